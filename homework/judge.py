"""The judge of the hidden tests: the checker runs here, outside the student's kernel.

``python -I homework/judge.py ROOT SOCKET`` loads ``lib`` and ``homework.checks`` from ``ROOT``
(``make grade``: the instructor's checkout, hashed by the grader; ``otter run`` alone: the
autograder's copy) and listens on the Unix socket ``SOCKET``. A hidden test in the kernel
(:func:`homework.hidden.verify`) connects and sends one JSON line
``{"op": "test", "exercise", "seed", "kind", "source" | "value" | "refused"}``; the judge runs
the checker with ``jax.random.key(seed)`` and an answer whose every call is a request to the
kernel, ``{"op": "call", "args", "kwargs"}`` (JSON, :func:`homework.hidden.encode`), answered
by ``{"value": ...}`` or ``{"raise": [type, message]}``; it ends with
``{"op": "verdict", "ok", "hint"}``. The reference values never leave this process.

Each verdict is also one JSON line on stdout, ``{"key": "exercise|seed|kind", "ok", "hint"}``:
the grader owns that pipe and reads it after the notebook's processes are killed.
"""

from __future__ import annotations

import json
import socket
import sys

CALL_TIMEOUT = 120.0  # seconds the kernel has to answer one call


def judge(checks, hidden, stream, request: dict) -> tuple[bool, str]:
    """The verdict of one hidden test (``hidden`` is :mod:`homework.hidden`)."""
    import builtins

    import jax

    exercise = request.get("exercise")
    if request.get("refused"):
        return False, str(request["refused"])[:500]
    if exercise not in checks._REGISTRY:
        return False, f"no checker for {exercise}"
    if exercise in hidden.IN_KERNEL:
        return False, f"{exercise} is checked in the kernel, not by the judge"
    seed = int(request["seed"])

    if "value" in request:
        answer = hidden.decode(request["value"])
    else:
        def answer(*args, **kwargs):
            try:
                message = {"op": "call", "args": hidden.encode(list(args)),
                           "kwargs": hidden.encode(dict(kwargs))}
            except TypeError as err:
                raise checks.CheckFailed(f"the grader cannot send this check's inputs ({err}); "
                                         "ask your instructor") from None
            hidden.send(stream, message)
            try:
                reply = hidden.receive(stream)
            except (TimeoutError, socket.timeout):
                raise checks.CheckFailed(f"your function did not answer within "
                                         f"{CALL_TIMEOUT:g} s") from None
            if reply is None:
                raise checks.CheckFailed("your function did not answer (the kernel stopped)")
            if "raise" in reply:
                name, text = (list(reply["raise"]) + ["", ""])[:2]
                exc_type = getattr(builtins, str(name), None)
                if not (isinstance(exc_type, type) and issubclass(exc_type, Exception)):
                    exc_type = RuntimeError
                raise exc_type(str(text))
            return hidden.decode(reply.get("value"))

        # the checker of a "no loop" exercise reads the source; None: it cannot be read
        answer.__krr_source__ = request.get("source")
    try:
        checks._REGISTRY[exercise](answer, jax.random.key(seed))
    except NotImplementedError:
        return False, "not attempted: replace the ... of the answer cell by your answer"
    except checks.CheckFailed as err:
        return False, f"fails: {err}"
    except Exception as err:  # noqa: BLE001 (the answer raised, or sent nonsense)
        return False, f"your code raised {type(err).__name__}: {err}"
    return True, ""


def _exit_with_parent() -> None:
    """End this process when the one that started it (grader or kernel) is gone."""
    import os
    import threading
    import time

    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def serve(root: str, path: str) -> int:
    _exit_with_parent()
    sys.path.insert(0, root)
    import jax

    jax.config.update("jax_enable_x64", True)
    import homework.checks as checks
    import homework.hidden as hidden

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    while True:
        conn, _ = server.accept()
        conn.settimeout(CALL_TIMEOUT)
        stream = conn.makefile("rwb")
        key = None
        try:
            request = hidden.receive(stream)
            if request is None or request.get("op") != "test":
                continue
            key = f"{request.get('exercise')}|{int(request.get('seed'))}|{request.get('kind')}"
            ok, hint = judge(checks, hidden, stream, request)
        except Exception as err:  # noqa: BLE001 (a broken request fails the test, loudly)
            ok, hint = False, f"the grader's judge could not run the test ({type(err).__name__})"
        finally:
            if key is not None:
                sys.stdout.write(json.dumps({"key": key, "ok": ok, "hint": hint}) + "\n")
                sys.stdout.flush()
                try:
                    hidden.send(stream, {"op": "verdict", "ok": ok, "hint": hint})
                except OSError:
                    pass  # the kernel left (e.g. its cell was interrupted): the verdict stands
            for closing in (stream, conn):
                try:
                    closing.close()
                except OSError:
                    pass


if __name__ == "__main__":
    del sys.path[0]  # this file's folder (homework/) would shadow packages such as otter
    sys.exit(serve(sys.argv[1], sys.argv[2]))

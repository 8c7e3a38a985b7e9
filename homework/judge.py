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

**The grader's plan** (``make grade``): before it listens, the judge reads its stdin to the end,
a pipe only the grader writes: ``{"keys": [...], "sources": {exercise: source | null}}``, the
announced hidden tests of the autograder and the answers' source that the grader took from the
submitted notebook (:func:`homework.grade.judge_plan`). With a plan the judge refuses a key it
was not told about, judges each key once (a second request for a key records a failure for it)
and gives the checker the grader's source, never the kernel's. Without one (stdin empty: the
``otter run`` path, where the kernel starts the judge) it judges what the kernel sends.
"""

from __future__ import annotations

import json
import socket
import sys

CALL_TIMEOUT = 120.0  # seconds the kernel has to answer one call
UNKNOWN_KEY = "this is not a hidden test of this assignment (the grader did not announce it)"
REPEAT_KEY = ("this hidden test was sent to the grader's judge more than once (the notebook "
              "sent its own requests): it scores 0")


def read_plan(stream) -> dict | None:
    """The grader's plan from ``stream`` (the judge's stdin), or None when it is empty."""
    data = stream.read()
    if not data.strip():
        return None
    plan = json.loads(data)
    keys = plan.get("keys")
    sources = plan.get("sources") or {}
    if type(keys) is not list or type(sources) is not dict:
        raise ValueError("a malformed plan")
    return {"keys": {str(k) for k in keys},
            "sources": {str(k): (v if type(v) is str else None) for k, v in sources.items()}}


def admit(plan: dict | None, judged: set, key: str, request: dict) -> tuple[dict, str | None]:
    """The request the judge runs, or a refusal: with a plan, an unknown key or a second request
    for a key is a failure, and the source is the grader's (None when it has none)."""
    if plan is None:
        return request, None
    if key not in plan["keys"]:
        return request, UNKNOWN_KEY
    if key in judged:
        return request, REPEAT_KEY
    judged.add(key)
    request = {k: v for k, v in request.items() if k != "source"}
    if "value" not in request and "refused" not in request:
        request["source"] = plan["sources"].get(str(request.get("exercise")))
    return request, None


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
    plan = None if sys.stdin is None or sys.stdin.isatty() else read_plan(sys.stdin.buffer)
    judged: set[str] = set()
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
            request, refusal = admit(plan, judged, key, request)
            if refusal is not None:
                ok, hint = False, refusal
            else:
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

"""The reference process of the hidden tests: the comparison with the reference, outside the
student's kernel.

``python -I homework/reference.py ROOT`` is started by :func:`homework.hidden.verify` (once per
kernel, in a fresh Python whose modules the notebook cannot have patched). It reads requests,
one JSON line each on stdin: ``{"exercise": id, "seed": int, "record": path}``, where ``path``
is a pickle of the calls the checker made to the student's answer in the kernel (inputs and
outputs, as numpy values). It runs the same checker with the same key on a *replay* of those
calls: the checker draws its own inputs (they must equal the recorded ones, else the kernel's
libraries were tampered with) and compares the recorded outputs with its own references. It
answers one JSON line: ``{"ok": true}`` or ``{"ok": false, "hint": "..."}``.
"""

from __future__ import annotations

import json
import pickle
import sys


def _same(a, b) -> bool:
    import numpy as np

    if callable(a) or callable(b):
        return True  # a function argument cannot be compared; the arrays around it are
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        x, y = np.asarray(a), np.asarray(b)
        return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=True))
    except Exception:  # noqa: BLE001
        return a == b


def _plain(value):
    """jax arrays as numpy arrays, recursively (what the replay hands back and compares)."""
    import numpy as np

    if isinstance(value, tuple | list):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if type(value).__module__.startswith(("jax", "jaxlib")):
        return np.asarray(value)
    return value


def replay(checks, exercise: str, seed: int, record: dict) -> tuple[bool, str]:
    import jax

    calls = list(record["calls"])
    state = {"i": 0}

    def answer(*args, **kwargs):
        i = state["i"]
        state["i"] += 1
        if i >= len(calls):
            raise checks.CheckFailed("the grader's clean run of the check calls your function "
                                     "more often than the run in your notebook did (was a "
                                     "library patched?)")
        rec_args, rec_kwargs, kind, out = calls[i]
        if not (_same(_plain(args), rec_args) and _same(_plain(kwargs), rec_kwargs)):
            raise checks.CheckFailed("your function received other inputs in your notebook than "
                                     "in the grader's clean run (was a library patched?)")
        if kind == "raise":
            import builtins

            exc_type = getattr(builtins, out[0], None)
            if not (isinstance(exc_type, type) and issubclass(exc_type, BaseException)):
                exc_type = RuntimeError
            raise exc_type(out[1])
        return out

    answer.__krr_source__ = record.get("source")
    try:
        checks._REGISTRY[exercise](answer, jax.random.key(seed))
    except NotImplementedError:
        return False, "not attempted: replace the ... of the answer cell by your answer"
    except checks.CheckFailed as err:
        return False, f"fails: {err}"
    except Exception as err:  # noqa: BLE001
        return False, f"your code raised {type(err).__name__}: {err}"
    return True, ""


def main(root: str) -> int:
    sys.path.insert(0, root)
    import jax

    jax.config.update("jax_enable_x64", True)
    import homework.checks as checks

    for line in sys.stdin:
        try:
            req = json.loads(line)
            with open(req["record"], "rb") as f:
                record = pickle.load(f)
            ok, hint = replay(checks, req["exercise"], int(req["seed"]), record)
        except Exception as err:  # noqa: BLE001 (a broken request fails the test, loudly)
            ok, hint = False, f"the grader's reference process failed ({type(err).__name__}: {err})"
        sys.stdout.write(json.dumps({"ok": ok, "hint": hint}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    del sys.path[0]  # this file's folder (homework/) would shadow packages such as otter
    sys.exit(main(sys.argv[1]))

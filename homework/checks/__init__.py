"""Self-checks for the course's coding exercises.

Convention (used by every chapter): a coding exercise asks for a named function or value; the
cell holding the solution is tagged ``solution``; the next cell, tagged ``check``, calls

    check("chapter/exercise-name", answer)

which runs the registered checker on fresh random inputs (a fixed key of its own, distinct from
the chapter's, so a hard-coded answer does not pass), prints one line and records the result in
:data:`results`:

* ``passes``: the answer agrees with the reference;
* ``fails (hint: ...)``: it does not, and the hint says where to look;
* ``not attempted``: the answer raised ``NotImplementedError`` (the stub in a student notebook).

Checkers live in modules of this package named after the chapter (``setup.py``, ...). A checker
is a function ``checker(answer, key)`` that raises :class:`CheckFailed` with a hint.
"""

from __future__ import annotations

import traceback
import zlib
from typing import Callable, NamedTuple

import jax

__all__ = ["CheckFailed", "CheckResult", "assert_close", "check", "register", "registered",
           "results"]


class CheckFailed(AssertionError):
    """Raised by a checker when the answer is wrong; its message is the hint shown."""


class CheckResult(NamedTuple):
    """Outcome of one check: ``status`` is ``"passes"``, ``"fails"`` or ``"not attempted"``."""

    exercise: str
    status: str
    message: str

    def _ipython_display_(self):
        """Display nothing: :func:`check` has already printed the line."""

    def __str__(self):
        if self.status == "fails":
            return f"{self.exercise}: fails (hint: {self.message})"
        return f"{self.exercise}: {self.status}" + (f" ({self.message})" if self.message else "")


_REGISTRY: dict[str, Callable] = {}
results: dict[str, CheckResult] = {}
"""The latest result of each exercise checked in this process, by exercise id."""


def register(exercise: str):
    """Decorator registering ``checker(answer, key)`` under the id ``exercise``."""

    def deco(fn):
        if exercise in _REGISTRY:
            raise ValueError(f"exercise {exercise!r} is registered twice")
        _REGISTRY[exercise] = fn
        return fn

    return deco


def registered() -> list[str]:
    """Ids of every registered exercise, sorted."""
    return sorted(_REGISTRY)


def _key(exercise):
    return jax.random.key(zlib.crc32(exercise.encode()) ^ 0x5EED)


def check(exercise: str, answer, *, quiet: bool = False) -> CheckResult:
    """Check ``answer`` for the exercise ``exercise`` and print the outcome.

    Args:
        exercise: a registered id such as ``"setup/symmetrize"``.
        answer: the student's function or value, as the exercise names it.
        quiet: do not print (the grader uses the returned value).

    Returns:
        The :class:`CheckResult`, also stored in :data:`results`.

    Raises:
        ValueError: ``exercise`` is not registered.

    Example:
        >>> import jax.numpy as jnp
        >>> result = check("setup/symmetrize",
        ...                lambda a, B: (jnp.concatenate([a, -a]), jnp.concatenate([B, B])))
        setup/symmetrize: passes
    """
    if exercise not in _REGISTRY:
        raise ValueError(f"exercise {exercise!r} is not registered; known: {registered()}")
    try:
        _REGISTRY[exercise](answer, _key(exercise))
        result = CheckResult(exercise, "passes", "")
    except NotImplementedError:
        result = CheckResult(exercise, "not attempted", "")
    except CheckFailed as err:
        result = CheckResult(exercise, "fails", str(err))
    except (Exception, SystemExit) as err:  # the answer raised: a failure with a hint
        last = traceback.format_exception_only(type(err), err)[-1].strip()
        result = CheckResult(exercise, "fails", f"your code raised {last}")
    results[exercise] = result
    if not quiet:
        print(result)
    return result


def assert_close(got, want, what, rtol=1e-6, atol=1e-9):
    """Raise :class:`CheckFailed` unless ``got`` is a real, finite array close to ``want``.

    The hint names ``what`` and says whether the shape, the type (complex), finiteness or the
    values are wrong (with the relative error).
    """
    import numpy as np

    if np.iscomplexobj(np.asarray(got)):
        raise CheckFailed(f"{what} is complex; the answer should be real")
    try:
        got = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise CheckFailed(f"{what} is not a numeric array ({err})") from err
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise CheckFailed(f"{what} has shape {got.shape}, expected {want.shape}")
    if not np.all(np.isfinite(got)):
        raise CheckFailed(f"{what} contains NaN or inf")
    # one normwise test, the same quantity the hint reports: an answer in float32 (rounding
    # ~1e-7 of the largest entry) passes a 1e-6 tolerance instead of failing on small entries
    if got.size == 0:
        return
    scale = float(np.max(np.abs(want)))
    diff = float(np.max(np.abs(got - want)))
    if diff > rtol * scale + atol:
        raise CheckFailed(f"{what} is off by a relative {diff / max(scale, 1e-300):.2e} "
                          f"(tolerance {rtol:.0e})")


# Checkers of each chapter register themselves on import.
from . import diagonal_classification as _diagonal_classification  # noqa: E402,F401
from . import diagonal_regression as _diagonal_regression  # noqa: E402,F401
from . import f1f2 as _f1f2  # noqa: E402,F401
from . import lazy_training as _lazy_training  # noqa: E402,F401
from . import parity as _parity  # noqa: E402,F401
from . import setup as _setup  # noqa: E402,F401

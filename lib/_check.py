"""``lib.check``: the chapters' self-check cells, answered by the instructors' grader.

The checkers and their references are not part of ``lib`` (students install ``lib``): they live
in the top-level ``homework`` package of the course repository, which is not installed with
``lib``. In the repository (where the book is built and tested) :func:`check` runs the checker;
in a ``lib`` installed on its own it says where the exercise is graded instead.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

__all__ = ["check"]


def _checks_module():
    """``homework.checks`` from the course repository holding this ``lib``, or None."""
    try:
        return importlib.import_module("homework.checks")
    except ImportError:
        pass
    root = Path(__file__).resolve().parents[1]
    if not (root / "homework" / "checks" / "__init__.py").is_file():
        return None
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("homework.checks")
    except ImportError:
        return None
    finally:
        sys.path.remove(str(root))


def check(exercise: str, answer, *, quiet: bool = False):
    """Check the answer to a coding exercise of a chapter and print one line.

    In the course repository this runs the exercise's checker (``homework.checks``) on random
    inputs of its own and prints ``passes``, ``fails (hint: ...)`` or ``not attempted``. Where
    ``lib`` is installed without the repository (a student's machine) there is no checker: the
    homework notebooks are graded with otter-grader (``grader.check("<question>")`` runs the
    public tests), and this function only prints where that happens.

    Args:
        exercise: the exercise id, ``"<chapter>/<name>"``, e.g. ``"demo/square"``.
        answer: the function or value the exercise asks for.
        quiet: do not print.

    Returns:
        The checker's result (``homework.checks.CheckResult``), or ``None`` without the grader.

    Raises:
        ValueError: ``exercise`` is not a string of the form ``"<chapter>/<name>"``, or (with
            the grader) is not a registered exercise.

    Example:
        >>> check("no-such-chapter", 1)
        Traceback (most recent call last):
        ...
        ValueError: exercise: expected '<chapter>/<name>', got 'no-such-chapter'
    """
    if not isinstance(exercise, str) or "/" not in exercise:
        raise ValueError(f"exercise: expected '<chapter>/<name>', got {exercise!r}")
    module = _checks_module()
    if module is None:
        if not quiet:
            print(f"{exercise}: graded by the course's otter autograder "
                  "(run grader.check in the homework notebook)")
        return None
    return module.check(exercise, answer, quiet=quiet)

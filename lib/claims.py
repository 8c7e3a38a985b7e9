"""The claims ledger: each chapter records the paper claims it checks, where it checks them.

A chapter asserts a number (a slope, an error, a gap) in a cell. Calling :func:`record` in that
cell, instead of a bare ``assert``, does the assertion *and* appends one JSON line to
``_build/claims/<chapter>.jsonl``: the claim, its source (paper and theorem or figure), the
measured value, the check applied, whether it passed and whether the run is at the paper's size
or a reduced one. The book's *Claims ledger* page is generated from these files after every
chapter has executed (``_ext/claims_ledger.py``), so the values shown are the ones the chapters
computed, never typed by hand. The line is written *before* the assertion is raised, so a failed
check is on file as ``failed`` and can never appear as reproduced.

Where the files go: the folder named by the environment variable ``KRR_CLAIMS_DIR`` if set;
otherwise ``_build/claims`` under the repository root, found by walking up from the working
directory to the folder holding ``_toc.yml`` (chapters execute in ``chapters/`` during the book
build and in ``_nbtest/`` under nbval, both one level below the root). Outside the repository (a
downloaded notebook) nothing is written; the records are still kept in :data:`records`.
"""

from __future__ import annotations

import datetime
import json
import math
import numbers
import os
import re
import uuid
from pathlib import Path

import numpy as np

from . import _validate, config

__all__ = ["ClaimFailed", "STATUSES", "claims_dir", "record", "records"]

STATUSES = ("reproduced", "reduced size", "no size in source", "failed", "not covered")
"""Statuses shown in the ledger. ``not covered`` is for paper claims the course lists but does not
check; :func:`record` itself produces the first four."""

RUN_ID = uuid.uuid4().hex
"""Identifies this process (one execution of a chapter); the ledger keeps only the latest run."""

records: list[dict] = []
"""Every record made in this process, in order (also when no file is written)."""

_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*/[a-z0-9][a-z0-9_.-]*$")
_SIZES = {"paper": "reproduced", "reduced": "reduced size", "unspecified": "no size in source"}


class ClaimFailed(AssertionError):
    """Raised by :func:`record` when the check of a claim fails (after the record is written)."""


def claims_dir(start: str | os.PathLike | None = None) -> Path | None:
    """The folder receiving the claims files, or ``None`` outside the repository.

    Args:
        start: folder to search upwards from for the repository root (the folder holding
            ``_toc.yml``); defaults to the working directory.

    Returns:
        ``Path(os.environ["KRR_CLAIMS_DIR"])`` when that variable is set and non-empty, else
        ``<root>/_build/claims``, else ``None``.

    Example:
        >>> import os, tempfile
        >>> os.environ["KRR_CLAIMS_DIR"] = tempfile.gettempdir()
        >>> claims_dir() == Path(tempfile.gettempdir())
        True
        >>> del os.environ["KRR_CLAIMS_DIR"]
    """
    env = os.environ.get("KRR_CLAIMS_DIR", "")
    if env:
        return Path(env)
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").is_file() and (folder / "lib").is_dir():
            return folder / "_build" / "claims"
    return None


def _number(name, x, *, finite=False):
    """A JSON-ready number or non-empty list of numbers from a Python, numpy or JAX value
    (real only; with ``finite=True`` NaN and infinities are refused too)."""
    if isinstance(x, bool | np.bool_) or getattr(x, "dtype", None) == np.bool_:
        raise ValueError(f"{name} must be a number or an array of numbers, got a boolean "
                         f"{x!r} (a verdict goes in passed=)")
    if isinstance(x, numbers.Integral | np.integer) and abs(int(x)) < 2**53:
        return int(x)
    if isinstance(x, numbers.Integral):
        try:
            float(x)
        except OverflowError as err:
            raise ValueError(f"{name} is too large for float64: {_validate._short(x)}") from err
    if x is None or isinstance(x, str | bytes):
        raise ValueError(f"{name} must be a number or an array of numbers, got "
                         f"{type(x).__name__}")
    try:
        raw = np.asarray(x)
        if np.iscomplexobj(raw):
            raise ValueError(f"{name} must be real, got a complex value")
        arr = raw.astype(np.float64)
    except (TypeError, ValueError, OverflowError) as err:
        if "must be real" in str(err):
            raise
        raise ValueError(f"{name} must be a number or an array of real numbers, got "
                         f"{type(x).__name__}") from err
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {x!r}")
    return float(arr) if arr.ndim == 0 else arr.tolist()


def _all_finite(v):
    if isinstance(v, list):
        return all(_all_finite(u) for u in v)
    return isinstance(v, bool) or math.isfinite(v)


def record(claim_id: str, *, source: str, statement: str, value, expected=None,
           tolerance=None, bounds=None, passed=None, size: str | None = None,
           directory: str | os.PathLike | None = None, raise_on_failure: bool = True) -> dict:
    r"""Check a claim, record it for the ledger, and raise if the check failed.

    The check is one of (exactly one must be given):

    * ``expected`` and ``tolerance``: passes when :math:`|v - e| \le \mathrm{tol}` for a
      scalar value (entrywise, all entries, for an array);
    * ``bounds=(lo, hi)``: passes when :math:`lo \le v \le hi` (entrywise);
    * ``passed``: the chapter computed the verdict itself (e.g. a boolean over several arrays);
      then ``value`` is what the ledger shows and ``statement`` must say what was checked.

    Args:
        claim_id: ``"<chapter>/<claim>"``, lower case, e.g. ``"setup/kernel-scaling-slope"``;
            ``<chapter>`` is the chapter file's name (``chapters/setup.md``), which the ledger
            links to.
        source: the paper and the theorem, claim or figure, e.g.
            ``"Chizat, Oyallon & Bach (2019), Sec. 2"``.
        statement: what is checked, in one sentence (inline ``$...$`` math is allowed).
        value: the measured number(s): a scalar or an array of floats (not NaN unless the
            check fails).
        expected, tolerance: the reference value and the absolute tolerance (>= 0).
        bounds: ``(lo, hi)``, either may be ``None`` for a one-sided check.
        passed: the verdict, when neither of the other checks applies.
        size: ``"paper"`` if the run is the paper's setting (status *reproduced*), or
            ``"reduced"`` (status *reduced size*). ``None`` (the default) means ``"paper"`` when
            the chapter runs at the papers' size (``KRR_FULL=1``, :func:`lib.config.full`) and
            ``"reduced"`` otherwise; a chapter passes ``"reduced"`` for a claim whose paper-size
            run still differs from the paper's setting (and says why). ``"unspecified"``
            (status *no size in source*, at every size) is for a claim whose source states no
            setting to reproduce (a blog post's illustration, a theorem without an experiment):
            the course's own sizes are then neither the paper's nor reduced. A failed check has
            status *failed*.
        directory: where to write; defaults to :func:`claims_dir`.
        raise_on_failure: raise :class:`ClaimFailed` when the check fails (default).

    Returns:
        The record (a dict with keys ``claim``, ``chapter``, ``source``, ``statement``,
        ``value``, ``check``, ``passed``, ``status``, ``size``, ``run``, ``seed``, ``full``,
        ``time``), also appended
        to :data:`records` and, when a directory is known, to ``<directory>/<chapter>.jsonl``.

    Raises:
        ValueError: malformed ``claim_id``, empty ``source`` or ``statement``, not exactly one
            kind of check, ``value`` empty, complex or not numeric, ``expected``, ``tolerance``
            or ``bounds`` not finite, negative ``tolerance``, ``bounds`` with ``lo > hi`` or
            both ``None``, ``passed`` not a boolean, ``size`` not ``"paper"``, ``"reduced"`` or
            ``"unspecified"``, an empty ``directory``, or a non-finite ``value`` given as
            passing; a boolean ``value`` or ``expected`` (a verdict goes in ``passed``), a
            Python int beyond float64's range, ``expected`` neither a scalar nor of the shape
            of ``value`` (no broadcasting), ``raise_on_failure`` not a boolean.
        OSError: the record cannot be written to ``directory`` (nothing is recorded then).
        ClaimFailed: the check failed (the record is written first, with status ``failed``).

    Example:
        >>> import tempfile
        >>> r = record("setup/example", source="Jacot et al. (2018), Theorem 1",
        ...            statement="a slope equals 2", value=2.0 + 1e-13, expected=2.0,
        ...            tolerance=1e-10, directory=tempfile.mkdtemp())
        >>> r["status"]
        'reduced size'
    """
    raise_on_failure = _validate.boolean("raise_on_failure", raise_on_failure)
    if not isinstance(claim_id, str) or not _ID.fullmatch(claim_id):
        raise ValueError(f"claim_id must look like 'chapter/claim-name' (lower case), got "
                         f"{claim_id!r}")
    for name, text in (("source", source), ("statement", statement)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{name} must be a non-empty string")
    if size is None:
        size = "paper" if config.full() else "reduced"
    if not isinstance(size, str) or size not in _SIZES:
        raise ValueError(f"size must be 'paper', 'reduced' or 'unspecified', got {size!r}")
    kinds = [expected is not None or tolerance is not None, bounds is not None,
             passed is not None]
    if sum(kinds) != 1:
        raise ValueError("give exactly one check: expected and tolerance, bounds, or passed")
    v = _number("value", value)
    arr = np.asarray(v, dtype=np.float64)

    if kinds[0]:
        if expected is None or tolerance is None:
            raise ValueError("expected and tolerance must be given together")
        e = _number("expected", expected, finite=True)
        if isinstance(tolerance, bool | np.bool_):
            raise ValueError(f"tolerance must be a number >= 0, got {tolerance!r}")
        tol = _number("tolerance", tolerance, finite=True)
        if not isinstance(tol, float | int) or not tol >= 0:
            raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
        if np.ndim(e) != 0 and np.shape(e) != arr.shape:
            raise ValueError(f"expected must be a scalar or have the shape of value "
                             f"{arr.shape}, got shape {np.shape(e)} (no broadcasting)")
        gap = np.abs(arr - np.asarray(e, dtype=np.float64))
        ok = bool(np.all(gap <= tol))
        check = {"kind": "close", "expected": e, "tolerance": tol}
    elif kinds[1]:
        if not isinstance(bounds, tuple | list) or len(bounds) != 2:
            raise ValueError(f"bounds must be a pair (lo, hi), got {bounds!r}")
        lo, hi = (None if b is None else _number("bounds", b) for b in bounds)
        # an infinite bound is no bound (and JSON cannot store it)
        lo, hi = (None if isinstance(b, float) and math.isinf(b) else b for b in (lo, hi))
        if lo is None and hi is None:
            raise ValueError("bounds=(None, None) checks nothing: give at least one bound")
        for b in (lo, hi):
            if b is not None and (not isinstance(b, int | float) or isinstance(b, bool)
                                  or math.isnan(b)):
                raise ValueError(f"bounds must be scalar numbers (or None), got {bounds!r}")
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"bounds must have lo <= hi, got {bounds!r}")
        ok = bool(np.all((lo is None or arr >= lo) & (hi is None or arr <= hi)))
        check = {"kind": "bounds", "lo": lo, "hi": hi}
    else:
        if not (isinstance(passed, bool | np.bool_) or (
                hasattr(passed, "dtype") and np.ndim(passed) == 0
                and np.asarray(passed).dtype == np.bool_)):
            raise ValueError(f"passed must be a boolean, got {passed!r}")
        ok = bool(passed)
        check = {"kind": "verdict"}
    finite = _all_finite(v)
    if not finite:
        if kinds[2] and ok:
            raise ValueError("value is not finite but passed=True: a claim cannot pass on NaN")
        ok = False

    chapter = claim_id.split("/", 1)[0]
    folder = Path(directory) if directory is not None else claims_dir()
    if directory is not None and not str(directory).strip():
        raise ValueError("directory must be a folder path, got an empty string")
    entry = {
        "claim": claim_id,
        "chapter": chapter,
        "source": source.strip(),
        "statement": statement.strip(),
        "value": v if finite else None,
        "check": check,
        "passed": ok,
        "size": size,
        "status": _SIZES[size] if ok else "failed",
        "run": RUN_ID,
        "seed": config.seed(),
        "full": config.full(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    line = json.dumps(entry, allow_nan=False)  # every number is finite by now
    if folder is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / f"{chapter}.jsonl", "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
        except OSError as err:
            raise OSError(f"cannot record claim {claim_id} in {folder}: {err}") from err
    records.append(entry)
    if not ok and raise_on_failure:
        raise ClaimFailed(f"claim {claim_id} failed: value {v}, check {check}")
    return entry

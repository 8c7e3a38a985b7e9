"""Run the whole test suite: lib unit tests, lib's docstring examples and every chapter executed
through nbval.

The chapters are Jupytext MyST files; nbval reads notebooks, so each chapter in _toc.yml is
converted to ``_nbtest/<name>.ipynb`` (a folder at the same depth as ``chapters/``, so relative
paths in the chapters resolve the same way) and executed with ``--nbval-lax`` in the current
environment's kernel. The plugin ``scripts/nbval_build_rules.py`` makes nbval judge a chapter by
the build's rules (a cell fails on an ``error`` execute reply, ``skip-execution`` cells are
skipped, the kernelspec must name ``python3``), so ``make test`` fails whenever ``make book``
would fail on a cell. Extra arguments are passed to pytest, e.g.
``python scripts/run_tests.py -k diagonal``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import jupytext
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # the pytest plugin nbval_build_rules
from homework.edition import toc_chapters  # noqa: E402  (chapters named in _toc.yml, in order)

NBTEST = ROOT / "_nbtest"


def convert():
    shutil.rmtree(NBTEST, ignore_errors=True)
    NBTEST.mkdir()
    for src in toc_chapters():
        notebook = jupytext.read(src)
        jupytext.write(notebook, NBTEST / (src.stem + ".ipynb"))
    return NBTEST


def cell_timeout() -> int:
    """The build's per-cell timeout (``execute: timeout`` in _config.yml), so that raising it
    there for a loaded machine reaches the tests too."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text()) or {}
    return int((config.get("execute") or {}).get("timeout", 180))


# How chapters are executed: nbval in the current environment, judged by the build's rules, with
# the build's per-cell timeout.
NBVAL_ARGS = ["--nbval-lax", "--nbval-current-env", f"--nbval-cell-timeout={cell_timeout()}",
              "-p", "nbval_build_rules"]


def main(argv):
    convert()
    # lib's docstring examples run too (--doctest-modules), so every Example is checked
    # tests marked slow (end-to-end grading, minutes) are skipped unless -m is given
    marks = [] if "-m" in argv else ["-m", "not slow"]
    args = ["tests", "lib", "--doctest-modules", str(NBTEST.relative_to(ROOT)), *NBVAL_ARGS,
            "-p", "no:cacheprovider", *marks, *argv]
    return pytest.main(args)


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    sys.exit(main(sys.argv[1:]))

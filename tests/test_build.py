"""Build-level tests of scripts/build_book.py and scripts/run_tests.py (issue 17), each on a
throwaway book of one tiny chapter in a temporary folder, built with the course's own
``_config.yml``, ``_ext/`` and ``references.bib``.

* A change in ``lib/`` (or in the run switches) reaches the page: the chapter is executed again.
* A failed build publishes nothing, and running it again unchanged fails again.
* A cell that ``make book`` rejects is rejected by ``make test`` too (same cells, same kernel,
  same failure rule).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.executable).parent)

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: {kernel}
---
"""

CHAPTER = HEADER + """
# A tiny chapter

```{{code-cell}} ipython3
import os
import sys

sys.path.insert(0, "../lib")
import tiny

print("tiny value", tiny.VALUE, "seed", os.environ.get("KRR_SEED", "unset"))
```
{extra}
"""

pytestmark = pytest.mark.skipif(shutil.which("jupyter-book", path=BIN) is None,
                                reason="jupyter-book is not installed in this environment")


def make_book(folder: Path, extra: str = "", kernel: str = "python3") -> Path:
    """A one-chapter book using the course's configuration and extensions."""
    for name in ("_config.yml", "references.bib"):
        shutil.copy(ROOT / name, folder / name)
    shutil.copytree(ROOT / "_ext", folder / "_ext",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\noptions:\n  numbered: true\nchapters:\n"
        "  - file: chapters/tiny\n")
    (folder / "intro.md").write_text("# Throwaway book\n\nOne tiny chapter.\n")
    (folder / "lib").mkdir()
    (folder / "lib" / "tiny.py").write_text("VALUE = 1\n")
    (folder / "chapters").mkdir()
    (folder / "chapters" / "tiny.md").write_text(CHAPTER.format(kernel=kernel, extra=extra))
    return folder


def build(folder: Path, **env) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"], **env}
    for name, value in env.items():
        if value is None:
            environ.pop(name)
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "build_book.py"),
                           "--root", str(folder)], capture_output=True, text=True, env=environ,
                          timeout=600)


def page(folder: Path) -> str:
    return (folder / "_build" / "html" / "chapters" / "tiny.html").read_text()


def test_lib_change_and_run_switch_reach_the_page(tmp_path):
    """Issue 17, input 1: a change in lib/ was never executed (no --all, stamp stored)."""
    book = make_book(tmp_path)
    first = build(book, KRR_SEED=None)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "tiny value 1 seed unset" in page(book)
    assert (book / "_build" / ".build-ok").is_file()
    assert "running over TCP without encryption" not in first.stdout + first.stderr

    (book / "lib" / "tiny.py").write_text("VALUE = 2\n")
    second = build(book, KRR_SEED=None)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "tiny value 2 seed unset" in page(book)

    third = build(book, KRR_SEED="3")  # a run switch is an input as well
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    assert "tiny value 2 seed 3" in page(book)


def test_no_proof_index_page_of_bare_labels(tmp_path):
    """sphinx-proof's Proof Index listed labels such as thm-tiny, not titles (new-user
    finding): it is not generated; the theorem itself is on its page."""
    book = make_book(tmp_path, extra="\n```{prf:theorem} A tiny result\n:label: thm-tiny\n\n"
                                      "One equals one.\n```\n")
    result = build(book)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "A tiny result" in page(book)
    assert not (book / "_build" / "html" / "prf-prf.html").exists()


def test_failed_build_publishes_nothing_and_fails_again(tmp_path):
    """Issue 17, input 2: a missing label and an unknown cite key failed the first build only."""
    book = make_book(tmp_path, extra="\nSee {ref}`no-such-label` and {cite}`no-such-key`.\n")
    for attempt in range(2):
        result = build(book)
        assert result.returncode != 0, f"attempt {attempt + 1} exited 0"
        assert not (book / "_build" / ".build-ok").exists()
        assert not (book / "_build" / "html").exists()
        assert (book / "_build" / ".build-failed").is_file()


def test_a_failing_cell_fails_the_build_but_every_page_is_written(tmp_path):
    """A failing cell in the first chapter: the build exits 1 and publishes nothing, yet the
    next chapter is still executed and both pages are in _build/html-failed to read (with
    nb_execution_raise_on_error the build stopped at the first failing chapter and
    html-failed was empty)."""
    book = make_book(tmp_path, extra='\n```{code-cell} ipython3\nraise ValueError("boom")\n```\n')
    (book / "chapters" / "later.md").write_text(CHAPTER.format(kernel="python3", extra="")
                                                .replace("A tiny chapter", "A later chapter"))
    (book / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\noptions:\n  numbered: true\nchapters:\n"
        "  - file: chapters/tiny\n  - file: chapters/later\n")
    result = build(book)
    assert result.returncode != 0
    assert "Executing notebook failed" in result.stdout + result.stderr
    assert not (book / "_build" / "html").exists()
    assert not (book / "_build" / ".build-ok").exists()
    failed = book / "_build" / "html-failed" / "chapters"
    assert "tiny value 1" in (failed / "later.html").read_text()  # executed after the failure
    assert (failed / "tiny.html").is_file()


# --------------------------------------------------------------------------------------------
# make test fails whenever make book would (issue 17, input 3)
# --------------------------------------------------------------------------------------------

BAD_MAGIC = """
```{code-cell} ipython3
%no_such_line_magic
raise RuntimeError("this cell fails the book build")
```
"""


def nbval(folder: Path, chapter_md: str, plugin: bool = True) -> subprocess.CompletedProcess:
    """Convert one chapter as scripts/run_tests.py does and run it with its nbval options."""
    import jupytext

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from run_tests import NBVAL_ARGS
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    src = folder / "chapters" / "tiny.md"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(chapter_md)
    (folder / "lib").mkdir(exist_ok=True)
    (folder / "lib" / "tiny.py").write_text("VALUE = 1\n")
    nbtest = folder / "_nbtest"
    nbtest.mkdir(exist_ok=True)
    jupytext.write(jupytext.read(src), nbtest / "tiny.ipynb")
    args = list(NBVAL_ARGS) if plugin else [a for a in NBVAL_ARGS if a not in
                                            ("-p", "nbval_build_rules")]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "scripts")}
    return subprocess.run([sys.executable, "-m", "pytest", str(nbtest), *args,
                           "-p", "no:cacheprovider", "-q"], cwd=folder, capture_output=True,
                          text=True, env=env, timeout=300)


def test_nbval_fails_an_error_reported_without_error_message(tmp_path):
    chapter = CHAPTER.format(kernel="python3", extra=BAD_MAGIC)
    plain = nbval(tmp_path, chapter, plugin=False)
    assert plain.returncode == 0, "nbval alone now catches it: the plugin may be redundant"
    ruled = nbval(tmp_path, chapter)
    assert ruled.returncode != 0
    assert "status 'error'" in ruled.stdout and "UsageError" in ruled.stdout


def test_nbval_fails_a_chapter_with_another_kernel(tmp_path):
    ruled = nbval(tmp_path, CHAPTER.format(kernel="julia-1.9", extra=""))
    assert ruled.returncode != 0
    assert "kernelspec names kernel 'julia-1.9'" in ruled.stdout


def test_nbval_passes_a_good_chapter_and_allowed_errors(tmp_path):
    allowed = ("\n```{code-cell} ipython3\n:tags: [raises-exception]\n%no_such_line_magic\n```\n"
               "\n```{code-cell} ipython3\n:tags: [skip-execution]\nraise SystemExit(3)\n```\n")
    ruled = nbval(tmp_path, CHAPTER.format(kernel="python3", extra=allowed))
    assert ruled.returncode == 0, ruled.stdout[-3000:]
    assert "1 skipped" in ruled.stdout


def test_inputs_hash_ignores_only_the_cell_time_limit(tmp_path):
    # raising execute.timeout on a slow machine must not re-execute every chapter; any other
    # change of _config.yml must
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_book

    (tmp_path / "lib").mkdir()
    config = "title: t\nexecute:\n  execute_notebooks: cache\n  timeout: 180\n"
    (tmp_path / "_config.yml").write_text(config)
    before = build_book.inputs_hash(tmp_path)
    (tmp_path / "_config.yml").write_text(config.replace("180", "900"))
    assert build_book.inputs_hash(tmp_path) == before
    (tmp_path / "_config.yml").write_text(config.replace("cache", "force"))
    assert build_book.inputs_hash(tmp_path) != before

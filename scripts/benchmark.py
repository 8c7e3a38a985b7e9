"""Time every chapter and the whole book build, against the course's budgets.

Prints a table: each chapter's execution time in a fresh kernel (budget 90 s on 2 CPU cores),
then the clean build of the whole book (every chapter executed; budget 10 minutes) and a cached
rebuild (nothing to execute). Exits with status 1 if a budget is exceeded.

    python scripts/benchmark.py              # everything
    python scripts/benchmark.py --chapters   # chapters only
    python scripts/benchmark.py -k setup     # chapters whose name contains "setup"

Run it on an otherwise idle machine: timings on a loaded one are inflated.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_tests import ROOT, toc_chapters  # noqa: E402

CHAPTER_BUDGET = 90.0
BUILD_BUDGET = 600.0


def time_chapter(path: Path) -> float:
    notebook = jupytext.read(path)
    nbformat.validate(notebook)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def time_build(out: Path, force: bool) -> tuple[float, int]:
    cmd = ["jupyter-book", "build", str(ROOT), "--path-output", str(out), "-W", "-n",
           "--keep-going", "--quiet"]
    if force:
        cmd.append("--all")
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    return time.perf_counter() - start, result.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapters", action="store_true", help="time the chapters only")
    parser.add_argument("-k", default="", help="only chapters whose file name contains this")
    args = parser.parse_args()

    rows, over = [], []
    for path in toc_chapters():
        if args.k not in path.stem:
            continue
        seconds = time_chapter(path)
        flag = "OVER BUDGET" if seconds > CHAPTER_BUDGET else "ok"
        if seconds > CHAPTER_BUDGET:
            over.append(path.stem)
        rows.append((f"chapter {path.stem}", seconds, CHAPTER_BUDGET, flag))
        print(f"  {path.stem}: {seconds:.1f} s", flush=True)

    if not args.chapters:
        out = Path(tempfile.mkdtemp(prefix="krr-bench-"))
        try:
            clean, rc1 = time_build(out, force=True)
            rows.append(("build, clean (all chapters executed)", clean, BUILD_BUDGET,
                         "FAILED" if rc1 else ("OVER BUDGET" if clean > BUILD_BUDGET else "ok")))
            cached, rc2 = time_build(out, force=False)
            rows.append(("build, cached (nothing changed)", cached, BUILD_BUDGET,
                         "FAILED" if rc2 else "ok"))
            if rc1 or rc2 or clean > BUILD_BUDGET:
                over.append("build")
        finally:
            shutil.rmtree(out, ignore_errors=True)

    print(f"\n{'what':45s} {'seconds':>9s} {'budget':>8s}  status   (cores: {os.cpu_count()})")
    for name, seconds, budget, flag in rows:
        print(f"{name:45s} {seconds:9.1f} {budget:8.0f}  {flag}")
    if over:
        print(f"\nexceeding their budget: {', '.join(over)}")
        return 1
    print("\nall within budget")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())

"""Build the book with warnings as errors, executing chapters as needed.

``python scripts/build_book.py`` builds ``_build/html`` with ``jupyter-book build -W -n
--keep-going``: a warning, a broken reference or a failing cell fails the build (exit code 1).
Chapters are executed through jupyter-cache, which re-runs a chapter only when its source
changes. The cache does not see edits to the imported ``lib`` package, so this script records
a hash of ``lib/`` and clears the cache when it changed. ``--force`` (or ``FORCE=1``) clears the
cache and rebuilds every page: CI builds this way.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
CACHE = BUILD / ".jupyter_cache"
STAMP = BUILD / ".lib-hash"


def lib_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted((ROOT / "lib").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", default=os.environ.get("FORCE") == "1",
                        help="execute every chapter from scratch (ignore the cache)")
    parser.add_argument("--builder", default="html")
    args = parser.parse_args()

    current = lib_hash()
    if args.force or not STAMP.exists() or STAMP.read_text() != current:
        shutil.rmtree(CACHE, ignore_errors=True)
    cmd = ["jupyter-book", "build", str(ROOT), "--builder", args.builder, "-W", "-n",
           "--keep-going"]
    if args.force:
        cmd.append("--all")
    print("+", " ".join(cmd), flush=True)
    result = subprocess.run(cmd, cwd=ROOT)
    if result.returncode == 0:
        BUILD.mkdir(exist_ok=True)
        STAMP.write_text(current)
        print(f"\nThe book is in {BUILD / 'html'}; open {BUILD / 'html' / 'index.html'}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())

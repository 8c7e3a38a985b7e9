"""Build the book with warnings as errors, executing chapters as needed; never leave a stale or
failed page in ``_build/html``.

``python scripts/build_book.py`` builds ``_build/html`` with ``jupyter-book build -W -n
--keep-going --all``: a warning, a broken reference or a failing cell fails the build (exit
code 1). Every page is re-read and re-written on every build (``--all`` gives Sphinx a fresh
environment, and the HTML folder is emptied first), so a page can never be left over from an
earlier build; what makes a build fast is jupyter-cache, which keeps each chapter's executed
outputs keyed on its source.

The cache does not see what else decides a chapter's outputs, so this script hashes those
*inputs* (every file under ``lib/`` and ``_ext/``, ``_config.yml``, ``_toc.yml``,
``references.bib``, ``requirements.txt`` and the run switches ``KRR_SEED``/``KRR_FULL``) and
clears the cache whenever the hash differs from the one the cache was filled with: after a
change in ``lib`` every chapter is executed again.

A failed (or interrupted) build leaves no page to publish: the success stamp
``_build/.build-ok`` is removed before the build starts and written only after a build that
exited 0, and on failure the HTML is moved to ``_build/html-failed`` (to read the error pages)
and the failure is recorded in ``_build/.build-failed``. A second, unchanged run builds
everything again and fails again. ``--force`` (or ``FORCE=1``) also clears the cache: every
chapter is executed from scratch (CI builds this way).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What decides a chapter's executed outputs besides its own source (hashed, see above).
INPUT_TREES = ("lib", "_ext")
INPUT_FILES = ("_config.yml", "_toc.yml", "references.bib", "requirements.txt")
INPUT_ENV = ("KRR_SEED", "KRR_FULL")


def inputs_hash(root: Path = ROOT) -> str:
    """sha256 over the inputs that jupyter-cache does not track (files and run switches)."""
    digest = hashlib.sha256()
    files = [p for tree in INPUT_TREES for p in (root / tree).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    files += [root / name for name in INPUT_FILES if (root / name).is_file()]
    for path in sorted(files):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(_config_bytes(path) if path.name == "_config.yml" else path.read_bytes())
        digest.update(b"\0")
    for name in INPUT_ENV:
        digest.update(f"{name}={os.environ.get(name, '')}\0".encode())
    return digest.hexdigest()


def _config_bytes(path: Path) -> bytes:
    """``_config.yml`` as hashed: without ``execute.timeout`` (the per-cell time limit does not
    change what a cell computes, so raising it on a slow machine keeps the executed chapters)."""
    import yaml

    config = yaml.safe_load(path.read_text()) or {}
    if isinstance(config.get("execute"), dict):
        config["execute"].pop("timeout", None)
    return yaml.safe_dump(config, sort_keys=True).encode()


# The kernels' IPython profile for the build: the kernel application logs only errors, so its
# startup warning "Kernel is running over TCP without encryption" (the build and its kernels
# talk over localhost) stays out of the build log. Cell output and tracebacks are not logging
# and are unaffected.
KERNEL_CONFIG = 'c.IPKernelApp.log_level = "ERROR"\n'


def kernel_env(build: Path) -> dict:
    """The build's environment: kernels read ``<build>/.ipython`` (``KERNEL_CONFIG``)."""
    profile = build / ".ipython" / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text(KERNEL_CONFIG)
    env = dict(os.environ)
    env["IPYTHONDIR"] = str(build / ".ipython")
    return env


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", default=os.environ.get("FORCE") == "1",
                        help="execute every chapter from scratch (ignore the cache)")
    parser.add_argument("--builder", default="html")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the book's folder (default: this course)")
    args = parser.parse_args(argv)

    root = args.root.resolve()
    build = root / "_build"
    cache = build / ".jupyter_cache"
    cache_key = build / ".cache-inputs"  # the inputs the cache was filled with
    stamp = build / ".build-ok"           # the inputs of the last build that exited 0
    failed = build / ".build-failed"
    out = build / args.builder
    build.mkdir(exist_ok=True)

    current = inputs_hash(root)
    if args.force or not cache_key.is_file() or cache_key.read_text() != current:
        shutil.rmtree(cache, ignore_errors=True)
        # jupyter-cache stores only chapters that executed without error, so from now on
        # the cache holds outputs of the current inputs only.
        cache_key.write_text(current)
    # From here until success there is no valid build: an interrupted or failed run leaves
    # no stamp, so nothing can mistake its pages for a good build.
    stamp.unlink(missing_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(build / f"{args.builder}-failed", ignore_errors=True)
    cmd = ["jupyter-book", "build", str(root), "--builder", args.builder, "-W", "-n",
           "--keep-going", "--all"]
    print("+", " ".join(cmd), flush=True)
    result = subprocess.run(cmd, cwd=root, env=kernel_env(build))
    if result.returncode == 0:
        stamp.write_text(current)
        failed.unlink(missing_ok=True)
        print(f"\nThe book is in {out}; open {out / 'index.html'}")
        return 0
    if out.exists():
        out.rename(build / f"{args.builder}-failed")
    failed.write_text(f"{time.strftime('%Y-%m-%d %H:%M:%S')} exit {result.returncode} "
                      f"inputs {current}\n")
    print(f"\nThe build FAILED (exit {result.returncode}); no page was published. The pages "
          f"as built are in {build / (args.builder + '-failed')}.", file=sys.stderr)
    return result.returncode or 1


if __name__ == "__main__":
    sys.exit(main())

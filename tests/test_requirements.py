"""``requirements-runtime.txt`` (what students and the otter autograder install) is a subset of
``requirements.txt`` at the same versions, holds what the homework imports, and leaves out the
book's toolchain."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            package, sep, version = line.partition("==")
            assert sep, f"{name}: {line!r} is not pinned with =="
            pins[re.sub(r"[-_.]+", "-", package).lower()] = version
    return pins


def test_runtime_pins_are_the_full_environments_and_leave_the_book_out():
    full, runtime = _pins("requirements.txt"), _pins("requirements-runtime.txt")
    assert {p: v for p, v in runtime.items() if full.get(p) != v} == {}
    for needed in ("jax", "jaxlib", "numpy", "scipy", "cvxpy", "optax", "diffrax", "optimistix",
                   "matplotlib", "tqdm", "altair", "scikit-learn", "otter-grader", "ipykernel"):
        assert needed in runtime, needed
    for book_only in ("jupyter-book", "sphinx-book-theme", "jupyter-cache", "myst-nb",
                      "sphinxcontrib-bibtex", "vl-convert-python", "nbval", "pytest", "ruff"):
        assert book_only not in runtime, book_only
    assert len(runtime) < len(full)


def test_lib_dependencies_are_pinned_in_the_runtime_file():
    """The ``lib`` wheel students install pulls its dependencies: each must be pinned there."""
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.findall(r'^\s*"([A-Za-z0-9_.-]+)[<>=!~ ]', text.split("dependencies = [", 1)[1]
                      .split("]", 1)[0], re.M)
    runtime = _pins("requirements-runtime.txt")
    assert deps and [d for d in deps if re.sub(r"[-_.]+", "-", d).lower() not in runtime] == []


def test_the_autograder_installs_the_runtime_file():
    source = (ROOT / "homework" / "otter.py").read_text()
    assert '"requirements": "requirements-runtime.txt"' in source
    assert 'ROOT / "requirements-runtime.txt"' in source

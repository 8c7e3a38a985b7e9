"""Collect the executed notebooks of the built book for the Colab launch buttons.

Colab opens only notebooks hosted on GitHub, and the chapters are Markdown files. After
``make book``, ``python scripts/export_notebooks.py [DEST]`` copies every downloadable
``_build/html/_sources/<page>.ipynb`` (executed, with the cell that installs ``lib``) to
``DEST/<page>.ipynb`` (default ``_build/notebooks``). The book's download notebooks are already
converted to plain Jupyter Markdown by ``_ext/notebook_links.py``; a notebook that is not (built
by another route) is converted here with the same converter, ``_ext/myst_to_jupyter.py``.
Publishing that folder as the root of the branch named ``notebooks_branch`` in ``_config.yml``
(``notebooks`` by default) makes each chapter's Colab button open its notebook, e.g. with
``git worktree add ../notebooks notebooks && cp -r _build/notebooks/* ../notebooks/``, then commit
and push from there (a deployment step; nothing here touches the network).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_ext"))

import myst_to_jupyter  # noqa: E402


def main(argv):
    dest = Path(argv[0]) if argv else ROOT / "_build" / "notebooks"
    sources = ROOT / "_build" / "html" / "_sources"
    notebooks = sorted(sources.rglob("*.ipynb"))
    if not notebooks:
        print(f"no notebooks under {sources}: run `make book` first", file=sys.stderr)
        return 1
    numbers = myst_to_jupyter.chapter_numbers(ROOT)
    for nb in notebooks:
        target = dest / nb.relative_to(sources)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(nb, target)
        myst_to_jupyter.convert_file(target, bib_files=[ROOT / "references.bib"],
                                     chapter=numbers.get(nb.stem))
        print(f"{target.relative_to(dest)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

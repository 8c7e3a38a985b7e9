"""Sphinx extension: serve MathJax 3 from the build itself, so equations render offline.

The MathJax files come from the PyPI package ``django-static-mathjax`` (installed with the rest
of the pinned requirements). When the builder starts, the ``es5`` distribution is copied into
``_build/mathjax-static/mathjax`` (not the source ``_static/`` folder, whose scripts Jupyter Book
injects into every page), added to ``html_static_path`` and named in ``mathjax_path``. The HTML
then loads ``_static/mathjax/tex-mml-chtml.js`` with no request leaving the machine.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def _mathjax_es5() -> Path:
    import mathjax  # the module shipped by django-static-mathjax

    root = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (root / "tex-mml-chtml.js").is_file():
        raise RuntimeError(f"MathJax 3 files not found under {root}; install the pinned "
                           "requirements (django-static-mathjax)")
    return root


def _copy(app, config):
    src = _mathjax_es5()
    dest_root = Path(app.outdir).parent / "mathjax-static"
    dest = dest_root / "mathjax"
    if not (dest / "tex-mml-chtml.js").is_file():
        shutil.copytree(src, dest, dirs_exist_ok=True)
    config.html_static_path = list(config.html_static_path) + [str(dest_root)]
    config.mathjax_path = "mathjax/tex-mml-chtml.js"


def setup(app):
    app.connect("config-inited", _copy, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

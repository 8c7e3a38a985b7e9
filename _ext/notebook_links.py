"""Sphinx extension: make the download and launch buttons of a chapter open a runnable notebook.

Chapters are MyST Markdown files; sphinx-book-theme (with ``launch_buttons`` set in
``_config.yml``) copies each executed notebook to ``_sources/<page>.ipynb`` and offers it as
the ``.ipynb`` download, but its launch links point at the ``.md`` file. This extension, run
after the theme on every page:

* converts the downloadable ``.ipynb`` from MyST to plain Jupyter Markdown
  (``_ext/myst_to_jupyter.py``: display math with its number, theorem boxes, citations with a
  references cell, equation references, exercises), so its math renders in plain Jupyter and
  Colab;
* puts a first cell into the downloadable ``.ipynb`` that installs the course library from the
  repository when ``lib`` cannot be imported (Colab, a copy downloaded alone), so the notebook
  runs in plain Jupyter with no jupytext;
* points the **Binder** link at ``<page>.ipynb``: the repository's ``postBuild`` converts every
  chapter to a notebook with jupytext and installs ``lib`` when Binder builds the image;
* points the **Colab** link at ``<page>.ipynb`` on the branch named by the configuration value
  ``notebooks_branch`` (default ``notebooks``), which holds the executed notebooks exported by
  ``python scripts/export_notebooks.py`` (Colab opens only ``.ipynb`` files hosted on GitHub).

The repository URL and branch are the ones of ``repository:`` in ``_config.yml``: one place.

It also removes a duplicated inline script: sphinx-thebe 0.3.1 (pulled in by Jupyter Book) adds
its configuration ``<script>const THEBE_JS_URL = ...</script>`` twice to every page, and the
second copy throws "Identifier 'THEBE_JS_URL' has already been declared" in the browser console
(found by ``scripts/browser_test.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

try:  # loaded by Sphinx as a local extension (``_ext`` on sys.path)
    import myst_to_jupyter
except ImportError:  # imported as a file from the tests
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "myst_to_jupyter", Path(__file__).with_name("myst_to_jupyter.py"))
    myst_to_jupyter = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(myst_to_jupyter)

INSTALL_TAG = "install-course-library"


def install_source(repo_url: str, branch: str) -> str:
    return (
        "# Outside the course repository (Colab, a notebook downloaded alone) the course\n"
        "# library `lib` is not installed yet: install it from the repository.\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        "try:\n"
        "    import lib  # noqa: F401\n"
        "except ImportError:\n"
        "    subprocess.check_call([sys.executable, \"-m\", \"pip\", \"install\", \"-q\",\n"
        f"                           \"git+{repo_url}@{branch}\"])\n"
    )


def macros_source(macros: dict) -> str:
    """A markdown cell defining the book's TeX macros (``\\R``, ``\\E``, ...) for plain
    Jupyter and Colab, which do not read the book's MathJax configuration."""
    defs = "".join(f"\\newcommand{{\\{name}}}{{{body}}}" for name, body in macros.items())
    return f"${defs}$\n\n*(TeX macros of the course, used by the cells below.)*"


def add_install_cell(path: Path, repo_url: str, branch: str, macros: dict | None = None,
                     bib: dict | None = None, chapter=None) -> None:
    """Convert (once) the notebook at ``path`` to plain Jupyter Markdown and insert at its top
    the cell installing ``lib`` and, when the book defines TeX ``macros``, a markdown cell
    defining them."""
    nb = nbformat.read(path, as_version=4)
    if any(INSTALL_TAG in c.get("metadata", {}).get("tags", []) for c in nb.cells):
        return
    myst_to_jupyter.convert_notebook(nb, bib=bib, chapter=chapter)
    cell = nbformat.v4.new_code_cell(install_source(repo_url, branch))
    cell.metadata["tags"] = [INSTALL_TAG, "remove-cell"]
    new = [cell]
    if macros:
        math = nbformat.v4.new_markdown_cell(macros_source(macros))
        math.metadata["tags"] = ["course-tex-macros", "remove-cell"]
        new.insert(0, math)
    for c in new:
        if nb.nbformat_minor < 5:  # cell ids exist from nbformat 4.5 on
            c.pop("id", None)
    nb.cells[0:0] = new
    # myst-nb's line map and jupytext's pairing hint mean nothing to plain Jupyter
    nb.metadata.pop("source_map", None)
    nb.metadata.pop("jupytext", None)
    nbformat.validate(nb)
    nbformat.write(nb, path)


def fix_links(app, pagename, templatename, context, doctree):
    ipynb = context.get("ipynb_source")
    opts = app.config.html_theme_options
    repo_url = opts.get("repository_url", "").rstrip("/")
    branch = opts.get("repository_branch", "") or "main"
    if not ipynb or not repo_url:
        return
    path = Path(app.outdir) / "_sources" / ipynb
    if path.is_file():
        tex = (getattr(app.config, "mathjax3_config", None) or {}).get("tex", {})
        secnum = app.env.toc_secnumbers.get(pagename, {}).get("")
        add_install_cell(path, repo_url, branch, macros=tex.get("macros") or {},
                         bib=_bibliography(app),
                         chapter=".".join(map(str, secnum)) if secnum else None)
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            url = button.get("url", "")
            if button.get("text") == "Binder":
                button["url"] = re.sub(r"\.md$", ".ipynb", url)
            elif button.get("text") == "Colab":
                url = re.sub(r"\.md$", ".ipynb", url)
                button["url"] = url.replace(f"/blob/{branch}/",
                                            f"/blob/{app.config.notebooks_branch}/", 1)


def _bibliography(app) -> dict:
    """The book's references (``bibtex_bibfiles``), read once per build."""
    cached = getattr(app, "_krr_bibliography", None)
    if cached is None:
        files = [Path(app.srcdir) / f for f in getattr(app.config, "bibtex_bibfiles", [])]
        cached = myst_to_jupyter.read_bibliography([f for f in files if f.is_file()])
        app._krr_bibliography = cached
    return cached


def dedupe_scripts(app, pagename, templatename, context, doctree):
    """Drop repeated ``<script>`` entries (same file and same inline body) from the page."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for js in scripts:
        # an inline script may come with filename None or "" and another priority: same tag
        attrs = getattr(js, "attributes", {}) or {}
        key = (str(getattr(js, "filename", js) or ""),
               tuple(sorted((k, str(v)) for k, v in attrs.items() if v is not None)))
        if key in seen:
            continue
        seen.add(key)
        kept.append(js)
    context["script_files"] = kept


def setup(app):
    app.add_config_value("notebooks_branch", "notebooks", "html")
    app.connect("html-page-context", fix_links, priority=502)
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""Sphinx extension: draw the chapters' interactive figures offline (issue 18).

A chapter cell that displays :func:`lib.plotting.interactive` leaves a ``<div
class="krr-interactive">`` and its Vega-Lite spec (data inline) on the page. This extension

* writes, once per build folder, Vega + Vega-Lite + Vega-Embed as one script,
  ``_static/vega/vega-embed-bundle.js``, from ``vl_convert.javascript_bundle()`` (the PyPI
  package ``vl-convert-python`` ships the libraries; nothing is downloaded), with the course's
  drawing code ``_ext/krr_interactive.js`` appended, for the Vega-Lite version Altair writes;
* adds that script only to the pages that have an interactive figure (once per page);
* styles the figures (``krr-interactive.css`` below): the note shown where JavaScript did not
  run is hidden once the figure is drawn; the figure's ``<div>`` stays a block as wide as the
  text column (Vega-Embed makes it an inline block as wide as the chart), so that the drawing
  code can fit a figure wider than the column into it (see ``krr_interactive.js``).

Like ``offline_mathjax``, the files go to ``_build/vega-static`` (not the source ``_static``,
whose scripts Jupyter Book adds to every page), which is added to ``html_static_path``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

SCRIPT = "vega/vega-embed-bundle.js"
CSS = "vega/krr-interactive.css"
_CSS_TEXT = """\
.krr-interactive { margin: 0.5em 0 1em; overflow-x: auto; }
.krr-interactive.vega-embed { display: block; }
.krr-interactive-ready > .krr-interactive-note { display: none; }
.krr-interactive .vega-bindings { margin-top: 0.4em; font-size: 0.95em; }
.krr-interactive .vega-bind { margin: 0.2em 0; }
.krr-interactive .vega-bind-name { display: inline-block; min-width: 9em; }
.krr-interactive input[type="range"] { vertical-align: middle; width: 14em; }
.krr-interactive input[type="range"] + span { margin-left: 0.5em; }
.krr-interactive .vega-bind-radio label { display: inline-block; margin-right: 1.2em; }
.krr-interactive .vega-bind-radio input { margin: 0 0.35em 0 0; vertical-align: middle; }
.krr-interactive input:focus-visible { outline: 3px solid #0a6ed1; outline-offset: 2px; }
html[data-theme="dark"] .krr-interactive { background: #333; color: #e6e6e6; padding: 0.4em; }
html[data-theme="dark"] .krr-interactive .vega-bindings { color: #e6e6e6; }
"""


def _bundle_text() -> str:
    import altair
    import vl_convert

    # the Vega-Lite version Altair writes, e.g. "6.4" for schema v6.4.1
    vl_version = ".".join(altair.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    if vl_version not in vl_convert.get_vegalite_versions():
        raise RuntimeError(f"vl-convert-python {vl_convert.__version__} has no Vega-Lite "
                           f"{vl_version} (Altair {altair.__version__}): pin matching versions")
    js = vl_convert.javascript_bundle(vl_version=vl_version)
    own = (Path(__file__).parent / "krr_interactive.js").read_text()
    # the bundle declares top-level consts: a function scope keeps them off the page's global
    # scope (a classic script, so the book also works opened from file://); it sets
    # window.vegaEmbed itself
    return "(function () {\n" + js + "\n})();\n" + own


def _write(app, config):
    import vl_convert

    dest_root = Path(app.outdir).parent / "vega-static"
    stamp = dest_root / "vega" / "VERSION"
    own = (Path(__file__).parent / "krr_interactive.js").read_text()
    digest = hashlib.sha256((own + _CSS_TEXT).encode()).hexdigest()
    tag = f"vl-convert {vl_convert.__version__}\n{digest}"
    if not (dest_root / SCRIPT).is_file() or not stamp.is_file() or stamp.read_text() != tag:
        (dest_root / "vega").mkdir(parents=True, exist_ok=True)
        (dest_root / SCRIPT).write_text(_bundle_text())
        (dest_root / CSS).write_text(_CSS_TEXT)
        stamp.write_text(tag)
    config.html_static_path = list(config.html_static_path) + [str(dest_root)]


def _add_to_page(app, pagename, templatename, context, doctree):
    if 'class="krr-interactive"' in context.get("body", ""):
        app.add_js_file(SCRIPT)
        app.add_css_file(CSS)


def setup(app):
    app.connect("config-inited", _write, priority=900)
    app.connect("html-page-context", _add_to_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

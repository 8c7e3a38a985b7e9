"""Figure style shared by the chapters.

:func:`style` gives every figure an opaque white background (so it stays legible in the
theme's dark mode), readable font sizes and light grids. Call it once at the top of a chapter.
:func:`interactive` wraps a Vega-Altair chart (a precomputed grid, a slider or a choice bound to
it) as the MIME bundle that the book draws offline and JupyterLab renders natively.
"""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import io
import json

import matplotlib as mpl

__all__ = ["style", "interactive", "Interactive"]

_RC = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "savefig.transparent": False,
    "figure.dpi": 100,
    "figure.figsize": (6.4, 4.0),
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.fontsize": 9,
    "legend.framealpha": 0.9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.constrained_layout.use": True,
    "animation.embed_limit": 5.0,
}


def style():
    """Apply the course's matplotlib style (white opaque backgrounds, grids, sizes).

    Example:
        >>> style()
        >>> import matplotlib as mpl
        >>> mpl.rcParams["figure.facecolor"]
        'white'
    """
    mpl.rcParams.update(_RC)


# ------------------------------------------------------------------ interactive figures (issue 18)

#: Vega-Lite's MIME type for the schema Altair 6 writes (JupyterLab and VS Code render it).
VEGALITE_MIME = "application/vnd.vegalite.v6+json"
_MAX_SPEC_BYTES = 2_000_000  # one figure's inline data; a chapter page stays below 8 MB


class Interactive:
    """A Vega-Lite figure shown through its MIME bundle (see :func:`interactive`).

    Attributes:
        spec: the Vega-Lite specification (a ``dict``, data inline).
        description: the accessible description (``aria-label`` of the figure).
        element_id: the id of the ``<div>`` the book draws the figure in (a hash of the spec:
            the same on every run).
    """

    def __init__(self, spec, description, fallback_png=None):
        self.spec = spec
        self.description = description
        self.fallback_png = fallback_png
        text = json.dumps(spec, sort_keys=True, separators=(",", ":"), allow_nan=False)
        self._json = text
        self.element_id = "krr-vis-" + hashlib.sha256(text.encode()).hexdigest()[:12]

    def html(self):
        """The ``text/html`` the book renders: a ``<div>``, the spec in a JSON ``<script>``.

        ``_static/krr-vega.js`` (added by ``_ext/interactive_figures.py`` to pages that have
        such a ``<div>``) draws every ``div.krr-interactive`` with the page's own copy of
        Vega-Embed; nothing is requested from outside the book.
        """
        spec = self._json.replace("</", "<\\/")  # a JSON string may not close the <script>
        note = ("Interactive figure: it is drawn on the course's web page (the static "
                "figure above shows the same computation).")
        return (f'<div class="krr-interactive" id="{self.element_id}" role="figure" '
                f'aria-label="{html_lib.escape(self.description, quote=True)}">'
                f'<p class="krr-interactive-note">{note}</p></div>\n'
                f'<script type="application/json" class="krr-interactive-spec" '
                f'data-target="{self.element_id}">{spec}</script>')

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {VEGALITE_MIME: self.spec, "text/html": self.html(),
                  "text/plain": f"<interactive figure: {self.description}>"}
        if self.fallback_png is not None:
            bundle["image/png"] = self.fallback_png
        return bundle


def interactive(chart, description, fallback_fig=None):
    """Wrap an Altair chart as an interactive figure for the book and for Jupyter.

    The chart's data must be inline (``alt.Data(values=rows)``, rows a list of dicts); its
    controls are Vega-Lite parameters bound to native HTML inputs (``alt.binding_range``,
    ``alt.binding_radio``, ``alt.binding_select``), which the keyboard operates. The returned
    object displays as a MIME bundle with ``application/vnd.vegalite.v6+json`` (the spec,
    rendered natively by JupyterLab 4.4+ and VS Code), ``text/html`` (drawn by the book's offline
    Vega-Embed, see ``_ext/interactive_figures.py``) and ``text/plain``.

    Args:
        chart: an ``altair`` chart (any top-level chart: ``Chart``, layer, concat).
        description: non-empty ``str``, what the figure shows and what its controls change
            (the screen-reader description; also the spec's ``description``).
        fallback_fig: optional matplotlib ``Figure``: its PNG is added to the bundle as
            ``image/png`` (for front ends that render neither Vega-Lite nor the book's HTML).

    Returns:
        :class:`Interactive`.

    Raises:
        ValueError: ``chart`` has no ``to_dict``, its spec is not Vega-Lite v6, refers to data
            by URL, holds NaN/inf, or is larger than 2 MB as JSON; ``description`` empty or not
            a ``str``.

    Example:
        >>> import altair as alt
        >>> rows = [{"x": 0, "y": 0, "k": 1}, {"x": 1, "y": 1, "k": 1},
        ...         {"x": 0, "y": 0, "k": 2}, {"x": 1, "y": 2, "k": 2}]
        >>> k = alt.param(name="k", value=1, bind=alt.binding_range(min=1, max=2, step=1))
        >>> chart = alt.Chart(alt.Data(values=rows)).mark_line().encode(x="x:Q", y="y:Q")
        >>> chart = chart.add_params(k)
        >>> fig = interactive(chart.transform_filter("datum.k == k"), "y against x for k")
        >>> sorted(fig._repr_mimebundle_())
        ['application/vnd.vegalite.v6+json', 'text/html', 'text/plain']
        >>> 'class="krr-interactive"' in fig.html()
        True
    """
    if not isinstance(description, str) or not description.strip():
        raise ValueError("description must be a non-empty str")
    if not hasattr(chart, "to_dict"):
        raise ValueError(f"chart must be an altair chart, got {type(chart).__name__}")
    spec = chart.properties(description=description).to_dict()
    if "/vega-lite/v6" not in spec.get("$schema", ""):
        raise ValueError(f"chart must be Vega-Lite v6, got schema {spec.get('$schema')!r}")
    try:
        text = json.dumps(spec, allow_nan=False)
    except ValueError as err:
        raise ValueError("chart data hold NaN or inf (not valid JSON)") from err
    if '"url"' in text and _has_url_data(spec):
        raise ValueError("chart data must be inline (no data URL): the book is offline")
    if len(text) > _MAX_SPEC_BYTES:
        raise ValueError(f"chart spec is {len(text)} bytes, above {_MAX_SPEC_BYTES}: "
                         "thin the grid")
    png = None
    if fallback_fig is not None:
        buf = io.BytesIO()
        fallback_fig.savefig(buf, format="png")
        png = base64.b64encode(buf.getvalue()).decode()
    return Interactive(spec, description.strip(), png)


def _has_url_data(node):
    if isinstance(node, dict):
        if "url" in node and isinstance(node.get("url"), str) and (
                set(node) <= {"url", "format", "name"}):
            return True
        return any(_has_url_data(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_url_data(v) for v in node)
    return False

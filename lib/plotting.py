"""Figure style shared by the chapters.

:func:`style` gives every figure an opaque white background (so it stays legible in the
theme's dark mode), readable font sizes and light grids. Call it once at the top of a chapter.
"""

from __future__ import annotations

import matplotlib as mpl

__all__ = ["style"]

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

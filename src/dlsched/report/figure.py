"""Matplotlib plumbing: object-oriented Agg figures (no pyplot global state) rendered to PNG data URIs."""

from __future__ import annotations

import base64
import io

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 110
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf")
# dash patterns and markers differ per series, so overlapping lines (e.g. SJF and SRTF CDFs that
# coincide) stay distinguishable in grey print and for colour-blind readers, not by colour alone
LINESTYLES = ("-", (0, (6, 2)), (0, (1, 1.5)), (0, (5, 2, 1, 2)), (0, (3, 1, 1, 1, 1, 1)), (0, (8, 2, 2, 2)),
              (0, (2, 3)), (0, (10, 3)), (0, (4, 2, 1, 2, 1, 2)), (0, (1, 3)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def new_figure(width: float = 8.0, height: float = 4.2) -> Figure:
    """A figure on its own Agg canvas, so rendering never depends on the user's backend."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def style(index: int) -> dict:
    """Colour and dash pattern of the ``index``-th series, so policies look alike in every plot."""
    return {"color": COLORS[index % len(COLORS)], "linestyle": LINESTYLES[index % len(LINESTYLES)]}


def marks(index: int, every: float = 0.09) -> dict:
    """A marker of its own for the ``index``-th line, spaced along the drawn line (``markevery`` as a
    fraction of the axes diagonal) and offset per series so coinciding lines show both markers."""
    return {"marker": MARKERS[index % len(MARKERS)], "markersize": 5, "markerfacecolor": "white",
            "markevery": (0.011 * (index % 8), every)}


def tidy(ax: Axes) -> None:
    """Light grid and no top/right spines: easier to read values off."""
    ax.grid(True, which="major", alpha=0.3, linewidth=0.6)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)


def to_data_uri(fig: Figure) -> str:
    """PNG of ``fig`` as a base64 ``data:`` URI for embedding in a self-contained page."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")

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
LINESTYLES = ("-", "--", "-.", ":")


def new_figure(width: float = 8.0, height: float = 4.2) -> Figure:
    """A figure on its own Agg canvas, so rendering never depends on the user's backend."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def style(index: int) -> dict:
    """Colour and line style of the ``index``-th series, so policies look alike in every plot."""
    return {"color": COLORS[index % len(COLORS)], "linestyle": LINESTYLES[(index // len(COLORS)) % 4]}


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

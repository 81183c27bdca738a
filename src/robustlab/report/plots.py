"""Plot helpers shared by the studies: mean ± band over seeds, log–log with theory lines."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

__all__ = ["plt", "mean_band", "save", "theory_line"]

plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 110, "axes.grid": True, "grid.alpha": 0.3,
                     "font.size": 9, "axes.titlesize": 10, "legend.fontsize": 8})


def mean_band(ax, df: pd.DataFrame, x: str, y: str, *, label: str | None = None, color=None,
              band: str = "std", marker: str = "o", **kw):
    """Plot the mean of ``y`` over rows sharing ``x`` with a ±1 std (or min–max) band."""
    g = df.groupby(x)[y]
    stats = g.agg(["mean", "std", "min", "max", "count"]).sort_index()
    xs = stats.index.to_numpy(dtype=float)
    mean = stats["mean"].to_numpy()
    if band == "std":
        sd = np.nan_to_num(stats["std"].to_numpy())
        lo, hi = mean - sd, mean + sd
    else:
        lo, hi = stats["min"].to_numpy(), stats["max"].to_numpy()
    (line,) = ax.plot(xs, mean, marker=marker, ms=3, label=label, color=color, **kw)
    ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
    return line


def theory_line(ax, xs, slope: float, anchor_x: float, anchor_y: float, label: str, **kw):
    """Draw y = anchor_y * (x / anchor_x) ** slope (a power law through an anchor point)."""
    xs = np.asarray(sorted(xs), dtype=float)
    ax.plot(xs, anchor_y * (xs / anchor_x) ** slope, "k--", lw=1, label=label, **kw)


def save(fig, path: Path) -> None:
    """Save a figure atomically as PNG and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.png")
    fig.savefig(tmp, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    os.replace(tmp, path)



"""Plot helpers shared by the studies: one house style, mean ± band over seeds, power laws.

Every study draws through these helpers so that the report reads as one document:

* :func:`subplots` — figures sized for a report column, constrained layout;
* :func:`log_axes` — log scales whose tick labels read as plain numbers (2, 10, 0.05);
* :func:`mean_band` — the mean of a quantity over seeds (rows sharing ``x``) with a band
  (±1 std by default; ``sem``, ``ci95`` or ``minmax`` on request);
* :func:`theory_line` — a power law ``y ∝ x^slope`` through an anchor point (dashed, black);
* :func:`fit_power_law` / :func:`loglog_fit` — an ordinary least-squares fit of
  ``log y = c + s log x`` with a t-interval on the slope ``s``; the latter draws the fitted
  line with its confidence band on log–log axes and puts the slope in the legend;
* :func:`save` — an atomic, byte-reproducible PNG.

The house style (Okabe–Ito colours, which stay distinct for colour-blind readers; no top/right
spines; light grid; 150 dpi) is :data:`STYLE`, applied only inside :func:`style` (a
``matplotlib.rc_context``): the run's figure step runs in it, and :func:`subplots` and
:func:`save` enter it too. Figures are :class:`matplotlib.figure.Figure` objects made without
pyplot, so importing this module or running a study never selects a backend, registers a
figure with pyplot or changes the caller's rcParams (a notebook's inline plots and style are
left as they were). ``plt`` is a small stand-in for the pyplot calls studies make
(``plt.subplots``, ``plt.close``, ``plt.get_cmap``) on that object API.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from cycler import cycler
from matplotlib import ticker
from matplotlib.figure import Figure

from .. import records

__all__ = ["plt", "STYLE", "style", "COLORS", "subplots", "label_panels", "log_axes", "mean_band", "theory_line",
           "PowerLawFit", "fit_power_law", "loglog_fit", "save"]

# Okabe & Ito (2008): eight colours distinguishable under the common colour-vision deficiencies
# (yellow last: it is faint on white).
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]

STYLE: dict[str, Any] = {
    "figure.dpi": 100, "savefig.dpi": 150, "savefig.facecolor": "white",
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8,
    "xtick.labelsize": 8, "ytick.labelsize": 8,
    "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "axes.grid.which": "major", "grid.alpha": 0.3, "grid.linewidth": 0.5,
    "lines.linewidth": 1.5, "lines.markersize": 4, "legend.frameon": False,
    "axes.prop_cycle": cycler(color=COLORS),
    # log-axis ticks from 10^-3 to 10^3 print as 0.05, 2, 300 instead of 5×10^-2, 2×10^0, ...
    "axes.formatter.min_exponent": 3,
}


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The house style (:data:`STYLE`) for what is drawn and saved inside; the caller's
    rcParams are restored on leaving, whatever happened inside."""
    with matplotlib.rc_context(STYLE):
        yield


_SUBPLOTS_KW = ("sharex", "sharey", "squeeze", "width_ratios", "height_ratios", "subplot_kw",
                "gridspec_kw")


class _Figures:
    """The pyplot calls studies make, on matplotlib's object API: figures are plain
    :class:`~matplotlib.figure.Figure` objects (no backend, no pyplot registry), drawn in the
    house style. Any other attribute is pyplot's own."""

    @staticmethod
    def figure(**fig_kw: Any) -> Figure:
        with style():
            return Figure(**fig_kw)

    @staticmethod
    def subplots(nrows: int = 1, ncols: int = 1, **kw: Any):
        sub = {k: kw.pop(k) for k in _SUBPLOTS_KW if k in kw}
        with style():
            fig = Figure(**kw)
            return fig, fig.subplots(nrows, ncols, **sub)

    @staticmethod
    def close(fig: Any = None) -> None:
        """Nothing to do: no pyplot registry holds these figures (they go with their last
        reference); kept for code written against pyplot."""

    @staticmethod
    def get_cmap(name: str | None = None, lut: int | None = None):
        cmap = matplotlib.colormaps[name or "viridis"]
        return cmap.resampled(lut) if lut is not None else cmap

    @staticmethod
    def get_fignums() -> list[int]:
        return []  # robustlab's figures are never registered with pyplot

    def __getattr__(self, name: str) -> Any:
        import matplotlib.pyplot as pyplot  # only for code that asks for more than the above

        return getattr(pyplot, name)


plt = _Figures()


def subplots(nrows: int = 1, ncols: int = 1, *, panel: tuple[float, float] = (3.4, 2.6),
             squeeze: bool = True, **kw: Any):
    """Subplots sized ``panel`` inches per panel, with constrained layout."""
    return plt.subplots(nrows, ncols, figsize=(panel[0] * ncols, panel[1] * nrows),
                        layout="constrained", squeeze=squeeze, **kw)


def label_panels(axes, *, start: str = "a") -> None:
    """Put (a), (b), … in the top-left corner of each panel, so captions can refer to them."""
    for i, ax in enumerate(np.ravel(axes)):
        ax.text(-0.02, 1.02, f"({chr(ord(start) + i)})", transform=ax.transAxes,
                ha="right", va="bottom", fontweight="bold")


def log_axes(ax, *, x: bool = True, y: bool = True) -> None:
    """Log scale on the chosen axes (ticks between 10⁻³ and 10³ read as plain numbers)."""
    if x:
        ax.set_xscale("log")
    if y:
        ax.set_yscale("log")


def mean_band(ax, df: pd.DataFrame, x: str, y: str, *, label: str | None = None, color=None,
              band: str = "std", marker: str = "o", **kw):
    """Plot the mean of ``y`` over rows sharing ``x`` with a band around it.

    ``band``: ``"std"`` (±1 standard deviation, default), ``"sem"`` (±1 standard error),
    ``"ci95"`` (95 % t-interval of the mean) or ``"minmax"`` (any other value: min–max).
    Rows with a missing ``y`` are ignored. Returns the mean's line.
    """
    g = df.dropna(subset=[y]).groupby(x)[y]
    stats = g.agg(["mean", "std", "min", "max", "count"]).sort_index()
    xs = stats.index.to_numpy(dtype=float)
    mean = stats["mean"].to_numpy(dtype=float)
    sd = np.nan_to_num(stats["std"].to_numpy(dtype=float))  # one seed: no band
    n = stats["count"].to_numpy(dtype=float)
    if band == "std":
        half = sd
    elif band == "sem":
        half = sd / np.sqrt(n)
    elif band == "ci95":
        from scipy import stats as sps

        t = np.where(n > 1, sps.t.ppf(0.975, np.maximum(n - 1, 1)), 0.0)
        half = t * sd / np.sqrt(n)
    else:
        half = None
    if half is None:
        lo, hi = stats["min"].to_numpy(dtype=float), stats["max"].to_numpy(dtype=float)
    else:
        lo, hi = mean - half, mean + half
    (line,) = ax.plot(xs, mean, marker=marker, label=label, color=color, **kw)
    ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
    return line


def theory_line(ax, xs, slope: float, anchor_x: float, anchor_y: float, label: str, **kw):
    """Draw y = anchor_y * (x / anchor_x) ** slope (a power law through an anchor point).

    Dashed black by default; keyword arguments (``color``, ``ls``, …) override the style.
    """
    xs = np.asarray(sorted(xs), dtype=float)
    style = {"color": "k", "ls": "--", "lw": 1.0, "zorder": 1}
    style.update(kw)
    (line,) = ax.plot(xs, anchor_y * (xs / anchor_x) ** slope, label=label, **style)
    return line


@dataclasses.dataclass(frozen=True)
class PowerLawFit:
    """The least-squares fit ``log y = intercept + slope · log x`` (natural logs).

    ``slope_ci`` is the two-sided ``level`` t-interval of the slope (n − 2 degrees of
    freedom); with only two points it is (nan, nan). ``s2`` is the residual variance and
    ``sxx = Σ (log x − mean log x)²``; both feed :meth:`band`.
    """

    slope: float
    intercept: float
    slope_ci: tuple[float, float]
    r2: float
    n: int
    level: float
    mean_logx: float
    sxx: float
    s2: float

    def predict(self, x) -> np.ndarray:
        return np.exp(self.intercept) * np.asarray(x, dtype=float) ** self.slope

    def band(self, x) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise ``level`` confidence band of the fitted line (mean response) at ``x``."""
        lx = np.log(np.asarray(x, dtype=float))
        if self.n <= 2:
            nan = np.full_like(lx, np.nan)
            return nan, nan
        from scipy import stats as sps

        t = sps.t.ppf(0.5 + self.level / 2, self.n - 2)
        se = np.sqrt(self.s2 * (1.0 / self.n + (lx - self.mean_logx) ** 2 / self.sxx))
        mid = self.intercept + self.slope * lx
        return np.exp(mid - t * se), np.exp(mid + t * se)

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies inside the slope's confidence interval."""
        lo, hi = self.slope_ci
        return bool(lo <= value <= hi)

    def evidence(self, name: str = "slope") -> dict[str, Any]:
        """The fit as claim evidence: ``{name, name_ci, name_r2, name_n}`` (the report pairs
        ``name`` with ``name_ci`` and prints ``slope = −0.49 [−0.53, −0.45]``)."""
        return {name: self.slope, f"{name}_ci": [self.slope_ci[0], self.slope_ci[1]],
                f"{name}_r2": self.r2, f"{name}_n": self.n}

    def text(self, digits: int = 2) -> str:
        lo, hi = self.slope_ci
        if math.isnan(lo):
            return f"{self.slope:.{digits}f}"
        return f"{self.slope:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def fit_power_law(x: Sequence[float], y: Sequence[float], *, level: float = 0.95) -> PowerLawFit:
    """Fit ``y = C x^s`` by least squares on logs; every point counts once (pool seeds as rows).

    Raises ValueError for non-positive or non-finite values (a log–log fit would silently
    drop them) and when fewer than two distinct ``x`` are given.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.size} vs {y.size}")
    bad = ~(np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0))
    if bad.any():
        raise ValueError(f"a power-law fit needs finite positive values; {int(bad.sum())} of "
                         f"{x.size} points are not")
    if not 0 < level < 1:
        raise ValueError(f"level={level} must lie in (0, 1)")
    lx, ly = np.log(x), np.log(y)
    if np.unique(lx).size < 2:
        raise ValueError("a power-law fit needs at least two distinct x values")
    n = x.size
    mx, my = lx.mean(), ly.mean()
    sxx = float(((lx - mx) ** 2).sum())
    slope = float(((lx - mx) * (ly - my)).sum() / sxx)
    intercept = float(my - slope * mx)
    resid = ly - (intercept + slope * lx)
    sse = float((resid ** 2).sum())
    sst = float(((ly - my) ** 2).sum())
    r2 = 1.0 - sse / sst if sst > 0 else 1.0
    if n > 2:
        from scipy import stats as sps

        s2 = sse / (n - 2)
        half = float(sps.t.ppf(0.5 + level / 2, n - 2) * math.sqrt(s2 / sxx))
        ci = (slope - half, slope + half)
    else:
        s2, ci = math.nan, (math.nan, math.nan)
    return PowerLawFit(slope, intercept, ci, r2, n, level, float(mx), sxx, s2)


def loglog_fit(ax, x: Sequence[float], y: Sequence[float], *, color=None, label: str = "fit",
               level: float = 0.95, **kw) -> PowerLawFit:
    """Fit a power law to (x, y), draw it with its confidence band on log–log axes.

    The legend entry reads ``label: slope s [lo, hi]``. Returns the :class:`PowerLawFit`.
    """
    fit = fit_power_law(x, y, level=level)
    xs = np.geomspace(float(np.min(x)), float(np.max(x)), 64)
    style = {"ls": "-", "lw": 1.0, "alpha": 0.9}
    style.update(kw)
    (line,) = ax.plot(xs, fit.predict(xs), color=color,
                      label=f"{label}: slope {fit.text()}", **style)
    lo, hi = fit.band(xs)
    if np.isfinite(lo).all():
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.12, lw=0)
    log_axes(ax)
    return fit


class _MinorLogLabels(ticker.LogFormatterSciNotation):
    """Minor log ticks labelled at 2 and 5 × 10^k only (matplotlib's default, 2, 3, 4 and 6,
    makes labels such as 300 and 400 run into each other on a narrow panel)."""

    def set_locs(self, locs=None):
        super().set_locs(locs)
        if self._sublabels is not None and self._sublabels != {1} and len(self._sublabels) < 9:
            self._sublabels = {1, 2, 5}


def _tidy_log_ticks(fig) -> None:
    """House style for log axes left with matplotlib's default minor-tick labels."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log" and type(axis.get_minor_formatter()) is ticker.LogFormatterSciNotation:
                axis.set_minor_formatter(_MinorLogLabels(labelOnlyBase=False))


def save(fig, path: Path) -> None:
    """Save a figure atomically as PNG (no timestamp, so the bytes are reproducible) and close it."""
    _tidy_log_ticks(fig)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # a safe temporary (unique name, no link followed), renamed into place
        with style():
            records.atomic_write_with(path, lambda fh: fig.savefig(fh, format="png", bbox_inches="tight",
                                                                   metadata={"Software": None}))
    finally:
        plt.close(fig)

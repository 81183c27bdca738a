"""Verdicts on claims: an effect with an interval, decided against the paper's threshold.

Every claim a study checks is a measurement, so its verdict is one of four states:

* ``reproduced``   — the effect's interval lies wholly on the paper's side of the threshold;
* ``contradicted`` — the interval lies wholly on the other side;
* ``inconclusive`` — the interval straddles the threshold: more seeds are needed, and
  :func:`seeds_needed` says how many would decide it at the observed effect and spread;
* ``not applicable`` — the run does not meet a condition the paper's statement rests on
  (an assumption violated, a network that did not train, weights that left the lazy ball);
  this says nothing about the paper either way.

An :class:`Estimate` is an effect with a two-sided interval and what produced it (a t interval
over seeds, an OLS slope's t interval, a percentile bootstrap, a Wilson interval), the number
of independent units behind it and, where known, the spread of one unit, from which the
number of units that would shrink the interval past the threshold follows:
``n* = min n such that t_{n−k}(level) · sd / √n < |effect − threshold|``.

:func:`decide` turns an estimate, a threshold (``side="above"`` or ``"below"``) or a band
(``side="inside"``) and a list of :class:`Condition` into a :class:`Verdict`.
:func:`combine` joins the verdicts of the parts of a statement that must all hold.

Nothing here knows about studies, tensors or files: numpy and scipy only, so that a user's
own study can use it as the built-in ones do.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "REPRODUCED", "CONTRADICTED", "INCONCLUSIVE", "NOT_APPLICABLE", "VERDICTS",
    "Estimate", "Condition", "Verdict",
    "mean_estimate", "difference_estimate", "slope_estimate", "bootstrap_estimate",
    "proportion_estimate", "log_ratio_estimate", "contrast_estimate", "power_exponent",
    "decide", "not_applicable", "combine", "margin", "seeds_needed", "seeds_for",
    "t_quantile",
]

REPRODUCED = "reproduced"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_APPLICABLE = "not applicable"
VERDICTS = (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_APPLICABLE)

SIDES = ("above", "below", "inside")
MAX_SEEDS = 100_000  # past this, "needs more seeds" is reported as None (practically undecidable)


def t_quantile(level: float, dof: float) -> float:
    """The two-sided ``level`` quantile of Student's t with ``dof`` degrees of freedom."""
    if dof <= 0:
        return math.inf
    from scipy import stats as sps

    return float(sps.t.ppf(0.5 + level / 2.0, dof))


def _f(x: Any) -> float | None:
    """A finite float or None (for JSON)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


# ----------------------------------------------------------------------------------------
# estimates

@dataclasses.dataclass(frozen=True)
class Estimate:
    """An effect with a two-sided interval.

    ``n``: independent units behind the interval (seeds, or rows of a fit); ``sd``: the
    spread of one unit, so that the interval's half-width is about ``t · sd / √n`` (None when
    the method gives no such scaling, e.g. a Wilson interval); ``dof_loss``: parameters fitted
    (1 for a mean, 2 for a slope), so ``dof = n − dof_loss``; ``units_per_seed``: units one
    seed adds (a fit over 5 values of d pools 5 rows per seed).
    """

    value: float
    low: float
    high: float
    n: int
    method: str
    level: float = 0.95
    sd: float | None = None
    dof_loss: int = 1
    units_per_seed: float = 1.0
    kind: str = "t"  # "t": half-width t·sd/√n; "wilson": a proportion's Wilson interval
    # set when the estimate's model does not describe the data (a significant lack of fit):
    # :func:`decide` then refuses to decide, saying this
    misfit: str | None = None

    @property
    def interval(self) -> tuple[float, float]:
        return (self.low, self.high)

    @property
    def finite(self) -> bool:
        return all(math.isfinite(v) for v in (self.value, self.low, self.high))

    def to_dict(self) -> dict[str, Any]:
        return {"effect": _f(self.value), "interval": [_f(self.low), _f(self.high)],
                "level": self.level, "n": int(self.n), "method": self.method}


def _array(values: Iterable[float]) -> np.ndarray:
    return np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64).ravel()


def _clean(values: Iterable[float]) -> tuple[np.ndarray, int]:
    """The finite values, and how many were left out (NaN, ±inf): an estimate names those in
    its ``method``, so that a unit left out is never left out silently."""
    a = _array(values)
    ok = np.isfinite(a)
    return a[ok], int(a.size - ok.sum())


def _left_out(est: Estimate, n: int) -> Estimate:
    return dataclasses.replace(est, method=f"{est.method} ({n} non-finite left out)") if n else est


def mean_estimate(values: Iterable[float], *, level: float = 0.95, what: str = "seeds") -> Estimate:
    """Mean over independent units (usually one value per seed) with its t interval.

    One value gives an infinite interval (no spread is known): such a claim can only be
    inconclusive.
    """
    a, out = _clean(values)
    n = int(a.size)
    if n == 0:
        return _left_out(Estimate(math.nan, math.nan, math.nan, 0, f"mean over 0 {what}", level), out)
    mean = float(a.mean())
    if n == 1:
        return _left_out(Estimate(mean, -math.inf, math.inf, 1, f"mean over 1 {what} (no interval)", level), out)
    sd = float(a.std(ddof=1))
    half = t_quantile(level, n - 1) * sd / math.sqrt(n)
    return _left_out(Estimate(mean, mean - half, mean + half, n, f"mean ± t over {n} {what}", level, sd), out)


def difference_estimate(a: Iterable[float], b: Iterable[float], *, level: float = 0.95,
                        paired: bool = False, what: str = "seeds") -> Estimate:
    """``mean(a) − mean(b)``: paired (same seeds) t interval, or Welch's for independent groups.

    Non-finite values are left out (and named in ``method``); paired, the whole pair goes."""
    if paired:
        a, b = _array(a), _array(b)
        if a.size != b.size:
            raise ValueError(f"paired difference needs equal sizes, got {a.size} and {b.size}")
        with np.errstate(invalid="ignore"):  # inf − inf: a pair left out like any other
            est = mean_estimate(a - b, level=level, what=what)
        return dataclasses.replace(est, method=est.method.replace("mean", "paired difference", 1))
    (a, out_a), (b, out_b) = _clean(a), _clean(b)
    return _left_out(_welch(a, b, level, what), out_a + out_b)


def _welch(a: np.ndarray, b: np.ndarray, level: float, what: str) -> Estimate:
    na, nb = a.size, b.size
    if na == 0 or nb == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, "difference of means (a group is empty)", level)
    diff = float(a.mean() - b.mean())
    if na < 2 or nb < 2:
        return Estimate(diff, -math.inf, math.inf, min(na, nb), "difference of means (no interval)", level)
    va, vb = float(a.var(ddof=1)), float(b.var(ddof=1))
    se2 = va / na + vb / nb
    if se2 == 0:
        return Estimate(diff, diff, diff, min(na, nb), f"Welch difference over {na}+{nb} {what}", level, 0.0)
    dof = se2 ** 2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    half = t_quantile(level, dof) * math.sqrt(se2)
    n = min(na, nb)
    # per-seed spread of the difference when both groups grow together (one seed adds one to each)
    sd = math.sqrt(se2 * n)
    return Estimate(diff, diff - half, diff + half, n, f"Welch difference over {na}+{nb} {what}", level, sd)


def log_ratio_estimate(a: Iterable[float], b: Iterable[float], *, level: float = 0.95,
                       paired: bool = False, what: str = "seeds") -> Estimate:
    """``log(a / b)`` as a difference of mean logs (a ratio of geometric means); positive values
    only. Non-finite values are left out as in :func:`difference_estimate`."""
    a, b = _array(a), _array(b)
    if (a <= 0).any() or (b <= 0).any():
        raise ValueError("a log ratio needs positive values")
    est = difference_estimate(np.log(a), np.log(b), level=level, paired=paired, what=what)
    return dataclasses.replace(est, method="log ratio: " + est.method)


def contrast_estimate(groups: Sequence[Iterable[float]], weights: Sequence[float], *, level: float = 0.95,
                      what: str = "seeds") -> Estimate:
    """``Σ wᵢ · mean(groupᵢ)`` over independent groups, with the Welch–Satterthwaite t interval:
    ``se² = Σ wᵢ² sᵢ²/nᵢ`` and ``dof = se⁴ / Σ (wᵢ² sᵢ²/nᵢ)² / (nᵢ − 1)``. Two groups with
    weights (1, −1) give :func:`difference_estimate`'s Welch interval; four with (1, −1, −1, 1)
    a difference of differences (an interaction: does a gap between two settings change from
    one condition to another?). Non-finite values are left out and named in ``method``."""
    if len(groups) != len(weights) or not groups:
        raise ValueError(f"a contrast needs one weight per group, got {len(groups)} groups and {len(weights)} weights")
    cleaned = [_clean(g) for g in groups]
    arrays, out = [a for a, _ in cleaned], sum(o for _, o in cleaned)
    sizes = [a.size for a in arrays]
    w = [float(x) for x in weights]
    label = f"Welch–Satterthwaite contrast over {'+'.join(map(str, sizes))} {what}"
    if min(sizes) == 0:
        return _left_out(Estimate(math.nan, math.nan, math.nan, 0, "contrast of means (a group is empty)", level), out)
    value = float(sum(wi * a.mean() for wi, a in zip(w, arrays)))
    n = min(sizes)
    if n < 2:
        return _left_out(Estimate(value, -math.inf, math.inf, n, "contrast of means (no interval)", level), out)
    terms = [wi * wi * float(a.var(ddof=1)) / a.size for wi, a in zip(w, arrays)]
    se2 = sum(terms)
    if se2 == 0:
        return _left_out(Estimate(value, value, value, n, label, level, 0.0), out)
    dof = se2 ** 2 / sum(t * t / (a.size - 1) for t, a in zip(terms, arrays))
    half = t_quantile(level, dof) * math.sqrt(se2)
    # per-seed spread when every group grows together (one seed adds one to each)
    return _left_out(Estimate(value, value - half, value + half, n, label, level, math.sqrt(se2 * n)), out)


def slope_estimate(x: Iterable[float], y: Iterable[float], *, log_x: bool = False, log_y: bool = False,
                   level: float = 0.95, units_per_seed: float | None = None,
                   groups: Iterable[Any] | None = None) -> Estimate:
    """OLS slope of ``y`` on ``x`` (optionally of logs: a power law is ``log_x=log_y=True``, an
    exponential trend ``log_y=True``) with its t interval; every row counts once (pool seeds as
    rows). Rows whose log is undefined (non-positive) are dropped and named in ``method``.
    ``units_per_seed`` defaults to the number of distinct x values (one seed adds one row per x).

    ``groups`` (one label per row) fits one intercept per group and a common slope (fixed
    effects): x and y are centred within each group, so only within-group variation of x
    informs the slope, and the t interval has ``n − k − 1`` degrees of freedom for ``k``
    groups. Groups in which x does not vary carry no information and are dropped. With
    groups, ``units_per_seed`` defaults to the number of distinct (group, x) cells.
    """
    x = np.asarray(list(x), dtype=np.float64).ravel()
    y = np.asarray(list(y), dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.size} vs {y.size}")
    g = None
    if groups is not None:
        g = np.asarray([str(v) for v in groups], dtype=object)
        if g.size != x.size:
            raise ValueError(f"groups and x differ in length: {g.size} vs {x.size}")
    keep = np.isfinite(x) & np.isfinite(y)
    if log_x:
        keep &= x > 0
    if log_y:
        keep &= y > 0
    dropped = int((~keep).sum())
    x, y = x[keep], y[keep]
    lx = np.log(x) if log_x else x
    ly = np.log(y) if log_y else y
    kind = {(True, True): "log-log", (False, True): "log-linear", (True, False): "linear-log",
            (False, False): "linear"}[(log_x, log_y)]
    if g is None:
        k = 0
        cells = np.unique(lx).size
        mx, my = lx.mean() if lx.size else 0.0, ly.mean() if ly.size else 0.0
        cx, cy = lx - mx, ly - my
    else:
        g = g[keep]
        cx, cy = np.zeros_like(lx), np.zeros_like(ly)
        informative = np.zeros(lx.size, dtype=bool)
        k, cells = 0, 0
        for label in dict.fromkeys(g):
            idx = g == label
            if np.unique(lx[idx]).size < 2:
                continue
            k += 1
            cells += np.unique(lx[idx]).size
            informative |= idx
            cx[idx] = lx[idx] - lx[idx].mean()
            cy[idx] = ly[idx] - ly[idx].mean()
        dropped += int((~informative).sum())
        cx, cy = cx[informative], cy[informative]
    n = int(cx.size)
    fe = f" with {k} group intercepts" if g is not None else ""
    method = (f"OLS {kind} slope{fe}, t interval over {n} rows"
              + (f" ({dropped} dropped)" if dropped else ""))
    dof_loss = 2 if g is None else k + 1
    ups = float(units_per_seed) if units_per_seed else float(max(1, cells))
    sxx = float((cx ** 2).sum())
    if n < 2 or sxx <= 0:
        return Estimate(math.nan, math.nan, math.nan, n, method, level, dof_loss=dof_loss, units_per_seed=ups)
    slope = float((cx * cy).sum() / sxx)
    dof = n - dof_loss
    if dof < 1:
        return Estimate(slope, -math.inf, math.inf, n, method, level, dof_loss=dof_loss, units_per_seed=ups)
    resid = cy - slope * cx
    s2 = float((resid ** 2).sum() / dof)
    se = math.sqrt(s2 / sxx)
    half = t_quantile(level, dof) * se
    return Estimate(slope, slope - half, slope + half, n, method, level, sd=se * math.sqrt(n),
                    dof_loss=dof_loss, units_per_seed=ups)


# the exponent grid of :func:`power_exponent` (of x in Q = a·x^p + b)
_P_GRID = np.linspace(0.05, 3.0, 1181)
MISFIT_P = 0.01  # lack of fit at this level means the model does not describe the data


def power_exponent(x: Iterable[float], q: Iterable[float], *, level: float = 0.95) -> Estimate:
    """The signed exponent of ``Q ≈ a·x^p + b`` over units ``(x_i, Q_i)``: ``sign(a)·p``.

    The x-dependence of ``Q`` once an x-independent offset ``b`` is allowed for (lazy
    training, Thm 3.1: ``‖∇ₓf‖² = d/2 + O(C0²)``, a power of d plus an offset set by C0).
    Weighted least squares with weights ``1/Q̄(x)²`` (relative errors alike); ``a, b`` are
    profiled out at each ``p`` of a grid over (0.05, 3]; the interval is the profile-likelihood
    one, ``RSS(p) <= RSS(p̂)·(1 + t²/(n − 3))``, read on the signed scale.

    **The sign.** ``a < 0`` means Q falls with x, and the estimate is then negative: a falling
    quantity can never read as a growing exponent (``Q = 500 − 0.5·x`` gives −1, not +1). An
    interval whose profile set holds fits of both signs spans both; a bound reaching the grid's
    edge (p near 0, where ``a·x^p`` degenerates into a logarithm, or 3) is infinite.

    **Lack of fit.** With replicates at four or more x values, the residual is split into pure
    error (around each x's mean) and lack of fit; ``F = (SS_lof / (k − 3)) / (SS_pe / (n − k))``
    for k distinct x. At ``p < 0.01`` the model does not describe the data: the estimate carries
    ``misfit`` and :func:`decide` refuses to decide on it.
    """
    d = np.asarray(list(x) if not isinstance(x, np.ndarray) else x, float).ravel()
    y = np.asarray(list(q) if not isinstance(q, np.ndarray) else q, float).ravel()
    if d.shape != y.shape:
        raise ValueError(f"x and q differ in length: {d.size} vs {y.size}")
    ok = np.isfinite(d) & np.isfinite(y) & (d > 0)
    d, y = d[ok], y[ok]
    n = int(d.size)
    xs = np.unique(d)
    method = f"signed exponent sign(a)·p of Q = a·x^p + b, WLS profile over p, profile-likelihood interval over {n} units"
    ups = float(max(1, xs.size))
    if n < 4 or xs.size < 3:
        return Estimate(math.nan, math.nan, math.nan, n, method, level, dof_loss=3, units_per_seed=ups)
    mean_at = {v: y[d == v].mean() for v in xs}
    w = np.array([1.0 / max(mean_at[v] ** 2, 1e-300) for v in d])
    X = d[None, :] ** _P_GRID[:, None]  # (P, n)
    sw, sx, sy = w.sum(), (w * X).sum(1), (w * y).sum()
    sxx, sxy = (w * X * X).sum(1), (w * X * y).sum(1)
    det = sw * sxx - sx ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        a = (sw * sxy - sx * sy) / det
        b = (sy - a * sx) / sw
    rss = (w * (y[None, :] - a[:, None] * X - b[:, None]) ** 2).sum(1)
    rss = np.where(np.isfinite(rss) & np.isfinite(a), rss, np.inf)
    i = int(np.argmin(rss))
    dof = n - 3
    bound = rss[i] * (1 + t_quantile(level, dof) ** 2 / dof)
    inside = np.nonzero(rss <= bound)[0]
    sign = np.sign(a)
    signed = sign[inside] * _P_GRID[inside]
    value = float(sign[i] * _P_GRID[i]) if sign[i] != 0 else 0.0
    low, high = float(signed.min()), float(signed.max())
    edge_lo, edge_hi = 0, len(_P_GRID) - 1
    if edge_lo in inside:  # p -> 0: the fit is a logarithm; its exponent can be any small value
        if sign[edge_lo] >= 0:
            low = -math.inf
        if sign[edge_lo] <= 0:
            high = math.inf
    if edge_hi in inside:
        if sign[edge_hi] >= 0:
            high = math.inf
        if sign[edge_hi] <= 0:
            low = -math.inf
    half = (high - low) / 2 if math.isfinite(high - low) else None
    sd = None if half is None else half / t_quantile(level, dof) * math.sqrt(n)
    misfit = None
    dof_pe, dof_lof = n - xs.size, xs.size - 3
    if dof_pe >= 1 and dof_lof >= 1:
        ss_pe = float(sum((w[d == v] * (y[d == v] - mean_at[v]) ** 2).sum() for v in xs))
        ss_lof = max(0.0, float(rss[i]) - ss_pe)
        if ss_pe > 0:
            from scipy import stats as sps

            F = (ss_lof / dof_lof) / (ss_pe / dof_pe)
            pval = float(sps.f.sf(F, dof_lof, dof_pe))
            method += f"; lack of fit F({dof_lof}, {dof_pe}) = {F:.3g}, p = {pval:.2g}"
            if pval < MISFIT_P:
                misfit = (f"the model Q = a·x^p + b does not describe the data (lack of fit F({dof_lof}, {dof_pe}) "
                          f"= {F:.3g}, p = {pval:.2g} < {MISFIT_P:g})")
        elif ss_lof > 0:
            misfit = "the model Q = a·x^p + b does not describe the data (no spread within x, yet residuals)"
    return Estimate(value, low, high, n, method, level, sd=sd, dof_loss=3, units_per_seed=ups, misfit=misfit)


def bootstrap_estimate(values: Sequence[Any], statistic: Callable[[Sequence[Any]], float], *,
                       level: float = 0.95, n_boot: int = 2000, seed: int = 0,
                       what: str = "seeds") -> Estimate:
    """Percentile bootstrap over independent units (``values``: one item per seed, any type;
    ``statistic``: a function of a resampled list). Deterministic for a given ``seed``."""
    values = list(values)
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, f"bootstrap over 0 {what}", level)
    value = float(statistic(values))
    if n == 1:
        return Estimate(value, -math.inf, math.inf, 1, f"bootstrap over 1 {what} (no interval)", level)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    boots = np.array([statistic([values[i] for i in row]) for row in idx], dtype=np.float64)
    boots = boots[np.isfinite(boots)]
    if boots.size == 0:
        return Estimate(value, -math.inf, math.inf, n, f"bootstrap over {n} {what} (no finite resample)", level)
    lo, hi = np.quantile(boots, [0.5 - level / 2, 0.5 + level / 2])
    sd = float(boots.std(ddof=1) * math.sqrt(n)) if boots.size > 1 else None
    return Estimate(value, float(lo), float(hi), n, f"percentile bootstrap over {n} {what} ({n_boot} resamples)",
                    level, sd)


def censored_median(values: np.ndarray, side: np.ndarray) -> tuple[float, int]:
    """The lower-middle order statistic of values some of which are censored at a common bound:
    ``side`` −1 (the true value is at most the given one: below the grid), 0 (exact), +1 (at least
    it: above the grid). With one grid per group, left-censored values sit below every exact one
    and right-censored above, so the order is known and the median is exact when it lands on an
    exact value. Returns (median, its side)."""
    key = np.lexsort((values, side))  # left-censored first, then exact by value, then right-censored
    i = key[(len(values) - 1) // 2]
    return float(values[i]), int(side[i])


def _median_slope_bounds(x: np.ndarray, groups: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float, float]:
    """(OLS slope of log medians on x with censored medians at their bound, lowest, highest slope they allow)."""
    meds = [censored_median(v, s) for v, s in groups]
    slope = float(np.polyfit(x, np.log([m for m, _ in meds]), 1)[0])
    w = x - x.mean()
    # a median that may be larger (right-censored) raises the slope where its x is above the mean and
    # lowers it below; a left-censored one the reverse
    up = any(s * wi > 1e-12 for (_, s), wi in zip(meds, w))
    down = any(s * wi < -1e-12 for (_, s), wi in zip(meds, w))
    return slope, (-math.inf if down else slope), (math.inf if up else slope)


def censored_median_slope(x: Sequence[float], groups: Sequence[tuple[Sequence[float], Sequence[int]]], *,
                          n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> Estimate:
    """Log–log slope of a quantity's median per x on x, where some observations are censored at
    the measuring grid's ends (``groups[i]``: (values, sides) at ``x[i]``, sides as in
    :func:`censored_median`). Point estimate: the OLS slope of log median on log x. Interval: a
    stratified percentile bootstrap (observations resampled within each x, numpy seed ``seed``),
    where a resample's censored median opens its slope to ±∞ on the side a truer value could move
    it. A censored observation is thereby used only as the bound it is: it can widen the interval,
    never narrow it, and is never dropped."""
    lx = np.log(np.asarray(x, float))
    gs = [(np.asarray(v, float), np.asarray(s, int)) for v, s in groups]
    value, low, high = _median_slope_bounds(lx, gs)
    rng = np.random.default_rng(seed)
    lows, highs = np.empty(n_boot), np.empty(n_boot)
    for b in range(n_boot):
        sample = []
        for v, s in gs:
            i = rng.integers(0, len(v), len(v))
            sample.append((v[i], s[i]))
        _, lows[b], highs[b] = _median_slope_bounds(lx, sample)
    a = (1 - level) / 2
    low = min(low, float(np.quantile(lows, a, method="lower")))
    high = max(high, float(np.quantile(highs, 1 - a, method="higher")))
    n = int(sum(len(v) for v, _ in gs))
    n_cens = int(sum(int((s != 0).sum()) for _, s in gs))
    return Estimate(value, low, high, n, f"log–log OLS slope of the median per value ({len(gs)} values; {n_cens} of "
                    f"{n} observations censored at the grid's ends), stratified bootstrap ({n_boot} resamples)",
                    level=level, dof_loss=2, units_per_seed=float(len(gs)))


def proportion_estimate(successes: int, n: int, *, level: float = 0.95, what: str = "trials") -> Estimate:
    """A proportion with its Wilson score interval (no per-seed spread: ``sd`` is the Bernoulli one)."""
    if n <= 0:
        return Estimate(math.nan, math.nan, math.nan, 0, f"proportion of 0 {what}", level)
    from scipy import stats as sps

    z = float(sps.norm.ppf(0.5 + level / 2))
    p = successes / n
    low, high = _wilson(p, n, z)
    return Estimate(p, low, high, n, f"Wilson interval over {n} {what}", level,
                    math.sqrt(max(p * (1 - p), 1e-12)), kind="wilson")


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


# ----------------------------------------------------------------------------------------
# verdicts

@dataclasses.dataclass(frozen=True)
class Condition:
    """A premise of the paper's statement and whether this run meets it."""

    name: str
    met: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "met": bool(self.met), "detail": self.detail}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The decision on one claim (or one part of it), with what it rests on."""

    verdict: str
    effect: float | None = None
    interval: tuple[float | None, float | None] | None = None
    threshold: float | tuple[float, float] | None = None
    side: str | None = None  # the paper's side of the threshold: above, below, inside (a band)
    level: float = 0.95
    n: int = 0
    method: str = ""
    seeds: int | None = None  # seeds behind the estimate
    seeds_needed: int | None = None  # total seeds that would decide an inconclusive claim
    conditions: tuple[Condition, ...] = ()
    reason: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r}: one of {', '.join(VERDICTS)}")

    @property
    def passed(self) -> bool:
        return self.verdict == REPRODUCED

    @property
    def more_seeds(self) -> int | None:
        if self.seeds_needed is None or self.seeds is None:
            return None
        return max(0, self.seeds_needed - self.seeds)

    def to_dict(self) -> dict[str, Any]:
        thr = self.threshold
        if isinstance(thr, tuple):
            thr = [_f(thr[0]), _f(thr[1])]
        else:
            thr = _f(thr)
        return {"verdict": self.verdict, "effect": _f(self.effect),
                "interval": None if self.interval is None else [_f(self.interval[0]), _f(self.interval[1])],
                "threshold": thr, "side": self.side, "level": self.level, "n": int(self.n),
                "method": self.method, "seeds": self.seeds, "seeds_needed": self.seeds_needed,
                "more_seeds": self.more_seeds,
                "conditions": [c.to_dict() for c in self.conditions], "reason": self.reason}


def _gap_decides(low: float, high: float, threshold: float | tuple[float, float], side: str) -> bool:
    """Does the interval [low, high] lie wholly on one side of the threshold (or band)?"""
    if isinstance(threshold, tuple):
        a, b = threshold
        return (a <= low and high <= b) or high < a or low > b
    return high < threshold or low > threshold


def _gap(value: float, threshold: float | tuple[float, float], side: str) -> float:
    """Distance from the effect to the nearest edge of the decision (0 on it)."""
    if side == "inside":
        lo, hi = threshold  # type: ignore[misc]
        return min(abs(value - lo), abs(value - hi))
    return abs(value - float(threshold))  # type: ignore[arg-type]


def seeds_needed(est: Estimate, threshold: float | tuple[float, float], *, side: str = "above",
                 max_seeds: int = MAX_SEEDS) -> int | None:
    """Seeds that would shrink ``est``'s interval past the threshold at its observed effect and
    spread: the smallest ``n`` with ``t_{n−k}(level) · sd / √n < gap``, converted from units to
    seeds by ``units_per_seed``. None when the spread is unknown or the effect sits on the
    threshold (no finite number of seeds decides it)."""
    if est.sd is None or not math.isfinite(est.value) or not math.isfinite(est.sd):
        return None
    gap = _gap(est.value, threshold, side)
    if gap <= 0:
        return None
    if est.kind == "wilson":  # the Wilson interval at the observed proportion, over more trials
        from scipy import stats as sps

        z = float(sps.norm.ppf(0.5 + est.level / 2))
        limit = max_seeds * est.units_per_seed
        n = max(1.0, float(est.n))
        while n <= limit:
            low, high = _wilson(est.value, n, z)
            if _gap_decides(low, high, threshold, side):
                return max(1, math.ceil(n / est.units_per_seed))
            n = n + max(1.0, est.units_per_seed)
        return None
    if est.sd == 0:
        return max(1, math.ceil((est.dof_loss + 1) / est.units_per_seed))
    from scipy import stats as sps

    z = float(sps.norm.ppf(0.5 + est.level / 2))
    n = max(est.dof_loss + 1, math.ceil((z * est.sd / gap) ** 2))
    limit = max_seeds * est.units_per_seed
    while n <= limit and t_quantile(est.level, n - est.dof_loss) * est.sd / math.sqrt(n) >= gap:
        n += max(1, n // 50)
    if n > limit:
        return None
    return max(1, math.ceil(n / est.units_per_seed))


def seeds_for(effect: float, sd: float, threshold: float = 0.0, *, level: float = 0.95,
              dof_loss: int = 1, units_per_seed: float = 1.0, power: float = 0.5) -> int | None:
    """A power estimate before running: seeds that decide a claim whose effect and per-seed
    spread are expected to be ``effect`` and ``sd`` (e.g. from a pilot run or the paper).

    ``power``: the chance that a run decides the claim when the true effect is ``effect``. The
    default 0.5 decides it when the estimate lands on the expected effect (the interval then
    just clears the threshold); 0.8 plans for the usual ``(z_level + z_power)²`` sample size,
    so that a rerun with other seeds, whose estimate wanders by about one standard error,
    still decides it the same way."""
    if not 0 < power < 1:
        raise ValueError(f"power={power!r}: a probability strictly between 0 and 1")
    from scipy import stats as sps

    z = float(sps.norm.ppf(0.5 + level / 2))
    shrink = z / (z + float(sps.norm.ppf(power)))
    target = threshold + (effect - threshold) * shrink
    est = Estimate(target, target, target, 1, "planned", level, sd, dof_loss, units_per_seed)
    return seeds_needed(est, threshold, side="above")


def decide(est: Estimate | None, *, threshold: float | tuple[float, float], side: str = "above",
           conditions: Sequence[Condition] = (), seeds: int | None = None, reason: str = "") -> Verdict:
    """The verdict of ``est`` against ``threshold`` (the paper's side: ``above``/``below`` it, or
    ``inside`` a band ``(lo, hi)``), unless a condition is not met (then ``not applicable``).

    ``seeds``: the seeds behind the estimate (default: ``n / units_per_seed``).
    """
    if side not in SIDES:
        raise ValueError(f"side={side!r}: one of {', '.join(SIDES)}")
    if side == "inside":
        lo_t, hi_t = threshold  # type: ignore[misc]
        if not lo_t < hi_t:
            raise ValueError(f"a band needs lo < hi, got {threshold!r}")
    conditions = tuple(conditions)
    unmet = [c for c in conditions if not c.met]
    common: dict[str, Any] = {"threshold": threshold, "side": side, "conditions": conditions}
    if est is not None:
        if seeds is None and est.n:
            seeds = max(1, round(est.n / est.units_per_seed))
        common.update(effect=_f(est.value), interval=(_f(est.low), _f(est.high)) if est.n else None,
                      level=est.level, n=est.n, method=est.method, seeds=seeds)
    if unmet:
        why = "; ".join(f"condition {c.name!r} not met" + (f" ({c.detail})" if c.detail else "") for c in unmet)
        return Verdict(NOT_APPLICABLE, reason=(reason + "; " if reason else "") + why, **common)
    if est is None or not math.isfinite(est.value):
        return Verdict(INCONCLUSIVE, reason=reason or "no estimate could be computed", **common)
    if est.misfit:  # the interval rests on a model the data reject: no verdict, and no seed count
        return Verdict(INCONCLUSIVE, reason="; ".join(x for x in (est.misfit, reason) if x), **common)
    lo, hi = est.low, est.high
    if side == "above":
        good, bad = lo > threshold, hi < threshold  # type: ignore[operator]
    elif side == "below":
        good, bad = hi < threshold, lo > threshold  # type: ignore[operator]
    else:
        good, bad = lo >= lo_t and hi <= hi_t, hi < lo_t or lo > hi_t
    if good:
        return Verdict(REPRODUCED, reason=reason, **common)
    if bad:
        return Verdict(CONTRADICTED, reason=reason, **common)
    need = seeds_needed(est, threshold, side=side)
    if need is not None and seeds is not None and need <= seeds:
        need = seeds + 1  # the t quantile at this n is what keeps it open: one more seed at least
    why = reason or "the interval straddles the threshold"
    return Verdict(INCONCLUSIVE, seeds_needed=need, reason=why, **common)


def not_applicable(reason: str, conditions: Sequence[Condition] = (), **kw: Any) -> Verdict:
    """A verdict for a claim whose premise fails in this run."""
    return Verdict(NOT_APPLICABLE, reason=reason, conditions=tuple(conditions), **kw)


def margin(v: Verdict) -> float:
    """How far a verdict's interval clears its threshold on the paper's side (negative: on the
    other side; inf when it has no interval or threshold)."""
    if v.effect is None or v.interval is None or v.threshold is None or None in v.interval:
        return math.inf
    lo, hi = v.interval
    if v.side == "below":
        return v.threshold - hi  # type: ignore[operator]
    if v.side == "inside":
        return min(lo - v.threshold[0], v.threshold[1] - hi)  # type: ignore[index]
    return lo - v.threshold  # type: ignore[operator]


def combine(parts: Sequence[Verdict], *, reason: str = "") -> Verdict:
    """The verdict of a statement whose parts must all hold.

    Any part contradicted -> contradicted (that part's numbers); else any inconclusive ->
    inconclusive (the part needing the most seeds); else, over the applicable parts, reproduced
    (the part closest to its threshold); every part not applicable -> not applicable.
    """
    if not parts:
        return Verdict(INCONCLUSIVE, reason=reason or "no part could be judged")
    by = {v: [p for p in parts if p.verdict == v] for v in VERDICTS}
    conds = tuple(c for p in parts for c in p.conditions)
    if by[CONTRADICTED]:
        pick = by[CONTRADICTED][0]
    elif by[INCONCLUSIVE]:
        pick = max(by[INCONCLUSIVE], key=lambda p: -1 if p.seeds_needed is None else p.seeds_needed)
        if any(p.seeds_needed is None for p in by[INCONCLUSIVE]):
            pick = dataclasses.replace(pick, seeds_needed=None)
    elif by[REPRODUCED]:
        pick = min(by[REPRODUCED], key=margin)
    else:
        pick = by[NOT_APPLICABLE][0]
    summary = ", ".join(f"{len(by[v])} {v}" for v in VERDICTS if by[v])
    return dataclasses.replace(pick, conditions=conds,
                               reason="; ".join(x for x in (reason, f"parts: {summary}", pick.reason) if x))

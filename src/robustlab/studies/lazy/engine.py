"""The three calls of the claims engine after issue #51 that the lazy claims use (``cl.judge``,
``cl.across(..., outside=...)``, ``stats.power_exponent``), taken from :mod:`robustlab.claims` and
:mod:`robustlab.stats` when they are there, else the same contract implemented here (the engine
was being rebuilt when these claims were; ENGINE_API.md §1, §3, §4). Remove once main has them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ... import claims as cm
from ... import stats

Rule = Callable[[pd.DataFrame], stats.Verdict]


def judge(spec: cm.ClaimSpec, rule: Rule, rows: pd.DataFrame,
          control_rows: pd.DataFrame | None) -> tuple[stats.Verdict, cm.Control | None]:
    """The claim and its control decided by one rule: ``rule(rows)`` and ``rule(control_rows)``."""
    if hasattr(cm, "judge"):
        return cm.judge(spec, rule, rows, control_rows)
    verdict = rule(rows)
    if control_rows is None or spec.control is None:
        return verdict, None
    return verdict, cm.control_from(spec.control, rule(control_rows))


def across(knob: str, verdicts: Mapping[Any, stats.Verdict], *,
           outside: Mapping[Any, str] | None = None) -> tuple[stats.Verdict, dict]:
    """A universal claim over ``knob``: values in ``outside`` excluded and named, one contradicted
    value contradicts (with that value's numbers), all remaining reproduced -> reproduced."""
    outside = dict(outside or {})
    try:
        return cm.across(knob, verdicts, quantifier="all", outside=outside)
    except TypeError:
        pass
    rec = {str(k): (f"excluded: {outside[k]}" if k in outside else v.verdict) for k, v in verdicts.items()}
    for k, why in outside.items():
        rec.setdefault(str(k), f"excluded: {why}")
    record = {knob: rec}
    kept = {k: v for k, v in verdicts.items() if k not in outside}
    named = "; ".join(f"{knob} = {k} excluded: {why}" for k, why in outside.items())
    if not kept:
        return stats.not_applicable(f"no value of {knob} inside the regime ({named})"), record
    suffix = f"; {named}" if named else ""
    bad = [(k, v) for k, v in kept.items() if v.verdict == stats.CONTRADICTED]
    if bad:
        k, v = bad[0]
        return dataclasses.replace(v, reason=f"contradicted at {knob} = {k}; {v.reason}".rstrip("; ") + suffix), record
    if all(v.verdict == stats.REPRODUCED for v in kept.values()):
        joined = stats.combine(list(kept.values()))
        return dataclasses.replace(joined, reason=(joined.reason or f"reproduced at every {knob}") + suffix), record
    k, v = next((k, v) for k, v in kept.items() if v.verdict != stats.REPRODUCED)
    listing = ", ".join(f"{kk} → {vv.verdict}" for kk, vv in kept.items())
    return dataclasses.replace(v, verdict=stats.INCONCLUSIVE if v.verdict != stats.NOT_APPLICABLE else v.verdict,
                               reason=f"{knob} = {k} undecided ({listing}){suffix}"), record


_P_GRID = np.linspace(0.05, 3.0, 1181)


def power_exponent(x, q, *, level: float = 0.95) -> stats.Estimate:
    """``Q = a·x^p + b`` over units ``(x_i, Q_i)``: the estimate of sign(a)·p (a falling quantity
    reads a negative exponent). WLS (weights 1/Q̄(x)²), a and b profiled for each p on a grid,
    profile-likelihood interval (a bound at the grid's edge is infinite)."""
    if hasattr(stats, "power_exponent"):
        return stats.power_exponent(x, q, level=level)
    x, q = np.asarray(x, float), np.asarray(q, float)
    ok = np.isfinite(x) & np.isfinite(q) & (x > 0)
    x, q = x[ok], q[ok]
    n = int(x.size)
    method = f"sign(a)·p of Q = a·x^p + b, WLS profile over p, profile-likelihood interval over {n} units"
    ups = float(max(1, np.unique(x).size))
    if n < 4 or np.unique(x).size < 3:
        return stats.Estimate(math.nan, math.nan, math.nan, n, method, level, dof_loss=3, units_per_seed=ups)
    mean_at = {v: q[x == v].mean() for v in np.unique(x)}
    w = np.array([1.0 / max(mean_at[v] ** 2, 1e-300) for v in x])
    X = x[None, :] ** _P_GRID[:, None]
    sw, sx, sy = w.sum(), (w * X).sum(1), (w * q).sum()
    sxx, sxy = (w * X * X).sum(1), (w * X * q).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = (sw * sxy - sx * sy) / (sw * sxx - sx ** 2)
        b = (sy - a * sx) / sw
    rss = (w * (q[None, :] - a[:, None] * X - b[:, None]) ** 2).sum(1)
    rss = np.where(np.isfinite(rss), rss, np.inf)
    i = int(np.argmin(rss))
    sign = 1.0 if a[i] >= 0 else -1.0
    dof = n - 3
    inside = np.nonzero(rss <= rss[i] * (1 + stats.t_quantile(level, dof) ** 2 / dof))[0]
    lo_i, hi_i = int(inside.min()), int(inside.max())
    low = -math.inf if lo_i == 0 else float(_P_GRID[lo_i])
    high = math.inf if hi_i == len(_P_GRID) - 1 else float(_P_GRID[hi_i])
    if sign < 0:
        low, high = -high, -low
    half = (high - low) / 2 if math.isfinite(high - low) else None
    sd = None if half is None else half / stats.t_quantile(level, dof) * math.sqrt(n)
    return stats.Estimate(sign * float(_P_GRID[i]), low, high, n, method, level, sd=sd, dof_loss=3,
                          units_per_seed=ups)

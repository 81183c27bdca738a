"""The claims of ``lazy-adversarial`` (lazy training, NeurIPS 2022, §5.2, Alg. 1), declared with
the claims engine (:mod:`robustlab.claims`).

* ``eps-sharp-drop`` (recast, issue #53): inside the lazy ball the robust-accuracy curves collapse
  against ε·√d: the ε at 75 %, 50 % and 25 % of the clean accuracy each moves like d^−½ (slope in
  :data:`SLOPE_BAND`). (The old rule, 75 % -> 25 % within a factor 4, passed on the rich network too.)
* ``eps-threshold``: the ε at which it halves scales like d^(−1/2) (log–log slope in a band).
* ``radius-low`` (exploratory: robustlab's reading, the 0.25 is not the paper's): at the lazy
  radius itself (R = C0/√m, ``R_factor = 1``), robust accuracy of trained networks stays below
  0.25, every width.
* ``radius-high`` (exploratory: robustlab's reading, the 0.75 is not the paper's): slightly
  beyond it (R_factor in [1.25, 2], decided at every such value of the grid with
  ``claims.across``), robust accuracy is above 0.75, every width.
* ``radius-transition``: the radius R½ at which robust accuracy reaches 0.5, in lazy radii
  (R½·√m/C0), is the same for every width: the slope of log R½ on log m lies in [−0.7, −0.3].
* ``eps-half-lazy-vs-control`` (exploratory, this study's reading of why ``eps-threshold``
  depends on the range of d): the lazy networks' halving ε over the rich control's falls like
  d^−½ (exponent in :data:`SLOPE_BAND`, :func:`eps_margin_claim`); its placebo (the control's even
  seeds over its odd seeds, true exponent 0) can read contradicted.

Controls, chosen before looking, each with the reason it must fail there:

* ε claims: the rich network (first layer :data:`~.common.RICH_INIT_SCALE` × smaller at init, C0 =
  :data:`~.common.NON_LAZY_C0`, same training), kept where its input gradient is learned (``rich``
  premise: gain >= 2), decided by the claim's own rule (``judge``). Not the untrained network the
  issue proposed: Thm 3.1 holds at initialisation too (W(0) is in every ball), so an untrained
  network must show the same d^(−1/2) threshold: it is a second instance of the claim, not a
  setting where it fails.
* radius-low ↔ radius-high: each is the other's control (R = 2·C0/√m, where the paper says
  networks become robust; R = C0/√m, where the theorem says they cannot).
* radius-transition: the clean accuracy of the same networks, which does not need the neurons to
  move past the lazy radius (lazy networks fit MNIST inside it), so its 0.5-crossing, if any, is
  not tied to C0/√m; if it showed the same R½·√m the transition would be one of fitting.

Premises per network: "trained" (clean test accuracy >= 0.9; for an ε curve, the network at the
curve's smallest ε: at larger ε a falling clean accuracy is part of the effect) and, for the
lazy networks, "lazy" (input-gradient gain <= 1.5 for every network of the curve); for the
control, "rich". Excluded networks are counted in ``excluded``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from ... import claims as cm
from ... import stats
from ..base import Claim
from .common import (
    LAZY_GAIN,
    MIN_TRAINED,
    NON_LAZY_C0,
    PAPER,
    RICH_GAIN,
    RICH_INIT_SCALE,
    LazyAdversarialConfig,
    crossing,
    describe_family,
    families,
    point_ids,
    scaled,
)

SOURCE = PAPER.cite("§5.2, Alg. 1")
SLOPE_BAND = (-0.7, -0.3)  # fitted slope of log ε½ against log d (theory −1/2)
MAX_WIDTH = 4.0  # the old "sharp" rule (75 % -> 25 % within this factor), reported as evidence only
LOW_FACTOR = 1.0  # radius-low: R = C0/√m
HIGH_FACTORS = (1.25, 2.0)  # radius-high: "slightly beyond" the lazy radius, every grid value in here
R_HALF_BAND = (-0.7, -0.3)  # slope of log R½ on log m (theory −1/2: R½ ∝ C0/√m)
BALL_TOL = 1e-4

_GAIN_AT_FIRST = "input-gradient gain ‖∇ₓf‖/‖∇ₓf₀‖ of the ε curve's network at its smallest ε"
PREMISES = {
    "trained": cm.premise_at_least("trained", "trained_acc", MIN_TRAINED,
                                   "clean test accuracy of the network (of an ε curve: at its smallest ε)"),
    # the regime of an ε curve is its network's at the smallest ε, as for "trained": at larger ε a
    # network that adversarial training flattens (‖∇ₓf‖ falling) is the effect, not another regime
    "lazy": cm.premise_at_most("lazy", "curve_gain", LAZY_GAIN, _GAIN_AT_FIRST),
    "rich": cm.premise_at_least("rich", "curve_gain", RICH_GAIN, _GAIN_AT_FIRST),
}
LAZY_CURVE, RICH_CURVE = PREMISES["lazy"], PREMISES["rich"]

_RICH = {"C0": NON_LAZY_C0, "init_scale": RICH_INIT_SCALE}
_WHY_EPS = (f"the rich regime (first layer {RICH_INIT_SCALE:g}× smaller at init, C0 = {NON_LAZY_C0:g} never binds; "
            "only networks whose input gradient is learned, gain >= 2, are kept): Thm 3.1 no longer applies, and a robust classifier's ℓ2 "
            "margin on sphere-normalised resized digits is set by the images, which resizing barely "
            "changes, so its halving ε need not fall like d^−1/2 nor drop sharply")
SPECS = (
    cm.ClaimSpec("eps-sharp-drop", premises=("trained", "lazy"), control=cm.ControlSpec(_RICH, _WHY_EPS),
                 min_points=2),
    cm.ClaimSpec("eps-threshold", premises=("trained", "lazy"), control=cm.ControlSpec(_RICH, _WHY_EPS),
                 min_points=3),
    # radius-low and radius-high are robustlab's reading, not the paper's statement: the paper gives
    # no accuracy numbers at the lazy radius or beyond it, and 0.25 / 0.75 are ours (issues #51 and
    # #53), so they are exploratory; radius-transition stays the claim (R½ in lazy radii)
    cm.ClaimSpec("radius-low", kind=cm.EXPLORATORY, premises=("trained",), control=cm.ControlSpec(
        {"R_factor": 2.0}, "at twice the lazy radius the paper says adversarial training succeeds, so robust "
                           "accuracy below 0.25 there would mean the rule does not see the transition"), min_points=2),
    cm.ClaimSpec("radius-high", kind=cm.EXPLORATORY, premises=("trained",), control=cm.ControlSpec(
        {"R_factor": 1.0}, "at the lazy radius itself Thm 3.1 bounds robust accuracy away from 1: above 0.75 "
                           "there would mean the rule passes whatever the radius"), min_points=2),
    cm.ClaimSpec("radius-transition", premises=("trained",), control=cm.ControlSpec(
        "the clean accuracy of the same networks",
        "clean accuracy does not need the neurons past the lazy radius (lazy networks fit the task inside "
        "it), so its 0.5-crossing is not tied to C0/√m; the same R½·√m there would make the transition "
        "one of fitting, not of robustness"), min_points=2),
    cm.ClaimSpec("eps-half-lazy-vs-control", kind=cm.EXPLORATORY, premises=("trained",), control=cm.ControlSpec(
        "placebo: the rich control's even seeds against its odd seeds",
        "the two halves are the same kind of network at every d, so their ratio of halving ε has no reason "
        "to change with d: a fall read there would come from noise or from the estimator, not from laziness"),
        min_points=2),
)
_SPEC = {s.id: s for s in SPECS}


def _config():
    return LazyAdversarialConfig


def _net(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(_net=point_ids(df, _config(), ()), C0_used=df["offset_ratio"] * df["radius"] * df["m"] ** 0.5)


def _init_scale(df: pd.DataFrame) -> pd.Series:
    return df["init_scale"].fillna(1.0) if "init_scale" in df.columns else pd.Series(1.0, index=df.index)


def _lazy_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The lazy networks of the ε grid: inside a ball that binds, from the standard init."""
    return df[(df["C0"] < NON_LAZY_C0) & (_init_scale(df) == 1.0)]


def _rich_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rich control: a small first layer at init and a ball that never binds."""
    return df[(df["C0"] == NON_LAZY_C0) & (_init_scale(df) < 1.0)]


def _with_relative(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``rel``: robust accuracy relative to the clean accuracy of the same network."""
    df = df.copy()
    df["rel"] = np.where(df["clean_acc"] > 0, df["robust_acc"] / df["clean_acc"].clip(lower=1e-12), 0.0)
    return df


# ---------------------------------------------------------------------------------------
# ε claims

def _eps_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The ε-grid runs (no radius sweep), with ``trained_acc``: the clean accuracy of the curve's
    network at its smallest ε, and a ``_curve`` label (family, d, seed): the unit excluded whole."""
    rows = df[df["R"].isna() & df["R_factor"].isna()] if "R_factor" in df.columns else df[df["R"].isna()]
    if rows.empty:
        return rows.assign(trained_acc=[], curve_gain=[], _curve=[])
    curve = point_ids(rows, _config(), ("eps",))
    first = rows["eps"] == rows.groupby(curve)["eps"].transform("min")

    def at_first(col: str) -> pd.Series:
        if col not in rows.columns:
            return pd.Series(np.nan, index=rows.index)
        return rows[col].where(first).groupby(curve).transform("max")
    return rows.assign(_curve=curve, trained_acc=at_first("clean_acc"), curve_gain=at_first("grad_gain"))


def _seed_curves(runs: pd.DataFrame):
    """(d, seed, ε array, robust/clean array) per curve, ε > 0 only, sorted by ε."""
    cur = _with_relative(runs[runs["eps"] > 0]).sort_values(["d", "seed", "eps"])
    for (d, seed), g in cur.groupby(["d", "seed"]):
        yield int(d), int(seed), g["eps"].to_numpy(float), g["rel"].to_numpy(float)


def _sharp_family(runs: pd.DataFrame) -> tuple[stats.Verdict, dict]:
    """Per d: mean over seeds of log(ε₂₅/ε₇₅) (each curve interpolated in log ε) below log
    MAX_WIDTH, t interval; all d must hold. A curve not falling from above 75 % to below 25 %
    inside the ε grid gives no width (counted)."""
    widths: dict[int, list[float]] = {}
    total: dict[int, int] = {}
    for d, _seed, xs, ys in _seed_curves(runs):
        total[d] = total.get(d, 0) + 1
        e75, e25 = crossing(xs, ys, 0.75), crossing(xs, ys, 0.25)
        if len(ys) and ys[0] > 0.75 and np.isfinite(e25) and np.isfinite(e75):
            widths.setdefault(d, []).append(math.log(e25 / e75))
    parts, per_d = [], []
    for d in sorted(total):
        w = widths.get(d, [])
        est = stats.mean_estimate(w)
        why = "" if len(w) == total[d] else f"the drop lies inside the ε grid for {len(w)} of {total[d]} seeds"
        v = stats.decide(est, threshold=math.log(MAX_WIDTH), side="below", reason=why)
        parts.append(v)
        per_d.append({"d": d, "log_width": est.value, "log_width_ci": [est.low, est.high],
                      "width_ratio": math.exp(est.value) if np.isfinite(est.value) else None,
                      "seeds_with_width": f"{len(w)}/{total[d]}", "verdict": v.verdict})
    if len(parts) < _SPEC["eps-sharp-drop"].min_points:
        return cm.too_few(len(parts), _SPEC["eps-sharp-drop"].min_points, what="values of d"), {"per_d": per_d}
    return stats.combine(parts, reason="every d must hold"), {"per_d": per_d}


COLLAPSE_LEVELS = (0.75, 0.5, 0.25)


def _collapse_family(runs: pd.DataFrame) -> tuple[stats.Verdict, dict]:
    """The curves collapse against ε·√d: for q = 0.75, 0.5 and 0.25, the ε where a curve's robust/
    clean accuracy falls to q (interpolated in log ε; a curve starting below q or never reaching it
    gives no point), and the OLS slope of log ε_q on log d over the curves (t interval) inside
    SLOPE_BAND; every q must hold."""
    parts, per_q = [], {}
    curves = list(_seed_curves(runs))
    for q in COLLAPSE_LEVELS:
        pts = [(d, crossing(xs, ys, q)) for d, _s, xs, ys in curves if len(ys) and ys[0] > q]
        pts = [(d, e) for d, e in pts if np.isfinite(e)]
        nd = len({d for d, _ in pts})
        if nd < _SPEC["eps-sharp-drop"].min_points:
            v = cm.too_few(nd, _SPEC["eps-sharp-drop"].min_points, what=f"values of d with an ε at {q:.0%}")
            per_q[f"{q:g}"] = {"curves": f"{len(pts)}/{len(curves)}", "verdict": v.verdict}
        else:
            est = stats.slope_estimate([d for d, _ in pts], [e for _, e in pts], log_x=True, log_y=True)
            v = stats.decide(est, threshold=SLOPE_BAND, side="inside", seeds=max(1, round(len(pts) / nd)))
            per_q[f"{q:g}"] = {"slope": est.value, "ci": [est.low, est.high], "curves": f"{len(pts)}/{len(curves)}",
                               "eps_q_times_sqrt_d": {int(d): float(np.exp(np.mean([math.log(e) for dd, e in pts
                                                                                     if dd == d])) * math.sqrt(d))
                                                      for d in sorted({d for d, _ in pts})},
                               "verdict": v.verdict}
        parts.append(dataclasses.replace(v, reason=f"ε at {q:.0%}: {v.reason}" if v.reason else f"ε at {q:.0%}"))
    return stats.combine(parts, reason="every quantile's ε must move like d^−½"), {
        "per_quantile": per_q, "old_rule_width_75_to_25": _sharp_family(runs)[1]["per_d"]}


def _halving(runs: pd.DataFrame) -> tuple[list[tuple[int, float]], int]:
    """(d, ε½) of every curve that halves inside the ε grid, and the number of curves: a curve
    that starts at or below 50 % or never halves gives no point."""
    pts, total = [], 0
    for d, _seed, xs, ys in _seed_curves(runs):
        total += 1
        e = crossing(xs, ys, 0.5)
        if np.isfinite(e) and len(ys) and ys[0] > 0.5:
            pts.append((d, e))
    return pts, total


def _scaling_family(runs: pd.DataFrame) -> tuple[stats.Verdict, dict]:
    """Log–log OLS slope of the per-curve halving ε on d inside SLOPE_BAND, t interval; a curve
    that starts at or below 50 % or never halves inside the grid gives no point (counted)."""
    pts, total = _halving(runs)
    evidence: dict = {"seed_eps_half": [[d, e] for d, e in pts], "curves_with_halving_eps": f"{len(pts)}/{total}"}
    nd = len({d for d, _ in pts})
    if nd < _SPEC["eps-threshold"].min_points:
        return cm.too_few(nd, _SPEC["eps-threshold"].min_points, what="values of d with a halving ε"), evidence
    est = stats.slope_estimate([d for d, _ in pts], [e for _, e in pts], log_x=True, log_y=True)
    evidence.update({"slope": est.value, "slope_ci": [est.low, est.high], "n": est.n,
                     "per_d_mean_eps_half_times_sqrt_d": {
                         int(d): float(np.mean([e for dd, e in pts if dd == d]) * math.sqrt(d))
                         for d in sorted({d for d, _ in pts})}})
    return stats.decide(est, threshold=SLOPE_BAND, side="inside", seeds=max(1, round(len(pts) / nd))), evidence


def _joined(results: list[tuple[pd.DataFrame, stats.Verdict, dict]], what: str) -> tuple[stats.Verdict, dict | list]:
    """One family's (verdict, evidence) as it is; several joined (every family must hold), with
    a list of per-family evidence; none: not applicable for want of ``what``."""
    if not results:
        return cm.too_few(0, 1, what=what), {}
    if len(results) == 1:
        return results[0][1], results[0][2]
    return (stats.combine([v for _, v, _ in results], reason="every family must hold"),
            [{**describe_family(f, ("m", "C0", "lr", "bias")), "verdict": v.verdict, **ev} for f, v, ev in results])


def _judge_families(rows: pd.DataFrame, judge) -> tuple[stats.Verdict, dict | list]:
    return _joined([(f, *judge(f)) for f in families(rows, _config(), ("eps", "size", "dim"))], "ε curves")


def _eps_claim(df: pd.DataFrame, cid: str, statement: str, judge_family, base_ev: dict) -> Claim:
    """An ε claim on the lazy curves (``trained``, then ``lazy`` per curve), its control the same
    rule (``judge``) on the rich control's curves (``trained``, then ``rich``)."""
    rows = _net(_eps_rows(df))
    kept, excl = cm.apply_premises(rows, [PREMISES["trained"]], unit=["_curve"])
    lazy, lexcl = cm.apply_premises(_lazy_rows(kept), [LAZY_CURVE], unit=["_curve"])
    ctrl_all = _rich_rows(kept)
    ctrl, cexcl = cm.apply_premises(ctrl_all, [RICH_CURVE], unit=["_curve"]) if len(_rich_rows(rows)) else (None, [])

    def rule(r: pd.DataFrame) -> stats.Verdict:
        return _judge_families(r, judge_family)[0]
    rule.__name__ = judge_family.__name__
    verdict, control = cm.judge(_SPEC[cid], rule, lazy, ctrl)
    ev = _judge_families(lazy, judge_family)[1]
    evidence = {**base_ev, **(ev if isinstance(ev, dict) else {"families": ev})}
    evidence["max_offset_over_radius"] = float(lazy["offset_ratio"].max()) if len(lazy) else None
    evidence["lazy_grad_gain"] = _gain_range(_lazy_rows(kept))
    lz = _lazy_rows(rows)  # an ε curve's "trained" network is the one at its smallest ε
    evidence["training"] = stopped_untrained(lz[lz["eps"] == lz.groupby("_curve")["eps"].transform("min")], cid)
    if ctrl is not None:
        cev = _judge_families(ctrl, judge_family)[1]
        evidence["control"] = cev
        evidence["control_excluded"] = [e.to_dict() for e in cexcl] + [
            {"premise": "trained", "excluded": int(_rich_rows(rows)["_curve"].nunique() - ctrl_all["_curve"].nunique())}]
        evidence["control_grad_gain"] = _gain_range(ctrl_all)
    return Claim(cid, statement, verdict, evidence, SOURCE, control=control, excluded=[*excl, *lexcl])


def _radius_entry(r: pd.Series) -> str:
    """The radius claims a network of the R sweep enters (if trained)."""
    f = float(r["R_factor"])
    if np.isclose(f, LOW_FACTOR):
        return "radius-low, radius-transition (and radius-high's control)"
    if HIGH_FACTORS[0] <= f <= HIGH_FACTORS[1]:
        return "radius-high, radius-transition" + (" (and radius-low's control)" if np.isclose(f, 2.0) else "")
    return "radius-transition"


def stopped_untrained(rows: pd.DataFrame, claim) -> dict:
    """The networks the patience rule stopped below the "trained" bound (armed by the burn-in before
    they reached it), each with the claim it would have entered: issue #53 asks that a stopping rule
    never hide an untrained network without saying so. (Networks that reached the epoch cap below
    the bound are counted apart: no rule stopped them.)"""
    if rows.empty or "stopped" not in rows.columns:
        return {"stopped_below_bound": 0, "at_cap_below_bound": 0, "networks": []}
    below = rows["clean_acc"] < MIN_TRAINED
    stopped = rows["stopped"].astype(bool)
    keys = [k for k in ("d", "eps", "R_factor", "m", "C0", "init_scale", "seed") if k in rows.columns]
    nets = [{**{k: (None if pd.isna(r[k]) else (r[k].item() if hasattr(r[k], "item") else r[k])) for k in keys},
             "clean_acc": float(r["clean_acc"]), "epochs_run": float(r["epochs_run"]),
             "would_enter": claim(r) if callable(claim) else claim}
            for _, r in rows[below & stopped].iterrows()]
    return {"stopped_below_bound": int((below & stopped).sum()), "at_cap_below_bound": int((below & ~stopped).sum()),
            "networks": nets[:20]}


def _gain_range(rows: pd.DataFrame) -> list[float] | None:
    """[min, median, max] of the networks' input-gradient gain (None: not measured)."""
    if "grad_gain" not in rows.columns or rows["grad_gain"].isna().all():
        return None
    g = rows["grad_gain"].dropna()
    return [float(g.min()), float(g.median()), float(g.max())]


def eps_sharp_claim(df: pd.DataFrame) -> Claim:
    """Inside the lazy ball the robust-accuracy curves collapse against ε·√d (issue #53's recast of
    the sharp drop; see :func:`_collapse_family`)."""
    return _eps_claim(df, "eps-sharp-drop",
                      "Inside the lazy ball the drop of robust accuracy sits at ε ∝ d^−½ along its whole "
                      "length: the curves collapse when plotted against ε·√d — the ε where robust/clean "
                      f"accuracy falls to 75 %, 50 % and 25 % each has a log–log slope on d in [{SLOPE_BAND[0]}, "
                      f"{SLOPE_BAND[1]}]", _collapse_family,
                      {"effect": "OLS slope of log ε_q on log d over the curves, per q = 0.75, 0.5, 0.25 (the "
                                 "one closest to its band's edge), t interval", "band": list(SLOPE_BAND),
                       "theory_slope": -0.5})


def eps_threshold_claim(df: pd.DataFrame) -> Claim:
    """The ε at which robust accuracy halves scales like d^(−1/2) (see :func:`_scaling_family`)."""
    return _eps_claim(df, "eps-threshold",
                      "Inside the lazy ball the ε at which robust/clean accuracy halves scales like d^(−1/2): "
                      f"its log–log slope against d lies in [{SLOPE_BAND[0]}, {SLOPE_BAND[1]}]", _scaling_family,
                      {"effect": "OLS slope of log ε½ on log d over (d, seed) curves, t interval",
                       "band": list(SLOPE_BAND), "theory_slope": -0.5})


def _margin_family(lazy: pd.DataFrame, ctrl: pd.DataFrame) -> tuple[stats.Verdict, dict]:
    """The exponent of ε½(lazy)/ε½(control) on d: log of that ratio at the largest d measured with
    both, minus the same at the smallest, over log(d_hi/d_lo) — a difference of differences of mean
    log ε½ (each curve a unit, the four groups independent), Welch–Satterthwaite t interval, scaled —
    inside SLOPE_BAND (the theorem's −½: the lazy ε½ ∝ d^−½ over a control whose ε½ the images set).
    (Until lazy2 it was the unscaled change decided below 0, where a placebo's true effect sits on
    the threshold: never contradicted.)"""
    def log_by_d(pts: list[tuple[int, float]]) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for d, e in pts:
            out.setdefault(d, []).append(math.log(e))
        return out

    (lp, lt), (cp, ct) = _halving(lazy), _halving(ctrl)
    by_l, by_c = log_by_d(lp), log_by_d(cp)
    both = sorted(d for d in by_l if len(by_l[d]) >= 2 and len(by_c.get(d, ())) >= 2)
    per_d = []
    for d in sorted(set(by_l) | set(by_c)):
        lv, cv = by_l.get(d, []), by_c.get(d, [])
        row = {"d": d, "lazy_eps_half": math.exp(np.mean(lv)) if lv else None,
               "control_eps_half": math.exp(np.mean(cv)) if cv else None,
               "lazy_curves": len(lv), "control_curves": len(cv)}
        if d in both:
            r = stats.difference_estimate(lv, cv, what="curves")  # Welch, on the logs
            row.update(ratio=math.exp(r.value), ratio_ci=[math.exp(r.low), math.exp(r.high)])
        per_d.append(row)
    evidence = {"per_d": per_d, "curves_with_halving_eps": {"lazy": f"{len(lp)}/{lt}", "control": f"{len(cp)}/{ct}"}}
    if len(both) < _SPEC["eps-half-lazy-vs-control"].min_points:
        return cm.too_few(len(both), _SPEC["eps-half-lazy-vs-control"].min_points,
                          what="values of d with >= 2 halving curves of both the lazy networks and the control"), evidence
    lo, hi = both[0], both[-1]
    est = stats.contrast_estimate([by_l[hi], by_c[hi], by_l[lo], by_c[lo]], [1.0, -1.0, -1.0, 1.0], what="curves")
    evidence.update({"d_low": lo, "d_high": hi, "ratio_change": math.exp(est.value),
                     "ratio_change_ci": [math.exp(est.low), math.exp(est.high)]})
    exponent = scaled(est, 1.0 / math.log(hi / lo), f"exponent of the ε½ ratio on d over d = {lo}..{hi}")
    evidence.update({"ratio_exponent": exponent.value, "ratio_exponent_ci": [exponent.low, exponent.high]})
    return stats.decide(exponent, threshold=SLOPE_BAND, side="inside"), evidence


def eps_margin_claim(df: pd.DataFrame) -> Claim:
    """Exploratory: the lazy networks' halving ε falls relative to the non-lazy control's as d
    grows (see :func:`_margin_family`).

    Why it is asked (registered 2026-11-27 before the d = 196 run under the authors' protocol,
    docs/studies/experiments/lazy_adversarial_small_d.py): ``eps-threshold`` read −0.09 over d =
    25–100 under that protocol, with the lazy networks' ε½ close to the non-lazy control's. The
    reading: at small d the images' own ℓ2 margin, not laziness, sets the halving ε, and the
    d^−½ bound of Thm 3.1 takes over only where it falls below that margin. If so, the ratio of
    the lazy ε½ to the control's falls from the smallest d to the largest; if laziness set ε½
    at every d, or the control fell as fast, it would not. The paper states no such ratio, so
    it is exploratory; the networks are the ε claims' (the ``trained`` premise, and
    ``non-lazy`` on the control)."""
    cid = "eps-half-lazy-vs-control"
    st = ("exploratory (this study's reading of why eps-threshold depends on the range of d): the lazy "
          "networks' halving ε, over the rich control's at the same d, falls like d^−½ (the lazy ε½ ∝ d^−½, the "
          "control's set by the images): the exponent of that ratio between the smallest and the largest d "
          f"measured with both lies in [{SLOPE_BAND[0]}, {SLOPE_BAND[1]}]")
    rows = _net(_eps_rows(df)).reset_index(drop=True)  # one label per row: families are matched by it
    kept, excl = cm.apply_premises(rows, [PREMISES[p] for p in _SPEC[cid].premises], unit=["_curve"])
    lazy_all, lexcl = cm.apply_premises(_lazy_rows(kept), [LAZY_CURVE], unit=["_curve"])
    excl = [*excl, *lexcl]
    if lazy_all.empty or _lazy_rows(rows).empty or _rich_rows(rows).empty:
        return Claim(cid, st, cm.too_few(0, 1, what="ε curves of both the lazy networks and the rich control"),
                     {}, SOURCE, kind=cm.EXPLORATORY, excluded=excl)
    ctrl_all, cexcl = cm.apply_premises(_rich_rows(kept), [RICH_CURVE], unit=["_curve"])
    # a lazy family is compared with the control runs that differ from it only in C0 and the init
    key = point_ids(kept, _config(), ("seed", "eps", "size", "dim", "C0", "init_scale"))
    pairs = [(lazy, ctrl_all[key.loc[ctrl_all.index] == k]) for k, lazy in lazy_all.groupby(key.loc[lazy_all.index])]
    pairs = [(lazy, ctrl) for lazy, ctrl in pairs if not ctrl.empty]
    what = "lazy families with a matching rich control"

    def split(r: pd.DataFrame) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
        return [(g[g["_side"] == "a"], g[g["_side"] == "b"]) for _, g in r.groupby("_pair")] if len(r) else []

    def margin(r: pd.DataFrame) -> stats.Verdict:
        """The rule on a frame of (numerator ``_side`` a, denominator b) networks per ``_pair``."""
        return _joined([(a, *_margin_family(a, b)) for a, b in split(r)], what)[0]
    # the claim's rows: each lazy family (a) with its rich control (b); the placebo's: the control's
    # even seeds (a) against its odd seeds (b) — the same rule on other runs
    claim_rows = pd.concat([f.assign(_side=side, _pair=i) for i, (lazy, ctrl) in enumerate(pairs)
                            for f, side in ((lazy, "a"), (ctrl, "b"))]) if pairs else kept.iloc[0:0]
    placebo = pd.concat([ctrl.assign(_side=np.where(ctrl["seed"] % 2 == 0, "a", "b"), _pair=i)
                         for i, (_, ctrl) in enumerate(pairs)]) if pairs else None
    verdict, control = cm.judge(_SPEC[cid], margin, claim_rows, placebo)
    evidence = _joined([(a, *_margin_family(a, b)) for a, b in split(claim_rows)], what)[1]
    if not isinstance(evidence, dict):
        evidence = {"families": evidence}
    evidence["control"] = _joined([(a, *_margin_family(a, b)) for a, b in split(placebo)], what)[1] \
        if placebo is not None else {}
    evidence = {"effect": "exponent of ε½ lazy / ε½ control on d: log of that ratio (of geometric means over "
                          "curves) at the largest d minus at the smallest, over log(d_hi/d_lo); Welch–Satterthwaite "
                          "t interval; the theorem's −½ (band ±0.2) if laziness alone sets the lazy networks' ε½",
                **evidence,
                "control_excluded": [e.to_dict() for e in cexcl]}
    return Claim(cid, st, verdict, evidence, "this study's reading of " + SOURCE, kind=cm.EXPLORATORY,
                 control=control, excluded=excl)


# ---------------------------------------------------------------------------------------
# radius claims

def _radius_rows(df: pd.DataFrame) -> pd.DataFrame:
    if "R_factor" not in df.columns:
        return df.iloc[0:0]
    rows = df[df["R_factor"].notna()]
    return _net(rows.assign(trained_acc=rows["clean_acc"]))


def _radius_premised(df: pd.DataFrame, cid: str) -> tuple[pd.DataFrame, pd.DataFrame, list[cm.Exclusion]]:
    rows = _radius_rows(df)
    kept, excl = cm.apply_premises(rows, [PREMISES[p] for p in _SPEC[cid].premises], unit=["_net"])
    return rows, kept, excl


def _at_rows(at: pd.DataFrame, side: str, threshold: float) -> tuple[stats.Verdict, list]:
    """Per width: mean robust accuracy over seeds of networks at one R_factor (t interval) against
    the threshold; every width must hold."""
    parts, per_m = [], []
    keys = ["m", *[k for k in _SWEEP if k in at.columns]]  # never pooled across d or ε
    for m, g in at.groupby(keys):
        m = m[0] if isinstance(m, tuple) else m
        est = stats.mean_estimate(g["robust_acc"].to_numpy(float))
        v = stats.decide(est, threshold=threshold, side=side)
        parts.append(v)
        per_m.append({"m": int(m), **describe_family(g, _SWEEP),
                      "R_factor": float(g["R_factor"].iloc[0]), "R": float(g["radius"].iloc[0]),
                      "robust_acc": est.value, "ci": [est.low, est.high], "networks": int(len(g)),
                      "clean_acc": float(g["clean_acc"].mean()), "verdict": v.verdict})
    if len({r["m"] for r in per_m}) < 2:
        return cm.too_few(len({r["m"] for r in per_m}), 2, what="widths with trained networks"), per_m
    return stats.combine(parts, reason="every width (and (d, ε) sweep) must hold"), per_m


def _radius_claim(df: pd.DataFrame, cid: str, statement: str, factors, side: str, threshold: float,
                  control_factor: float) -> Claim:
    rows, kept, excl = _radius_premised(df, cid)
    if rows.empty:
        return Claim(cid, statement, cm.too_few(0, 2, what="widths in a radius sweep"), {}, SOURCE, excluded=excl,
                     kind=_SPEC[cid].kind)
    present = sorted(float(f) for f in rows["R_factor"].unique())
    use = [f for f in present if factors[0] <= f <= factors[1]]
    evidence: dict = {"R_factors": present, "judged_at": use, "per_width": {}}

    def at(f: float) -> pd.DataFrame:
        return kept[np.isclose(kept["R_factor"], f)]

    def rule(r: pd.DataFrame) -> stats.Verdict:
        return _at_rows(r, side, threshold)[0]
    rule.__name__ = f"robust_acc_{side}_{threshold:g}"
    ctrl = at(control_factor) if any(np.isclose(control_factor, present)) else None
    control = cm.judge(_SPEC[cid], rule, kept.iloc[0:0], ctrl)[1]
    if not use:
        verdict, across = cm.too_few(0, 1, what=f"R_factor values in [{factors[0]:g}, {factors[1]:g}]"), None
    else:
        per = {}
        for f in use:
            per[f"{f:g}"], control = cm.judge(_SPEC[cid], rule, at(f), ctrl)
            evidence["per_width"][f"{f:g}"] = _at_rows(at(f), side, threshold)[1]
        verdict, across = (per[f"{use[0]:g}"], None) if len(per) == 1 else cm.across("R_factor", per)
    if ctrl is not None:
        evidence["control"] = _at_rows(ctrl, side, threshold)[1]
    evidence["moved"] = _moved(rows)
    evidence["training"] = stopped_untrained(rows, _radius_entry)
    return Claim(cid, statement, verdict, evidence, SOURCE, control=control, excluded=excl, across=across,
                 kind=_SPEC[cid].kind)


def _moved(rows: pd.DataFrame) -> list[dict]:
    """How far training took the neurons at each R, in lazy radii, and how trained they are."""
    g = rows.assign(moved=rows["offset_ratio"] * rows["R_factor"])
    t = g.groupby(["m", "R_factor"]).agg(moved=("moved", "max"), clean_acc=("clean_acc", "mean"),
                                         trained=("trained_acc", lambda v: float((v >= MIN_TRAINED).mean())),
                                         epochs=("epochs_run", "mean"), robust_acc=("robust_acc", "mean"))
    return [{"m": int(m), "R_factor": float(f), **{k: float(v) for k, v in r.items()}}
            for (m, f), r in t.iterrows()]


def radius_low_claim(df: pd.DataFrame) -> Claim:
    """At the lazy radius R = C0/√m, trained networks' robust accuracy is below 0.25, every width."""
    return _radius_claim(df, "radius-low", "At the lazy radius R = C0/√m, adversarially trained networks stay "
                         "non-robust: robust accuracy below 0.25 for every width", (LOW_FACTOR, LOW_FACTOR),
                         "below", 0.25, 2.0)


def radius_high_claim(df: pd.DataFrame) -> Claim:
    """Slightly beyond the lazy radius (R_factor in [1.25, 2]), robust accuracy is above 0.75."""
    return _radius_claim(df, "radius-high", "Slightly beyond the lazy radius (R = 1.25–2 × C0/√m, every such "
                         "value of the grid) adversarial training succeeds: robust accuracy above 0.75 for every "
                         "width", HIGH_FACTORS, "above", 0.75, LOW_FACTOR)


_SWEEP = ("d", "eps")  # a radius sweep is one (d, ε): sweeps at other d or ε are never pooled


def _sweeps(rows: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    keys = [k for k in _SWEEP if k in rows.columns]
    if rows.empty or not keys:
        return [((), rows)] if len(rows) else []
    return [(k if isinstance(k, tuple) else (k,), g) for k, g in rows.groupby(keys)]


def _r_half(kept: pd.DataFrame, col: str) -> tuple[stats.Verdict, dict]:
    """Per (d, ε) sweep: :func:`_r_half_one`; every sweep must hold (one sweep: its verdict)."""
    parts = [(key, *_r_half_one(g, col)) for key, g in _sweeps(kept)]
    if not parts:
        return _r_half_one(kept, col)
    if len(parts) == 1:
        return parts[0][1], parts[0][2]
    return (stats.combine([v for _, v, _ in parts], reason="every (d, ε) sweep must hold"),
            {"sweeps": [{"d": k[0], "eps": k[1] if len(k) > 1 else None, "verdict": v.verdict, **ev}
                        for k, v, ev in parts]})


def _r_half_one(kept: pd.DataFrame, col: str) -> tuple[stats.Verdict, dict]:
    """Per (m, seed): R½ (the radius where ``col`` first reaches 0.5, interpolated in log R);
    the OLS slope of log R½ on log m against R_HALF_BAND."""
    pts, total = [], 0
    for (m, _seed), g in kept.sort_values("radius").groupby(["m", "seed"]):
        total += 1
        xs, ys = g["radius"].to_numpy(float), g[col].to_numpy(float)
        if len(ys) and ys[0] < 0.5:
            r = crossing(xs, ys, 0.5, rising=True)
            if np.isfinite(r):
                pts.append((int(m), float(r), float(r * math.sqrt(m) / g["C0"].iloc[0])))
    ev: dict = {"curves_with_R_half": f"{len(pts)}/{total}",
                "R_half_in_lazy_radii": {int(m): float(np.mean([x for mm, _, x in pts if mm == m]))
                                         for m in sorted({m for m, _, _ in pts})}}
    if len({m for m, _, _ in pts}) < 2:
        return cm.too_few(len({m for m, _, _ in pts}), 2, what="widths with an R½"), ev
    est = stats.slope_estimate([m for m, _, _ in pts], [r for _, r, _ in pts], log_x=True, log_y=True)
    ev.update({"slope": est.value, "slope_ci": [est.low, est.high]})
    return stats.decide(est, threshold=R_HALF_BAND, side="inside"), ev


def radius_transition_claim(df: pd.DataFrame) -> Claim:
    """R½·√m/C0 is the same for every width: slope of log R½ on log m in R_HALF_BAND (theory −½)."""
    cid = "radius-transition"
    statement = ("The robust transition sits at the lazy radius for every width: the radius R½ where robust "
                 f"accuracy reaches 0.5 scales like 1/√m (slope of log R½ on log m in [{R_HALF_BAND[0]}, "
                 f"{R_HALF_BAND[1]}]), i.e. R½·√m/C0 is the same across widths")
    rows, kept, excl = _radius_premised(df, cid)

    def r_half_slope(r: pd.DataFrame) -> stats.Verdict:
        return _r_half(r, "robust_acc")[0]
    # the control: every network, its clean accuracy in the claim's column, the same rule
    ctrl = rows.assign(robust_acc=rows["clean_acc"]) if len(rows) else None
    verdict, control = cm.judge(_SPEC[cid], r_half_slope, kept, ctrl)
    ev = _r_half(kept, "robust_acc")[1]
    ev["control"] = _r_half(rows, "clean_acc")[1]
    ev["moved"] = _moved(rows) if len(rows) else []
    ev["training"] = stopped_untrained(rows, _radius_entry)
    return Claim(cid, statement, verdict, ev, SOURCE, excluded=excl, control=control)


def claims(df: pd.DataFrame, ctx) -> list[Claim]:
    return [eps_sharp_claim(df), eps_threshold_claim(df), radius_low_claim(df), radius_high_claim(df),
            radius_transition_claim(df), eps_margin_claim(df)]


__all__ = ["SPECS", "PREMISES", "claims", "eps_sharp_claim", "eps_threshold_claim", "radius_low_claim",
           "radius_high_claim", "radius_transition_claim", "eps_margin_claim"]

"""The width-depth-init claims, declared with the claims engine (:mod:`robustlab.claims`).

Each claim names its kind, the premises its networks must meet (counted per network, in
``excluded``) and a control chosen before any run, with the reason it must fail there
(:data:`SPECS`). Claims from Thm 1 live in :mod:`.lazy_claims`; the non-lazy claims (Thm 3,
Fig. 4b), κ (§5.2) and the Monte Carlo self-check are here. The moment of measurement is the
equal-fit one (a network's first epoch at ``target_acc``); the end of the schedule is reported
as its own variant (``Claim.variants``), never substituted for a network that missed the target.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np
import pandas as pd

from ... import claims as cl
from ...papers import WIDTH_DEPTH_INIT
from ...stats import (
    CONTRADICTED,
    INCONCLUSIVE,
    REPRODUCED,
    Condition,
    Estimate,
    Verdict,
    decide,
    mean_estimate,
    not_applicable,
    slope_estimate,
)
from ..base import Claim, Context
from .analysis import (
    PLATEAU_PREMISES,
    PREMISES,
    PROTOCOLS,
    SPECTRAL_LAZY,
    _classes,
    _r,
    _table,
    curve,
    finals,
    kept,
    merge_exclusions,
    protocols,
    series,
    view,
)
from .lazy_claims import (
    AT_INIT_PREMISES,
    DEPTH_DELTA,
    DEPTH_LAZY_PREMISES,
    DEPTH_SWEEP,
    DEPTH_TRAINED_PREMISES,
    LAZY_LIMIT_PREMISES,
    MECHANISM_AT_INIT,
    TRAINED_SIDE,
    TRAINED_THRESHOLD,
    WIDTH_FIT_PREMISES,
    WIDTH_P_PREMISES,
    WIDTH_PREMISES,
    WIDTH_RELATIVE_PREMISES,
    _has_depth_sweep,
    _he_vs_lecun_same_seed,
    _multi,
    _regime,
    _sweeps,
    capped_per_sweep,
    closed_form_at_init,
    decide_depth_at_init,
    decide_width_moves,
    depth_part,
    depth_sweep_rows,
    depth_sweeps,
    depth_trained_rule,
    lecun_nonlazy,
    location_evidence,
    location_rule,
    paired_depth_rule,
    peak_part,
    trained_part,
    width_evidence,
    width_peak_rule,
    width_sweep_rows,
)
from .presets import LOSS_MARKS, THM3_STEPS
from .run import MIN_DEPTHS

AT_INIT = "at-init"
# populations of runs measured inside every point (Study(populations=...)): a control names one
POPULATIONS = {AT_INIT: "the same networks at initialisation, before any training step (P at t = 0 in place of "
                        "P trained)"}
EARLY_PREMISES = ("early-window", "fd-linear")
# the end-of-schedule variant of nonlazy-width: the same plateau premises as width-peak (the same question:
# is the end the network training leaves; notes/wdi5.md)
NONLAZY_PREMISES = (*PLATEAU_PREMISES, "fd-linear")
MATCHED_PREMISES = ("at-loss", "fd-linear")
# nonlazy-width's range: Fig. 4(b)'s over-parameterised widths (the Thm 3 blocks' 16 and up), fixed
# before its first run on this design; the narrower small-init networks are width-peak's control
NONLAZY_MIN_WIDTH = 16
KAPPA_PREMISES = ("over-parameterised",)
# κ's growth exponent b in κ(t) ∝ t^b, band fixed before the run from §5.2's words: the non-lazy init
# "increases almost linearly over time" (b near 1, ±0.25). Declared window: the late constant-rate
# half [T1/2, T1] (issue 35); its sensitivity: the whole constant-rate phase [2, T1] (across "window")
KAPPA_BAND = (0.75, 1.25)
KAPPA_WINDOWS = ("late half", "whole constant-rate phase")
MIN_EARLY_WIDTHS = 3
SMALL = {"init": "small"}
# NONLAZY_DELTA: the smallest fall of interest (per e-fold of width) for nonlazy-width(-early) (review
# defect 7): with 0 as the threshold a He control at theory's slope 0 could never read contradicted. A slope
# of -0.1 moves P by < 35 % over the whole 64x width range; Fig. 4(b)'s non-lazy curves move it by more than
# 10x (slopes beyond -0.5). R: interval below -delta; C: interval above -delta. Chosen from the paper's
# scale, before re-deciding (notes/wdi3.md).
NONLAZY_DELTA = 0.1
# width-peak and its lazy twin judge the trained curve P_T (review defect 2): dividing by the small
# init's E_W P_init (falling as m^(1-2 gamma)) made their control rise with width by construction
TRAINED_CURVE = "none"
# the lazy limit's control: the small init's SGD networks, outside Thm 1's lazy regime (its own regime
# premise), P measured validly; not width-peak's plateau premise (review defect 5)
LAZY_LIMIT_CONTROL_PREMISES = ("not-lazy", "fd-linear")

SPECS = (
    cl.ClaimSpec("width-peak", premises=WIDTH_PREMISES, control=cl.ControlSpec(
        SMALL, "the small-init (non-lazy) sweep over the same widths: Thm 3 and Fig. 4(b) have non-lazy two-layer "
               "networks grow more robust with width monotonically, no phase transition, so the trained curve P_T "
               "has no interior maximum there (judged on P_T itself, not divided by the init's scale, which "
               "falls as m^(1-2 gamma) and would make the curve rise by construction)"), min_points=MIN_EARLY_WIDTHS),
    # exploratory: its registered control (the same networks at initialisation, where the location is noise)
    # reads inconclusive by construction, so it could never be a working control; no run of the grid has
    # a setting where theory fixes the peak's place in depth
    cl.ClaimSpec("width-peak-location", kind=cl.EXPLORATORY, premises=WIDTH_PREMISES),
    cl.ClaimSpec("width-peak-lazy-limit", premises=LAZY_LIMIT_PREMISES, control=cl.ControlSpec(
        SMALL, "the small-init networks trained by SGD (non-lazy, outside Thm 1): monotone in width by Thm 3 / "
               "Fig. 4(b), no interior maximum in the trained curve P_T; its networks are checked to be non-lazy "
               "(some layer moved > SPECTRAL_LAZY in spectral norm; kappa > KAPPA_LAZY where no layer is recorded) and "
               "validly measured, not on width-peak's plateau. No linearised small init: "
               "it would keep the mechanism (a min-norm solve peaks at the interpolation width at any init scale)")),
    cl.ClaimSpec("width-peak-n-train", kind=cl.EXPLORATORY, premises=WIDTH_PREMISES),
    cl.ClaimSpec("depth-init-at-init", kind=cl.SELF_CHECK, premises=AT_INIT_PREMISES),
    # depth after training (review defect 6): decided on the linearised arm (no premise: exact lazy limit);
    # the control is the other init's networks of the same arm under the claim's own rule
    cl.ClaimSpec("depth-init-trained-lecun", premises=DEPTH_LAZY_PREMISES, control=cl.ControlSpec(
        {"init": "he"}, "the He networks of the same arm: He keeps the signal per layer (m beta = 2; its P at init is "
                        "flat in depth) and Thm 1 has trained He networks grow less robust with depth, so LeCun's rule "
                        "(trained slope below -DEPTH_DELTA) must fail there; it passes only if trained He falls "
                        "faster than 0.15 per layer")),
    cl.ClaimSpec("depth-init-trained-he", premises=DEPTH_LAZY_PREMISES, control=cl.ControlSpec(
        {"init": "lecun"}, "the LeCun networks of the same arm: LeCun halves the signal per layer (m beta = 1, ln 1/2 "
                           "per layer at init) and Thm 1 has trained LeCun networks grow more robust with depth, so "
                           "He's rule (trained slope above +DEPTH_DELTA) must fail there; it passes only if trained "
                           "LeCun rises faster than 0.15 per layer")),
    cl.ClaimSpec("depth-init-trained-ntk", premises=DEPTH_LAZY_PREMISES, control=cl.ControlSpec(
        {"init": "lecun"}, "the LeCun networks of the same arm: LeCun halves the signal per layer and Thm 1 has "
                           "trained LeCun networks grow more robust with depth, so NTK's rule (trained slope above "
                           "+DEPTH_DELTA) must fail there; it passes only if trained LeCun rises faster than 0.15 "
                           "per layer")),
    cl.ClaimSpec("depth-lecun-nonlazy", kind=cl.EXPLORATORY, premises=("equal-fit", "fd-linear")),
    cl.ClaimSpec("nonlazy-width-early", premises=EARLY_PREMISES, control=cl.ControlSpec(
        {"init": "he"},
        "He networks in Thm 3's own setting (one output, squared loss, the same steps), the same rule: lazy weights "
        "barely move in 20 steps, so P(t) stays near P(0), whose expectation is flat in m; the slope of "
        "log P(t) - log E_W P_init cannot be below -NONLAZY_DELTA there (slope 0 reads contradicted); Thm 3's "
        "condensation needs the small init")),
    cl.ClaimSpec("nonlazy-width", premises=MATCHED_PREMISES, control=cl.ControlSpec(
        {"init": "he"}, "the He (lazy) two-layer networks over the same widths: past the peak Thm 1 has lazy "
                        "stability tend to a constant in width (slope 0, above -NONLAZY_DELTA), so a rule for 'falls "
                        "with width' must fail there")),
    cl.ClaimSpec("kappa", premises=KAPPA_PREMISES, control=cl.ControlSpec(
        {"init": "he"}, "He networks over the same widths: §5.2 has He's kappa almost constant in time (growth "
                        "exponent near 0), outside the non-lazy band [0.75, 1.25]")),
    cl.ClaimSpec("kappa-width", kind=cl.EXPLORATORY, premises=KAPPA_PREMISES),
    cl.ClaimSpec("mc-identity", kind=cl.SELF_CHECK),
)
_SPEC = {s.id: s for s in SPECS}
POPULATIONS = {AT_INIT: "the same networks before any training step",
               "He networks in Thm 3's own setting (init=he, output=single, the same window)":
                   "He-initialised networks trained in the same window as the small-init ones"}


def _claim(cid: str, statement: str, where: str, verdict: Verdict, ev: dict, *, control: cl.Control | None = None,
           excluded=(), variants: dict | None = None, across=None) -> Claim:
    return Claim(cid, statement, verdict, ev, WIDTH_DEPTH_INIT.cite(where), kind=_SPEC[cid].kind, control=control,
                 excluded=excluded, variants=variants or None, across=across)


def _no_results(cid: str, statement: str, where: str) -> Claim:
    return _claim(cid, statement, where, Verdict(INCONCLUSIVE, reason="no final results"),
                  {"reason": "no final results"})


def _premise_objs(names) -> list[cl.Premise]:
    return [PREMISES[n] for n in names]


def _coverage(df: pd.DataFrame, premises: list[cl.Premise], *, axis: str, shape: str, min_distinct: int = 3,
              min_span: float | None = 4.0, min_per_value: int = 1) -> Verdict | None:
    """``cl.coverage`` counted per network (``point`` x ``seed``)."""
    return cl.coverage(df, premises, axis, shape=shape, min_distinct=min_distinct, min_span=min_span,
                       unit=[u for u in ("point", "seed") if u in df.columns], min_per_value=min_per_value)


def _bound(rule, outside: dict | None = None, **kw) -> Callable[[pd.DataFrame], Verdict]:
    """``rule`` with its excluded values (or other arguments) bound, keeping the rule's name (the
    control's record)."""
    args = {"outside": outside} if outside is not None else {}
    return functools.update_wrapper(functools.partial(rule, **args, **kw), rule)


def _same_networks(v: pd.DataFrame, k: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``v`` (another moment's view) for the networks kept in ``k``."""
    if k.empty:
        return v.iloc[0:0]
    return v[v.set_index(["point", "seed"]).index.isin(k.set_index(["point", "seed"]).index)]


def _judged(cid: str, rule, rows: pd.DataFrame, control_rows: pd.DataFrame | None,
            na: Verdict | None = None) -> tuple[Verdict, cl.Control | None]:
    """``judge`` with an empty control frame read as "not in this run", and the coverage verdict
    (``na``) standing in for the claim's own where the premises leave the axis undecidable."""
    v, c = cl.judge(_SPEC[cid], rule, rows, control_rows if control_rows is not None and len(control_rows) else None)
    return (na or v), c


# ---------------------------------------------------------------------------------------
# Thm 1 (the lazy regime): width

def _he_lecun(f: pd.DataFrame) -> pd.DataFrame:
    return width_sweep_rows(_regime(_multi(f[f["init"].isin(["he", "lecun"])]), "sgd"))


def _small_sweep(f: pd.DataFrame) -> pd.DataFrame:
    return width_sweep_rows(_regime(_multi(f[(f["init"] == "small") & (f["depth"] == 2)]), "sgd"))


def claim_width(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    cid, where = "width-peak", "Thm 1, §5.3, Fig. 4(a)"
    statement = ("Lazy regime, width: stability first gets worse then better with width (an interior maximum), He "
                 "and LeCun, every depth and class count, at the end of training where loss and accuracy have "
                 "stopped changing (App. E.2)")
    f = finals(df)
    if f.empty or "stability" not in f.columns:
        return _no_results(cid, statement, where)
    hl = _he_lecun(f)
    v = view(hl, "end")
    v, late = _from_under_parameterised(v)
    k, exc = kept(v, WIDTH_PREMISES)
    ck_all = _from_under_parameterised(view(_small_sweep(f), "end"))[0]
    ck = kept(ck_all, WIDTH_PREMISES)[0]
    # coverage per sweep (defect 3): a sweep whose premises leave its peak undecidable (an end lost) is
    # excluded by name (across outside=); the other sweeps decide; every sweep lost -> NA
    # an end counts as kept with >= 2 networks, as the statistic needs (peak_part's per-width minimum)
    lost = {n: _coverage(s, _premise_objs(WIDTH_PREMISES), axis="width", shape="peak", min_per_value=2)
            for n, s in _sweeps(v)}
    lost = {**late, **{n: c.reason for n, c in lost.items() if c is not None}}
    k = pd.concat([s for n, s in _sweeps(k) if n not in lost] or [k.iloc[0:0]])
    na = cl.across("sweep", {}, outside=lost)[0] if lost and len(lost) == len(_sweeps(v)) + len(late) else None
    verdict, control = _judged(cid, _bound(width_peak_rule, init_term=TRAINED_CURVE), k, ck, na)
    parts = {n: peak_part(s, n, TRAINED_CURVE)[0] for n, s in _sweeps(k) if s["width"].nunique() >= 2}
    record = cl.across("sweep", parts, quantifier="all", outside=lost)[1] if parts or lost else None
    fit, _ = kept(view(hl, "target"), WIDTH_FIT_PREMISES) if "stability_at_target" in hl.columns else (k.iloc[0:0], [])
    variants = {"D paired with the closed-form E_W P_init (the statistic of issue 54's second round; flat in m for "
                "He and LeCun, falls as m^(1-2 gamma) for the small init)": width_peak_rule(k),
                "paired with the same networks' sampled P_init (the statistic before issue 54's second round)":
                    width_peak_rule(k, "sampled")}
    if len(fit):
        variants["equal fit (first epoch at target_acc)"] = width_peak_rule(fit, TRAINED_CURVE)
    variants.update(_plateau_variants(v, ck_all))
    ev = {"definition": "per width sweep (init x depth x class set) of the networks at the end whose running training "
                        "loss and accuracy changed by <= 1 % of chance loss and <= 1 point over the last 10 epochs: "
                        "D(m) = log mean P_T(m), the trained curve (what Fig. 4 plots; for He and LeCun E_W P_init "
                        "is flat in m, so this equals the closed-form-paired D up to a constant); "
                        "min(D(peak) - D(narrowest), D(peak) - D(widest)) at the interior maximum, percentile "
                        "bootstrap over networks within each width, above 0 in every sweep",
          "judged_on": PROTOCOLS["end"], "parts": width_evidence(k, TRAINED_CURVE),
          "control_parts": width_evidence(ck, TRAINED_CURVE),
          "plateau_by_width": {**_plateau_table(v), **_plateau_table(ck_all)}}
    return _claim(cid, statement, where, verdict, ev, control=control, excluded=exc, variants=variants,
                  across=record)


def _from_under_parameterised(v: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The width sweeps of ``v`` that start at or below the number of classes k, and the others by name.
    Thm 1 places the peak at the passage from under- to over-parameterised; a sweep that starts past k
    (paper-nonlazy's He sweep from width 16, nonlazy-width's control) has no narrow side by design, and
    peak-over-ends on it would read its falling tail as "no peak"."""
    if v.empty:
        return v, {}
    keep, late = [], {}
    for n, s in _sweeps(v):
        k = float(_classes(s).max())
        if float(pd.to_numeric(s["width"]).min()) <= k:
            keep.append(s)
        else:
            late[n] = f"{n}: starts at width {int(pd.to_numeric(s['width']).min())} > k = {int(k)} (no narrow side)"
    return (pd.concat(keep) if keep else v.iloc[0:0]), late


def _plateau_variants(v: pd.DataFrame, control: pd.DataFrame) -> dict[str, Verdict]:
    """width-peak under the other plateau readings (reported, never the verdict; notes/wdi5.md), each with
    the small-init control judged by the same premises (cl.judge)."""
    out = {}
    for label, names in (("relative loss change <= 10 % over the last 10 epochs (the premise before wdi5)",
                          WIDTH_RELATIVE_PREMISES),
                         ("accuracy flat and P itself at a plateau (|log P(T)/P(T-10)| <= 0.1, first 100 held-out "
                          "points)", WIDTH_P_PREMISES)):
        k, ck = kept(v, names)[0], kept(control, names)[0]
        out[label] = _judged("width-peak", _bound(width_peak_rule, init_term=TRAINED_CURVE), k, ck)[0]
    return out


def _plateau_table(v: pd.DataFrame) -> dict:
    """Evidence per sweep and width: networks measured, kept by the verdict's plateau premises, by the
    relative-loss premise (before wdi5) and by plateau-P, with the median quantities."""
    if v.empty:
        return {}
    ok = pd.DataFrame({name: np.logical_and.reduce([PREMISES[p].mask(v) for p in names]) for name, names in
                       (("kept", PLATEAU_PREMISES), ("kept_relative", ("plateau-relative",)),
                        ("kept_P", ("plateau-P",)))}, index=v.index)
    cols = [c for c in ("acc_change_last10", "loss_drop_last10", "loss_change_last10") if c in v.columns]
    out = {}
    for n, s in _sweeps(v):
        rows = {}
        for m, g in s.groupby("width"):
            med = {c: _r(pd.to_numeric(g[c], errors="coerce").median(), 3) for c in cols}
            rows[int(m)] = {"networks": int(len(g)), **{k: int(x) for k, x in ok.loc[g.index].sum().items()}, **med}
        out[n] = rows
    return out


def claim_width_location(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    cid, where = "width-peak-location", "Thm 1 (remark), Fig. 4(a)"
    statement = ("Exploratory: the stability peak moves to wider networks with depth (Thm 1's remark: the critical "
                 "width is set by L); at initialisation, beside it, the same networks' location is noise")
    f = finals(df)
    if f.empty or "stability" not in f.columns:
        return _no_results(cid, statement, where)
    hl = _he_lecun(f)
    v = view(hl, "end")
    k, exc = kept(v, WIDTH_PREMISES)
    ctl = _same_networks(view(hl, "init"), k)
    na = _coverage(v, _premise_objs(WIDTH_PREMISES), axis="depth", shape="slope", min_distinct=MIN_DEPTHS,
                   min_span=1.5)
    verdict = na or location_rule(k)
    ev = {"definition": "per (init, class set) swept in width at >= 3 depths: OLS slope on depth of log2 of the "
                        "interior width of largest log mean P at the end (plateau premises), percentile bootstrap over "
                        "networks, above 0; every series", "parts": location_evidence(k),
          "at_init_parts": location_evidence(ctl)}
    return _claim(cid, statement, where, verdict, ev, excluded=exc)


def claim_width_lazy_limit(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    cid, where = "width-peak-lazy-limit", "Thm 1"
    statement = ("Thm 1's own regime, exactly: the network linearised at initialisation and solved by min-norm least "
                 "squares (kappa -> 0 at any width) is first less, then more stable as width grows (an interior "
                 "maximum), at every class count and training-set size")
    f = finals(df)
    # the width sweeps only: the linearised depth arm (depth-init-trained, one width at 4 depths) is not one
    lz = width_sweep_rows(_regime(_multi(f), "linearised")) if len(f) else f
    if lz.empty:
        return _claim(cid, statement, where, not_applicable("not measured in this run: needs regime=linearised "
                                                            "points (the quick preset and paper-lazy-limit run them)"),
                      {})
    k, exc = kept(view(lz, "end"), LAZY_LIMIT_PREMISES)
    ck, cexc = kept(view(_small_sweep(f), "end"), LAZY_LIMIT_CONTROL_PREMISES)
    verdict, control = _judged(cid, _bound(width_peak_rule, init_term=TRAINED_CURVE), k, ck)
    parts = {n: peak_part(s, n, TRAINED_CURVE)[0] for n, s in _sweeps(k) if s["width"].nunique() >= 2}
    ev = {"definition": "per (init, depth, class set, n_train) sweep of linearised solutions: the curve D(m) "
                        "= log mean P_lin(m) (the solved curve; E_W P_init is flat in m for He) and its interior "
                        "maximum over both ends (width-peak's rule), above 0 in every sweep",
          "parts": width_evidence(k, TRAINED_CURVE), "table": _lazy_table(k),
          "control_population": "the small init's depth-2 SGD width sweep at the end of the schedule (no preset runs "
                                "a linearised small init), premises " + ", ".join(LAZY_LIMIT_CONTROL_PREMISES),
          "control_excluded": [e.to_dict() for e in cexc], "control_parts": width_evidence(ck, TRAINED_CURVE)}
    variants = {"D paired with the closed-form E_W P_init (issue 54's second round)": width_peak_rule(k)}
    alpha_variants, ev_alpha = _alpha_arm(f, lz)
    # each alpha variant uses the claim's own rule, so it stands only where the claim's control works (ref5
    # defect 3): in a run without the small-init sweep (paper-alpha alone) it reads "no working control"
    variants.update({n: cl.with_control(v, control) for n, v in alpha_variants.items()})
    if ev_alpha:
        ev["alpha_arm"] = ev_alpha
    return _claim(cid, statement, where, verdict, ev, control=control, excluded=exc, variants=variants,
                  across=cl.across("sweep", parts, quantifier="all")[1] if parts else None)


# the alpha arm's premise (reported variants of width-peak-lazy-limit, never its verdict)
ALPHA_PREMISES = ("spectral-lazy", "fd-measured")


def _alpha_arm(f: pd.DataFrame, lz: pd.DataFrame) -> tuple[dict, dict]:
    """width-peak-lazy-limit's paper-scale arm (issue 54; ``regime=alpha``, the ``paper-alpha`` slice): per
    alpha, width-peak's rule on the trained curve of the alpha-scaled networks whose every layer stayed within
    SPECTRAL_LAZY of its initialisation, P by finite differences (``stability_fd``: the alpha network's
    gradient identity grows ~alpha at ReLU kinks, run._fd_stability). Reported variants, never the verdict;
    evidence: per sweep and width, the arm's P beside the linearised twins' on the same draws."""
    al = width_sweep_rows(_regime(_multi(f), "alpha")) if len(f) and "alpha" in f.columns else f.iloc[0:0]
    if al.empty or "stability_fd" not in al.columns:
        return {}, {}
    variants, ev = {}, {}
    lin_fd = lz.dropna(subset=["stability_fd"]) if "stability_fd" in lz.columns else lz.iloc[0:0]
    steps = _regime(_multi(f), "linearised-steps")  # the twins after the arm's own steps (lin_steps)
    steps = steps.dropna(subset=["stability_fd"]) if "stability_fd" in steps.columns else steps.iloc[0:0]
    for a, rows in al.groupby("alpha"):
        v = view(rows, "end").assign(stability=lambda d: d["stability_fd"], stability_init=lambda d: d["stability_fd_init"])
        k, exc = kept(v, ALPHA_PREMISES)
        name = f"alpha-scaled GD, alpha = {a:g}: finite-difference P, every layer's spectral change <= {SPECTRAL_LAZY:g}"
        variants[name] = _alpha_rule(v, k)
        ev[f"alpha={a:g}"] = {"excluded": [e.to_dict() for e in exc], "table": _alpha_table(v, lin_fd, steps)}
    return variants, ev


def _alpha_rule(v: pd.DataFrame, k: pd.DataFrame) -> Verdict:
    """One alpha's variant: width-peak's rule on the trained curve of the kept networks ``k``, with width-peak's
    coverage per sweep (review ref5): the spectral premise removes the widths that move most, which at finite
    alpha are the narrow, rising side (paper-alpha, 2 classes: widths 1-8 at alpha = 30, width 1 at alpha = 100).
    A sweep that lost an end (either side of the peak) is excluded by name, never read as "no peak"; the
    other sweeps decide; every sweep lost -> not applicable, naming the premise."""
    sweeps = _sweeps(v)  # named on all rows: a sweep's name must not change when the premise empties another
    lost = {n: _coverage(s, _premise_objs(ALPHA_PREMISES), axis="width", shape="peak", min_per_value=2)
            for n, s in sweeps}
    lost = {n: c.reason for n, c in lost.items() if c is not None}
    mine = {n: k[k.index.isin(s.index)] for n, s in sweeps if n not in lost}
    gaps = {n: _interior_gaps(dict(sweeps)[n], s) for n, s in mine.items() if s["width"].nunique() >= 2}
    if not gaps and not lost:
        return not_applicable("no width sweep with >= 2 widths")
    # sweeps with gaps first (review ref6 defect 2): with several undecided sweeps the join reports the first
    # one's reason, and the gap's (the premise removed the peak's widths) is the one a reader needs
    parts = {n: _gap_capped(peak_part(mine[n], n, TRAINED_CURVE)[0], g)
             for n, g in sorted(gaps.items(), key=lambda kv: not kv[1])}
    return cl.across("sweep", parts, quantifier="all", outside=lost)[0]


def _interior_gaps(all_rows: pd.DataFrame, kept_rows: pd.DataFrame, min_per_value: int = 2) -> list[int]:
    """The widths strictly inside a sweep's kept range where the premise left fewer than ``min_per_value``
    networks (the coverage check's count at the ends)."""
    n_kept = kept_rows.groupby("width").size()
    kw = sorted(int(m) for m, c in n_kept.items() if c >= min_per_value)
    if len(kw) < 2:
        return []
    return sorted(int(m) for m in pd.unique(all_rows["width"])
                  if kw[0] < int(m) < kw[-1] and int(n_kept.get(m, 0)) < min_per_value)


def _gap_capped(v: Verdict, gaps: list[int]) -> Verdict:
    """A sweep that lost interior widths to the spectral premise may read reproduced (the peak is in what is
    left) but not contradicted (ref5 defect 2): at finite alpha the widths that move most are the peak's own,
    and the falling remainder of a curve whose peak was removed is no evidence of "no peak"."""
    if v.verdict not in (CONTRADICTED, INCONCLUSIVE) or not gaps:
        return v  # an undecided remainder keeps its verdict but names the gap (review ref6)
    why = (f"{' / '.join(ALPHA_PREMISES)} removed interior widths {', '.join(map(str, gaps))} (where the peak may lie): the "
           "remainder cannot contradict the peak")
    return dataclasses.replace(v, verdict=INCONCLUSIVE, reason="; ".join(x for x in (why, v.reason) if x),
                               seeds_needed=None)


def _twin_p(t: pd.DataFrame, x: pd.DataFrame, keys: list[str], text: Callable) -> float:
    """The mean finite-difference P of the twins in ``t`` of the alpha networks ``x`` (one width of a sweep)."""
    if t.empty:
        return float("nan")
    first = x.iloc[0]
    t = t[(t["width"] == first["width"]) & (t["init"] == first["init"]) & (t["depth"] == first["depth"]) &
          np.logical_and.reduce([text(t[c]) == text(x[c]).iloc[0] for c in keys])]
    return float(pd.to_numeric(t["stability_fd"]).mean()) if len(t) else float("nan")


def _alpha_table(v: pd.DataFrame, lin_fd: pd.DataFrame, lin_steps: pd.DataFrame) -> dict:
    """Per sweep (class set, n_train) and width: the alpha arm's mean finite-difference P, the linearised twins'
    on the same draws (same seeds: the min-norm solution, and after the arm's own steps), the ratios, the largest
    per-layer spectral change (median over seeds) and the training loss (½ Σ_j, mean over points)."""
    out = {}
    keys = [c for c in ("classes", "n_train") if c in v.columns]
    def text(x: pd.Series) -> pd.Series:  # n_train may come back as a float from a table with gaps
        return x.map(lambda u: str(int(u)) if isinstance(u, float) and u.is_integer() else str(u))
    for name, s in v.groupby([text(v[c]) for c in keys]):
        tab = {}
        for m, x in s.groupby("width"):
            p = float(x["stability_fd"].mean())
            p_lin, p_steps = (_twin_p(t, x, keys, text) for t in (lin_fd, lin_steps))
            tab[int(m)] = {"P_fd_alpha": _r(p), "P_fd_lin": _r(p_lin), "ratio": _r(p / p_lin) if p_lin > 0 else None,
                           "P_fd_lin_steps": _r(p_steps), "ratio_steps": _r(p / p_steps) if p_steps > 0 else None,
                           "spectral_change_max_median": _r(pd.to_numeric(x["spectral_change_max"]).median(), 3),
                           "train_loss": _r(x["train_loss"].mean(), 3)}
        out[",".join(f"{c}={n}" for c, n in zip(keys, name if isinstance(name, tuple) else (name,)))] = tab
    return out


def _lazy_table(k: pd.DataFrame) -> dict:
    out = {}
    for n, s in _sweeps(k):
        g = s.groupby("width")
        out[n] = {int(m): {"P_lin": _r(x["stability"].mean()), "P_init": _r(x["stability_init"].mean()),
                           "train_acc": _r(x["train_acc"].mean(), 3), "test_acc": _r(x["test_acc"].mean(), 3),
                           "ntk_rank": _r(x["ntk_rank"].mean(), 4) if "ntk_rank" in x else None}
                  for m, x in g}
    return out


def claim_width_moves(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    cid = "width-peak-n-train"
    statement = ("Exploratory: the stability peak moves to larger widths with a larger training set (the abstract's "
                 "gloss of Thm 1; never a condition on width-peak)")
    f = finals(df)
    if f.empty or "stability" not in f.columns:
        return _no_results(cid, statement, "Thm 1, §5.3")
    v, exc, ev = decide_width_moves(f, "end")
    return _claim(cid, statement, "Thm 1, §5.3", v,
                  {"definition": "log2 of the interior width of largest log mean P at the largest training-set size "
                                 "minus at the smallest (bootstrap over networks), above 0; SGD at the end (plateau) "
                                 "and the linearised solutions", "parts": ev}, excluded=exc)


# ---------------------------------------------------------------------------------------
# depth

def claim_depth_at_init(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("Self-check: at initialisation log E_W P falls by ln 1/2 per layer for LeCun and is flat for He and "
                 "NTK (the closed form's identity)")
    f = finals(df)
    if f.empty or "stability_init" not in f.columns:
        return _no_results("depth-init-at-init", statement, "Thm 1")
    v, exc, ev = decide_depth_at_init(f)
    out = {"definition": "networks at t = 0 (each trained network's own and its init_draws extra draws): OLS slope "
                         "on L of log of the mean P per depth, percentile bootstrap over networks within each depth; "
                         "LeCun inside ln(1/2) +- 0.15, He and NTK inside 0 +- 0.15, at every width with >= 3 depths",
           "mechanism": MECHANISM_AT_INIT, "parts": ev, "he_vs_lecun_same_seed": _he_vs_lecun_same_seed(f)}
    return _claim("depth-init-at-init", statement, "Thm 1", v, out, excluded=exc)


_DEPTH_CONTROL = {"lecun": "he", "he": "lecun", "ntk": "lecun"}
_DEPTH_WORDS = {"lecun": "falls with depth (deeper is more robust)", "he": "rises with depth (deeper is less robust)",
                "ntk": "rises with depth (deeper is less robust)"}
NOT_MEASURED_DEPTH_LAZY = (f"not measured in this run: needs linearised depth sweeps (regime=linearised, one width "
                           f"at >= {DEPTH_SWEEP} depths; quick, paper-depth and paper-depth-lazy run them)")


def _depth_arm(rows: pd.DataFrame, init: str, protocol: str, premises: tuple[str, ...], rule, cid: str,
               part: Callable[[pd.DataFrame, str], Verdict] | None = None
               ) -> tuple[Verdict, cl.Control | None, list, pd.DataFrame]:
    """One arm of depth-init-trained-<init>: its rows at ``protocol`` on ``premises``, the rule on ``init``'s
    depth sweeps and, as the control, on the control init's (``_DEPTH_CONTROL``); NA where ``init`` has no
    depth sweep or the premises leave too few depths."""
    v = view(rows, protocol)
    k, exc = kept(v, premises)
    mine, other = k[k["init"] == init], k[k["init"] == _DEPTH_CONTROL[init]]
    own = v[v["init"] == init]
    na = _coverage(own, _premise_objs(premises), axis="depth", shape="slope", min_distinct=MIN_DEPTHS,
                   min_span=2.0) if len(own) and premises else None
    if not len(own) or not _has_depth_sweep(own):
        na = not_applicable(NOT_MEASURED_DEPTH_LAZY if protocol == "end" and not premises else
                            f"not measured in this run: needs a width with >= {DEPTH_SWEEP} depths (paper-depth runs it)")
    verdict, control = _judged(cid, rule, mine, other, na)
    if verdict.verdict == REPRODUCED and control is not None and control.working and part is not None:
        # review R2-3: claim and control paired per sweep (the control above is judged over every sweep at once;
        # where it does not work, the engine caps the claim anyway and its raw verdict stays as the rule read it)
        verdict = capped_per_sweep(part, mine, other, init, _DEPTH_CONTROL[init], control.setting, control.rule)
    return verdict, control, exc, mine


def claim_depth_trained(df: pd.DataFrame, init: str, ctx: Context | None = None) -> Claim:
    """depth-init-trained-<init> (review defect 6): decided on Thm 1's own regime, the networks linearised at
    initialisation and solved exactly (:mod:`.linearised`), by the slope on L of log mean P of the solved
    (trained) networks beyond the margin DEPTH_DELTA (:func:`.lazy_claims.depth_part`); the SGD arm (lr 0.03,
    equal fit; its networks move 80-260 % per layer, outside the lazy regime) and the paired slope (trained
    minus init, the rule before) are variants."""
    cid, where = f"depth-init-trained-{init}", "Thm 1, §5.4, Fig. 5, App. E.6"
    thr = TRAINED_THRESHOLD[init]
    statement = (f"Depth after training, {init}, in Thm 1's lazy regime: log E P of the trained networks "
                 f"{_DEPTH_WORDS[init]}, slope per layer {TRAINED_SIDE[init]} {thr:+.2f} (the flatness band); "
                 "decided on the networks linearised at initialisation and solved exactly; SGD reported")
    f = finals(df)
    if f.empty or "stability" not in f.columns:
        return _no_results(cid, statement, where)
    pool = _multi(f[f["init"].isin(list(TRAINED_SIDE))])
    lz, sg = depth_sweep_rows(_regime(pool, "linearised")), depth_sweep_rows(_regime(pool, "sgd"))
    rule, paired = depth_trained_rule(init), paired_depth_rule(TRAINED_SIDE[init])
    part = functools.partial(trained_part, init)
    verdict, control, exc, mine = _depth_arm(lz, init, "end", DEPTH_LAZY_PREMISES, rule, cid, part)
    variants: dict = {"linearised, trained minus init (paired slope on the side of 0; the rule before review "
                      "defect 6)": _depth_arm(lz, init, "end", DEPTH_LAZY_PREMISES, paired, cid)[0]}
    ps = protocols(f)
    sgd_ev: dict = {}
    if len(sg):
        sv, sc, sexc, smine = _depth_arm(sg, init, ps[0], DEPTH_TRAINED_PREMISES, rule, cid, part)
        # as a claim would read it: beside its own control (the other init's SGD networks, the same rule)
        variants["SGD lr 0.03 at equal fit (operational, outside Thm 1's lazy regime), beside its control"] = \
            cl.with_control(sv, sc)
        variants["SGD, trained minus init (paired, the rule before)"] = _depth_arm(
            sg, init, ps[0], DEPTH_TRAINED_PREMISES, paired, cid)[0]
        if "end" in ps[1:]:
            variants["SGD end of schedule"] = _depth_arm(sg, init, "end", DEPTH_TRAINED_PREMISES, rule, cid)[0]
        sgd_ev = {"sgd_judged_on": PROTOCOLS[ps[0]], "sgd_verdict_before_control": sv.to_dict(),
                  "sgd_control": sc.verdict.to_dict() if sc else None,
                  "sgd_excluded": [e.to_dict() for e in sexc],
                  "sgd_parts": {n: depth_part(s, init, n)[1] for n, s in depth_sweeps(smine)}}
    ev = {"definition": "per depth sweep (init x width x class set x n_train, >= 3 depths) of the networks "
                        "linearised at initialisation and solved by min-norm least squares (Thm 1's lazy limit, "
                        "float64, no premise: kappa -> 0 by construction; param_shift |dtheta|/|theta0| reported): "
                        "OLS slope on L of log mean P of the solved networks, percentile bootstrap over networks "
                        f"within each depth, {TRAINED_SIDE[init]} {thr:+.2f} per layer (DEPTH_DELTA = the flatness "
                        "band of depth-init-at-init) in every sweep. Control: the same rule on the "
                        f"{_DEPTH_CONTROL[init]} networks of the same arm. The SGD arm (lr 0.03, equal fit, "
                        "max_layer_change: the largest per-layer relative weight change at the end) is reported",
          "judged_on": PROTOCOLS["end"] + " (the linearised solution)", "margin_per_layer": DEPTH_DELTA,
          "parts": {n: depth_part(s, init, n)[1] for n, s in depth_sweeps(mine)}, **sgd_ev}
    return _claim(cid, statement, where, verdict, ev, control=control, excluded=exc, variants=variants)


def claim_lecun_nonlazy(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    f = finals(df)
    statement = ("Exploratory: the depth trend of trained LeCun networks that left the lazy regime (kappa above the "
                 "lazy bound), outside Thm 1, with how far training moved P from initialisation")
    if f.empty or "stability_at_target" not in f.columns:
        return _claim("depth-lecun-nonlazy", statement, "§5.4", not_applicable("no results at equal fit"), {})
    v, exc, ev = lecun_nonlazy(_regime(f, "sgd"))
    return _claim("depth-lecun-nonlazy", statement, "§5.4", v,
                  {"definition": "slope on L of log mean P over LeCun networks at equal fit with kappa above the "
                                 "lazy bound, below 0 as the paper's LeCun trend; log10 P_trained / P_init per depth "
                                 "is the mechanism: how much of P training created", "parts": ev}, excluded=exc)


# ---------------------------------------------------------------------------------------
# Thm 3 and Fig. 4(b): the non-lazy two-layer network

def _early_part(sub: pd.DataFrame, name: str) -> tuple[Verdict, dict]:
    widths = sorted(int(m) for m in sub["width"].unique())
    cond = Condition(f">= {MIN_EARLY_WIDTHS} widths", len(widths) >= MIN_EARLY_WIDTHS, f"widths {widths}")
    est = slope_estimate(sub["width"], sub["stability"] / sub["stability_init"], log_x=True, log_y=True) \
        if len(widths) >= 2 else None
    v = decide(est, threshold=0.0, side="below", conditions=[cond], reason=f"{name}: slope of log(P1/P0) on log m")
    p1 = slope_estimate(sub["width"], sub["stability"], log_x=True, log_y=True) if len(widths) >= 2 else None
    p0 = slope_estimate(sub["width"], sub["stability_init"], log_x=True, log_y=True) if len(widths) >= 2 else None
    return v, {**v.to_dict(), "slope_log_P_early": _r(p1.value) if p1 else None,
               "slope_log_P_init": _r(p0.value) if p0 else None,
               "by_width": {int(m): {"P_early_over_init": _r((g["stability"] / g["stability_init"]).mean()),
                                     "train_acc_early": _r(g["train_acc"].mean(), 3), "networks": int(len(g))}
                            for m, g in sub.groupby("width")}}


def early_rule(rows: pd.DataFrame) -> Verdict:
    """nonlazy-width-early's rule: the slope on log m of log(P(early) / P(init)) below 0, at every
    gamma of the rows (``across``: the exponent is the paper's lost symbol)."""
    per: dict = {}
    for init in sorted(rows["init"].unique()) if len(rows) else []:
        for label, sub in series(rows, init):
            per[float(sub["gamma"].iloc[0]) if init == "small" else f"{init}{label}"] = _early_part(sub, init + label)[0]
    if not per:
        return not_applicable("no network meets the premises")
    return cl.across("gamma", per, quantifier="all")[0]


def _init_scale(rows: pd.DataFrame) -> pd.Series:
    """Per row, the closed-form ``E_W P`` at initialisation of its network (exact at finite width:
    ``metrics.expected_stability_at_init``); NaN where there is none."""
    cache: dict = {}

    def one(r: pd.Series) -> float:
        key = (r["init"], int(r["width"]), int(r["depth"]), int(r["outputs"]), float(r["eps"]), int(r["d"]),
               float(r["gamma"]) if r["init"] == "small" else None)
        if key not in cache:
            v = closed_form_at_init(r)
            cache[key] = float(v) if v is not None and v > 0 else np.nan
        return cache[key]
    return rows.apply(one, axis=1) if len(rows) else pd.Series(np.nan, index=rows.index, dtype=float)


def _steps_part(sub: pd.DataFrame, name: str) -> tuple[Verdict, dict]:
    """One (init series, gamma, step): OLS slope of log P(t) − log E_W P_init on log m, below -NONLAZY_DELTA."""
    widths = sorted(int(m) for m in sub["width"].unique())
    cond = Condition(f">= {MIN_EARLY_WIDTHS} widths", len(widths) >= MIN_EARLY_WIDTHS, f"widths {widths}")
    ok = len(widths) >= 2
    r = np.log(sub["stability"].to_numpy(float)) - np.log(sub["init_scale"].to_numpy(float))
    est = slope_estimate(sub["width"], np.exp(r), log_x=True, log_y=True) if ok else None
    v = decide(est, threshold=-NONLAZY_DELTA, side="below", conditions=[cond],
               reason=f"{name}: slope of log P(t) - log E_W P_init on log m, below -{NONLAZY_DELTA:g}")
    raw = slope_estimate(sub["width"], sub["stability"], log_x=True, log_y=True) if ok else None
    scale = slope_estimate(sub["width"], sub["init_scale"], log_x=True, log_y=True) if ok else None
    return v, {**v.to_dict(), "slope_log_P": _r(raw.value) if raw else None,
               "slope_log_init_scale": _r(scale.value) if scale else None,
               "by_width": {int(m): {"mean_log_P_over_init_scale": _r(float(np.mean(rr))), "networks": int(len(rr)),
                                     "train_acc": _r(g["train_acc"].mean(), 3)}
                            for (m, g), rr in ((mg, np.log(mg[1]["stability"].to_numpy(float))
                                               - np.log(mg[1]["init_scale"].to_numpy(float)))
                                              for mg in sub.groupby("width"))}}


def _step_parts(rows: pd.DataFrame) -> dict[str, tuple[Verdict, dict]]:
    out = {}
    for init in sorted(rows["init"].unique()) if len(rows) else []:
        for label, sub in series(rows.drop(columns=["step"]).assign(_step=rows["step"]), init):
            g = f"gamma={float(sub['gamma'].iloc[0])}" if init == "small" else f"{init}{label}"
            for t, x in sub.groupby("_step"):
                out[f"{g}, step {int(t)}"] = _steps_part(x, f"{g}, step {int(t)}")
    return out


def steps_rule(rows: pd.DataFrame, outside: dict | None = None) -> Verdict:
    """nonlazy-width-early's rule on rows of every measured step (column ``step``, ``stability`` =
    P(t), ``init_scale`` = the closed-form E_W P_init): the OLS slope of log P(t) − log E_W P_init
    on log m below -NONLAZY_DELTA at every (gamma, step) (``across``, quantifier all). ``outside``: steps excluded
    by name (their premises left too few widths), ``{"step t": why}``."""
    parts = {k: v for k, (v, _) in _step_parts(rows).items()}
    if not parts:
        return not_applicable("no network meets the premises")
    return cl.across("gamma x step", parts, quantifier="all", outside=outside)[0]


def _step_views(s: pd.DataFrame, steps: list[int]) -> tuple[pd.DataFrame, pd.DataFrame, list[cl.Exclusion]]:
    """Every step's view of the rows (``step`` added), the networks each keeps, and the merged exclusions."""
    views, keeps, excs = [], [], []
    for t in steps:
        v = view(s, f"step{t}").assign(step=t)
        k, exc = kept(v, EARLY_PREMISES)
        views.append(v)
        keeps.append(k)
        excs.append([cl.Exclusion(e.premise, e.excluded, e.of, f"step {t}: {e.detail}") for e in exc])
    k = pd.concat(keeps) if keeps else s.iloc[0:0]
    return pd.concat(views), k.assign(init_scale=_init_scale(k)), merge_exclusions(excs)


def claim_nonlazy_early(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    """Thm 3 on measured dynamics: two-layer, one output, squared loss, a few SGD steps in."""
    cid = "nonlazy-width-early"
    statement = ("Non-lazy width, early training (Thm 3: squared loss, small init): after 5, 10 and 20 SGD steps "
                 "stability falls with width once the initialisation's scale is removed, at every gamma")
    f = finals(df)
    ok = len(f) and "output" in f.columns
    s = f[(f["depth"] == 2) & (f["output"] == "single")] if ok else f.iloc[0:0]
    steps = [t for t in THM3_STEPS if f"stability_step{t}" in s.columns and s[f"stability_step{t}"].notna().any()]
    if s.empty or not (s["init"] == "small").any() or not steps:
        return _claim(cid, statement, "Thm 3",
                      not_applicable("not measured in this run: Thm 3's premise (a few SGD steps under the squared "
                                     "loss) needs output=single small-init runs with early_steps"),
                      {"reason": "no output=single, depth-2 runs with early_steps"})
    v, k, exc = _step_views(s, steps)
    # coverage per step: a step whose premises leave the width axis undecidable is excluded by name
    # (across outside=), from the claim's and the control's rows alike; the other steps decide
    lost = {t: _coverage(v[(v["init"] == "small") & (v["step"] == t)], _premise_objs(EARLY_PREMISES),
                         axis="width", shape="slope", min_distinct=MIN_EARLY_WIDTHS, min_span=4.0) for t in steps}
    lost = {t: c.reason for t, c in lost.items() if c is not None}
    k = k[~k["step"].isin(list(lost))]
    small, he = k[k["init"] == "small"], k[k["init"] == "he"]
    outside = {f"step {t}": why for t, why in lost.items()}
    na = cl.across("step", {}, outside=outside)[0] if len(lost) == len(steps) else None
    verdict, control = _judged(cid, _bound(steps_rule, outside=outside), small, he, na)
    parts = _step_parts(small)
    ev: dict = {"definition": "per network r(t) = log P(t) - log E_W P_init(m) (P after SGD step t, Def. 3; the "
                              "init's closed-form expectation, exact at finite width, whose own slope on log m is "
                              "1 - 2 gamma for the small init and 0 for He); OLS slope of r(t) on log m with a 95% "
                              f"t interval below -{NONLAZY_DELTA:g}, at every gamma and step t in {steps}",
                "parts": {n: e for n, (_, e) in parts.items()},
                "control_parts": {n: e for n, (_, e) in _step_parts(he).items()}}
    variants = None
    if "stability_early" in s.columns and s["stability_early"].notna().any():
        ke = kept(view(s, "early"), EARLY_PREMISES)[0]
        variants = {"exploratory: the per-network ratio P(epoch early_epoch) / P(init) (the earlier statistic)":
                    early_rule(ke[ke["init"] == "small"])}
    return _claim(cid, statement, "Thm 3", verdict, ev, control=control, excluded=exc, variants=variants,
                  across=cl.across("gamma x step", {n: pv for n, (pv, _) in parts.items()},
                                   quantifier="all", outside=outside)[1] if parts or outside else None)


def nonlazy_rule(rows: pd.DataFrame) -> Verdict:
    """nonlazy-width's rule: the OLS slope of log P (Def. 3, per network) on log m below -NONLAZY_DELTA, in every
    series of the rows."""
    parts = {}
    for init in sorted(rows["init"].unique()) if len(rows) else []:
        for label, sub in series(rows, init):
            ws = sorted(int(m) for m in sub["width"].unique())
            cond = Condition(">= 3 widths", len(ws) >= 3, f"widths kept {ws}")
            est = slope_estimate(sub["width"], sub["stability"], log_x=True, log_y=True) if len(ws) >= 2 else None
            parts[f"{init}{label}"] = decide(est, threshold=-NONLAZY_DELTA, side="below", conditions=[cond],
                                             reason=f"{init}{label}: slope of log P on log m, below "
                                                    f"-{NONLAZY_DELTA:g}")
    if not parts:
        return not_applicable("no network meets the premises")
    return cl.across("series", parts, quantifier="all")[0]


def claim_nonlazy(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    cid = "nonlazy-width"
    statement = ("Non-lazy two-layer networks after training (Fig. 4b): stability falls with width (no phase "
                 "transition), compared at matched training loss L* in {0.3, 0.2}")
    f = finals(df)
    if f.empty or "stability" not in f.columns:
        return _no_results(cid, statement, "Fig. 4(b)")
    two = width_sweep_rows(_regime(_multi(f[(f["depth"] == 2) & f["init"].isin(["small", "he"])]), "sgd"))
    if "classes" in two.columns and (two["init"] == "small").any():  # He on the small init's data only
        two = two[two["classes"].astype(str).isin(set(two.loc[two["init"] == "small", "classes"].astype(str)))]
    two = two[pd.to_numeric(two["width"]) >= NONLAZY_MIN_WIDTH]
    if not _both_inits(two):
        return _claim(cid, statement, "Fig. 4(b)", not_applicable(NOT_MEASURED_NONLAZY), {})
    marks = [L for L in LOSS_MARKS if f"stability_L{L:g}" in two.columns]
    end_v = view(two, "end")
    k_end, exc_end = kept(end_v, NONLAZY_PREMISES)
    ev: dict = {"definition": f"depth 2, cross-entropy, widths >= {NONLAZY_MIN_WIDTH}, each network measured the "
                              "first epoch its full-pass training loss was at most L* (premises: reached L*, finite "
                              f"difference within tolerance): OLS slope of log P on log m below -{NONLAZY_DELTA:g}, at "
                              "every L* "
                              f"in {list(LOSS_MARKS)} (across)"}
    end_rule = nonlazy_rule(k_end[k_end["init"] == "small"]) if (k_end["init"] == "small").any() else \
        not_applicable("no small-init network on a plateau at the end")
    variants = {"end of the schedule, loss and accuracy at a plateau (the reading before issue 54's second round, "
                "its plateau premises since wdi5)": end_rule}
    if not marks:
        return _claim(cid, statement, "Fig. 4(b)", not_applicable(
            "not measured in this run: needs depth-2 small-init and He runs with loss_marks"), ev, excluded=exc_end,
            variants=variants)
    views = pd.concat([view(two, f"loss{L:g}").assign(mark=L) for L in marks])
    keeps, excs = [], []
    for L in marks:
        kk, ex = kept(views[views["mark"] == L], MATCHED_PREMISES)
        keeps.append(kk)
        excs.append([cl.Exclusion(e.premise, e.excluded, e.of, f"L* = {L:g}: {e.detail}") for e in ex])
    k = pd.concat(keeps)
    # coverage per L*: a mark whose premises leave the width axis undecidable is excluded by name
    # (across outside=), from the claim's and the control's rows alike; the other marks decide
    lost = {L: _coverage(views[(views["init"] == "small") & (views["mark"] == L)], _premise_objs(MATCHED_PREMISES),
                         axis="width", shape="slope") for L in marks}
    outside = {f"{L:g}": c.reason for L, c in lost.items() if c is not None}
    k = k[~k["mark"].map(lambda L: f"{L:g}").isin(list(outside))]
    small, he = k[k["init"] == "small"], k[k["init"] == "he"]
    na = cl.across("L*", {}, outside=outside)[0] if len(outside) == len(marks) else None
    verdict, control = _judged(cid, _bound(matched_rule, outside=outside), small, he, na)
    ev["curve_small"] = {f"L*={L:g}": _table(curve(small[small["mark"] == L], "width")) for L in marks}
    ev["curve_he"] = {f"L*={L:g}": _table(curve(he[he["mark"] == L], "width")) for L in marks}
    ev["end_curve_small"] = _table(curve(k_end[k_end["init"] == "small"], "width"))
    per = {f"{L:g}": nonlazy_rule(small[small["mark"] == L]) for L in marks if f"{L:g}" not in outside}
    return _claim(cid, statement, "Fig. 4(b)", verdict, ev, control=control, excluded=merge_exclusions(excs),
                  variants=variants, across=cl.across("L*", per, quantifier="all", outside=outside)[1])


def matched_rule(rows: pd.DataFrame, outside: dict | None = None) -> Verdict:
    """nonlazy-width's rule at matched loss: :func:`nonlazy_rule` at every L* of the rows (column
    ``mark``; ``across``, quantifier all). ``outside``: marks excluded by name, ``{"0.2": why}``."""
    if rows.empty:
        return not_applicable("no network meets the premises")
    parts = {f"{L:g}": nonlazy_rule(rows[rows["mark"] == L]) for L in sorted(rows["mark"].unique(), reverse=True)}
    return cl.across("L*", parts, quantifier="all", outside=outside)[0]


def _same_output_as_he(f: pd.DataFrame) -> pd.DataFrame:
    """The cross-entropy rows (Fig. 4b and κ are on those; the squared-loss rows are Thm 3's)."""
    return f[f["output"] == "multi"] if "output" in f.columns else f


NOT_MEASURED_NONLAZY = ("not measured in this run: needs He and small-init (non-lazy) networks at depth 2 "
                        "(paper-nonlazy and paper-kappa run them)")


def _both_inits(two: pd.DataFrame) -> bool:
    """The grid holds both He and small-init depth-2 networks (before any premise)."""
    return {"he", "small"} <= set(two["init"])


# ---------------------------------------------------------------------------------------
# κ (§5.2)

def growth_exponent(trace: pd.DataFrame, decay_start: int, start: int | None = None) -> dict:
    """Log–log growth exponent ``b`` of κ(t) ∝ t^b (the mean over the rows at each epoch) over the
    constant-rate window ``[start, T₁]`` with ``T₁ = decay_start`` (the last epoch when the rate
    never decays); ``start`` defaults to ``T₁/2`` (the declared late window: past the first
    transient, before a decay slows every curve down)."""
    k = trace.groupby("epoch")["kappa"].mean().sort_index()
    last = int(k.index.max())
    T1 = int(decay_start) if 0 < decay_start <= last else last
    lo = max(1, T1 // 2) if start is None else start
    win = k[(k.index >= lo) & (k.index <= T1)]
    if len(win) < 2 or (win <= 0).any():
        return {"exponent": None, "window": [lo, T1]}
    est = slope_estimate(win.index.to_numpy(float), win.to_numpy(float), log_x=True, log_y=True)
    return {"exponent": _r(est.value, 3), "window": [int(win.index.min()), int(win.index.max())],
            "kappa_start": _r(win.iloc[0]), "kappa_end": _r(win.iloc[-1])}


def _seed_exponents(ep: pd.DataFrame, start: int | None) -> pd.Series:
    """Per seed, the mean over its widths of its own κ(t) growth exponent."""
    per: dict[int, list[float]] = {}
    for (_m, s), tr in ep.groupby(["width", "seed"]):
        b = growth_exponent(tr, int(tr["decay_start"].iloc[0]), start)["exponent"]
        if b is not None:
            per.setdefault(int(s), []).append(b)
    return pd.Series({s: float(np.mean(b)) for s, b in per.items()}, dtype=float)


def _kappa_window(start: int | None) -> Callable[[pd.DataFrame], Verdict]:
    def rule(ep: pd.DataFrame) -> Verdict:
        parts = {}
        for init in sorted(ep["init"].unique()) if len(ep) else []:
            sub = ep[ep["init"] == init]
            ws = sorted(int(m) for m in sub["width"].unique())
            cond = Condition(">= 3 over-parameterised widths", len(ws) >= 3, f"widths {ws}")
            b = _seed_exponents(sub, start)
            parts[init] = decide(mean_estimate(b) if len(b) else None, threshold=KAPPA_BAND, side="inside",
                                 conditions=[cond], reason=f"{init}: growth exponent of kappa(t)")
        return cl.across("init", parts, quantifier="all")[0] if parts else not_applicable("no kappa trace kept")
    return rule


def kappa_rule(ep: pd.DataFrame) -> Verdict:
    """kappa's rule on the epoch rows of the kept networks: the growth exponent of κ(t) inside the
    non-lazy band, in the declared window and in the whole constant-rate phase (``across``)."""
    return cl.across("window", {KAPPA_WINDOWS[0]: _kappa_window(None)(ep), KAPPA_WINDOWS[1]: _kappa_window(2)(ep)},
                  quantifier="all")[0]


def _kappa_rows(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, list[cl.Exclusion], pd.DataFrame]:
    f = finals(df)
    two = width_sweep_rows(_regime(_multi(f[(f["depth"] == 2) & f["init"].isin(["he", "small"])]), "sgd"))
    if "classes" in two.columns and (two["init"] == "small").any():  # He on the small init's data only
        two = two[two["classes"].astype(str).isin(set(two.loc[two["init"] == "small", "classes"].astype(str)))]
    k, exc = kept(view(two, "end"), KAPPA_PREMISES)
    ep = df[(df["kind"] == "epoch")] if "point" in df.columns else df.iloc[0:0]
    ep = _same_networks(ep, k) if len(ep) else ep
    return two, k, exc, ep


def claim_kappa(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    cid = "kappa"
    statement = "kappa: the non-lazy init's kappa(t) grows about linearly in time (growth exponent near 1)"
    ev: dict = {"definition": "depth 2, cross-entropy, widths >= the number of training points: per seed the growth "
                              "exponent b of kappa(t) ~ t^b (mean over widths), inside "
                              f"{KAPPA_BAND} (t interval over seeds), in the declared window [decay_start/2, "
                              "decay_start] and in [2, decay_start] (across window)"}
    if "kind" not in df.columns or finals(df).empty or "kappa" not in finals(df).columns:
        return _claim(cid, statement, "§5.2, Figs. 2-3", not_applicable(NOT_MEASURED_NONLAZY), ev)
    two, k, exc, ep = _kappa_rows(df)
    if not _both_inits(two):
        return _claim(cid, statement, "§5.2, Figs. 2-3", not_applicable(NOT_MEASURED_NONLAZY), ev, excluded=exc)
    small, he = ep[ep["init"] == "small"], ep[ep["init"] == "he"]
    verdict, control = _judged(cid, kappa_rule, small, he)
    for init, e in (("small", small), ("he", he)):
        ev[f"{init}_exponent"] = {w: _kappa_window(st)(e).to_dict() for w, st in zip(KAPPA_WINDOWS, (None, 2))}
    return _claim(cid, statement, "§5.2, Figs. 2-3", verdict, ev, control=control, excluded=exc)


def kappa_width_rule(rows: pd.DataFrame) -> Verdict:
    parts = {}
    for init in sorted(rows["init"].unique()) if len(rows) else []:
        sub = rows[rows["init"] == init]
        ws = sorted(int(m) for m in sub["width"].unique())
        cond = Condition(">= 3 over-parameterised widths", len(ws) >= 3, f"widths {ws}")
        est = slope_estimate(sub["width"], sub["kappa"], log_x=True, log_y=True) if len(ws) >= 2 else None
        parts[init] = decide(est, threshold=0.0, side="below", conditions=[cond],
                             reason=f"{init}: slope of log kappa_end on log m")
    return cl.across("init", parts, quantifier="all")[0] if parts else not_applicable("no network kept")


def claim_kappa_width(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    cid = "kappa-width"
    statement = "Exploratory: kappa at the end falls with width for both the lazy (He) and the non-lazy init (§5.2)"
    if "kind" not in df.columns or finals(df).empty or "kappa" not in finals(df).columns:
        return _claim(cid, statement, "§5.2", not_applicable(NOT_MEASURED_NONLAZY), {})
    two, k, exc, _ = _kappa_rows(df)
    if not _both_inits(two):
        return _claim(cid, statement, "§5.2", not_applicable(NOT_MEASURED_NONLAZY), {}, excluded=exc)
    parts = {}
    for init in ("he", "small"):
        parts[init] = kappa_width_rule(k[k["init"] == init])
    v, record = cl.across("init", parts, quantifier="all")
    ev = {"definition": "depth 2, widths >= n_train: OLS slope of log kappa at the end on log m, below 0 for He and "
                        "for the small init; exploratory: no setting here where theory has kappa not fall with width",
          "kappa_by_width": {i: {int(m): _r(g["kappa"].mean(), 3) for m, g in k[k["init"] == i].groupby("width")}
                             for i in ("he", "small")}}
    return _claim(cid, statement, "§5.2", v, ev, excluded=exc, across=record)


# ---------------------------------------------------------------------------------------
# the Monte Carlo self-check

MC_BAND = 0.05  # relative: the Monte Carlo mean within ±5 % of the identity (see claim_mc)


def claim_mc(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("Self-check: the Monte Carlo estimate of E|<J, delta>|^2 agrees with the identity "
                 f"eps^2 ||J||_F^2 / (d+2) (its 95% interval within ±{MC_BAND:.0%} of it)")
    f = finals(df)
    if "mc_stability" not in f.columns or f["mc_stability"].isna().all():
        # a run without Monte Carlo points (a slice that does not measure it) did not test the identity:
        # not applicable, not an undecided self-check
        why = "not measured in this run: no grid point had a Monte Carlo estimate (mc_width, mc_samples)"
        return _claim("mc-identity", statement, "Def. 1", not_applicable(why), {"reason": why})
    m = f.dropna(subset=["mc_stability"])
    mc, se, exact = (m[k].to_numpy(float) for k in ("mc_stability", "mc_stderr", "mc_exact"))
    rel = float((mc - exact).sum() / exact.sum())
    half = 1.96 * float(np.sqrt((se ** 2).sum()) / exact.sum())
    est = Estimate(rel, rel - half, rel + half, len(m), f"pooled relative error over {len(m)} seeds, normal interval "
                   "from the Monte Carlo standard errors", sd=float(np.median(se / exact)))
    z = (mc - exact) / se
    ev = {"definition": f"pooled relative error sum(MC - exact) / sum(exact) over seeds, 95% interval from the "
                        f"draws' standard errors, inside ±{MC_BAND:.0%}: a normalisation error (a wrong d + 2, a "
                        "radius squared twice) is larger. An invariant of the code (the sampler against its own "
                        "identity), not a finding; whether eps is small enough for the linear formula is the "
                        "fd-linear premise, checked per network from the finite difference itself",
          "point": {"init": str(m["init"].iloc[0]), "depth": int(m["depth"].iloc[0]), "width": int(m["width"].iloc[0])},
          "per_seed": [{"seed": int(r.seed), "mc": _r(r.mc_stability), "stderr": _r(r.mc_stderr),
                        "exact": _r(r.mc_exact), "z": _r(zz, 3)} for r, zz in zip(m.itertuples(), z)],
          "draws": int(m["mc_samples"].iloc[0]), "points": int(m["mc_points"].iloc[0])}
    return _claim("mc-identity", statement, "Def. 1", decide(est, threshold=(-MC_BAND, MC_BAND), side="inside"), ev)


# ---------------------------------------------------------------------------------------

def claims(df: pd.DataFrame, ctx: Context | None) -> list[Claim]:
    return [claim_width(df, ctx), claim_width_location(df, ctx), claim_width_lazy_limit(df, ctx),
            claim_width_moves(df, ctx), claim_depth_at_init(df, ctx),
            *(claim_depth_trained(df, init, ctx) for init in ("lecun", "he", "ntk")),
            claim_lecun_nonlazy(df, ctx), claim_nonlazy_early(df, ctx), claim_nonlazy(df, ctx), claim_kappa(df, ctx),
            claim_kappa_width(df, ctx), claim_mc(df, ctx)]


__all__ = ["SPECS", "POPULATIONS", "claims", "claim_width", "claim_width_location", "claim_width_lazy_limit",
           "claim_width_moves", "claim_depth_at_init", "claim_depth_trained", "claim_lecun_nonlazy",
           "claim_nonlazy_early", "claim_nonlazy", "claim_kappa", "claim_kappa_width", "claim_mc",
           "growth_exponent", "CONTRADICTED"]

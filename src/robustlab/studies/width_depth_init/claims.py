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
from collections.abc import Callable

import numpy as np
import pandas as pd

from ... import claims as cl
from ...papers import WIDTH_DEPTH_INIT
from ...stats import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_APPLICABLE,
    REPRODUCED,
    Condition,
    Estimate,
    Verdict,
    combine,
    decide,
    difference_estimate,
    mean_estimate,
    not_applicable,
    slope_estimate,
)
from ..base import Claim, Context
from .analysis import PROTOCOLS, _r, _table, curve, finals, kept, protocols, series, view
from .lazy_claims import (
    AT_INIT_PREMISES,
    DEPTH_TRAINED_PREMISES,
    MECHANISM_AT_INIT,
    WIDTH_PREMISES,
    _he_vs_lecun_same_seed,
    decide_depth_at_init,
    decide_depth_trained,
    decide_width,
    decide_width_moves,
    lecun_nonlazy,
)

AT_INIT = "the same networks at initialisation"
SWAP = "inits swapped (each init judged by the other's rule)"
EARLY_PREMISES = ("early-window", "fd-linear")
NONLAZY_PREMISES = ("equal-fit", "fd-linear")
KAPPA_PREMISES = ("over-parameterised",)
# κ's growth exponent b in κ(t) ∝ t^b over the late constant-rate window, bands fixed before the
# run from §5.2's words: He "almost a constant that does not change with time" (b near 0), the
# non-lazy init "increases almost linearly over time" (b near 1); ±0.25 each, so the bands are
# half a unit apart and a single exponent cannot sit in both.
KAPPA_BANDS = {"he": (-0.25, 0.25), "small": (0.75, 1.25)}
MIN_EARLY_WIDTHS = 3

SPECS = (
    cl.ClaimSpec("width-peak", premises=WIDTH_PREMISES, control=cl.ControlSpec(
        AT_INIT, "E_W P at initialisation is flat in width for He and LeCun (closed form d k beta_L "
                 "prod(m beta / 2) does not depend on m), so no interior peak exists there: a rule that finds "
                 "one finds noise or the argmax's own selection bias"), min_points=MIN_EARLY_WIDTHS),
    cl.ClaimSpec("width-peak-n-train", premises=WIDTH_PREMISES, control=cl.ControlSpec(
        AT_INIT, "at initialisation the curve is flat in width, so where its maximum falls carries no "
                 "information about the training-set size: the peak cannot move with n there")),
    # a closed-form identity at t = 0 (LeCun halves P per layer): robustlab's own check, not the
    # paper's statement about trained networks
    cl.ClaimSpec("depth-init-at-init", kind=cl.SELF_CHECK, premises=AT_INIT_PREMISES),
    # its former control judged the same runs by the other init's rule (a complement, refused
    # by the engine); until it is re-declared on other runs it has none, and cannot read reproduced
    cl.ClaimSpec("depth-init-trained", premises=DEPTH_TRAINED_PREMISES),
    cl.ClaimSpec("depth-lecun-nonlazy", kind=cl.EXPLORATORY, premises=("equal-fit", "fd-linear")),
    cl.ClaimSpec("nonlazy-width-early", premises=EARLY_PREMISES, control=cl.ControlSpec(
        "He networks in Thm 3's own setting (init=he, output=single, the same window)",
        "lazy (He) weights barely move in the first epoch, so P(epoch 1) / P(init) cannot fall with width "
        "there: Thm 3's mechanism (weights condensing on few directions) needs the small init")),
    cl.ClaimSpec("nonlazy-width", premises=NONLAZY_PREMISES, control=cl.ControlSpec(
        AT_INIT, "no training regime has acted at t = 0; if the small init already falls with width and lies "
                 "below He there (its P scales as m^(1-2 gamma) by construction), the rule measures the "
                 "initial scale, not non-lazy training")),
    # its former control ("bands swapped") judged the same runs by the complement of its rule,
    # refused by the engine; none until it is re-declared on other runs
    cl.ClaimSpec("kappa", premises=KAPPA_PREMISES),
    cl.ClaimSpec("mc-identity", kind=cl.SELF_CHECK),
)
_SPEC = {s.id: s for s in SPECS}
POPULATIONS = {AT_INIT: "the same networks before any training step",
               "He networks in Thm 3's own setting (init=he, output=single, the same window)":
                   "He-initialised networks trained in the same window as the small-init ones"}


def _claim(cid: str, statement: str, where: str, verdict: Verdict, ev: dict, *, control: Verdict | None = None,
           excluded=(), variants: dict | None = None, across=None) -> Claim:
    spec = _SPEC[cid]
    ctl = cl.control_from(spec.control, control) if spec.control is not None and control is not None else None
    return Claim(cid, statement, verdict, ev, WIDTH_DEPTH_INIT.cite(where), kind=spec.kind, control=ctl,
                 excluded=excluded, variants=variants or None, across=across)


def _at_fit_and_end(cid: str, statement: str, where: str, definition: str, f: pd.DataFrame,
                    fn: Callable[[pd.DataFrame, str], tuple]) -> Claim:
    """A claim decided at equal fit, with the end of the schedule as its own variant."""
    if f.empty or "stability" not in f.columns:
        return _claim(cid, statement, where, Verdict(INCONCLUSIVE, reason="no final results"),
                      {"reason": "no final results"})
    ps = protocols(f)
    v, c, exc, ev = fn(f, ps[0])
    out = {"definition": definition, "judged_on": PROTOCOLS[ps[0]], "parts": ev}
    variants = {}
    if "end" in ps[1:]:
        ve, ce, exce, eve = fn(f, "end")
        variants["end of schedule"] = ve
        out["end_of_schedule"] = {"verdict": ve.verdict, "effect": ve.effect, "interval": ve.interval,
                                  "control": ce.verdict, "excluded": [e.to_dict() for e in exce], "parts": eve}
    return _claim(cid, statement, where, v, out, control=c, excluded=exc, variants=variants)


# ---------------------------------------------------------------------------------------
# Thm 1 (the lazy regime)

def claim_width(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    return _at_fit_and_end(
        "width-peak", "Lazy regime, width: stability first rises then falls with width (an interior maximum) for "
        "He and LeCun, among networks at equal fit that stayed lazy and are at least as wide as the class count",
        "Thm 1, §5.3, Fig. 4(a)",
        "per (init, depth, series) width sweep of the kept networks: log of the mean P over networks per width "
        "(Def. 1; P = 0 kept), statistic min(peak - narrowest, peak - widest) at the interior maximum, percentile "
        "bootstrap over networks within each width, above 0; every sweep (both inits, every depth, the 2-class "
        "sweep) must hold", finals(df), decide_width)


def claim_width_moves(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    return _at_fit_and_end(
        "width-peak-n-train", "Lazy regime, width: the stability peak moves to larger widths with a larger "
        "training set (Thm 1 ties it to the passage from under- to over-parameterised)", "Thm 1, §5.3",
        "log2 of the interior width of largest log mean P at the largest training-set size minus at the smallest "
        "(bootstrap over networks), above 0; the expected move is log2 of the ratio of sizes", finals(df),
        decide_width_moves)


def claim_depth_at_init(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("Depth at initialisation (Thm 1's premise holds exactly): log E_W P falls by about ln 1/2 per layer "
                 "for LeCun and is flat for He and NTK (the exact expectation; the paper's He/NTK rise is its "
                 "bound's)")
    f = finals(df)
    if f.empty or "stability_init" not in f.columns:
        return _claim("depth-init-at-init", statement, "Thm 1", Verdict(INCONCLUSIVE, reason="no final results"),
                      {"reason": "no final results"})
    v, c, exc, ev = decide_depth_at_init(f)
    out = {"definition": "networks at t = 0 (each trained network's own and its init_draws extra draws): OLS slope "
                         "on L of log of the mean P per depth, percentile bootstrap over networks within each depth; "
                         "LeCun inside ln(1/2) +- 0.15, He and NTK inside 0 +- 0.15, at every width with >= 3 depths",
           "mechanism": MECHANISM_AT_INIT, "parts": ev, "he_vs_lecun_same_seed": _he_vs_lecun_same_seed(f)}
    return _claim("depth-init-at-init", statement, "Thm 1", v, out, control=c, excluded=exc)


def claim_depth_trained(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    return _at_fit_and_end(
        "depth-init-trained", "Depth after training, networks that stayed lazy (Thm 1, §5.4): with LeCun init "
        "stability falls with depth; with He and NTK it rises", "Thm 1, §5.4, Fig. 5, App. E.6",
        "kept networks (equal fit, kappa <= the lazy bound, finite difference within tolerance): slope of log of "
        "the mean P per depth, on L for LeCun (below 0), on log L for He and NTK (above 0), percentile bootstrap "
        "over networks within each depth, at every width with >= 3 depths", finals(df), decide_depth_trained)


def claim_lecun_nonlazy(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    f = finals(df)
    statement = ("Exploratory: the depth trend of trained LeCun networks that left the lazy regime (kappa above the "
                 "lazy bound), outside Thm 1, with how far training moved P from initialisation")
    if f.empty or "stability_at_target" not in f.columns:
        return _claim("depth-lecun-nonlazy", statement, "§5.4", not_applicable("no results at equal fit"), {})
    v, exc, ev = lecun_nonlazy(f)
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


def claim_nonlazy_early(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    """Thm 3 on measured dynamics: two-layer, one output, squared loss, early in training.

    The slope on log m of log(P(epoch early_epoch) / P(init)) per network (Def. 3) must lie below
    0 for the small init: what the first epoch of training did, not the init's own m^(1−2γ);
    decided at every γ of the grid (the exponent is the paper's lost symbol: ``across``)."""
    statement = ("Non-lazy width, early training (Thm 3: squared loss, small init): the first epoch of training "
                 "makes stability fall with width (beyond the initial scale), at every gamma")
    f = finals(df)
    ok = len(f) and "stability_early" in f.columns and "output" in f.columns
    s = f[(f["depth"] == 2) & (f["output"] == "single") & f["stability_early"].notna()] if ok else f.iloc[0:0]
    if s.empty:
        return _claim("nonlazy-width-early", statement, "Thm 3",
                      not_applicable("Thm 3's premise (an early-training window under the squared loss) is not "
                                     "measured"), {"reason": "no output=single, depth-2 runs with early_epoch > 0"})
    k, exc = kept(view(s, "early"), EARLY_PREMISES)
    ev: dict = {"definition": "per network P(epoch early_epoch) / P(init) (Def. 3: no expectation over W), the OLS "
                              "slope of its log on log m with a 95% t interval below 0, per gamma; the slope of log "
                              "P(init) is 1 - 2 gamma by construction, which is why P(early) alone is not judged"}
    per: dict = {}
    for label, sub in series(k, "small"):
        g = float(sub["gamma"].iloc[0])
        per[g], ev[f"small{label}"] = _early_part(sub, f"small{label}")
    if not per:
        v, across = cl.too_few(k, 1, exc, what="small-init networks") or not_applicable("no small init"), None
    else:
        v, across = cl.across("gamma", per)
    he = k[k["init"] == "he"]
    ctl = _early_part(he, "he")[0] if len(he) else not_applicable("no He run in Thm 3's setting")
    ev["control_he"] = ctl.to_dict()
    # the same rule on every network with eps in the linear range, fitted or not at epoch 1: reported
    # beside (an easy two-class task reaches the target accuracy within the first epoch)
    loose = kept(view(s, "early"), ("fd-linear",))[0]
    every = {float(x["gamma"].iloc[0]): _early_part(x, "small")[0] for _, x in series(loose, "small")}
    variants = {"without the early-window premise": cl.across("gamma", every)[0]} if every else None
    ev["without_early_window"] = {str(g): x.to_dict() for g, x in every.items()}
    he_all = loose[loose["init"] == "he"]
    if len(he_all):
        ev["control_he_without_early_window"] = _early_part(he_all, "he")[0].to_dict()
    return _claim("nonlazy-width-early", statement, "Thm 3", v, ev, control=ctl, excluded=exc, across=across,
                  variants=variants)


# What makes a non-lazy run and a He run comparable: the same data, training budget and loss.
_PAIRING_FIELDS = ("dataset", "data_dir", "classes", "size", "sphere", "n_train", "n_test", "epochs", "batch_size",
                   "output")


def _same_setting(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return all(set(a[k].astype(str)) == set(b[k].astype(str))
               for k in _PAIRING_FIELDS if k in a.columns and k in b.columns)


def _same_output_as_he(f: pd.DataFrame) -> pd.DataFrame:
    """The cross-entropy rows (Fig. 4b and κ are on those; the squared-loss rows are Thm 3's)."""
    return f[f["output"] == "multi"] if "output" in f.columns else f


def _nonlazy_pair(small: pd.DataFrame, he: pd.DataFrame, name: str) -> tuple[list[Verdict], dict]:
    ws = sorted(int(m) for m in small["width"].unique())
    cond = Condition(">= 3 widths", len(ws) >= 3, f"small-init widths kept {ws}")
    slope = decide(slope_estimate(small["width"], small["stability"], log_x=True, log_y=True) if len(ws) >= 2
                   else None, threshold=0.0, side="below", conditions=[cond], reason=f"{name}: slope of log P on log m")
    common = sorted(set(ws) & {int(m) for m in he["width"].unique()})
    cond2 = Condition(">= 3 common widths", len(common) >= 3, f"widths where both inits kept networks: {common}")

    def per_seed(x: pd.DataFrame) -> pd.Series:
        x = x[x["width"].isin(common)]
        return np.log(x["stability"]).groupby(x["seed"]).mean() if len(x) else pd.Series(dtype=float)
    below = decide(difference_estimate(per_seed(small), per_seed(he)) if common else None, threshold=0.0,
                   side="below", conditions=[cond2], reason=f"{name}: log(P_small / P_he) over common widths")
    return [slope, below], {"slope": slope.to_dict(), "below_he": {**below.to_dict(), "widths": common},
                            "curve_small": _table(curve(small, "width")),
                            "curve_he": _table(curve(he, "width")) if len(he) else None}


NOT_MEASURED_NONLAZY = ("not measured in this run: needs He and small-init (non-lazy) networks at depth 2 "
                        "(paper-nonlazy and paper-kappa run them)")


def _both_inits(two: pd.DataFrame) -> bool:
    """The grid holds both He and small-init depth-2 networks (before any premise)."""
    return {"he", "small"} <= set(two["init"])


def decide_nonlazy(f: pd.DataFrame, protocol: str) -> tuple[Verdict, Verdict, list[cl.Exclusion], dict]:
    two = _same_output_as_he(f[(f["depth"] == 2) & f["init"].isin(["small", "he"])])
    k, exc = kept(view(two, protocol), NONLAZY_PREMISES)
    init = view(two, "init")
    init = init[init.set_index(["point", "seed"]).index.isin(k.set_index(["point", "seed"]).index)]
    parts, ctls, ev = [], [], {}
    for ls, small in series(k, "small"):
        for lh, he in series(k, "he") or [("", k.iloc[0:0])]:
            if len(he) and not _same_setting(small, he):
                continue
            name = f"small{ls}_vs_he{lh}"
            p, e = _nonlazy_pair(small, he, name)
            pick = lambda x: init[init.set_index(["point", "seed"]).index.isin(  # noqa: E731
                x.set_index(["point", "seed"]).index)]
            c, _ = _nonlazy_pair(pick(small), pick(he), name + " at init")
            parts += p
            ctls.append(combine(c))
            ev[name] = {**e, "control_at_init": combine(c).to_dict()}
    if not parts:
        na = (cl.too_few(k, None, exc, what="networks") if _both_inits(two)
              else not_applicable(NOT_MEASURED_NONLAZY))
        return na, na, exc, ev
    return combine(parts), combine(ctls), exc, ev


def claim_nonlazy(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    return _at_fit_and_end(
        "nonlazy-width", "Non-lazy two-layer networks after training (Fig. 4b): at equal fit, stability falls "
        "with width and lies below the lazy (He) network at the same width", "Fig. 4(b)",
        "depth 2, cross-entropy, kept networks (equal fit, finite difference within tolerance): (i) the OLS slope "
        "of log P (Def. 3, per network) on log m for the small init below 0; (ii) the per-seed mean over common "
        "widths of log P_small minus that of log P_he (Welch interval) below 0", finals(df), decide_nonlazy)


# ---------------------------------------------------------------------------------------
# κ (§5.2)

def growth_exponent(trace: pd.DataFrame, decay_start: int) -> dict:
    """Log–log growth exponent ``b`` of κ(t) ∝ t^b (the mean over the rows at each epoch) over the
    late constant-rate window ``[T₁/2, T₁]`` with ``T₁ = decay_start`` (the last epoch when the
    rate never decays): past the first transient, before a decay slows every curve down."""
    k = trace.groupby("epoch")["kappa"].mean().sort_index()
    last = int(k.index.max())
    T1 = int(decay_start) if 0 < decay_start <= last else last
    win = k[(k.index >= max(1, T1 // 2)) & (k.index <= T1)]
    if len(win) < 2 or (win <= 0).any():
        return {"exponent": None, "window": [max(1, T1 // 2), T1]}
    est = slope_estimate(win.index.to_numpy(float), win.to_numpy(float), log_x=True, log_y=True)
    return {"exponent": _r(est.value, 3), "window": [int(win.index.min()), int(win.index.max())],
            "kappa_start": _r(win.iloc[0]), "kappa_end": _r(win.iloc[-1])}


def _seed_exponents(ep: pd.DataFrame, widths: list[int]) -> pd.Series:
    """Per seed, the mean over ``widths`` of its own κ(t) growth exponent."""
    per: dict[int, list[float]] = {}
    for (_m, s), tr in ep[ep["width"].isin(widths)].groupby(["width", "seed"]):
        b = growth_exponent(tr, int(tr["decay_start"].iloc[0]))["exponent"]
        if b is not None:
            per.setdefault(int(s), []).append(b)
    return pd.Series({s: float(np.mean(b)) for s, b in per.items()}, dtype=float)


def claim_kappa(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("kappa: nearly constant in time (growth exponent near 0) and falling with width for He; growing "
                 "about linearly in time (exponent near 1) and an order of magnitude larger for the non-lazy init")
    ev: dict = {"definition": "depth 2, cross-entropy, widths >= the number of training points: per seed the growth "
                              "exponent b of kappa(t) ~ t^b over the late constant-rate window (mean over widths); "
                              f"He's mean b inside {KAPPA_BANDS['he']}, the non-lazy one inside "
                              f"{KAPPA_BANDS['small']} (t intervals); He's final kappa falls with width (OLS slope "
                              "of log kappa on log m below 0); log10 kappa_small / kappa_he above 1"}
    f = finals(df)
    if f.empty or "kappa" not in f.columns:
        return _claim("kappa", statement, "§5.2, Figs. 2-3", Verdict(INCONCLUSIVE, reason="no results"), ev)
    two = _same_output_as_he(f[(f["depth"] == 2) & f["init"].isin(["he", "small"])])
    k, exc = kept(view(two, "end"), KAPPA_PREMISES)
    ep = df[(df["kind"] == "epoch") & df["point"].isin(k["point"])] if "point" in df.columns else df.iloc[0:0]
    parts, ctls = [], []
    for lh, he in series(k, "he"):
        for ls, small in series(k, "small"):
            if not _same_setting(small, he):
                continue
            common = sorted({int(m) for m in he["width"]} & {int(m) for m in small["width"]})
            cond = Condition(">= 3 over-parameterised widths", len(common) >= 3, f"common widths {common}")
            b = {i: _seed_exponents(ep[ep["point"].isin(x["point"])], common) for i, x in (("he", he), ("small", small))}
            name = f"small{ls}_vs_he{lh}"
            for i, o in (("he", "small"), ("small", "he")):
                parts.append(decide(mean_estimate(b[i]) if len(b[i]) else None, threshold=KAPPA_BANDS[i],
                                    side="inside", conditions=[cond], reason=f"{name}: {i} growth exponent"))
                ctls.append(decide(mean_estimate(b[i]) if len(b[i]) else None, threshold=KAPPA_BANDS[o],
                                   side="inside", conditions=[cond], reason=f"{name}: {i} exponent in {o}'s band"))
                ev[f"{name}_{i}_exponent"] = {**parts[-1].to_dict(), "per_seed": {int(s): _r(x, 3) for s, x in b[i].items()}}
            over = he[he["width"].isin(common)]
            falls = decide(slope_estimate(over["width"], over["kappa"], log_x=True, log_y=True) if len(common) >= 2
                           else None, threshold=0.0, side="below", conditions=[cond], reason=f"he{lh}: kappa vs width")
            lk = lambda x, common=common: np.log10(x[x["width"].isin(common)].pivot_table(  # noqa: E731
                index="seed", columns="width", values="kappa")).mean(axis=1)
            larger = decide(difference_estimate(lk(small), lk(he)) if common else None, threshold=1.0, side="above",
                            conditions=[cond], reason=f"{name}: log10 kappa_small / kappa_he")
            parts += [falls, larger]
            ev[f"he{lh}_vs_width"], ev[f"{name}_far_larger"] = falls.to_dict(), larger.to_dict()
    if not parts:
        v = cl.too_few(k, None, exc, what="networks") if _both_inits(two) else not_applicable(NOT_MEASURED_NONLAZY)
        return _claim("kappa", statement, "§5.2, Figs. 2-3", v, ev, control=v, excluded=exc)
    # the control holds only if every swapped band passes: combine its parts as one statement
    return _claim("kappa", statement, "§5.2, Figs. 2-3", combine(parts), ev, control=combine(ctls), excluded=exc)


# ---------------------------------------------------------------------------------------
# the Monte Carlo self-check

MC_BAND = 0.05  # relative: the Monte Carlo mean within ±5 % of the identity (see claim_mc)


def claim_mc(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("Self-check: the Monte Carlo estimate of E|<J, delta>|^2 agrees with the identity "
                 f"eps^2 ||J||_F^2 / (d+2) (its 95% interval within ±{MC_BAND:.0%} of it)")
    f = finals(df)
    if "mc_stability" not in f.columns or f["mc_stability"].isna().all():
        return _claim("mc-identity", statement, "Def. 1", decide(None, threshold=(-MC_BAND, MC_BAND), side="inside",
                                                                 reason="no grid point had a Monte Carlo estimate"),
                      {"reason": "no grid point had a Monte Carlo estimate"})
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

def _conditional_on_move(peak: Claim, moves: Claim) -> Claim:
    """width-peak is the paper's only if the peak moves with n: a reproduced peak whose move was
    measured and did not reproduce becomes inconclusive, naming it."""
    mv = moves.decision.verdict
    if peak.decision.verdict != REPRODUCED or mv in (REPRODUCED, NOT_APPLICABLE):
        if mv == NOT_APPLICABLE and peak.decision.verdict == REPRODUCED:
            peak.evidence["conditional_on"] = "width-peak-n-train was not measured in this run (one training-set size)"
        return peak
    why = (f"the peak does not move with the training-set size (width-peak-n-train {mv}), so it is not shown to be "
           "the passage from under- to over-parameterisation")
    v = dataclasses.replace(peak.decision, verdict=INCONCLUSIVE, seeds_needed=None,
                            reason="; ".join(x for x in (why, peak.decision.reason) if x))
    return dataclasses.replace(peak, verdict=v)


def claims(df: pd.DataFrame, ctx: Context | None) -> list[Claim]:
    peak, moves = claim_width(df, ctx), claim_width_moves(df, ctx)
    return [_conditional_on_move(peak, moves), moves, claim_depth_at_init(df, ctx), claim_depth_trained(df, ctx),
            claim_lecun_nonlazy(df, ctx), claim_nonlazy_early(df, ctx), claim_nonlazy(df, ctx), claim_kappa(df, ctx),
            claim_mc(df, ctx)]


__all__ = ["SPECS", "claims", "claim_width", "claim_width_moves", "claim_depth_at_init", "claim_depth_trained",
           "claim_lecun_nonlazy", "claim_nonlazy_early", "claim_nonlazy", "claim_kappa", "claim_mc",
           "growth_exponent", "CONTRADICTED"]

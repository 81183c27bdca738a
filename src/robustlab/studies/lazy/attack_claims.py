"""The claims of ``lazy-attack`` (lazy training, NeurIPS 2022, Thm 3.1 and §5.1), declared with
the claims engine (:mod:`robustlab.claims`): kind, premises by name, and a control chosen
before looking, with the reason it must fail there.

* ``lazy-ball`` (self-check): the training loop keeps the last in-ball weights, so this checks
  the code, not the paper.
* ``lazy-generalise``: every lazy grid point generalises (mean test accuracy over its seeds
  above 0.9, each point judged); control: the same networks at initialisation (chance level
  by construction: an untrained network cannot generalise).
* ``grad-scaling``, ``eta-scaling``, ``delta-scaling``: the asymptotic exponent of ‖∇ₓf‖, η and
  ‖δ‖/‖x‖ against d (:func:`~.common.asymptotic_exponent`), every width, decided at every
  C0 of the preset's lazy grid (``claims.across``); control: the rich-regime network (first
  layer :data:`~.common.RICH_INIT_SCALE` × smaller at init, C0 =
  :data:`~.common.NON_LAZY_C0`), kept where its input gradient is learned
  (‖∇ₓf‖ >= 2‖∇ₓf₀‖): nothing in the theorem ties its exponent to d.
* ``c0-more-robust``: ‖δ‖, ‖∇ₓf‖ and η all grow with C0 (the paper's §5.1 statement);
  control: the same networks at initialisation, where C0 plays no role (effect 0 by
  construction).
* ``raw-*``: the raw-pixel runs (the authors' own Fig. 2 setting), against what the theorem
  implies once ‖x‖ grows with d (:data:`RAW_THEORY`): ‖∇ₓf‖ keeps its exponent ½ (a ReLU
  network's input gradient does not grow with ‖x‖), and η/‖x‖ keeps η's exponent −1 on the
  sphere (η ∝ ‖x‖/d; registered 2026-11-26 and tested on fresh seeds, see
  :func:`exponent_claim`).

Every claim that uses trained networks carries the "trained" premise (clean test accuracy >=
0.9 per network); excluded networks are counted, never substituted.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from ... import claims as cm
from ... import stats
from ..base import Claim, Context
from .common import (
    MIN_TRAINED,
    NON_LAZY_C0,
    PAPER,
    RICH_INIT_SCALE,
    LazyAttackConfig,
    asymptotic_exponent,
    describe_family,
    point_ids,
    scaled,
    trained_premise,
)

SOURCE = PAPER.cite("Thm 3.1, §5.1")
BALL_TOL = 1e-4  # offsets are measured in float32: a ratio of 1 + 1e-4 is on the ball

# the theorem's exponents against d on the unit sphere, and the bands the claims accept
# (±0.2 around ½ for ‖∇ₓf‖ and ‖δ‖/‖x‖, ±0.3 around −1 for η: the bands of the first version)
THEORY = {"grad": 0.5, "eta": -1.0, "delta_rel": -0.5}
BANDS = {"grad": (0.3, 0.7), "eta": (-1.3, -0.7), "delta_rel": (-0.7, -0.3)}
# Q = a·d^p + b is fitted to: ‖∇f‖² (exponent p/2), 1/η (−p), 1/(‖δ‖/‖x‖)² (−p/2)
TRANSFORM = {"grad": (lambda v: v ** 2, 0.5), "eta": (lambda v: 1.0 / v, -1.0),
             "delta_rel": (lambda v: 1.0 / v ** 2, -0.5), "eta_rel": (lambda v: 1.0 / v, -1.0)}
# raw pixels: f is (nearly: biases) 1-homogeneous in x and ∇ₓf 0-homogeneous, so the flipping step
# of input x is ‖x‖ times that of x/‖x‖ (exactly, for a bias-free ReLU network): η/‖x‖ has the
# sphere's exponent −1 and ‖∇ₓf‖ keeps ½. With ‖x‖ ∝ √d that is η ∝ d^−1/2; these pixels grow
# faster (‖x‖ ∝ d^0.63 over sizes 5…28), so η's own exponent is reported beside it, not judged.
# Registered 2026-11-26 in place of a fit of 1/η = a·d^p + b (band −½ ± 0.2): that form assumes
# |f| does not change with d, but on raw pixels |f| grows like ‖x‖, 1/η = ‖∇ₓf‖²/|f| is not
# monotone at small d, and the fit read −1.15 [−1.70, −0.73] at the paper preset's seeds 0–4.
# The new estimator was then tested on fresh seeds (1000–1004) only: docs/studies/lazy-training.md.
RAW_THEORY = {"grad": 0.5, "eta_rel": -1.0}
RAW_BANDS = {"grad": (0.3, 0.7), "eta_rel": BANDS["eta"]}
MIN_DS = 4  # distinct d a family needs after the premises (3 fitted parameters + 1)

PREMISES = {"trained": trained_premise("test_acc")}


# the control's own premise, per network: its input gradient is learned, not inherited from init
GRAD_GAIN = 2.0
NON_LAZY = cm.premise_at_least(
    "non-lazy", "grad_gain", GRAD_GAIN,
    "‖∇ₓf‖/‖∇ₓf₀‖ (the input gradient is learned: ‖∇ₓf₀‖² is under a quarter of ‖∇ₓf‖²)")
_WHY_NON_LAZY = (f"the rich regime: the first layer starts {RICH_INIT_SCALE:g}× smaller and C0 = {NON_LAZY_C0:g} "
                 "never binds, so the trained network's input gradient is learned (‖∇ₓf₀‖ <= 0.2 at d <= 784) "
                 "rather than ∇ₓf₀ ≈ √(d/2) plus a d-independent term: nothing in the theorem ties its "
                 "exponent to d, and a rule that passes there too does not test laziness. (The same C0 "
                 "from the standard init is not a control: SGD leaves it at C0_used ~ 10-40, a lazy "
                 "network whose ‖∇ₓf‖ is still ‖∇ₓf₀‖ at large d.)")
_WHY_INIT = ("the same networks before training: C0 is not used at initialisation, so every C0 gives "
             "identical networks and the effect is 0 by construction")
_WHY_INIT_ACC = "the same networks before training classify at chance: they cannot generalise"

SPECS = (
    cm.ClaimSpec("lazy-ball", kind=cm.SELF_CHECK),
    cm.ClaimSpec("lazy-generalise", control=cm.ControlSpec("the same networks at initialisation",
                                                           _WHY_INIT_ACC)),
    *(cm.ClaimSpec(cid, premises=("trained",), control=cm.ControlSpec({"C0": NON_LAZY_C0, "init_scale": RICH_INIT_SCALE}, _WHY_NON_LAZY),
                   min_points=MIN_DS)
      for cid in ("grad-scaling", "eta-scaling", "delta-scaling")),
    cm.ClaimSpec("c0-more-robust", premises=("trained",),
                 control=cm.ControlSpec("the same networks at initialisation", _WHY_INIT), min_points=2),
    *(cm.ClaimSpec(cid, premises=("trained",), control=cm.ControlSpec({"C0": NON_LAZY_C0, "init_scale": RICH_INIT_SCALE}, _WHY_NON_LAZY),
                   min_points=MIN_DS)
      for cid in ("raw-grad-scaling", "raw-eta-scaling")),
)
_SPEC = {s.id: s for s in SPECS}


def _config():
    return LazyAttackConfig


def theory_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Runs in the theorem's setting: inputs on the unit sphere."""
    return df[(df["sphere"].astype(bool)) | (df["dataset"] == "sphere")]


def raw_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Runs on raw pixels (the authors' setting); inputs rescaled by ``input_scale`` are neither."""
    scaled = (df["input_scale"].fillna("none") != "none") if "input_scale" in df.columns \
        else pd.Series(False, index=df.index)
    return df[(~df["sphere"].astype(bool)) & (df["dataset"] != "sphere") & ~scaled]


def _init_scale(df: pd.DataFrame) -> pd.Series:
    return df["init_scale"].fillna(1.0) if "init_scale" in df.columns else pd.Series(1.0, index=df.index)


def _lazy(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["C0"] < NON_LAZY_C0) & (_init_scale(df) == 1.0)]


def _control_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rich-regime control: C0 = NON_LAZY_C0 from a small init. (C0 = NON_LAZY_C0 from the
    standard init is neither a lazy point nor the control: see ``_WHY_NON_LAZY``.)"""
    return df[(df["C0"] == NON_LAZY_C0) & (_init_scale(df) < 1.0)]


def _trained(df: pd.DataFrame, cid: str) -> tuple[pd.DataFrame, list[cm.Exclusion]]:
    return cm.apply_premises(df, [PREMISES[p] for p in _SPEC[cid].premises], unit=["_net"])


def _with_net(df: pd.DataFrame) -> pd.DataFrame:
    """One label per network (its point and seed): the unit the premises count in; and
    ``C0_used``, the C0 of the smallest lazy ball that holds the network."""
    out = df.assign(_net=point_ids(df, _config(), ()), C0_used=df["max_offset"] * df["m"] ** 0.5)
    if "init_grad" in out.columns:
        out = out.assign(grad_gain=out["grad"] / out["init_grad"])
    return out


# ---------------------------------------------------------------------------------------
# self-check and generalisation

def ball_check(df: pd.DataFrame) -> Claim:
    """Training stops before any neuron leaves its ball: the largest offset over every lazy
    network and neuron, relative to the radius, is at most 1 (exact: a maximum)."""
    lazy = _lazy(df)
    worst = float(lazy["offset_ratio"].max())
    est = stats.Estimate(worst, worst, worst, int(len(lazy)), "maximum over every network and neuron (exact)")
    verdict = stats.decide(est, threshold=1 + BALL_TOL, side="below", seeds=int(lazy["seed"].nunique()))
    return Claim("lazy-ball",
                 "The training loop keeps the network lazy: every neuron stays inside its ball "
                 "‖θ_s − θ_s(0)‖ <= C0/√m (the loop restores the last in-ball weights)",
                 verdict, {"max_offset_over_radius": worst,
                           "fraction_stopped_by_ball": float(lazy["left_ball"].mean()),
                           "n_networks": int(len(lazy))}, SOURCE, kind=cm.SELF_CHECK)


def _every_point(df: pd.DataFrame, col: str) -> tuple[stats.Verdict, list[dict]]:
    """Per grid point: mean of ``col`` over its seeds above MIN_TRAINED (t interval); all must hold."""
    parts, rows = [], []
    for _, g in df.groupby(point_ids(df, _config())):
        est = stats.mean_estimate(g[col].to_numpy(float))
        v = stats.decide(est, threshold=MIN_TRAINED, side="above")
        parts.append(v)
        rows.append({**describe_family(g, ("sphere", "size", "m", "C0", "bias", "lr")), "mean": est.value,
                     "ci": [est.low, est.high], "min_network": float(g[col].min()), "verdict": v.verdict})
    return stats.combine(parts, reason="every grid point must generalise"), rows


def generalise_claim(df: pd.DataFrame) -> Claim:
    """Every lazy grid point generalises: its mean test accuracy over seeds (t interval) is
    above MIN_TRAINED, judged point by point (not the grid mean). The failing points are named."""
    lazy = _lazy(df)
    verdict, rows = _every_point(lazy, "test_acc")
    control = None
    if "init_test_acc" in lazy.columns:
        cv, _ = _every_point(lazy, "init_test_acc")
        control = cm.control_from(_SPEC["lazy-generalise"].control, cv)
    failing = [r for r in rows if r["verdict"] != stats.REPRODUCED]
    return Claim("lazy-generalise",
                 f"Every lazy network generalises: at every grid point the mean test accuracy over seeds "
                 f"is above {MIN_TRAINED}",
                 verdict, {"points": len(rows), "points_failing": failing[:10],
                           "min_single_network_test_acc": float(lazy["test_acc"].min())},
                 SOURCE, control=control)


# ---------------------------------------------------------------------------------------
# exponents against d

def _d_families(df: pd.DataFrame, value: str) -> list[pd.DataFrame]:
    df = df.dropna(subset=[value])
    df = df[df[value] > 0]
    if df.empty:
        return []
    return [g for _, g in df.groupby(point_ids(df, _config(), ("seed", "size", "dim")))]


def _exponent(sub: pd.DataFrame, value: str) -> stats.Estimate:
    f, k = TRANSFORM[value]
    return scaled(asymptotic_exponent(sub["d"], f(sub[value].to_numpy(float))), k,
                  f"exponent of {value} against d")


def _judge_exponent(rows: pd.DataFrame, value: str, band: tuple[float, float]) -> tuple[stats.Verdict, list[dict]]:
    """One verdict per (m, …) family (every width must hold) on rows already filtered."""
    parts, fits = [], []
    for sub in _d_families(rows, value):
        nd = int(sub["d"].nunique())
        if nd < MIN_DS:
            v = cm.too_few(nd, MIN_DS, what="values of d")
        else:
            est = _exponent(sub, value)
            v = stats.decide(est, threshold=band, side="inside", seeds=int(sub["seed"].nunique()))
        parts.append(v)
        fits.append({**describe_family(sub, ("m", "C0", "bias", "lr")), "exponent": v.effect,
                     "ci": list(v.interval) if v.interval else None, "d": sorted(int(x) for x in sub["d"].unique()),
                     "networks": int(len(sub)), "verdict": v.verdict})
    if not parts:
        return cm.too_few(0, MIN_DS, what="values of d"), fits
    return stats.combine(parts, reason="every width must hold"), fits


def exponent_claim(df: pd.DataFrame, cid: str, value: str, *, raw: bool = False) -> Claim:
    """The asymptotic exponent of ``value`` against d lies in its band, for every width, at
    every lazy C0 of the grid (``claims.across``: a verdict that depends on C0 is inconclusive).
    Effect: :func:`~.common.asymptotic_exponent` over the (d, seed) networks of one
    family; interval: its profile-likelihood 95 % interval."""
    theory = (RAW_THEORY if raw else THEORY)[value]
    band = (RAW_BANDS if raw else BANDS)[value]
    runs = _with_net(raw_runs(df) if raw else theory_runs(df))
    if value == "eta_rel":
        runs = runs.assign(eta_rel=runs["eta"] / runs["x_norm"])
    kept, exclusions = _trained(runs, cid)
    lazy = _lazy(kept)
    ctrl, ctrl_excl = cm.apply_premises(_control_rows(kept), [NON_LAZY], unit=["_net"])
    per_c0, evidence = {}, {"band": list(band), "theory": theory, "fits": {}}
    for c0 in sorted(_lazy(runs)["C0"].unique()):
        v, fits = _judge_exponent(lazy[lazy["C0"] == c0], value, band)
        per_c0[f"{c0:g}"] = v
        evidence["fits"][f"{c0:g}"] = fits
    if per_c0:
        verdict, across = cm.across("C0", per_c0)
    else:
        verdict, across = cm.too_few(0, MIN_DS, exclusions, what="values of d"), None
    control = None
    if len(_control_rows(runs)):
        cv, cfits = _judge_exponent(ctrl, value, band)
        control = cm.control_from(_SPEC[cid].control, cv)
        evidence["control_fits"] = cfits
        evidence["control_excluded"] = [e.to_dict() for e in ctrl_excl] + [
            {"premise": "trained", "excluded": int(_control_rows(runs)["_net"].nunique()
                                                   - _control_rows(kept)["_net"].nunique())}]
        evidence["control_C0_used"] = [float(_control_rows(runs)["C0_used"].min()),
                                       float(_control_rows(runs)["C0_used"].max())]
        if "grad_gain" in runs.columns:
            gain = _control_rows(runs)["grad_gain"]
            evidence["control_grad_gain"] = [float(gain.min()), float(gain.max())]
            evidence["lazy_grad_gain_at_largest_d"] = _gain_at_largest_d(lazy)
    if value == "eta_rel":
        evidence["eta_itself"] = _eta_itself(_lazy(kept))
    name = {"grad": "‖∇ₓf‖", "eta": "η", "delta_rel": "‖δ‖/‖x‖", "eta_rel": "η/‖x‖"}[value]
    where = "raw pixels, where ‖x‖ grows with d" if raw else "unit-sphere inputs"
    q = {'grad': '‖∇ₓf‖²', 'eta': '1/η', 'delta_rel': '(‖x‖/‖δ‖)²', 'eta_rel': '‖x‖/η'}[value]
    statement = (f"{name} scales like d^{theory:g} asymptotically: the exponent of Q = a·d^p + b (Q = "
                 f"{q}) lies in [{band[0]:g}, {band[1]:g}] for every width, at every lazy C0 ({where})")
    return Claim(cid, statement, verdict, evidence, SOURCE, control=control, excluded=exclusions, across=across)


def _gain_at_largest_d(lazy: pd.DataFrame) -> dict | None:
    """‖∇ₓf‖/‖∇ₓf₀‖ of the lazy networks at the largest d: near 1 when the theorem's picture holds
    (the gradient is the initial one plus a d-independent term)."""
    if "grad_gain" not in lazy.columns or lazy.empty:
        return None
    top = lazy[lazy["d"] == lazy["d"].max()]["grad_gain"]
    return {"d": int(lazy["d"].max()), "min": float(top.min()), "max": float(top.max())}


def _eta_itself(runs: pd.DataFrame) -> list[dict]:
    """Beside raw-eta's verdict, per width: η's own exponent as the theorem implies it, the
    exponent of ‖x‖ on d (a property of the pixels, no network in it) plus that of η/‖x‖; and,
    for comparison only, the superseded fit of 1/η = a·d^p + b, misspecified here because |f|
    grows with ‖x‖ (its bias is the reason the claim was re-registered)."""
    out = []
    for sub in _d_families(runs.dropna(subset=["x_norm"]), "eta_rel"):
        if sub["d"].nunique() < MIN_DS:
            continue
        x = stats.slope_estimate(sub["d"], sub["x_norm"], log_x=True, log_y=True)
        rel = _exponent(sub, "eta_rel")
        old = _exponent(sub, "eta")
        out.append({**describe_family(sub, ("m", "C0")), "x_norm_exponent": x.value,
                    "eta_rel_exponent": rel.value, "eta_exponent_implied": x.value + rel.value,
                    "abs_f_exponent": (stats.slope_estimate(sub["d"], sub["abs_f"], log_x=True, log_y=True).value
                                       if "abs_f" in sub.columns and sub["abs_f"].notna().all() else None),
                    "superseded_inv_eta_fit": {"exponent": old.value, "ci": [old.low, old.high]}})
    return out


# ---------------------------------------------------------------------------------------
# C0

C0_VALUES = (("delta", "‖δ‖"), ("grad", "‖∇ₓf‖"), ("eta", "η"))


def _c0_slopes(runs: pd.DataFrame, prefix: str = "") -> tuple[stats.Verdict, dict]:
    """Slopes of log ‖δ‖, log ‖∇ₓf‖ and log η on log C0, one intercept per (d, m) (fixed effects);
    each must be above 0 (all three: the paper's statement)."""
    labels = point_ids(runs, _config(), ("seed", "C0"))
    parts, ev = [], {}
    for col, name in C0_VALUES:
        est = stats.slope_estimate(runs["C0"], runs[prefix + col], log_x=True, log_y=True, groups=labels)
        v = stats.decide(est, threshold=0.0, side="above", seeds=int(runs["seed"].nunique()))
        parts.append(dataclasses.replace(v, reason=f"{name}: {v.reason}" if v.reason else name))
        ev[col] = {"slope": est.value, "ci": [est.low, est.high], "verdict": v.verdict}
    return stats.combine(parts, reason="‖δ‖, ‖∇ₓf‖ and η must all grow with C0"), ev


def _eta_mechanism(runs: pd.DataFrame) -> list[dict]:
    """Per (d, m): the slope on log C0 of log ‖δ‖ and of log ‖∇ₓf‖ (η's is their difference), and
    ‖∇ₓf‖² − d/2 per C0: at small d the d-independent part of ‖∇ₓf‖² (O(C0²)) grows faster with
    C0 than ‖δ‖ does, so η = ‖δ‖/‖∇ₓf‖ can fall."""
    out = []
    for (d, m), g in runs.groupby(["d", "m"]):
        if g["C0"].nunique() < 2:
            continue
        row: dict = {"d": int(d), "m": int(m)}
        for col in ("delta", "grad", "eta"):
            est = stats.slope_estimate(g["C0"], g[col], log_x=True, log_y=True)
            row[f"slope_{col}"] = est.value
            row[f"slope_{col}_ci"] = [est.low, est.high]
        means = g.groupby("C0")[["grad", "eta", "delta"]].mean()
        row["grad2_minus_half_d"] = {f"{c:g}": float(v ** 2 - d / 2) for c, v in means["grad"].items()}
        row["eta"] = {f"{c:g}": float(v) for c, v in means["eta"].items()}
        out.append(row)
    return out


def c0_claim(df: pd.DataFrame) -> Claim:
    """Larger C0 gives larger ‖δ‖, ‖∇ₓf‖ and η at fixed (d, m) (§5.1): three fixed-effect slopes
    on log C0, each above 0 (t intervals over the networks). The per-d slopes and ‖∇ₓf‖² − d/2
    are the evidence of the η mechanism."""
    statement = ("More movement allowed gives a larger flipping perturbation, gradient and step: the "
                 "slopes of log ‖δ‖, log ‖∇ₓf‖ and log η on log C0, one intercept per (d, m), are all "
                 "above 0 (unit-sphere inputs, lazy C0 only)")
    runs = _with_net(_lazy(theory_runs(df))).dropna(subset=["delta", "grad", "eta"])
    runs = runs[(runs["delta"] > 0) & (runs["R"].isna() if "R" in runs.columns else True)]
    kept, exclusions = _trained(runs, "c0-more-robust")
    kept = kept.groupby(point_ids(kept, _config(), ("seed", "C0"))).filter(lambda g: g["C0"].nunique() >= 2)
    short = cm.too_few(int(kept["C0"].nunique()) if len(kept) else 0, 2, exclusions, what="values of C0")
    if short is not None:
        return Claim("c0-more-robust", statement, short, {}, SOURCE, excluded=exclusions,
                     control=None)
    verdict, ev = _c0_slopes(kept)
    control = None
    if {"init_delta", "init_grad", "init_eta"} <= set(kept.columns):
        cv, cev = _c0_slopes(kept.dropna(subset=["init_delta", "init_grad", "init_eta"]), "init_")
        control = cm.control_from(_SPEC["c0-more-robust"].control, cv)
        ev["control"] = cev
    ev["per_d"] = _eta_mechanism(kept)
    ev["C0"] = sorted(float(c) for c in kept["C0"].unique())
    return Claim("c0-more-robust", statement, verdict, ev, SOURCE, control=control, excluded=exclusions)


# ---------------------------------------------------------------------------------------

def claims(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    out = [ball_check(df), generalise_claim(df),
           exponent_claim(df, "grad-scaling", "grad"),
           exponent_claim(df, "eta-scaling", "eta"),
           exponent_claim(df, "delta-scaling", "delta_rel"),
           c0_claim(df)]
    if len(raw_runs(df)):
        out += [exponent_claim(df, "raw-grad-scaling", "grad", raw=True),
                exponent_claim(df, "raw-eta-scaling", "eta_rel", raw=True)]
    return out


__all__ = ["SPECS", "PREMISES", "claims", "ball_check", "generalise_claim", "exponent_claim", "c0_claim",
           "theory_runs", "raw_runs", "THEORY", "RAW_THEORY", "BANDS", "RAW_BANDS"]

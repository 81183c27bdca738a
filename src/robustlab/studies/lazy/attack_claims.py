"""The claims of ``lazy-attack`` (lazy training, NeurIPS 2022, Thm 3.1 and §5.1), declared with
the claims engine (:mod:`robustlab.claims`): kind, premises by name, and a control chosen
before looking, with the reason it must fail there.

* ``lazy-ball`` (self-check): the training loop keeps the last in-ball weights, so this checks
  the code, not the paper.
* ``lazy-generalise``: every lazy grid point generalises (mean test accuracy over its seeds
  above 0.9, each point judged); control: the same networks at initialisation.
* Thm 3.1's mechanism, three claims, each decided at every C0 inside the lazy regime
  (``across``, universal; a C0 where fewer than :data:`MIN_DS` values of d have a majority of
  lazy networks is excluded and named): ``grad-scaling`` (‖∇ₓf‖² = a·d + b with the theorem's
  a ≈ ½), ``one-step-ratio`` (η‖∇ₓf‖²/|f| ≈ 1: one linear step flips) and ``f-bounded``
  (|f| does not grow with d). Control: the rich network (:data:`~.common.RICH_INIT_SCALE` ×
  smaller first layer, C0 = :data:`~.common.NON_LAZY_C0`, premise ``rich``), the same rule;
  for ``f-bounded`` the raw-pixel lazy networks (‖x‖ grows with d, so must |f|).
* ``eta-scaling``, ``delta-scaling`` (exploratory, "closely follows"): the log–log slope on d
  of η (Θ(1/d): a band) and ‖δ‖/‖x‖ (O(d^−½): one-sided), a bounded interval, so a flat trend
  (the rich control's) reads contradicted; the free power fit is evidence only.
* ``c0-more-robust``: ‖δ‖, ‖∇ₓf‖ and η all grow with C0 (§5.1).
* ``raw-grad-scaling`` (claim) and ``raw-eta-scaling`` (exploratory): raw pixels, against what the
  theorem implies once ‖x‖ grows with d: ∇ₓf is 0-homogeneous in x (a ≈ ½ again) and η/‖x‖ keeps
  the sphere's exponent −1.

Premises per network: ``trained`` (clean test accuracy >= 0.9), ``lazy`` (input-gradient gain
‖∇ₓf‖/‖∇ₓf₀‖ <= 1.5, over every test point) for the lazy networks, ``rich`` (gain >= 2) for the
control. Excluded networks are counted, never substituted. Designs: docs/studies/lazy-training.md.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ... import claims as cm
from ... import stats
from ..base import Claim, Context
from .common import (
    LAZY,
    MIN_TRAINED,
    NON_LAZY_C0,
    PAPER,
    RICH,
    RICH_INIT_SCALE,
    LazyAttackConfig,
    describe_family,
    point_ids,
    scaled,
    trained_premise,
)

SOURCE = PAPER.cite("Thm 3.1, §5.1")
BALL_TOL = 1e-4  # offsets are measured in float32: a ratio of 1 + 1e-4 is on the ball

# Thm 3.1's mechanism (chosen from the theorem before any run; docs/studies/lazy-training.md):
# ‖∇ₓf₀‖² averages d/2 exactly on the sphere (E[1{w·x>0}‖w‖²] = d/2), and inside the ball
# ‖∇ₓf‖² = d/2 + O(C0·√d) + O(C0²): the coefficient of d stays ½, ±0.1 allowing the cross term's
# share of a finite-range fit.
COEF_BAND = (0.4, 0.6)
RATIO_BAND = (0.8, 1.25)  # η‖∇ₓf‖²/|f| ≈ 1: within a factor 1.25 either way
F_SLOPE_MAX = 0.25  # |f| = O(1): grows at most like d^¼ (half of ‖∇ₓf‖'s ½), log–log slope
# the theorem's exponents against d on the unit sphere (the figure's dashed lines) and the
# exploratory readings: η is Θ(1/d) (two-sided band), ‖δ‖/‖x‖ is O(d^−½) (one-sided)
THEORY = {"grad": 0.5, "eta": -1.0, "delta_rel": -0.5}
EXPLORE = {"eta": ((-1.3, -0.7), "inside"), "delta_rel": (-0.3, "below"), "eta_rel": ((-1.3, -0.7), "inside")}
# Q = a·d^p + b is fitted to: 1/η (η's exponent −p), 1/(‖δ‖/‖x‖)² (−p/2), ‖x‖/η (−p)
TRANSFORM = {"eta": (lambda v: 1.0 / v, -1.0), "delta_rel": (lambda v: 1.0 / v ** 2, -0.5),
             "eta_rel": (lambda v: 1.0 / v, -1.0)}
MIN_DS = 4  # distinct d a C0 (and a family) needs inside the regime

PREMISES = {"trained": trained_premise("test_acc"), "lazy": LAZY, "rich": RICH}

_RICH = {"C0": NON_LAZY_C0, "init_scale": RICH_INIT_SCALE}
_WHY_RICH = (f"the rich regime: the first layer starts {RICH_INIT_SCALE:g}× smaller and C0 = {NON_LAZY_C0:g} never "
             "binds, so the trained network's input gradient is learned (gain >= 2, its own premise; "
             "‖∇ₓf₀‖² = 10⁻⁴·d/2) rather than ∇ₓf₀ plus a d-independent term: nothing in the theorem ties it "
             "to d, so a ≈ 0 and the rule must fail there. (C0 = 1000 from the standard init is no control: "
             "SGD leaves it lazy, C0_used ~ 10-40.)")
_WHY_RICH_RATIO = (_WHY_RICH.split(":")[0] + ": its ‖∇ₓf‖ is O(1), so the flipping step is O(1) on a unit "
                   "input and crosses many activation boundaries: nothing makes one linear step exact")
_WHY_RAW_F = ("raw pixels (the theorem's ‖x‖ = 1 removed), the same lazy networks: ‖x‖ grows like d^0.6 and f "
              "is (nearly) 1-homogeneous in x, so |f| must grow with d (slope ≈ 0.6)")
C0_PLACEBO = "placebo: the lazy networks with their C0 label replaced by a seed-rank label"
_WHY_C0_PLACEBO = ("at each d, the claim's lazy networks at each true C0 are split by seed rank into as many groups "
                   "as there are C0 values and relabelled with them (one intercept per width and true C0): the label "
                   "changes nothing in a network, so theory gives slope 0 for ‖δ‖ and ‖∇ₓf‖, below ‖δ‖'s smallest "
                   "effect 0.2: the rule must fail there. (The networks at initialisation, the old control, are "
                   "identical across C0: effect 0 with the threshold at 0, never contradicted.)")
_WHY_INIT_ACC = "the same networks before training classify at chance: they cannot generalise"


def _mech(cid: str, why: str = _WHY_RICH, setting=None, kind: str = cm.CLAIM) -> cm.ClaimSpec:
    return cm.ClaimSpec(cid, kind=kind, premises=("trained", "lazy"),
                        control=cm.ControlSpec(setting or _RICH, why), min_points=MIN_DS)


SPECS = (
    cm.ClaimSpec("lazy-ball", kind=cm.SELF_CHECK),
    cm.ClaimSpec("lazy-generalise", control=cm.ControlSpec("the same networks at initialisation",
                                                           _WHY_INIT_ACC)),
    _mech("grad-scaling"),
    _mech("one-step-ratio", _WHY_RICH_RATIO),
    _mech("f-bounded", _WHY_RAW_F, {"sphere": False}),
    _mech("eta-scaling", kind=cm.EXPLORATORY),
    _mech("delta-scaling", kind=cm.EXPLORATORY),
    cm.ClaimSpec("c0-more-robust", premises=("trained", "lazy"),
                 control=cm.ControlSpec(C0_PLACEBO, _WHY_C0_PLACEBO), min_points=2),
    cm.ClaimSpec("c0-eta", kind=cm.EXPLORATORY, premises=("trained",), min_points=2),
    _mech("raw-grad-scaling"),
    _mech("raw-eta-scaling", kind=cm.EXPLORATORY),
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
    """The ``trained`` premise per network (``lazy`` is applied per C0 by :func:`_regime`)."""
    return cm.apply_premises(df, [PREMISES["trained"]], unit=["_net"])


def _with_net(df: pd.DataFrame) -> pd.DataFrame:
    """One label per network (its point and seed): the unit the premises count in; and
    ``C0_used``, the C0 of the smallest lazy ball that holds the network."""
    out = df.assign(_net=point_ids(df, _config(), ()), C0_used=df["max_offset"] * df["m"] ** 0.5)
    if "grad_gain" not in out.columns and "init_grad" in out.columns:  # records before grad_all
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

    def generalises(rows: pd.DataFrame) -> stats.Verdict:
        return _every_point(rows, "test_acc")[0]
    rows = _every_point(lazy, "test_acc")[1]
    # the control: the same networks at initialisation, their accuracy in the claim's column
    ctrl = lazy.assign(test_acc=lazy["init_test_acc"]) if "init_test_acc" in lazy.columns else None
    verdict, control = cm.judge(_SPEC["lazy-generalise"], generalises, lazy, ctrl)
    failing = [r for r in rows if r["verdict"] != stats.REPRODUCED]
    return Claim("lazy-generalise",
                 f"Every lazy network generalises: at every grid point the mean test accuracy over seeds "
                 f"is above {MIN_TRAINED}",
                 verdict, {"points": len(rows), "points_failing": failing[:10],
                           "min_single_network_test_acc": float(lazy["test_acc"].min())},
                 SOURCE, control=control)


# ---------------------------------------------------------------------------------------
# the lazy regime, measured on each network

def _regime(lazy: pd.DataFrame) -> tuple[dict[str, pd.DataFrame], dict[str, str], cm.Exclusion, dict]:
    """Per C0, the trained networks the theorem covers. A value of d *qualifies* at a C0 when at
    least half of its networks (every width and seed) meet ``lazy``; a C0 with fewer than
    :data:`MIN_DS` qualifying values is outside the regime (returned with its reason). At a C0
    inside it, the networks of the qualifying d that meet ``lazy`` are kept (the rest counted)."""
    per, outside, table = {}, {}, {}
    total = dropped = 0
    for c0, g in lazy.groupby("C0"):
        key = f"{c0:g}"
        ok = pd.Series(LAZY.mask(g), index=g.index)
        share = ok.groupby(g["d"]).mean()
        qual = sorted(int(d) for d, v in share.items() if v >= 0.5)
        table[key] = {"lazy_share_by_d": {int(d): round(float(v), 3) for d, v in share.items()},
                      "d_qualifying": qual}
        total += g["_net"].nunique()
        if len(qual) < MIN_DS:
            outside[key] = (f"lazy: {LAZY.description} for at least half the networks at {len(qual)} of "
                            f"{len(share)} values of d (needs {MIN_DS})")
            dropped += g["_net"].nunique()
            continue
        keep = g[g["d"].isin(qual) & ok]
        dropped += g["_net"].nunique() - keep["_net"].nunique()
        per[key] = keep
    excl = cm.Exclusion("lazy", dropped, total, f"{LAZY.description}, per network; every network of a d "
                                                "that does not qualify, and of a C0 outside the regime")
    return per, outside, excl, table


def _rich(kept: pd.DataFrame) -> tuple[pd.DataFrame | None, list[cm.Exclusion]]:
    """The rich control's trained networks that meet its own premise (None: no control in the run)."""
    rows = _control_rows(kept)
    if rows.empty:
        return None, []
    out, excl = cm.apply_premises(rows, [RICH], unit=["_net"])
    return out, excl


def _families(rows: pd.DataFrame) -> list[pd.DataFrame]:
    """The runs grouped so that each group differs only in d (and the seed): one per width."""
    if rows.empty:
        return []
    return [g for _, g in rows.groupby(point_ids(rows, _config(), ("seed", "size", "dim")))]


def _every_width(one):
    """A rule that decides ``one`` on every width's family; all must hold."""
    def rule(rows: pd.DataFrame) -> stats.Verdict:
        parts = [one(g) for g in _families(rows)]
        if not parts:
            return cm.too_few(0, MIN_DS, what="values of d")
        return stats.combine(parts, reason="every width must hold")
    rule.__name__ = one.__name__
    return rule


def _grad_sq(g: pd.DataFrame) -> np.ndarray:
    """Per network, the mean over its correctly classified test points of ‖∇ₓf‖² (= mean² + std²)."""
    return (g["grad"] ** 2 + g["grad_std"].fillna(0.0) ** 2).to_numpy(float) if "grad_std" in g.columns \
        else (g["grad"] ** 2).to_numpy(float)


def coefficient(g: pd.DataFrame) -> stats.Verdict:
    """``‖∇ₓf‖² = a·d + b`` over one family's networks: OLS slope a (t interval) inside COEF_BAND."""
    nd = int(g["d"].nunique())
    if nd < MIN_DS:
        return cm.too_few(nd, MIN_DS, what="values of d")
    est = stats.slope_estimate(g["d"], _grad_sq(g))
    return stats.decide(est, threshold=COEF_BAND, side="inside", seeds=int(g["seed"].nunique()))


def one_step_ratio(g: pd.DataFrame) -> stats.Verdict:
    """At every d of one family: mean over networks of η‖∇ₓf‖²/|f| (t interval) inside RATIO_BAND."""
    g = g.dropna(subset=["step_ratio"]) if "step_ratio" in g.columns else g.iloc[0:0]
    parts = [stats.decide(stats.mean_estimate(h["step_ratio"].to_numpy(float)), threshold=RATIO_BAND,
                          side="inside", seeds=int(h["seed"].nunique())) for _, h in g.groupby("d")]
    if not parts:
        return cm.too_few(0, 1, what="networks with a one-step ratio")
    return stats.combine(parts, reason="every d must hold")


def f_bounded(g: pd.DataFrame) -> stats.Verdict:
    """|f| does not grow with d: the log–log OLS slope of |f| on d (t interval) below F_SLOPE_MAX."""
    g = g.dropna(subset=["abs_f"])
    nd = int(g["d"].nunique())
    if nd < 3:
        return cm.too_few(nd, 3, what="values of d")
    est = stats.slope_estimate(g["d"], g["abs_f"], log_x=True, log_y=True)
    return stats.decide(est, threshold=F_SLOPE_MAX, side="below", seeds=int(g["seed"].nunique()))


def _exponent(sub: pd.DataFrame, value: str) -> stats.Estimate:
    """The sign-aware exponent of the free fit Q = a·d^p + b (evidence beside the rule, not the rule)."""
    f, k = TRANSFORM[value]
    return scaled(stats.power_exponent(sub["d"], f(sub[value].to_numpy(float))), k, f"exponent of {value} against d")


def _log_slope(sub: pd.DataFrame, value: str) -> stats.Estimate:
    """The log–log OLS slope of ``value`` on d over the networks (t interval: always bounded, so a
    flat or rising quantity reads a slope near 0 or above it, never an infinite interval)."""
    return stats.slope_estimate(sub["d"], sub[value], log_x=True, log_y=True)


def _exploratory(value: str):
    """The exploratory reading of ``value``'s exponent against d: the log–log slope of the quantity
    itself (:func:`_log_slope`) against EXPLORE's band or bound. (Until lazy2 the sign-aware power
    fit was the rule: its interval is unbounded for a flat quantity, so a flat trend, the rich
    control's, could never read contradicted.)"""
    threshold, side = EXPLORE[value]

    def one(g: pd.DataFrame) -> stats.Verdict:
        g = g.dropna(subset=[value])
        g = g[g[value] > 0]
        nd = int(g["d"].nunique())
        if nd < MIN_DS:
            return cm.too_few(nd, MIN_DS, what="values of d")
        return stats.decide(_log_slope(g, value), threshold=threshold, side=side, seeds=int(g["seed"].nunique()))
    one.__name__ = f"log_slope_of_{value}"
    return one


RULES = {"grad-scaling": coefficient, "raw-grad-scaling": coefficient, "one-step-ratio": one_step_ratio,
         "f-bounded": f_bounded, "eta-scaling": _exploratory("eta"), "delta-scaling": _exploratory("delta_rel"),
         "raw-eta-scaling": _exploratory("eta_rel")}


def _fit_row(g: pd.DataFrame) -> dict:
    """The numbers behind every mechanism claim, for one family (the per-C0 table)."""
    row: dict = {**describe_family(g, ("m", "C0", "init_scale")), "networks": int(g["_net"].nunique()),
                 "d": sorted(int(x) for x in g["d"].unique())}
    if g["d"].nunique() >= 2:
        a, b = np.polyfit(g["d"].to_numpy(float), _grad_sq(g), 1)
        est = stats.slope_estimate(g["d"], _grad_sq(g))
        row.update(a=float(a), a_ci=[est.low, est.high], b=float(b))
        for value in ("eta", "delta_rel"):
            if value in g.columns and (g[value] > 0).sum() >= 2:
                est = _log_slope(g[g[value] > 0], value)
                row[f"{value}_log_slope"] = [est.value, est.low, est.high]
    if "step_ratio" in g.columns and g["step_ratio"].notna().any():
        r = g.groupby("d")["step_ratio"].mean()
        row["ratio_by_d"] = {int(d): round(float(v), 4) for d, v in r.items()}
    if g["abs_f"].notna().any():
        row["abs_f_by_d"] = {int(d): round(float(v), 4) for d, v in g.groupby("d")["abs_f"].mean().items()}
    if "grad_gain" in g.columns:
        row["gain"] = {"median": float(g["grad_gain"].median()), "max": float(g["grad_gain"].max())}
    if "weight_change" in g.columns and g["weight_change"].notna().any():
        row["weight_change_max"] = float(g["weight_change"].max())
    return row


def mechanism_table(df: pd.DataFrame, *, raw: bool = False) -> list[dict]:
    """Per (C0, m) — the rich control last — the fitted a and b of ‖∇ₓf‖² = a·d + b, the one-step
    ratio and |f| per d, the gradient gain, and how many trained networks meet ``lazy``."""
    runs = _with_net(raw_runs(df) if raw else theory_runs(df))
    kept, _ = _trained(runs, "grad-scaling")
    out = []
    fams = sorted(_families(_lazy(kept)), key=lambda f: (float(f["C0"].iloc[0]), int(f["m"].iloc[0])))
    for fam in fams + _families(_control_rows(kept)):
        row = _fit_row(fam)
        row["lazy_premise"] = f"{int(LAZY.mask(fam).sum())}/{len(fam)}"
        row["rich_premise"] = f"{int(RICH.mask(fam).sum())}/{len(fam)}"
        out.append(row)
    return out


def mechanism_claim(df: pd.DataFrame, cid: str, statement: str, *, raw: bool = False) -> Claim:
    """One part of Thm 3.1's mechanism (or an exploratory reading), decided at every C0 inside the
    lazy regime (``across``, universal: C0 values outside are excluded and named) with the rule
    :data:`RULES` ``[cid]``; its control: the same rule on the control's rows."""
    spec = _SPEC[cid]
    rule = _every_width(RULES[cid])
    runs = _with_net(raw_runs(df) if raw else theory_runs(df))
    if "eta_rel" in RULES[cid].__name__:
        runs = runs.assign(eta_rel=runs["eta"] / runs["x_norm"])
    kept, exclusions = _trained(runs, cid)
    per, outside, lazy_excl, table = _regime(_lazy(kept))
    if cid == "f-bounded":  # the theorem's premise ‖x‖ = 1 removed: raw pixels, lazy networks
        raw = _with_net(raw_runs(df))
        raw_kept, _ = _trained(raw, cid)
        ctrl = cm.apply_premises(_lazy(raw_kept), [LAZY], unit=["_net"])[0] if len(raw_kept) else None
        ctrl_excl: list[cm.Exclusion] = []
    else:
        ctrl, ctrl_excl = _rich(kept)
    verdicts, control = {}, None
    for key, rows in per.items():
        verdicts[key], control = cm.judge(spec, rule, rows, ctrl)
    if not per:
        control = cm.judge(spec, rule, runs.iloc[0:0], ctrl)[1]
    if verdicts or outside:
        verdict, across_rec = cm.across("C0", verdicts, outside=outside)
    else:
        verdict, across_rec = cm.too_few(0, MIN_DS, exclusions, what="lazy C0 values"), None
    evidence = {"rule": RULES[cid].__doc__.split("\n")[0] if RULES[cid].__doc__ else RULES[cid].__name__,
                "per_C0": {key: [_fit_row(f) for f in _families(rows)] for key, rows in per.items()},
                "regime": table, "outside": outside}
    if ctrl is not None:
        evidence["control_fits"] = [_fit_row(f) for f in _families(ctrl)]
        evidence["control_excluded"] = [e.to_dict() for e in ctrl_excl]
    if cid == "raw-eta-scaling":
        evidence["eta_itself"] = _eta_itself(pd.concat(list(per.values())) if per else _lazy(kept).iloc[0:0])
    return Claim(cid, statement, verdict, evidence, SOURCE if spec.kind == cm.CLAIM else "this study's reading of " + SOURCE,
                 kind=spec.kind, control=control, excluded=[*exclusions, lazy_excl], across=across_rec)


def _eta_itself(runs: pd.DataFrame) -> list[dict]:
    """Beside raw-eta's reading, per width: η's own exponent as the theorem implies it, the
    exponent of ‖x‖ on d (a property of the pixels, no network in it) plus that of η/‖x‖."""
    out = []
    for sub in _families(runs.dropna(subset=["x_norm", "eta_rel"])):
        if sub["d"].nunique() < MIN_DS:
            continue
        x = stats.slope_estimate(sub["d"], sub["x_norm"], log_x=True, log_y=True)
        rel = _exponent(sub, "eta_rel")
        out.append({**describe_family(sub, ("m", "C0")), "x_norm_exponent": x.value,
                    "eta_rel_exponent": rel.value, "eta_exponent_implied": x.value + rel.value,
                    "abs_f_exponent": (stats.slope_estimate(sub["d"], sub["abs_f"], log_x=True, log_y=True).value
                                       if sub["abs_f"].notna().all() else None)})
    return out


_STATEMENTS = {
    "grad-scaling": (f"‖∇ₓf‖² grows like d/2 (Thm 3.1: ‖∇ₓf‖ ≈ √(d/2)): in ‖∇ₓf‖² = a·d + b, a lies in "
                     f"[{COEF_BAND[0]:g}, {COEF_BAND[1]:g}] for every width, at every C0 inside the lazy regime "
                     "(unit-sphere inputs)"),
    "one-step-ratio": (f"One linear step flips the prediction (Thm 3.1): η‖∇ₓf‖²/|f| lies in [{RATIO_BAND[0]:g}, "
                       f"{RATIO_BAND[1]:g}] at every d and width, at every C0 inside the lazy regime (unit sphere)"),
    "f-bounded": (f"|f(x)| = O(1) (Thm 3.1): the log–log slope of |f| on d is below {F_SLOPE_MAX:g} for every "
                  "width, at every C0 inside the lazy regime (unit sphere)"),
    "eta-scaling": ("exploratory (the paper's tightness remark): η closely follows d^−1: the log–log slope of η on d "
                    "lies in [−1.3, −0.7] for every width, at every lazy C0 (unit sphere)"),
    "delta-scaling": ("exploratory: ‖δ‖/‖x‖ = O(d^−1/2) closely followed: the log–log slope of ‖δ‖/‖x‖ on d is "
                      "below −0.3 for every width, at every lazy C0 (unit sphere)"),
    "raw-grad-scaling": (f"On raw pixels, where ‖x‖ grows with d, ∇ₓf does not scale with ‖x‖: ‖∇ₓf‖² = a·d + b "
                         f"with a in [{COEF_BAND[0]:g}, {COEF_BAND[1]:g}] for every width, at every lazy C0"),
    "raw-eta-scaling": ("exploratory: on raw pixels η/‖x‖ keeps the sphere's η ∝ d^−1 (η ∝ ‖x‖/d): the log–log "
                        "slope of η/‖x‖ on d lies in [−1.3, −0.7] for every width, at every lazy C0"),
}


def exponent_claim(df: pd.DataFrame, cid: str, value: str | None = None, *, raw: bool = False) -> Claim:
    """The claim ``cid`` (kept for callers of the old name; ``value`` is implied by the id)."""
    return mechanism_claim(df, cid, _STATEMENTS[cid], raw=raw)


# ---------------------------------------------------------------------------------------
# C0

C0_CLAIMED = (("delta", "‖δ‖"), ("grad", "‖∇ₓf‖"))
# The smallest effect of interest of each slope on log C0 (lazy2, chosen before running it): ‖δ‖ at
# least 15 % larger per doubling of the ball (2^0.2 = 1.149) — "more robust" — so that a setting
# without the effect (true slope 0) can read contradicted: at 0 no control could ever fail, and the
# interval half-width of a true-0 slope at the quick preset's size is ≈ 0.13. ‖∇ₓf‖'s stays 0: its
# C0 slope is b(C0)/(d/2 + b(C0)) -> 0 for d ≫ C0², a vanishing effect inside the theorem's regime.
C0_MIN_SLOPE = {"delta": 0.2, "grad": 0.0}


def _c0_slopes(rows: pd.DataFrame, cols=C0_CLAIMED) -> tuple[stats.Verdict, dict]:
    """Slopes of the log of each of ``cols`` on log C0, one intercept per family (fixed effects:
    every width at the same d; with a placebo, per (width, true C0) too); each must be above its
    :data:`C0_MIN_SLOPE` (0 for a column not named there)."""
    labels = point_ids(rows, _config(), ("seed", "C0"))
    if "_true_C0" in rows.columns:  # the placebo: only the label varies inside a group
        labels = labels + "|" + rows["_true_C0"].map(str)
    parts, ev = [], {}
    for col, name in cols:
        est = stats.slope_estimate(rows["C0"], rows[col], log_x=True, log_y=True, groups=labels)
        v = stats.decide(est, threshold=C0_MIN_SLOPE.get(col, 0.0), side="above", seeds=int(rows["seed"].nunique()))
        parts.append(dataclasses.replace(v, reason=f"{name}: {v.reason}" if v.reason else name))
        ev[col] = {"slope": est.value, "ci": [est.low, est.high], "verdict": v.verdict}
    names = " and ".join(n for _, n in cols)
    return stats.combine(parts, reason=f"{names} must grow with C0"), ev


def c0_rule(rows: pd.DataFrame) -> stats.Verdict:
    """At one d: the slopes of log ‖δ‖ and log ‖∇ₓf‖ on log C0 (fixed effects per width), above
    0.2 and 0 (:data:`C0_MIN_SLOPE`)."""
    if rows.empty or rows["C0"].nunique() < 2:
        return cm.too_few(int(rows["C0"].nunique()) if len(rows) else 0, 2, what="values of C0")
    return _c0_slopes(rows)[0]


def _c0_runs(df: pd.DataFrame) -> tuple[pd.DataFrame, list[cm.Exclusion]]:
    runs = _with_net(_lazy(theory_runs(df))).dropna(subset=["delta", "grad", "eta"])
    runs = runs[(runs["delta"] > 0) & (runs["R"].isna() if "R" in runs.columns else True)]
    kept, exclusions = _trained(runs, "c0-more-robust")
    # families (d, m, ...) that vary C0
    return kept.groupby(point_ids(kept, _config(), ("seed", "C0"))).filter(lambda g: g["C0"].nunique() >= 2), exclusions


def _eta_mechanism(runs: pd.DataFrame) -> list[dict]:
    """Per (d, m): the slope on log C0 of log ‖δ‖, log ‖∇ₓf‖ and log η, and per C0 ‖∇ₓf‖² − d/2,
    η and the median gain: at small d the d-independent part of ‖∇ₓf‖² (O(C0²)) grows faster with
    C0 than ‖δ‖ does (gain > 1.5: outside the lazy regime), so η = ‖δ‖/‖∇ₓf‖ can fall."""
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
        if "grad_gain" in g.columns:
            row["gain_median"] = {f"{c:g}": float(v) for c, v in g.groupby("C0")["grad_gain"].median().items()}
        out.append(row)
    return out


def c0_placebo(rows: pd.DataFrame, c0s: list[float]) -> pd.DataFrame:
    """The within-C0 placebo of :func:`c0_claim`: the networks at each true C0 (and width, d) split
    by seed rank into ``len(c0s)`` groups relabelled with the values ``c0s``; ``_true_C0`` keeps the
    real one (an intercept per true C0 in the fit). The label changes nothing in a network: true
    slope 0."""
    if rows.empty:
        return rows.assign(_true_C0=[])
    family = point_ids(rows, _config(), ("seed",))  # (width, d, true C0, ...)
    rank = rows.groupby(family)["seed"].rank(method="dense").astype(int) - 1
    labels = np.asarray(sorted(c0s), float)[rank.to_numpy() % len(c0s)]
    return rows.assign(_true_C0=rows["C0"], C0=labels)


def c0_claim(df: pd.DataFrame) -> Claim:
    """Larger C0 gives larger ‖δ‖ and ‖∇ₓf‖ at fixed d (§5.1), decided at every d (``across``,
    universal) on the lazy networks (``lazy`` per network); a d where fewer than two values of C0
    keep lazy networks is excluded and named. Control (lazy2): a within-C0 placebo, the same rule
    on the same lazy networks with their C0 label replaced by a seed-rank label
    (:func:`c0_placebo`): theory says slope 0 there, below ‖δ‖'s smallest effect 0.2. (Until lazy2
    the control was the networks at initialisation: identical across C0, effect 0, and with the
    threshold at 0 it could never read contradicted.)"""
    cid = "c0-more-robust"
    statement = ("More movement allowed gives a larger flipping perturbation and gradient: at every d, the "
                 "slope of log ‖δ‖ on log C0 (one intercept per width) is above 0.2 (≥ 15 % more per doubling) "
                 "and that of log ‖∇ₓf‖ above 0, over the lazy networks (unit-sphere inputs)")
    kept, exclusions = _c0_runs(df)
    lazy_ok = pd.Series(LAZY.mask(kept), index=kept.index) if len(kept) else pd.Series(dtype=bool)
    lazy = kept[lazy_ok] if len(kept) else kept
    lexcl = cm.Exclusion("lazy", int(kept["_net"].nunique() - lazy["_net"].nunique()) if len(kept) else 0,
                         int(kept["_net"].nunique()) if len(kept) else 0, LAZY.description)
    if kept.empty:
        return Claim(cid, statement, cm.too_few(0, 2, exclusions, what="values of C0"), {}, SOURCE,
                     excluded=exclusions)
    cells: dict[str, tuple[pd.DataFrame, list[float]]] = {}
    for d in sorted(kept["d"].unique()):
        share = lazy_ok[kept["d"] == d].groupby(kept.loc[kept["d"] == d, "C0"]).mean()
        c0s = sorted(float(c) for c, v in share.items() if v >= 0.5)
        cells[f"{int(d)}"] = (lazy[(lazy["d"] == d) & lazy["C0"].isin(c0s)], c0s)
    placebos = [c0_placebo(rows, c0s) for rows, c0s in cells.values() if len(c0s) >= 2]
    ctrl = pd.concat(placebos) if placebos else None
    per, outside, control, ev = {}, {}, None, {}
    for key, (rows, c0s) in cells.items():
        # a (C0, d) cell is inside the regime when at least half its networks are lazy (as in _regime)
        if len(c0s) < 2:
            outside[key] = (f"lazy: {LAZY.description} for at least half the networks at {len(c0s)} value(s) "
                            f"of C0 here ({', '.join(f'{c:g}' for c in c0s) or 'none'})")
            continue
        per[key], control = cm.judge(_SPEC[cid], c0_rule, rows, ctrl)
        ev[key] = _c0_slopes(rows)[1]
    if not per:
        verdict, across_rec = cm.across("d", {}, outside=outside)
    else:
        verdict, across_rec = cm.across("d", per, outside=outside)
    evidence = {"per_d_slopes": ev, "C0": sorted(float(c) for c in kept["C0"].unique()), "outside": outside}
    if ctrl is not None and len(ctrl):
        evidence["control"] = _c0_slopes(ctrl)[1]
    return Claim(cid, statement, verdict, evidence, SOURCE, control=control, excluded=[*exclusions, lexcl],
                 across=across_rec)


def c0_eta_claim(df: pd.DataFrame) -> Claim:
    """Exploratory: η grows with C0 at every d (the paper's §5.1 figure), over every trained network
    of the ball (Def. 2.1, no gain premise), decided per d (``across``); the mechanism per (d, m)."""
    cid = "c0-eta"
    statement = ("exploratory (the paper's §5.1 figure, and the issue's small-d finding): the step η grows with "
                 "C0 at every d — slope of log η on log C0 above 0 — over every trained network inside its "
                 "ball (no gain premise); at small d the C0-dependent part of ‖∇ₓf‖² can outgrow ‖δ‖")
    kept, exclusions = _c0_runs(df)
    per = {f"{int(d)}": _c0_slopes(g, (("eta", "η"),))[0] for d, g in kept.groupby("d")} if len(kept) else {}
    verdict, across_rec = cm.across("d", per) if per else (cm.too_few(0, 2, exclusions, what="values of C0"), None)
    return Claim(cid, statement, verdict, {"per_d": _eta_mechanism(kept) if len(kept) else []},
                 "this study's reading of " + SOURCE, kind=cm.EXPLORATORY, excluded=exclusions, across=across_rec)


# ---------------------------------------------------------------------------------------

def claims(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    out = [ball_check(df), generalise_claim(df),
           *(exponent_claim(df, cid) for cid in ("grad-scaling", "one-step-ratio", "f-bounded",
                                                  "eta-scaling", "delta-scaling")),
           c0_claim(df), c0_eta_claim(df)]
    if len(raw_runs(df)):
        out += [exponent_claim(df, cid, raw=True) for cid in ("raw-grad-scaling", "raw-eta-scaling")]
    return out


__all__ = ["SPECS", "PREMISES", "RULES", "claims", "ball_check", "generalise_claim", "exponent_claim",
           "mechanism_claim", "mechanism_table", "c0_claim", "c0_eta_claim", "theory_runs", "raw_runs", "THEORY", "COEF_BAND",
           "RATIO_BAND", "F_SLOPE_MAX"]

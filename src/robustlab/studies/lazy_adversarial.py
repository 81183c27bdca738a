"""Study ``lazy-adversarial``: adversarial training cannot make a lazy network robust
(Seed 001, §5.2 and Alg. 1).

Each point adversarially trains E seeds of the two-layer network with every neuron projected
back onto its ball after each SGD step (``C₀/√m``, or an absolute radius ``R``), then
measures clean and robust test accuracy under the same ℓ2 PGD. Two grids:

* robust accuracy against ``ε`` for several ``d`` inside the lazy ball — the theorem says
  a perturbation of size ``O(1/√d)`` always suffices, so the accuracy should collapse once
  ``ε`` passes a threshold that shrinks like ``d^{−1/2}``;
* robust accuracy against ``R`` for several widths at fixed ``d`` and ``ε`` — once the
  neurons may move a little beyond the lazy radius, adversarial training should succeed.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import torch

from .. import stats
from ..config import param
from ..metrics import accuracy, neuron_distance
from ..models.ensemble import Flat, fold
from ..report.plots import COLORS, fit_power_law, label_panels, save, subplots, theory_line
from ..train.lazy import adversarial_examples, train_lazy_adversarial
from ..utils import make_generator, resolve_device
from ._lazy_common import (
    LazyConfig,
    build_model,
    crossing,
    describe_family,
    input_bounds,
    load_data,
    neuron_params,
    point_ids,
    radius_of,
    work,
)
from .base import Claim, Context, Figure, Preset, Study

SOURCE = "Seed 001 (Adversarial robustness is at odds with lazy training), §5.2, Alg. 1"

SLOPE_BAND = (-0.7, -0.3)  # fitted slope of log ε½ against log d (theory −1/2)
MAX_WIDTH = 4.0  # a "sharp" change: from 75 % to 25 % (or 25 % to 75 %) within this factor


@dataclasses.dataclass(frozen=True)
class LazyAdversarialConfig(LazyConfig):
    study = "lazy-adversarial"
    eps: float = param(0.1, "ℓ2 budget ε of the PGD used for training and testing", ge=0)
    attack_steps: int = param(100, "PGD steps (Seed 001: 100)", ge=1)
    attack_step_div: float = param(40.0, "PGD step size ε/attack_step_div (Seed 001: ε/40)", gt=0)
    test_attack_steps: int | None = param(None, "PGD steps at test time (default: attack_steps)", ge=1)
    lr: float = param(0.01, "SGD learning rate (Seed 001: 0.01)", gt=0)
    batch_size: int = param(32, "SGD mini-batch size (Seed 001: 32)", ge=1)
    patience: int = param(20, "stop after this many epochs without a robust-training-accuracy gain", ge=1)
    min_gain: float = param(1e-4, "the gain that counts as an improvement", ge=0)
    epochs: int = param(1000, "at most this many epochs", ge=1)


# ---------------------------------------------------------------------------------------
# running a point

def run_points(cfgs: list[LazyAdversarialConfig], device: str = "cpu") -> list:
    """Adversarially train the seeds of one point as an ensemble; robust test accuracy."""
    base = cfgs[0]
    dev = resolve_device(device)
    data = load_data(base).to(dev)
    E, d = len(cfgs), data.d
    model = build_model(cfgs, d, dev)
    r = radius_of(base)
    bounds = input_bounds(base)
    step = base.eps / base.attack_step_div
    log = train_lazy_adversarial(
        model, data.x_train, data.y_train, radius=r, eps=base.eps,
        generators=[make_generator(c.seed, "lazy-order") for c in cfgs],
        attack_steps=base.attack_steps, attack_step_size=step, bounds=bounds, lr=base.lr,
        batch_size=base.batch_size, patience=base.patience, min_gain=base.min_gain,
        max_epochs=base.epochs)
    model.eval()
    flat = Flat(model, E).eval()
    steps = base.test_attack_steps or base.attack_steps
    x_adv = adversarial_examples(model, data.x_test, data.y_test, eps=base.eps, steps=steps,
                                 step_size=base.eps * base.attack_steps / (base.attack_step_div * steps),
                                 bounds=bounds)  # same path length ε·steps/div as in training
    yt = data.y_test.repeat(E)
    clean = accuracy(flat, fold(data.x_test.expand(E, -1, -1)), yt, per_sample=True).view(E, -1)
    robust = accuracy(flat, fold(x_adv), yt, per_sample=True).view(E, -1) & clean
    with torch.no_grad():
        offsets = neuron_distance(*neuron_params(model), per_neuron=True)  # (E, m)
    final = log.history[-1]
    lazy_r = base.C0 / math.sqrt(base.m)
    return [[{
        "d": d, "radius": r, "lazy_radius": lazy_r, "radius_over_lazy": r / lazy_r,
        "epochs_run": float(log.epochs[e]), "stopped": bool(log.stopped[e]),
        "offset_ratio": float(offsets[e].max() / r),
        "train_loss": float(final["train_loss"][e]),
        "robust_train_acc": float(final["robust_train_acc"][e]),
        "clean_acc": float(clean[e].float().mean()),
        "robust_acc": float(robust[e].float().mean()),
    }] for e in range(E)]


# ---------------------------------------------------------------------------------------
# claims
#
# Each claim is a verdict (robustlab.stats) on an effect with a 95 % interval over seeds. The
# ε claims rest on two premises, recorded as conditions: every neuron stayed inside its lazy
# ball, and the networks are trained classifiers (clean accuracy at the smallest ε); where a
# premise fails the claim is "not applicable". The claims are split so that each verdict is
# about one statement: where the drop is sharp, how the drop's ε scales with d, and, for the
# radius sweep, low robustness at small R, high at large R, and a sharp rise between.

BALL_TOL = 1e-4  # offsets are measured in float32: a ratio of 1 + 1e-4 is on the ball
MIN_CLEAN = 0.9  # premise: clean accuracy (smallest ε) of a trained classifier; the runs reach ~0.96


def _with_relative(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``rel``: robust accuracy relative to the clean accuracy of the same network."""
    df = df.copy()
    df["rel"] = np.where(df["clean_acc"] > 0, df["robust_acc"] / df["clean_acc"].clip(lower=1e-12), 0.0)
    return df


def _families(df: pd.DataFrame, axes: tuple[str, ...]) -> list[pd.DataFrame]:
    """Runs grouped so that each group differs only along ``axes`` (and the seed)."""
    if df.empty:
        return []
    return [g for _, g in df.groupby(point_ids(df, LazyAdversarialConfig, ("seed", *axes)))]


MIN_TRAINED_FRACTION = 2 / 3  # below this share of trained seed curves at some d, the claim is not applicable


def _untrained(runs: pd.DataFrame) -> set[tuple[int, int]]:
    """(d, seed) curves whose network at the smallest ε is not a trained classifier (clean
    accuracy < MIN_CLEAN): the premise fails for that curve, so it is left out of the estimates
    (neither for nor against the claim). Larger ε are not judged: a collapse there is the effect."""
    first = runs[runs["eps"] == runs.groupby("d")["eps"].transform("min")]
    bad = first[first["clean_acc"] < MIN_CLEAN]
    return {(int(d), int(s)) for d, s in zip(bad["d"], bad["seed"])}


def _eps_conditions(runs: pd.DataFrame) -> list[stats.Condition]:
    worst = float(runs["offset_ratio"].max())
    bad = _untrained(runs)
    per_d = runs.groupby("d")["seed"].nunique()
    share = min((1 - sum(1 for d2, _ in bad if d2 == d) / n) for d, n in per_d.items()) if len(per_d) else 0.0
    return [
        stats.Condition("lazy regime reached", bool(worst <= 1 + BALL_TOL),
                        f"max ‖θ_s − θ_s(0)‖ / (C0/√m) = {worst:.4g} (<= 1 required)"),
        stats.Condition("networks trained", bool(share >= MIN_TRAINED_FRACTION),
                        f"{len(bad)} seed curve(s) left out for clean accuracy < {MIN_CLEAN} at the smallest ε; "
                        f"lowest share of trained curves at one d: {share:.2g} (>= {MIN_TRAINED_FRACTION:.2g} "
                        "required)"),
    ]


def _seed_curves(runs: pd.DataFrame):
    """(d, seed, ε array, robust/clean array) per trained seed curve, ε > 0 only, sorted by ε."""
    bad = _untrained(runs)
    cur = _with_relative(runs[runs["eps"] > 0]).sort_values(["d", "seed", "eps"])
    for (d, seed), g in cur.groupby(["d", "seed"]):
        if (int(d), int(seed)) not in bad:
            yield int(d), int(seed), g["eps"].to_numpy(float), g["rel"].to_numpy(float)


def _sharp_family(runs: pd.DataFrame) -> tuple[stats.Verdict, dict]:
    """Per d: mean over seeds of log(ε₂₅/ε₇₅) (each seed's curve, interpolated in log ε) below
    log MAX_WIDTH, t interval over seeds; all d must hold. A seed whose curve does not fall from
    above 75 % to below 25 % inside the ε grid gives no width (counted in the evidence)."""
    widths: dict[int, list[float]] = {}
    total: dict[int, int] = {}
    for d, _seed, xs, ys in _seed_curves(runs):
        total[d] = total.get(d, 0) + 1
        e75, e25 = crossing(xs, ys, 0.75), crossing(xs, ys, 0.25)
        if len(ys) and ys[0] > 0.75 and np.isfinite(e25) and np.isfinite(e75):
            widths.setdefault(d, []).append(math.log(e25 / e75))
    conds = _eps_conditions(runs)
    parts, per_d = [], []
    for d in sorted(total):
        w = widths.get(d, [])
        est = stats.mean_estimate(w)
        why = "" if len(w) == total[d] else f"the drop lies inside the ε grid for {len(w)} of {total[d]} seeds"
        v = stats.decide(est, threshold=math.log(MAX_WIDTH), side="below", conditions=conds, reason=why)
        parts.append(v)
        per_d.append({"d": d, "log_width": est.value, "log_width_ci": [est.low, est.high],
                      "width_ratio": math.exp(est.value) if np.isfinite(est.value) else None,
                      "seeds_with_width": f"{len(w)}/{total[d]}", "verdict": v.verdict})
    if not parts:  # no trained seed curve at any d
        return stats.decide(None, threshold=math.log(MAX_WIDTH), side="below", conditions=conds,
                            reason="no seed curve to measure"), {"per_d": per_d}
    return stats.combine(parts, reason="every d must hold"), {"per_d": per_d}


def _scaling_family(runs: pd.DataFrame) -> tuple[stats.Verdict, dict]:
    """Log–log OLS slope of the per-seed halving ε on d inside SLOPE_BAND, t interval; a seed
    whose curve starts at or below 50 % or never halves inside the grid gives no point."""
    pts, total = [], 0
    for d, _seed, xs, ys in _seed_curves(runs):
        total += 1
        e = crossing(xs, ys, 0.5)
        if np.isfinite(e) and len(ys) and ys[0] > 0.5:
            pts.append((d, e))
    evidence: dict = {"seed_eps_half": [[d, e] for d, e in pts], "seed_curves_with_halving_eps": f"{len(pts)}/{total}",
                      "untrained_curves_left_out": sorted([d, s] for d, s in _untrained(runs))}
    if len({d for d, _ in pts}) < 3:
        evidence["problem"] = "the halving ε is defined for fewer than 3 values of d"
        return stats.decide(None, threshold=SLOPE_BAND, side="inside", conditions=_eps_conditions(runs),
                            reason=evidence["problem"]), evidence
    est = stats.slope_estimate([d for d, _ in pts], [e for _, e in pts], log_x=True, log_y=True)
    evidence.update({"slope": est.value, "slope_ci": [est.low, est.high], "n": est.n,
                     "per_d_mean_eps_half_times_sqrt_d": {
                         int(d): float(np.mean([e for dd, e in pts if dd == d]) * math.sqrt(d))
                         for d in sorted({d for d, _ in pts})}})
    v = stats.decide(est, threshold=SLOPE_BAND, side="inside", conditions=_eps_conditions(runs),
                     seeds=max(1, round(len(pts) / max(1, len({d for d, _ in pts})))))
    return v, evidence


def _eps_claim(df: pd.DataFrame, cid: str, statement: str, judge, base_ev: dict) -> Claim:
    lazy = df[df["R"].isna()] if "R" in df.columns else df
    fams = [f for f in _families(lazy, ("eps", "size", "dim")) if f["d"].nunique() >= 3]
    if not fams:
        problem = "no ε grid with 3 or more values of d"
        return Claim(cid, statement, stats.Verdict(stats.INCONCLUSIVE, reason=problem),
                     {**base_ev, "problem": problem}, SOURCE)
    results = [judge(f) for f in fams]
    if len(results) == 1:
        verdict, evidence = results[0]
        evidence = {**base_ev, **evidence, "max_offset_over_radius": float(fams[0]["offset_ratio"].max())}
    else:
        verdict = stats.combine([r[0] for r in results], reason="every family must hold")
        evidence = {**base_ev, "families": [
            {**describe_family(f, ("m", "C0", "lr", "bias")), "verdict": r[0].verdict, **r[1]}
            for f, r in zip(fams, results)]}
    return Claim(cid, statement, verdict, evidence, SOURCE)


def eps_sharp_claim(df: pd.DataFrame) -> Claim:
    """Claim 5a: inside the lazy ball robust accuracy collapses sharply in ε (see :func:`_sharp_family`)."""
    return _eps_claim(df, "eps-sharp-drop",
                      "Inside the lazy ball robust accuracy collapses sharply: for every d the robust/clean "
                      f"accuracy falls from 75 % to 25 % within a factor {MAX_WIDTH:g} in ε", _sharp_family,
                      {"effect": f"log(ε₂₅/ε₇₅), mean over seeds, t interval; threshold log {MAX_WIDTH:g}",
                       "max_width_ratio": MAX_WIDTH})


def eps_threshold_claim(df: pd.DataFrame) -> Claim:
    """Claim 5b: the ε at which robust accuracy halves scales like d^(−1/2) (see :func:`_scaling_family`)."""
    return _eps_claim(df, "eps-threshold",
                      "Inside the lazy ball the ε at which robust/clean accuracy halves scales like d^(−1/2): "
                      f"its log–log slope against d lies in [{SLOPE_BAND[0]}, {SLOPE_BAND[1]}]", _scaling_family,
                      {"effect": "OLS slope of log ε½ on log d over (d, seed) curves, t interval",
                       "band": list(SLOPE_BAND), "theory_slope": -0.5})


def _radius_runs(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["R"].notna()] if "R" in df.columns else df.iloc[0:0]


def _radius_conditions(g: pd.DataFrame) -> list[stats.Condition]:
    worst = float(g["offset_ratio"].max())
    return [stats.Condition("every neuron inside its radius R", bool(worst <= 1 + BALL_TOL),
                            f"max offset / R = {worst:.4g}")]


def _radius_claim(df: pd.DataFrame, cid: str, statement: str, part) -> Claim:
    """One verdict per width (``part(g) -> (Verdict, evidence)``), combined: all must hold."""
    runs = _radius_runs(df)
    if runs.empty or runs["R"].nunique() < 3:
        problem = "no grid over R with 3 or more values"
        return Claim(cid, statement, stats.Verdict(stats.INCONCLUSIVE, reason=problem), {"problem": problem}, SOURCE)
    parts, per_m = [], []
    for g in _families(runs, ("R",)):
        v, ev = part(g)
        parts.append(v)
        mean = g.groupby("R")["robust_acc"].mean().sort_index()
        per_m.append({"m": int(g["m"].iloc[0]), "d": int(g["d"].iloc[0]), "eps": float(g["eps"].iloc[0]),
                      "lazy_radius_C0_over_sqrt_m": float(g["lazy_radius"].iloc[0]),
                      "R": [float(x) for x in mean.index], "robust_acc": [float(x) for x in mean],
                      **ev, **_used_freedom(g), "verdict": v.verdict})
    evidence: dict = {"per_width": per_m}
    halves = [(p["m"], p.get("R_half")) for p in per_m if p.get("R_half") and np.isfinite(p["R_half"])]
    if len({m for m, _ in halves}) >= 2:
        fit = fit_power_law([m for m, _ in halves], [r for _, r in halves])
        evidence["R_half_vs_m_slope"] = fit.slope  # informative: margin ∝ √m·R suggests −1/2
    why = "every width must hold"
    stayed = [p for p in per_m if p["max_offset_over_lazy_radius_at_R_large"] < 1]
    if stayed:  # the mechanism behind a flat curve, said where the verdict is read
        why += "; " + ", ".join(f"m={p['m']}" for p in stayed) + (
            " never left the lazy ball, even at the largest R (max neuron offset "
            + ", ".join(f"{p['max_offset_over_lazy_radius_at_R_large']:.2g}" for p in stayed)
            + " lazy radii): training did not use the freedom R allowed")
    return Claim(cid, statement, stats.combine(parts, reason=why), evidence, SOURCE)


def _used_freedom(g: pd.DataFrame) -> dict:
    """How far training took the neurons at the largest R (evidence only, no verdict).

    The radius claims compare radii that training was *allowed*; whether it used them is a
    separate fact: the largest neuron offset reached, in units of the lazy radius C0/√m (below
    1: every neuron stayed inside the lazy ball however large R was), with the epochs run and
    the final clean accuracy and training loss, means over seeds.
    """
    top = g[g["R"] == g["R"].max()]
    moved = top["offset_ratio"] * top["R"] / top["lazy_radius"]
    out = {"max_offset_over_lazy_radius_at_R_large": float(moved.max()),
           "epochs_run_at_R_large": float(top["epochs_run"].mean()) if "epochs_run" in top else None,
           "clean_acc_at_R_large": float(top["clean_acc"].mean())}
    if "train_loss" in top:
        out["train_loss_at_R_large"] = float(top["train_loss"].mean())
    return out


def _acc_at(g: pd.DataFrame, which: str) -> tuple[float, np.ndarray]:
    r = g["R"].min() if which == "min" else g["R"].max()
    return float(r), g[g["R"] == r]["robust_acc"].to_numpy(float)


def radius_low_claim(df: pd.DataFrame) -> Claim:
    """Claim 6a: at the smallest R mean robust accuracy (t interval over seeds) is below 0.25."""
    def part(g):
        r, acc = _acc_at(g, "min")
        est = stats.mean_estimate(acc)
        return (stats.decide(est, threshold=0.25, side="below", conditions=_radius_conditions(g)),
                {"R_small": r, "robust_acc_small_R": est.value, "robust_acc_small_R_ci": [est.low, est.high]})
    return _radius_claim(df, "radius-low", "At the smallest radius R, inside the lazy ball, robust accuracy "
                         "stays below 0.25 for every width", part)


def radius_high_claim(df: pd.DataFrame) -> Claim:
    """Claim 6b: at the largest R mean robust accuracy (t interval over seeds) is above 0.75."""
    def part(g):
        r, acc = _acc_at(g, "max")
        est = stats.mean_estimate(acc)
        return (stats.decide(est, threshold=0.75, side="above", conditions=_radius_conditions(g)),
                {"R_large": r, "robust_acc_large_R": est.value, "robust_acc_large_R_ci": [est.low, est.high]})
    return _radius_claim(df, "radius-high", "Once neurons may move well beyond the lazy radius, adversarial "
                         "training succeeds: at the largest R robust accuracy is above 0.75 for every width", part)


def radius_transition_claim(df: pd.DataFrame) -> Claim:
    """Claim 6c: the rise is sharp: per seed log(R₇₅/R₂₅) (robust accuracy, interpolated in log R)
    has a mean below log MAX_WIDTH, t interval over seeds. A seed that does not rise from below
    25 % to above 75 % inside the R grid gives no width."""
    def part(g):
        widths, n, halves = [], 0, []
        for _, gs in g.sort_values("R").groupby("seed"):
            n += 1
            xs, ys = gs["R"].to_numpy(float), gs["robust_acc"].to_numpy(float)
            r25, r75 = crossing(xs, ys, 0.25, rising=True), crossing(xs, ys, 0.75, rising=True)
            halves.append(crossing(xs, ys, 0.5, rising=True))
            if ys[0] < 0.25 and np.isfinite(r25) and np.isfinite(r75):
                widths.append(math.log(r75 / r25))
        est = stats.mean_estimate(widths)
        why = "" if len(widths) == n else f"the rise lies inside the R grid for {len(widths)} of {n} seeds"
        h = [x for x in halves if np.isfinite(x)]
        return (stats.decide(est, threshold=math.log(MAX_WIDTH), side="below",
                             conditions=_radius_conditions(g), reason=why),
                {"log_width": est.value, "log_width_ci": [est.low, est.high],
                 "seeds_with_width": f"{len(widths)}/{n}",
                 "R_half": float(np.exp(np.mean(np.log(h)))) if h else float("nan")})
    return _radius_claim(df, "radius-transition",
                         f"Phase transition in the radius: for every width robust accuracy rises from 0.25 to "
                         f"0.75 within a factor {MAX_WIDTH:g} in R", part)


def claims(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    return [eps_sharp_claim(df), eps_threshold_claim(df), radius_low_claim(df), radius_high_claim(df),
            radius_transition_claim(df)]


# ---------------------------------------------------------------------------------------
# figures

def figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    figs: list[Figure] = []
    lazy = df[df["R"].isna()] if "R" in df.columns else df
    if len(lazy):
        fig, axes = subplots(1, 2, squeeze=False)
        ax = axes[0][0]
        for i, (d, g) in enumerate(lazy.groupby("d")):
            st = g.groupby("eps")["robust_acc"].agg(["mean", "std"]).sort_index()
            st = st[st.index > 0]
            c = COLORS[i % len(COLORS)]
            ax.plot(st.index, st["mean"], "o-", color=c, label=f"d={int(d)}")
            ax.fill_between(st.index, st["mean"] - st["std"].fillna(0), st["mean"] + st["std"].fillna(0),
                            color=c, alpha=0.18, lw=0)
        ax.set_xscale("log")
        ax.set_xlabel("ε (ℓ2 budget)")
        ax.set_ylabel("robust test accuracy")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7)
        ax = axes[0][1]
        claim = eps_threshold_claim(df)
        pts = claim.evidence.get("seed_eps_half") or [
            p for fam in claim.evidence.get("families", []) for p in fam.get("seed_eps_half", [])]
        if pts:
            ds, es = zip(*pts)
            ax.plot(ds, es, "o", color=COLORS[0], alpha=0.7, label="ε at half the clean accuracy (per seed)")
            if len(set(ds)) >= 2:
                fit = fit_power_law(ds, es)
                xs = np.geomspace(min(ds), max(ds), 32)
                ax.plot(xs, fit.predict(xs), "-", color=COLORS[0], lw=1, label=f"fit: slope {fit.text()}")
                theory_line(ax, ds, -0.5, min(ds), float(fit.predict(min(ds))), "d^−1/2")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("input dimension d")
        ax.set_ylabel("halving ε")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        label_panels(axes)
        save(fig, ctx.figdir / "robust_vs_eps.png")
        figs.append(Figure(
            "figures/robust_vs_eps.png", "Robust accuracy against ε inside the lazy ball, per d",
            "(a) Robust test accuracy under ℓ2 PGD after projected adversarial training, mean ± std over "
            "seeds; it should collapse past a threshold that moves left as d grows. (b) The ε at which "
            "robust accuracy falls to half the clean accuracy, with its log–log fit; dashed: the "
            "theorem's d^−1/2."))
    runs = df[df["R"].notna()] if "R" in df.columns else df.iloc[0:0]
    if len(runs):
        fig, axes = subplots(1, 1, squeeze=False)
        ax = axes[0][0]
        for i, ((m, d, eps), g) in enumerate(runs.groupby(["m", "d", "eps"])):
            st = g.groupby("R")["robust_acc"].agg(["mean", "std"]).sort_index()
            c = COLORS[i % len(COLORS)]
            ax.plot(st.index, st["mean"], "o-", color=c, label=f"m={int(m)} (d={int(d)}, ε={eps:g})")
            ax.fill_between(st.index, st["mean"] - st["std"].fillna(0), st["mean"] + st["std"].fillna(0),
                            color=c, alpha=0.18, lw=0)
            ax.axvline(float(g["lazy_radius"].iloc[0]), color=c, ls=":", lw=1,
                       label=f"C0/√m = {float(g['lazy_radius'].iloc[0]):.3g}")
        ax.set_xscale("log")
        ax.set_xlabel("per-neuron radius R")
        ax.set_ylabel("robust test accuracy")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7)
        save(fig, ctx.figdir / "robust_vs_radius.png")
        figs.append(Figure(
            "figures/robust_vs_radius.png", "Robust accuracy against the radius R, per width",
            "Projected adversarial training with every neuron kept within R of its initialisation; "
            "mean ± std over seeds. Dotted: the lazy radius C0/√m of each width. Robust accuracy "
            "should jump from near 0 to high once R passes a threshold near the lazy radius."))
    return figs


# ---------------------------------------------------------------------------------------

def _work(cfg: LazyAdversarialConfig) -> float:
    """Relative cost of a point: each epoch is a PGD of ``attack_steps`` steps (a forward and
    a pull-back each, plus the scoring pass) and one SGD pass over the training set."""
    return work(cfg, cfg.attack_steps + 2)


STUDY = Study(
    name="lazy-adversarial",
    title="Adversarial training inside the lazy ball",
    source=SOURCE,
    summary=("Projected adversarial training (ℓ2 PGD) with every neuron kept near its initialisation: "
             "robust accuracy against ε per d, and against the radius R per width."),
    config=LazyAdversarialConfig,
    presets={
        "quick": Preset(
            # 5 PGD steps of ε/2 in training (20 of ε/8 at test) travel the same 2.5ε as the
            # authors' 100 steps of ε/40; lr 0.5 instead of 0.01 and at most 15 epochs make a run
            # take about a second.
            # Patience: the authors' 20 (Alg. 1), so the rule cannot fire before epoch 21 and,
            # with the 15-epoch cap, every quick run trains its 15 epochs — the paper's protocol
            # cut at 15 epochs, as every paper run trains at least 21. A shorter patience breaks
            # the protocol, not just its length: the robust training accuracy is measured at the
            # start of each epoch, so the first "best" is the untrained network's, and with
            # lr 0.5 a run that starts with some robust accuracy (0.2–0.45, about 1 seed in 8)
            # first falls for 3–6 epochs before it climbs. With the former patience 5 such a
            # run stopped after 6 epochs below its untrained start (e.g. m=64, R=2, seed 105:
            # 0.29 0.15 0.08 0.07 0.11 0.13, stopped; robust test accuracy 0.20 against ~0.85
            # for the rest): a run that never trained, a heavy tail on radius-high's mean. With
            # patience 20 the same 40 seeds (base 0..400 × 8) at m=64, R=2 all end at robust
            # training accuracy 0.88–0.95. Cost: a point's ensemble runs as long as its longest
            # seed, and most points already had one seed at 15 epochs.
            {"sphere": True, "C0": 5.0, "m": 64, "max_train": 256, "attack_steps": 5,
             "attack_step_div": 2.0, "test_attack_steps": 20, "lr": 0.5, "patience": 20,
             "epochs": 15},
            (
                {"size": [10, 14, 20, 28], "eps": [0.025, 0.05, 0.1, 0.2, 0.4]},
                {"size": [14], "eps": [0.2], "m": [64, 256], "R": [0.125, 0.25, 0.5, 1.0, 2.0]},
            ),
            # Seeds from a power estimate (stats.seeds_for, power 0.9). A 3-seed pilot (base seed
            # 0) suggested 5; five base seeds at 5 seeds then changed verdicts (eps-threshold,
            # radius-low), so the estimate was redone on those 20 seeds pooled: the halving-ε
            # slope is −0.48 against the band edge −0.7 with a per-(d, seed) spread of 0.29
            # (4 rows per seed) -> 8 seeds; robust accuracy at the smallest R for m=64 is 0.07
            # against 0.25 with a per-seed spread of 0.11 -> 7; the sharpness widths need <= 4.
            # Checked at base seeds 0, 100, 200, 300, 400 (8 seeds each): with patience 5,
            # radius-high was reproduced at 2 and inconclusive at 3 (it "needed" 77–534 seeds):
            # the early stops above. With patience 20 all five claims are reproduced at all five
            # base seeds; radius-high at R=2 is 0.84–0.86 (lowest 95 % bound 0.807, m=64).
            n_seeds=8,
            description="4 sizes × 5 ε inside the ball C0=5; R sweep for widths 64/256 at d=196; "
                        "8 seeds (from a power estimate)"),
        "paper": Preset(
            {"sphere": True, "C0": 5.0, "m": 256},
            (
                {"size": [5, 7, 10, 14, 20, 28], "eps": [0.0125, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8]},
                {"size": [14], "eps": [0.2], "m": [64, 256, 1024],
                 "R": [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0]},
            ),
            n_seeds=5,
            description="the authors' Alg. 1 (100 PGD steps of ε/40, lr 0.01, batch 32, patience 20)"),
    },
    run_points=run_points,
    claims=claims,
    figures=figures,
    ensemble=True,
    weight=_work,
)

__all__ = ["STUDY", "LazyAdversarialConfig", "run_points", "claims", "figures", "eps_sharp_claim",
           "eps_threshold_claim", "radius_low_claim", "radius_high_claim", "radius_transition_claim"]

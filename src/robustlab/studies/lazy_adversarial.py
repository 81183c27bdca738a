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

def _with_relative(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``rel``: robust accuracy relative to the clean accuracy of the same network."""
    df = df.copy()
    df["rel"] = np.where(df["clean_acc"] > 0, df["robust_acc"] / df["clean_acc"].clip(lower=1e-12), 0.0)
    return df


def _eps_family(runs: pd.DataFrame) -> tuple[bool, dict]:
    """Claim 5 on one family of runs that differ only in d, ε and seed."""
    per_d, seeds, ok = [], [], True
    cur = _with_relative(runs[runs["eps"] > 0]).sort_values(["d", "seed", "eps"])
    for d, g in cur.groupby("d"):
        mean = g.groupby("eps")["rel"].mean().sort_index()
        xs, ys = mean.index.to_numpy(float), mean.to_numpy(float)
        e75, e50, e25 = (crossing(xs, ys, q) for q in (0.75, 0.5, 0.25))
        # a threshold is located only if the curve starts above 75 % and ends below 25 %
        starts_high = bool(len(ys) and ys[0] > 0.75)
        width = e25 / e75 if starts_high and np.isfinite(e25) and np.isfinite(e75) else float("nan")
        sharp = bool(np.isfinite(width) and width <= MAX_WIDTH)
        ok &= sharp and np.isfinite(e50)
        per_d.append({"d": int(d), "eps_75": e75, "eps_half": e50, "eps_25": e25,
                      "width_ratio": width, "sharp": sharp, "starts_above_75pct": starts_high,
                      "clean_acc": float(g["clean_acc"].mean()),
                      "eps_half_times_sqrt_d": e50 * math.sqrt(d)})
        for _seed, gs in g.groupby("seed"):
            e = crossing(gs["eps"].to_numpy(float), gs["rel"].to_numpy(float), 0.5)
            if np.isfinite(e) and gs["rel"].iloc[0] > 0.5:
                seeds.append((int(d), e))
    evidence: dict = {"per_d": per_d, "seed_eps_half": [[d, e] for d, e in seeds],
                      "band": list(SLOPE_BAND), "theory_slope": -0.5, "max_width_ratio": MAX_WIDTH,
                      "max_offset_over_radius": float(runs["offset_ratio"].max()),
                      "seed_curves_with_halving_eps": f"{len(seeds)}/{runs.groupby(['d', 'seed']).ngroups}"}
    ok &= bool((runs["offset_ratio"] <= 1 + 1e-4).all())  # every neuron stayed in its ball
    if len({d for d, _ in seeds}) >= 3:
        fit = fit_power_law([d for d, _ in seeds], [e for _, e in seeds])
        evidence.update(fit.evidence("slope"))
        ok &= SLOPE_BAND[0] <= fit.slope <= SLOPE_BAND[1]
    else:
        ok = False
        evidence["problem"] = "the halving ε is defined for fewer than 3 values of d"
    return bool(ok), evidence


def _families(df: pd.DataFrame, axes: tuple[str, ...]) -> list[pd.DataFrame]:
    """Runs grouped so that each group differs only along ``axes`` (and the seed)."""
    if df.empty:
        return []
    return [g for _, g in df.groupby(point_ids(df, LazyAdversarialConfig, ("seed", *axes)))]


def eps_threshold_claim(df: pd.DataFrame) -> Claim:
    """Claim 5: a sharp robust-accuracy drop at an ε that scales like d^(−1/2) (lazy-ball runs).

    Per d, the ε where robust/clean accuracy crosses 75 %, 50 % and 25 % (interpolated in
    log ε on the mean curve over seeds); "sharp" means ε₂₅/ε₇₅ <= MAX_WIDTH. The slope is an
    OLS fit of log ε½ on log d with one point per seed, with its 95 % t-interval.
    """
    statement = (
        "Inside the lazy ball robust accuracy collapses once ε crosses a threshold that scales like "
        f"d^(−1/2): for every d the robust/clean accuracy falls from 75 % to 25 % within a factor "
        f"{MAX_WIDTH:g} in ε, and the log–log slope of the halving ε against d lies in "
        f"[{SLOPE_BAND[0]}, {SLOPE_BAND[1]}]")
    lazy = df[df["R"].isna()] if "R" in df.columns else df
    fams = [f for f in _families(lazy, ("eps", "size", "dim")) if f["d"].nunique() >= 3]
    if not fams:
        return Claim("eps-threshold", statement, False,
                     {"problem": "no ε grid with 3 or more values of d"}, SOURCE)
    results = [_eps_family(f) for f in fams]
    if len(results) == 1:
        ok, evidence = results[0]
    else:
        ok = all(r[0] for r in results)
        evidence = {"families": [{**describe_family(f, ("m", "C0", "lr", "bias")), "passed": r[0], **r[1]}
                                 for f, r in zip(fams, results)]}
    return Claim("eps-threshold", statement, ok, evidence, SOURCE)


def radius_transition_claim(df: pd.DataFrame) -> Claim:
    """Claim 6 (see the statement)."""
    statement = (
        "Phase transition in the radius: for every width, robust accuracy is <= 0.25 at small R, "
        f">= 0.75 at large R, and rises from 0.25 to 0.75 within a factor {MAX_WIDTH:g} in R")
    runs = df[df["R"].notna()] if "R" in df.columns else df.iloc[0:0]
    if runs.empty or runs["R"].nunique() < 3:
        return Claim("radius-transition", statement, False,
                     {"problem": "no grid over R with 3 or more values"}, SOURCE)
    per_m, ok = [], True
    for g in _families(runs, ("R",)):
        m, d, eps = int(g["m"].iloc[0]), int(g["d"].iloc[0]), float(g["eps"].iloc[0])
        mean = g.groupby("R")["robust_acc"].mean().sort_index()
        xs, ys = mean.index.to_numpy(float), mean.to_numpy(float)
        r25, r50, r75 = (crossing(xs, ys, q, rising=True) for q in (0.25, 0.5, 0.75))
        low, high = bool(ys.min() <= 0.25 and ys[0] <= 0.25), bool(ys.max() >= 0.75)
        width = r75 / r25 if np.isfinite(r25) and np.isfinite(r75) and ys[0] < 0.25 else float("nan")
        sharp = bool(np.isfinite(width) and width <= MAX_WIDTH)
        lazy_r = float(g["lazy_radius"].iloc[0])
        per_m.append({"m": m, "d": d, "eps": eps, "R": [float(v) for v in xs],
                      "robust_acc": [float(v) for v in ys], "R_25": r25, "R_half": r50, "R_75": r75,
                      "width_ratio": width, "low_at_small_R": low, "high_at_large_R": high,
                      "sharp": sharp, "lazy_radius_C0_over_sqrt_m": lazy_r,
                      "R_half_over_lazy_radius": r50 / lazy_r})
        ok &= low and high and sharp
    evidence: dict = {"per_width": per_m, "max_width_ratio": MAX_WIDTH}
    halves = [(p["m"], p["R_half"]) for p in per_m if np.isfinite(p["R_half"])]
    if len({m for m, _ in halves}) >= 2:
        fit = fit_power_law([m for m, _ in halves], [r for _, r in halves])
        evidence["R_half_vs_m_slope"] = fit.slope  # informative: margin ∝ √m·R suggests −1/2
    return Claim("radius-transition", statement, bool(ok), evidence, SOURCE)


def claims(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    return [eps_threshold_claim(df), radius_transition_claim(df)]


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
            # authors' 100 steps of ε/40; lr 0.5 instead of 0.01, a patience of 5 and at most
            # 15 epochs make a run take about a second.
            {"sphere": True, "C0": 5.0, "m": 64, "max_train": 256, "attack_steps": 5,
             "attack_step_div": 2.0, "test_attack_steps": 20, "lr": 0.5, "patience": 5,
             "epochs": 15},
            (
                {"size": [10, 14, 20, 28], "eps": [0.025, 0.05, 0.1, 0.2, 0.4]},
                {"size": [14], "eps": [0.2], "m": [64, 256], "R": [0.125, 0.25, 0.5, 1.0, 2.0]},
            ),
            n_seeds=3,
            description="4 sizes × 5 ε inside the ball C0=5; R sweep for widths 64/256 at d=196; 3 seeds"),
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
)

__all__ = ["STUDY", "LazyAdversarialConfig", "run_points", "claims", "figures",
           "eps_threshold_claim", "radius_transition_claim"]

"""Study ``lazy-attack``: networks trained in the lazy regime flip under one small gradient step
(Seed 001, Thm 3.1 and §5.1).

Each point trains E seeds of ``f(x) = (1/√m) Σ_s a_s ReLU(⟨w_s, x⟩ [+ b_s])`` with SGD on the
logistic loss until the first epoch that would leave the ball ``‖θ_s − θ_s(0)‖ ≤ C₀/√m``
(the weights kept are the last ones inside it), then, for every correctly classified test
point, finds the smallest step along ``−sign(f) ∇ₓf/‖∇ₓf‖`` that flips the sign and records
``‖δ‖``, ``‖∇ₓf‖``, ``η = ‖δ‖/‖∇ₓf‖`` and ``‖δ‖/‖x‖``.

The theorem is about unit-norm inputs: its slopes (``‖∇ₓf‖ ∝ d^{1/2}``, ``η ∝ d^{−1}``,
``‖δ‖/‖x‖ ∝ d^{−1/2}``) are checked on the runs with ``sphere=true``; the authors' main
experiment, raw pixels with biases, is run beside them and drawn, not checked.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import torch
from matplotlib.ticker import NullLocator

from .. import stats
from ..attacks import min_flip_along_gradient
from ..config import param
from ..metrics import accuracy, neuron_distance
from ..models.ensemble import Flat, fold
from ..report.plots import COLORS, fit_power_law, label_panels, save, subplots, theory_line
from ..train.lazy import train_lazy_sgd
from ..utils import make_generator, resolve_device
from ._lazy_common import (
    LazyConfig,
    build_model,
    describe_family,
    load_data,
    neuron_params,
    point_ids,
    radius_of,
    work,
)
from .base import Claim, Context, Figure, Preset, Study

SOURCE = "Seed 001 (Adversarial robustness is at odds with lazy training), Thm 3.1, §5.1"

# claim bands (the issue's): slopes of the log–log fits against d
BANDS = {"delta_rel": (-0.7, -0.3), "grad": (0.3, 0.7), "eta": (-1.3, -0.7)}
THEORY = {"delta_rel": -0.5, "grad": 0.5, "eta": -1.0}
MIN_ACC = 0.95


@dataclasses.dataclass(frozen=True)
class LazyAttackConfig(LazyConfig):
    study = "lazy-attack"
    lr: float = param(0.1, "SGD learning rate (Seed 001: 0.1)", gt=0)
    batch_size: int = param(64, "SGD mini-batch size (Seed 001: 64)", ge=1)
    epochs: int = param(1000, "at most this many epochs (Seed 001: 1000)", ge=1)
    ball_check: str = param("epoch", "when the ball is checked: after each epoch (authors) or each step",
                            choices=("epoch", "step"))
    flip_tol: float = param(1e-4, "absolute tolerance of the minimal flipping ‖δ‖", gt=0)


# ---------------------------------------------------------------------------------------
# running a point

def _stats(v: torch.Tensor) -> tuple[float | None, float | None]:
    """Mean and std over the finite entries of a 1-D tensor (None when there are none)."""
    v = v[torch.isfinite(v)]
    if v.numel() == 0:
        return None, None
    return float(v.mean()), float(v.std(unbiased=False))


def run_points(cfgs: list[LazyAttackConfig], device: str = "cpu") -> list:
    """Train the seeds of one point as an ensemble, then attack every test point."""
    base = cfgs[0]
    dev = resolve_device(device)
    data = load_data(base).to(dev)
    E, d = len(cfgs), data.d
    model = build_model(cfgs, d, dev)
    r = radius_of(base)
    log = train_lazy_sgd(model, data.x_train, data.y_train, radius=r,
                         generators=[make_generator(c.seed, "lazy-order") for c in cfgs],
                         lr=base.lr, batch_size=base.batch_size, max_epochs=base.epochs,
                         check=base.ball_check)
    model.eval()
    flat = Flat(model, E).eval()
    xt = fold(data.x_test.expand(E, -1, -1))  # (E·N, d): copy e sees rows e·N … e·N+N−1
    yt = data.y_test.repeat(E)
    xr = fold(data.x_train.expand(E, -1, -1))
    test_ok = accuracy(flat, xt, yt, per_sample=True).view(E, -1).float()
    train_ok = accuracy(flat, xr, data.y_train.repeat(E), per_sample=True).view(E, -1).float()
    flip = min_flip_along_gradient(flat, xt, yt, tol=base.flip_tol)
    with torch.no_grad():
        scores = model(data.x_test.expand(E, -1, -1))  # (E, N)
        offsets = neuron_distance(*neuron_params(model), per_neuron=True)  # (E, m)
    xnorm = data.x_test.norm(dim=1)  # (N,)
    dn, gn, eta = (t.view(E, -1) for t in (flip.delta_norm, flip.grad_norm, flip.eta))
    ok = flip.correct.view(E, -1)
    final = log.history[-1] if log.history else None
    out = []
    for e, _ in enumerate(cfgs):
        delta_mean, delta_std = _stats(dn[e])
        rel_mean, rel_std = _stats(dn[e] / xnorm)
        grad_mean, grad_std = _stats(gn[e])
        eta_mean, eta_std = _stats(eta[e])
        n_ok = int(ok[e].sum())
        out.append([{
            "d": d, "radius": r,
            "x_norm": float(xnorm.mean()),
            "epochs_run": float(log.epochs[e]), "left_ball": bool(log.stopped[e]),
            "max_offset": float(offsets[e].max()), "offset_ratio": float(offsets[e].max() / r),
            "train_loss": float(final["train_loss"][e]) if final else None,
            "train_acc": float(train_ok[e].mean()), "test_acc": float(test_ok[e].mean()),
            "n_correct": n_ok,
            "flipped_frac": float(flip.flipped.view(E, -1)[e][ok[e]].float().mean()) if n_ok else None,
            "abs_f": float(scores[e][ok[e]].abs().mean()) if n_ok else None,
            "delta": delta_mean, "delta_std": delta_std,
            "delta_rel": rel_mean, "delta_rel_std": rel_std,
            "grad": grad_mean, "grad_std": grad_std,
            "eta": eta_mean, "eta_std": eta_std,
        }])
    return out


# ---------------------------------------------------------------------------------------
# claims
#
# Every claim is a verdict (robustlab.stats): an effect with a 95 % interval over seeds against
# the paper's threshold. The slope claims rest on two premises, recorded as conditions: the
# networks are in the lazy regime (every neuron inside its ball) and they are trained
# classifiers; where a premise fails the claim is "not applicable", not contradicted.

def _theory_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Runs in the theorem's setting: inputs on the unit sphere."""
    return df[(df["sphere"].astype(bool)) | (df["dataset"] == "sphere")]


def _raw_runs(df: pd.DataFrame) -> pd.DataFrame:
    return df[(~df["sphere"].astype(bool)) & (df["dataset"] != "sphere")]


FAMILY = ("dataset", "m", "C0", "R", "bias", "lr")  # shown to tell families apart
BALL_TOL = 1e-4  # offsets are measured in float32: a ratio of 1 + 1e-4 is on the ball
MIN_TRAINED = 0.9  # premise: a point whose mean test accuracy is below this is not a trained classifier


def _conditions(runs: pd.DataFrame) -> list[stats.Condition]:
    """The premises of Thm 3.1 in these runs: every neuron in its lazy ball, every point trained."""
    worst = float(runs["offset_ratio"].max()) if len(runs) else float("nan")
    acc = runs.groupby(["d", "m", "C0"])["test_acc"].mean() if len(runs) else pd.Series(dtype=float)
    low = float(acc.min()) if len(acc) else float("nan")
    return [
        stats.Condition("lazy regime reached", bool(worst <= 1 + BALL_TOL),
                        f"max ‖θ_s − θ_s(0)‖ / (C0/√m) = {worst:.4g} (<= 1 required)"),
        stats.Condition("networks trained", bool(low >= MIN_TRAINED),
                        f"lowest point mean test accuracy {low:.3g} (>= {MIN_TRAINED} required)"),
    ]


def _families(df: pd.DataFrame, value: str) -> list[pd.DataFrame]:
    """Runs that differ only in d (and seed), with >= 3 values of d and a positive ``value``."""
    df = df.dropna(subset=[value])
    df = df[df[value] > 0]
    if df.empty:
        return []
    return [sub for _, sub in df.groupby(point_ids(df, LazyAttackConfig, ("seed", "size", "dim")))
            if sub["d"].nunique() >= 3]


def _fit(sub: pd.DataFrame, value: str) -> tuple[stats.Estimate, dict]:
    """Log–log OLS slope of ``value`` on d, one row per (d, seed): each row is one network's mean
    over its correctly classified test points, so seeds are the independent units."""
    est = stats.slope_estimate(sub["d"], sub[value], log_x=True, log_y=True)
    return est, {**describe_family(sub, FAMILY), "slope": est.value, "ci": [est.low, est.high],
                 "n": est.n, "seeds": int(sub["seed"].nunique()),
                 "d_range": [int(sub["d"].min()), int(sub["d"].max())]}


def _slope_claim(df: pd.DataFrame, c0: float, cid: str, statement: str, value: str) -> Claim:
    """The log–log slope of ``value`` against d lies inside the band around the theorem's slope,
    for every width at the reference C0 on unit-sphere inputs (one verdict per width, combined:
    all must hold). Effect: the OLS slope over (d, seed) rows; interval: its 95 % t interval.
    Fits at other C0 and on raw pixels are shown beside, not judged."""
    sph = _theory_runs(df)
    lo, hi = BANDS[value]
    evidence: dict = {"C0": c0, "band": [lo, hi], "theory": THEORY[value], "interval": "OLS slope t interval, 95 %"}
    parts, fits = [], []
    for sub in _families(sph[sph["C0"] == c0], value):
        est, fit = _fit(sub, value)
        v = stats.decide(est, threshold=(lo, hi), side="inside", conditions=_conditions(sub),
                         seeds=int(sub["seed"].nunique()))
        fits.append({**fit, "verdict": v.verdict})
        parts.append(v)
    evidence["fits"] = fits
    evidence["other_C0_fits"] = [_fit(s, value)[1] for s in _families(sph[sph["C0"] != c0], value)]
    evidence["raw_pixel_fits"] = [_fit(s, value)[1] for s in _families(_raw_runs(df), value)]
    if not parts:
        evidence["problem"] = f"no unit-sphere (dataset, m) family at C0={c0:g} with >= 3 values of d"
        verdict = stats.Verdict(stats.INCONCLUSIVE, threshold=(lo, hi), side="inside",
                                reason=evidence["problem"])
    else:
        verdict = stats.combine(parts, reason=f"{len(parts)} width(s), all must lie in the band")
    return Claim(cid, statement, verdict, evidence, SOURCE)


def _ball_claim(df: pd.DataFrame) -> Claim:
    """Training stops before any neuron leaves its ball (Def. 2.1): the largest offset over every
    network and neuron, relative to the radius, is at most 1. Exact (a maximum, no sampling);
    this is the "lazy regime reached" premise of the other claims."""
    worst = float(df["offset_ratio"].max())
    est = stats.Estimate(worst, worst, worst, int(len(df)), "maximum over every network and neuron (exact)")
    verdict = stats.decide(est, threshold=1 + BALL_TOL, side="below", seeds=int(df["seed"].nunique()))
    return Claim("lazy-ball",
                 "Training keeps the network lazy: every neuron stays inside its ball ‖θ_s − θ_s(0)‖ <= C0/√m",
                 verdict, {"max_offset_over_radius": worst,
                           "fraction_stopped_by_ball": float(df["left_ball"].mean()),
                           "n_networks": int(len(df))}, SOURCE)


def _generalise_claim(df: pd.DataFrame) -> Claim:
    """The lazy networks generalise: mean test accuracy >= MIN_ACC. Effect: per seed, the mean
    test accuracy over every point of the study; interval: t over seeds (the points of one seed
    share no randomness with other seeds). The worst point is shown beside."""
    per_seed = df.groupby("seed")["test_acc"].mean()
    est = stats.mean_estimate(per_seed.to_numpy(float))
    by_point = df.assign(pid=point_ids(df, LazyAttackConfig)).groupby("pid").agg(
        dataset=("dataset", "first"), sphere=("sphere", "first"), size=("size", "first"),
        m=("m", "first"), C0=("C0", "first"), test_acc=("test_acc", "mean"), n=("seed", "count"))
    worst = by_point.sort_values("test_acc").head(3).reset_index(drop=True)
    verdict = stats.decide(est, threshold=MIN_ACC, side="above", conditions=_conditions(df)[:1])
    return Claim("lazy-generalise",
                 f"Lazy networks generalise: mean test accuracy over the study's points >= {MIN_ACC}",
                 verdict, {"mean_test_acc": est.value, "mean_test_acc_ci": [est.low, est.high],
                           "interval": "t over seeds (each seed: mean over every point)",
                           "min_point_test_acc": float(by_point["test_acc"].min()),
                           "min_single_network_test_acc": float(df["test_acc"].min()),
                           "worst_points": worst.to_dict("records")}, SOURCE)


def claims(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    c0 = float(ctx.base_config.get("C0", 10.0))
    where = f"unit-sphere inputs, C0={c0:g}"
    return [
        _ball_claim(df),
        _generalise_claim(df),
        _slope_claim(df, c0, "delta-scaling",
                     f"‖δ‖/‖x‖ falls like d^(−1/2): for every width the log–log slope against d lies in "
                     f"[−0.7, −0.3] ({where})", "delta_rel"),
        _slope_claim(df, c0, "grad-scaling",
                     f"‖∇ₓf‖ grows like d^(1/2): for every width the log–log slope against d lies in "
                     f"[0.3, 0.7] ({where})", "grad"),
        _slope_claim(df, c0, "eta-scaling",
                     f"η falls like 1/d: for every width the log–log slope against d lies in "
                     f"[−1.3, −0.7] ({where})", "eta"),
        _c0_claim(df),
    ]


def _c0_claim(df: pd.DataFrame) -> Claim:
    """Larger C0 gives larger ‖δ‖ at fixed d (Seed 001, §5.1): the slope of log ‖δ‖ on log C0 with
    one intercept per (d, m) (fixed effects, :func:`robustlab.stats.slope_estimate` with
    ``groups``) is above 0; interval: its 95 % t interval over the (C0, d, m, seed) networks.

    The paper states a trend, not an ordering at every d: the per-(d, m) comparisons of the
    largest and smallest C0 are shown as evidence, not judged (at d = 25 the difference is a
    few per cent, which three seeds cannot resolve)."""
    statement = ("More movement allowed gives a larger flipping perturbation: the slope of log ‖δ‖ on "
                 "log C0, with one intercept per (d, m), is above 0 (unit-sphere inputs)")
    sph = _theory_runs(df).dropna(subset=["delta"])
    sph = sph[sph["R"].isna()] if "R" in sph.columns else sph  # C0 matters only without R
    sph = sph[sph["delta"] > 0]
    groups = [] if sph.empty else [
        g for _, g in sph.groupby(point_ids(sph, LazyAttackConfig, ("seed", "C0")))
        if g["C0"].nunique() >= 2]
    if not groups:
        return Claim("c0-more-robust", statement,
                     stats.Verdict(stats.INCONCLUSIVE, threshold=0.0, side="above",
                                   reason="no (d, m) with two or more values of C0"),
                     {"problem": "no (d, m) with two or more values of C0"}, SOURCE)
    runs = pd.concat(groups)
    labels = point_ids(runs, LazyAttackConfig, ("seed", "C0"))
    est = stats.slope_estimate(runs["C0"], runs["delta"], log_x=True, log_y=True, groups=labels)
    comparisons = []
    for g in groups:
        mean = g.groupby("C0")["delta"].mean().sort_index()
        comparisons.append({**describe_family(g, ("dataset", "m", "d", "bias", "lr")),
                            "C0": [float(c) for c in mean.index], "delta": [float(v) for v in mean],
                            "largest_beats_smallest": bool(mean.iloc[-1] > mean.iloc[0])})
    verdict = stats.decide(est, threshold=0.0, side="above", conditions=_conditions(runs),
                           seeds=int(runs["seed"].nunique()))
    return Claim("c0-more-robust", statement, verdict,
                 {"slope_logdelta_logC0": est.value, "slope_logdelta_logC0_ci": [est.low, est.high],
                  "interval": est.method, "n": est.n, "groups": len(groups),
                  "comparisons": comparisons}, SOURCE)


# ---------------------------------------------------------------------------------------
# figures

PANELS = [("grad", "‖∇ₓf‖", "grad_std"), ("eta", "η = ‖δ‖/‖∇ₓf‖", "eta_std"),
          ("delta_rel", "‖δ‖/‖x‖", "delta_rel_std")]


def _pooled(sub: pd.DataFrame, x: str, value: str, std: str) -> pd.DataFrame:
    """Mean over seeds (each a mean over test points) and the spread over points and seeds:
    the std of the pooled points, from the per-seed means and stds."""
    sub = sub.dropna(subset=[value])
    g = sub.assign(sq=sub[std] ** 2 + sub[value] ** 2).groupby(x)
    mean = g[value].mean()
    spread = np.sqrt(np.maximum(g["sq"].mean() - mean ** 2, 0.0))
    return pd.DataFrame({"mean": mean, "spread": spread}).sort_index()


def _band(ax, st: pd.DataFrame, *, color, label, marker="o"):
    xs = st.index.to_numpy(float)
    mean, sp = st["mean"].to_numpy(), st["spread"].to_numpy()
    ax.plot(xs, mean, marker=marker, color=color, label=label)
    lo = np.where(mean - sp > 0, mean - sp, mean / 3)  # a log axis cannot show values <= 0
    ax.fill_between(xs, lo, mean + sp, color=color, alpha=0.18, lw=0)


def _panel_row(axes, df: pd.DataFrame, by: str, fmt, theory: dict[str, float] | None, title: str) -> None:
    """Three log–log panels (‖∇f‖, η, ‖δ‖/‖x‖ against d), one curve per level of ``by``;
    ``theory`` maps a quantity to the slope drawn (dashed) through the largest-d point."""
    levels = sorted(df[by].dropna().unique())
    ds = sorted(int(v) for v in df["d"].unique())
    for j, (value, name, std) in enumerate(PANELS):
        ax = axes[j]
        anchor = None
        for i, lev in enumerate(levels):
            sub = df[(df[by] == lev) & (df[value] > 0)]
            st = _pooled(sub, "d", value, std)
            if st.empty:
                continue
            label = fmt(lev)
            if sub["d"].nunique() >= 3:  # the fitted slope (per-seed means), as in the claims
                label += f": slope {fit_power_law(sub['d'], sub[value]).text()}"
            _band(ax, st, color=COLORS[i % len(COLORS)], label=label)
            anchor = anchor or (float(st.index[-1]), float(st["mean"].iloc[-1]))
        if theory and anchor and len(ds) > 1:
            if value == "grad":
                theory_line(ax, ds, 0.5, 1.0, math.sqrt(0.5), "√(d/2) (at init)")
            else:
                theory_line(ax, ds, theory[value], *anchor, f"d^{theory[value]:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(ds, [str(v) for v in ds])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("input dimension d")
        ax.set_ylabel(name)
        ax.set_title(title, fontsize=8)
        ax.legend(fontsize=7)


def figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    figs: list[Figure] = []
    base = ctx.base_config
    sph, raw = _theory_runs(df), _raw_runs(df)
    c0_ref = base.get("C0", 10.0)
    rows = [("unit sphere", sph[sph["C0"] == c0_ref]), ("raw pixels", raw[raw["C0"] == c0_ref])]
    rows = [(n, r) for n, r in rows if len(r)]
    if rows:
        fig, axes = subplots(len(rows), 3, squeeze=False)
        for i, (name, sub) in enumerate(rows):
            # raw pixels: ‖x‖ ∝ √d, and f is (nearly) 1-homogeneous in x, so η ∝ ‖x‖/d ∝ d^−1/2
            slopes = THEORY if name == "unit sphere" else {**THEORY, "eta": -0.5}
            _panel_row(axes[i], sub, "m", lambda v: f"m={int(v)}", slopes,
                       f"{name}, C0={c0_ref:g}, bias={'/'.join(sorted({str(b) for b in sub['bias']}))}")
        label_panels(axes)
        save(fig, ctx.figdir / "vs_d.png")
        figs.append(Figure(
            "figures/vs_d.png", "Gradient norm, step size and flipping perturbation against d, per width",
            "Mean over seeds and correctly classified test points, band ±1 std over points and seeds; "
            "dashed: the theorem's slopes (‖∇f‖ ≈ √(d/2) at init, η ∝ 1/d, ‖δ‖/‖x‖ ∝ d^−1/2). Top row: "
            "unit-sphere inputs (the theorem's setting, where the slopes are checked); bottom row: raw "
            "pixels with biases (the authors' main experiment), where ‖x‖ itself grows like √d, so the "
            "same theorem predicts η ∝ ‖x‖/d ∝ d^−1/2 there."))
    c0_runs = sph.groupby(["m"]).filter(lambda g: g["C0"].nunique() >= 2)
    if len(c0_runs):
        m_ref = int(c0_runs["m"].value_counts().idxmax())
        sub = c0_runs[c0_runs["m"] == m_ref]
        fig, axes = subplots(1, 4, squeeze=False)
        _panel_row(axes[0][:3], sub, "C0", lambda v: f"C0={v:g}", None, f"unit sphere, m={m_ref}")
        ax = axes[0][3]
        for i, (d, g) in enumerate(sub.groupby("d")):
            st = _pooled(g, "C0", "delta", "delta_std")
            _band(ax, st, color=COLORS[i % len(COLORS)], label=f"d={int(d)}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        c0s = sorted(float(v) for v in sub["C0"].unique())
        ax.set_xticks(c0s, [f"{v:g}" for v in c0s])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("C0 (ball radius C0/√m)")
        ax.set_ylabel("‖δ‖")
        ax.legend(fontsize=7)
        label_panels(axes)
        save(fig, ctx.figdir / "vs_C0.png")
        figs.append(Figure(
            "figures/vs_C0.png", "The same against the ball radius C0",
            f"Width m={m_ref}, unit-sphere inputs. (a–c) the quantities against d, one curve per C0; "
            "(d) ‖δ‖ against C0, one curve per d: allowing more movement should give larger ‖δ‖."))
    return figs


# ---------------------------------------------------------------------------------------

_SIZES_QUICK = [5, 8, 12, 18, 28]
_SIZES_PAPER = [5, 7, 10, 14, 20, 28]

STUDY = Study(
    name="lazy-attack",
    title="Lazy training is not robust: one gradient step flips the prediction",
    source=SOURCE,
    summary=("Two-layer ReLU networks trained by SGD until they would leave the lazy ball; the "
             "smallest flipping step along the input gradient, against d, width and C0."),
    config=LazyAttackConfig,
    presets={
        "quick": Preset(
            # lr 1 (10× the authors') reaches the ball in a few epochs instead of a hundred;
            # the networks kept are the same kind: the last ones inside the ball.
            {"lr": 1.0, "epochs": 40, "C0": 10.0},
            (
                {"size": _SIZES_QUICK, "m": [64, 256], "sphere": [True], "bias": [False]},
                {"size": _SIZES_QUICK, "m": [64], "C0": [10.0, 14.0, 20.0], "sphere": [True],
                 "bias": [False]},
                # the authors' main experiment: raw pixels, biases, lr 0.1
                {"size": _SIZES_QUICK, "m": [64, 256], "sphere": [False], "bias": [True],
                 "lr": [0.1], "epochs": [20]},
            ),
            # Seeds from a power estimate (stats.seeds_for, power 0.9) on a 3-seed pilot at base
            # seed 0: the hardest part is η's slope at m=64, −0.78 against the band edge −0.7 with
            # a per-(d, seed) spread of 0.19 (5 rows per seed): 6 seeds decide it at the observed
            # effect, 10 with 80 % power, 13 with 90 %. The other parts need <= 7 (‖δ‖/‖x‖ at
            # m=64: slope −0.39 against −0.3, spread 0.15). 13 seeds, so that another base seed
            # gives the same verdicts. Checked at base seeds 0, 100, 200, 300, 400 (13 seeds each):
            # every claim reproduced at every base seed. Re-estimated on those 65 seeds pooled,
            # the tightest parts (η at m=64: −0.775, spread 0.19; ‖δ‖/‖x‖: −0.37, spread 0.17)
            # need 10–11 seeds at 80 % power and 13–15 at 90 %: 13 is about 85–90 %.
            n_seeds=13,
            description="5 sizes 5..28, widths 64/256, C0 10/14/20, 13 seeds (from a power estimate); "
                        "sphere and raw pixels"),
        "paper": Preset(
            {"lr": 0.1, "epochs": 1000, "C0": 10.0},
            (
                {"size": _SIZES_PAPER, "m": [256, 1024, 4096], "sphere": [True], "bias": [False]},
                {"size": _SIZES_PAPER, "m": [1024], "C0": [5.0, 10.0, 20.0, 40.0], "sphere": [True],
                 "bias": [False]},
                {"size": _SIZES_PAPER, "m": [256, 1024, 4096], "sphere": [False], "bias": [True]},
            ),
            n_seeds=5,
            description="the authors' protocol: lr 0.1, up to 1000 epochs, sizes 5..28, 3 widths, 4 C0, 5 seeds"),
    },
    run_points=run_points,
    claims=claims,
    figures=figures,
    ensemble=True,
    weight=work,  # one SGD pass an epoch; the paper grid's d = 784, m = 4096 group is ~30 % of it
)

__all__ = ["STUDY", "LazyAttackConfig", "run_points", "claims", "figures"]

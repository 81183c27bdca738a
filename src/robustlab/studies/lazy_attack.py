"""Study ``lazy-attack``: networks trained in the lazy regime flip under one small gradient step
(lazy training, NeurIPS 2022, Thm 3.1 and §5.1).

Each point trains E seeds of ``f(x) = (1/√m) Σ_s a_s ReLU(⟨w_s, x⟩ [+ b_s])`` with SGD on the
logistic loss until the first epoch that would leave the ball ``‖θ_s − θ_s(0)‖ ≤ C₀/√m``
(the weights kept are the last ones inside it), then, for every correctly classified test
point, finds the smallest step along ``−sign(f) ∇ₓf/‖∇ₓf‖`` that flips the sign and records
``‖δ‖``, ``‖∇ₓf‖``, ``η = ‖δ‖/‖∇ₓf‖`` and ``‖δ‖/‖x‖``.

The theorem is about unit-norm inputs: its exponents (``‖∇ₓf‖ ∝ d^{1/2}``, ``η ∝ d^{−1}``,
``‖δ‖/‖x‖ ∝ d^{−1/2}``) are checked on the runs with ``sphere=true``; the authors' main
experiment, raw pixels with biases, is checked against what the theorem implies once ‖x‖
grows like √d. The claims are declared in :mod:`.lazy_attack_claims`. Every point also
measures its networks at initialisation (``init_*``): the controls of two claims.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import torch
from matplotlib.ticker import NullLocator

from ..attacks import min_flip_along_gradient
from ..config import param
from ..metrics import accuracy, neuron_distance
from ..models.ensemble import Flat, fold
from ..report.plots import COLORS, fit_power_law, label_panels, save, subplots, theory_line
from ..train.lazy import train_lazy_sgd
from . import lazy_attack_claims as lac
from ._lazy_common import NON_LAZY_C0, RICH_INIT_SCALE, LazyConfig, neuron_params, start_point, work
from .base import Context, Figure, Preset, Study

SOURCE = lac.SOURCE
THEORY = lac.THEORY


@dataclasses.dataclass(frozen=True)
class LazyAttackConfig(LazyConfig):
    study = "lazy-attack"
    lr: float = param(0.1, "SGD learning rate (the authors': 0.1)", gt=0)
    batch_size: int = param(64, "SGD mini-batch size (the authors': 64)", ge=1)
    epochs: int = param(1000, "at most this many epochs (the authors': 1000)", ge=1)
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


def _flip_stats(flat, xt, yt, E: int, tol: float, xnorm: torch.Tensor) -> list[dict]:
    """Per copy: the minimal flipping step's means and stds over its correctly classified test
    points (‖δ‖, ‖δ‖/‖x‖, ‖∇ₓf‖, η), their count and the share that flipped."""
    flip = min_flip_along_gradient(flat, xt, yt, tol=tol)
    dn, gn, eta = (t.view(E, -1) for t in (flip.delta_norm, flip.grad_norm, flip.eta))
    ok = flip.correct.view(E, -1)
    out = []
    for e in range(E):
        n_ok = int(ok[e].sum())
        row = {"n_correct": n_ok,
               "flipped_frac": float(flip.flipped.view(E, -1)[e][ok[e]].float().mean()) if n_ok else None}
        for name, v in (("delta", dn[e]), ("delta_rel", dn[e] / xnorm), ("grad", gn[e]), ("eta", eta[e])):
            row[name], row[name + "_std"] = _stats(v)
        out.append(row)
    return out


def run_points(cfgs: list[LazyAttackConfig], device: str = "cpu") -> list:
    """Measure the seeds' networks at initialisation, train them as an ensemble until they would
    leave the ball, then attack every test point."""
    st = start_point(cfgs, device)
    base, data, E, d, model, r = st.base, st.data, st.E, st.d, st.model, st.radius
    xt = fold(data.x_test.expand(E, -1, -1))  # (E·N, d): copy e sees rows e·N … e·N+N−1
    yt = data.y_test.repeat(E)
    xnorm = data.x_test.norm(dim=1)  # (N,)
    model.eval()
    flat = Flat(model, E).eval()
    init_ok = accuracy(flat, xt, yt, per_sample=True).view(E, -1).float()
    init = _flip_stats(flat, xt, yt, E, base.flip_tol, xnorm)
    log = train_lazy_sgd(model, data.x_train, data.y_train, radius=r, generators=st.generators,
                         lr=base.lr, batch_size=base.batch_size, max_epochs=base.epochs,
                         check=base.ball_check)
    model.eval()
    test_ok = accuracy(flat, xt, yt, per_sample=True).view(E, -1).float()
    xr = fold(data.x_train.expand(E, -1, -1))
    train_ok = accuracy(flat, xr, data.y_train.repeat(E), per_sample=True).view(E, -1).float()
    after = _flip_stats(flat, xt, yt, E, base.flip_tol, xnorm)
    with torch.no_grad():
        scores = model(data.x_test.expand(E, -1, -1))  # (E, N)
        offsets = neuron_distance(*neuron_params(model), per_neuron=True)  # (E, m)
    final = log.history[-1] if log.history else None
    out = []
    for e in range(E):
        ok = (scores[e] * data.y_test) > 0
        out.append([{
            "d": d, "radius": r, "x_norm": float(xnorm.mean()),
            "epochs_run": float(log.epochs[e]), "left_ball": bool(log.stopped[e]),
            "max_offset": float(offsets[e].max()), "offset_ratio": float(offsets[e].max() / r),
            "train_loss": float(final["train_loss"][e]) if final else None,
            "train_acc": float(train_ok[e].mean()), "test_acc": float(test_ok[e].mean()),
            "abs_f": float(scores[e][ok].abs().mean()) if bool(ok.any()) else None,
            **after[e],
            "init_test_acc": float(init_ok[e].mean()),
            **{f"init_{k}": init[e][k] for k in ("delta", "delta_rel", "grad", "eta")},
        }])
    return out


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
    sph, raw = lac.theory_runs(df), lac.raw_runs(df)
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
            "pixels with biases (the authors' main experiment), where ‖x‖ itself grows with d, so the "
            "same theorem predicts η ∝ ‖x‖/d there (dashed: d^−1/2, for ‖x‖ ∝ √d; MNIST's pixels grow "
            "a little faster, and raw-eta-scaling judges η/‖x‖ against d^−1)."))
    sph = sph[sph["C0"] < NON_LAZY_C0]  # the non-lazy control is not drawn against C0
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
                # the exponent claims are decided at every lazy C0 (10, 20, 40); their control is
                # the rich regime: a 100× smaller first layer at init, a ball that never binds
                # (40 epochs of the same SGD). C0 = 1000 from the standard init is no control:
                # SGD leaves it lazy (C0_used 14–23, docs/studies/lazy-training.md)
                {"size": _SIZES_QUICK, "m": [64], "C0": [10.0, 20.0, 40.0], "sphere": [True], "bias": [False]},
                {"size": _SIZES_QUICK, "m": [64], "C0": [NON_LAZY_C0], "init_scale": [RICH_INIT_SCALE],
                 "sphere": [True], "bias": [False]},
                # the authors' main experiment: raw pixels, biases, lr 0.1; and its control
                {"size": _SIZES_QUICK, "m": [64, 256], "sphere": [False], "bias": [True],
                 "lr": [0.1], "epochs": [20]},
                {"size": _SIZES_QUICK, "m": [64], "C0": [NON_LAZY_C0], "init_scale": [RICH_INIT_SCALE],
                 "sphere": [False], "bias": [True], "lr": [0.1], "epochs": [20]},
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
            description="5 sizes 5..28, widths 64/256, C0 10/20/40 and the non-lazy control C0=1000, "
                        "13 seeds (from a power estimate); sphere and raw pixels"),
        "paper": Preset(
            {"lr": 0.1, "epochs": 1000, "C0": 10.0},
            (
                {"size": _SIZES_PAPER, "m": [256, 1024, 4096], "sphere": [True], "bias": [False]},
                {"size": _SIZES_PAPER, "m": [1024], "C0": [5.0, 10.0, 20.0, 40.0], "sphere": [True],
                 "bias": [False]},
                {"size": _SIZES_PAPER, "m": [256, 1024, 4096], "sphere": [False], "bias": [True]},
                # the rich-regime controls: a 100× smaller first layer, a ball that never binds, so
                # SGD runs to the cap; 100 epochs of lr 0.1 at m = 256 (1000 would cost more than
                # the rest of the grid)
                {"size": _SIZES_PAPER, "m": [256], "C0": [NON_LAZY_C0], "init_scale": [RICH_INIT_SCALE],
                 "epochs": [100], "sphere": [True], "bias": [False]},
                {"size": _SIZES_PAPER, "m": [256], "C0": [NON_LAZY_C0], "init_scale": [RICH_INIT_SCALE],
                 "epochs": [100], "sphere": [False], "bias": [True]},
            ),
            n_seeds=5,
            description="the authors' protocol: lr 0.1, up to 1000 epochs, sizes 5..28, 3 widths, 4 C0, 5 seeds"),
    },
    run_points=run_points,
    claims=lac.claims,
    figures=figures,
    ensemble=True,
    weight=work,
    claim_specs=lac.SPECS,
    populations={"the same networks at initialisation": "each network's own measurements before any training step"},
    premises=lac.PREMISES,  # one SGD pass an epoch; the paper grid's d = 784, m = 4096 group is ~30 % of it
)

claims = lac.claims

__all__ = ["STUDY", "LazyAttackConfig", "run_points", "claims", "figures"]

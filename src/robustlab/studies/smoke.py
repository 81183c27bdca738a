"""The smoke study: softmax regression on the embedded digits.

Small enough to run in seconds, it exercises the whole path — config, grid, ensemble of
seeds trained in one batched pass, store, claims, figures, report — and serves the sweep
tests and benchmarks.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import torch

from .. import stats
from ..claims import EXPLORATORY, SELF_CHECK, ClaimSpec
from ..config import Config, ConfigError, param
from ..data import load_images
from ..errors import NumericalError
from ..report.plots import mean_band, plt, save
from ..utils import make_generator, resolve_device
from .base import Claim, Context, Figure, Preset, Study


@dataclasses.dataclass(frozen=True)
class SmokeConfig(Config):
    study = "smoke"
    dataset: str = param("digits", "embedded dataset", choices=("digits", "mnist5k"))
    size: int = param(8, "images resized to size x size", ge=2, le=28)
    lr: float = param(0.5, "gradient-descent learning rate", gt=0)
    epochs: int = param(30, "full-batch gradient steps", ge=1)
    init_scale: float = param(0.01, "std of the initial weights", ge=0)
    weight_decay: float = param(0.0, "L2 penalty", ge=0)
    fail_on_lr: float = param(-1.0, "testing hook: a point with exactly this lr raises (negative: never)")

    def check(self) -> None:
        if self.dataset == "digits" and self.size > 8:
            raise ConfigError("size", self.size, "<= 8 for digits (8x8 images)")


def run_points(cfgs: list[SmokeConfig], device: str = "cpu") -> list:
    """Train len(cfgs) seeds of the same point as one (E, d, k) ensemble."""
    base = cfgs[0]
    if base.fail_on_lr >= 0 and base.lr == base.fail_on_lr:
        raise RuntimeError(f"forced failure at lr={base.lr}")
    dev = resolve_device(device)
    data = load_images(base.dataset, size=base.size, flatten=True).to(dev)
    E, d, k = len(cfgs), data.d, data.n_classes
    W = torch.stack([torch.randn(d, k, generator=make_generator(c.seed, "smoke-init")) * c.init_scale
                     for c in cfgs]).to(dev).requires_grad_(True)  # (E, d, k)
    b = torch.zeros(E, 1, k, device=dev, requires_grad=True)
    x, y = data.x_train, data.y_train
    losses = []
    for _ in range(base.epochs):
        logits = torch.einsum("nd,edk->enk", x, W) + b  # (E, N, k)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, k), y.repeat(E), reduction="none")
        loss = loss.reshape(E, -1).mean(1) + base.weight_decay * W.pow(2).sum((1, 2))  # (E,)
        gW, gb = torch.autograd.grad(loss.sum(), (W, b))
        with torch.no_grad():
            W -= base.lr * gW
            b -= base.lr * gb
        losses.append(loss.detach())
    L = torch.stack(losses, 1).cpu()  # (E, epochs)
    with torch.no_grad():
        acc = ((torch.einsum("nd,edk->enk", data.x_test, W) + b).argmax(-1) == data.y_test).float().mean(1)
    out = []
    for e, c in enumerate(cfgs):
        if not torch.isfinite(L[e]).all():
            out.append(NumericalError(f"loss diverged (lr={c.lr})"))
            continue
        out.append([{"epoch": t + 1, "loss": float(L[e, t]),
                     "test_acc": float(acc[e]) if t == base.epochs - 1 else None}
                    for t in range(base.epochs)])
    return out


def claims(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    """Two pipeline checks, each a verdict on an effect with a t interval over seeds (a seed is
    one network; with several learning rates a seed's value is its mean over them):

    * ``smoke-accuracy``: mean test accuracy above 0.85;
    * ``smoke-loss-falls``: the paired drop of the training loss from the first to the last
      epoch (same seed) above 0.
    """
    final = df[df["test_acc"].notna()]
    acc_per_seed = final.groupby("seed")["test_acc"].mean()
    acc = stats.mean_estimate(acc_per_seed.to_numpy(float))
    first = df[df["epoch"] == 1].groupby("seed")["loss"].mean()
    last = df[df["epoch"] == df["epoch"].max()].groupby("seed")["loss"].mean()
    seeds = first.index.intersection(last.index)
    drop = stats.difference_estimate(first[seeds].to_numpy(float), last[seeds].to_numpy(float), paired=True)
    return [
        Claim("smoke-accuracy", "softmax regression on the digits reaches test accuracy >= 0.85",
              stats.decide(acc, threshold=0.85, side="above"),
              {"test_acc_mean": acc.value, "test_acc_mean_ci": [acc.low, acc.high],
               "interval": acc.method, "n_points": int(final["point"].nunique())}, "robustlab"),
        Claim("smoke-loss-falls", "the training loss falls",
              stats.decide(drop, threshold=0.0, side="above"),
              {"first_loss": float(first.mean()), "last_loss": float(last.mean()),
               "loss_drop": drop.value, "loss_drop_ci": [drop.low, drop.high], "interval": drop.method},
              "robustlab"),
    ]


def figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for lr, sub in df.groupby("lr"):
        mean_band(ax, sub, "epoch", "loss", label=f"lr={lr:g}", marker="")
    ax.set_xlabel("epoch (full-batch step)")
    ax.set_ylabel("training cross-entropy")
    ax.legend()
    save(fig, ctx.figdir / "loss.png")
    return [Figure("figures/loss.png", "Training loss", "Mean over seeds with a ±1 std band; it should fall steadily.")]


STUDY = Study(
    name="smoke",
    title="Smoke: softmax regression on the digits",
    source="robustlab (a pipeline check, no paper)",
    summary="A tiny study that runs the whole pipeline in seconds.",
    config=SmokeConfig,
    presets={
        "quick": Preset({}, ({"lr": [0.5]},), n_seeds=2, description="one learning rate, two seeds"),
        "paper": Preset({"epochs": 100}, ({"lr": [0.1, 0.5, 1.0]},), n_seeds=4),
    },
    run_points=run_points,
    claims=claims,
    figures=figures,
    ensemble=True,
    # no paper states either. The loss falling is an invariant of the pipeline at any sane
    # learning rate (a failure means robustlab is broken): a self-check. The accuracy bound
    # depends on the settings (5 epochs do not reach 0.85), so it is an exploratory reading.
    claim_specs=(ClaimSpec("smoke-accuracy", kind=EXPLORATORY), ClaimSpec("smoke-loss-falls", kind=SELF_CHECK)),
)

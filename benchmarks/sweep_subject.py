"""A benchmark subject for bench_sweep.py: one small two-layer-network point.

Sized like the prototype of SPEC study A (a few hundred samples, d = 64, a narrow ReLU
layer, full-batch GD for a few hundred steps): the kind of point a seed sweep is made of,
where each step is a handful of small tensor ops. ``run_points`` trains ``len(cfgs)`` seeds
as one ensemble with a leading dim E; the plain loop and the one-process-per-point runs
call the very same function with E = 1, so the comparison measures batching alone.
"""

from __future__ import annotations

import dataclasses

import torch

from robustlab.config import Config, param
from robustlab.errors import NumericalError
from robustlab.utils import make_generator


@dataclasses.dataclass(frozen=True)
class TwoLayerConfig(Config):
    study = "bench-two-layer"
    n: int = param(200, "training samples", ge=1)
    d: int = param(64, "input dimension", ge=1)
    width: int = param(8, "hidden ReLU units", ge=1)
    steps: int = param(300, "full-batch GD steps", ge=1)
    lr: float = param(0.5, "learning rate", gt=0)


def _data(cfg: TwoLayerConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Two Gaussian classes, means ±mu/2 with |mu| = 2, labels ±1 — shared by every seed."""
    g = make_generator(0, "bench-data")
    y = torch.where(torch.rand(cfg.n, generator=g) < 0.5, -1.0, 1.0)  # (N,)
    mu = torch.randn(cfg.d, generator=g)
    mu = 2 * mu / mu.norm()
    x = torch.randn(cfg.n, cfg.d, generator=g) + 0.5 * y[:, None] * mu  # (N, d)
    return x, y


def run_points(cfgs: list[TwoLayerConfig], device: str = "cpu") -> list:
    """f(x) = a·relu(W x)/m, logistic loss, GD on (W, a); E = len(cfgs) seeds in one pass.

    The E first layers are laid side by side as one (d, E·m) matrix, so the forward and
    backward passes are single GEMMs over the shared inputs rather than E small ones.
    """
    base = cfgs[0]
    x, y = _data(base)  # (N, d), (N,)
    E, m, d = len(cfgs), base.width, base.d
    W = torch.stack([torch.randn(d, m, generator=make_generator(c.seed, "W")) / d ** 0.5
                     for c in cfgs]).requires_grad_(True)  # (E, d, m)
    a = torch.stack([torch.randn(m, generator=make_generator(c.seed, "a")) for c in cfgs]
                    ).requires_grad_(True)  # (E, m)

    def forward(W: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x @ W.transpose(0, 1).reshape(d, E * m)).view(-1, E, m)  # (N, E, m)
        return torch.einsum("nem,em->en", h, a) / m  # (E, N)

    losses = []
    for _ in range(base.steps):
        loss = torch.nn.functional.softplus(-y * forward(W, a)).mean(1)  # (E,) logistic loss
        gW, ga = torch.autograd.grad(loss.sum(), (W, a))
        with torch.no_grad():
            W -= base.lr * m * gW  # mean-field scaling of the step
            a -= base.lr * m * ga
        losses.append(loss.detach())
    L = torch.stack(losses, 1)  # (E, steps)
    with torch.no_grad():
        acc = ((forward(W, a) * y) > 0).float().mean(1)  # (E,)
    out = []
    for e in range(E):
        if not torch.isfinite(L[e]).all():
            out.append(NumericalError("loss diverged"))
            continue
        out.append([{"step": base.steps, "loss": float(L[e, -1]), "train_acc": float(acc[e])}])
    return out

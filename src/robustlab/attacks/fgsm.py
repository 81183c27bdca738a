"""FGSM: one steepest-ascent step of full size ε (Goodfellow et al. 2015).

``x_adv = x + ε · s(∇ₓL)`` with ``s = sign`` for ℓ∞ and ``s = g/‖g‖₂`` for ℓ2.
For a linear model this lowers the margin by exactly ``ε‖w‖₁`` (ℓ∞) or ``ε‖w‖₂`` (ℓ2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import nn

from .base import Attack, Bounds, _check_flag, _check_loss, loss_and_grad
from .losses import get_loss

__all__ = ["FGSM"]


@dataclasses.dataclass(frozen=True)
class FGSM(Attack):
    """``FGSM(Linf(eps))`` / ``FGSM(L2(eps))``: one step of full size ε on cross-entropy, as
    ``torchattacks.FGSM(model, eps=8/255)``; ``loss`` in ce (the default), margin, logistic or
    a callable ``(out, y) -> (N,)``. Deterministic: no random start. ``saturation_safe=True``
    steps along cross-entropy's gradient taken up to a positive factor per sample, which the
    step does not see, so that a point the model classifies with a float32-saturated softmax
    (its gradient exactly 0) still moves (see :class:`~robustlab.attacks.PGD`)."""

    loss: str | Callable = "ce"
    saturation_safe: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_loss(self.loss)
        _check_flag("saturation_safe", self.saturation_safe)

    def run(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, bounds: Bounds, generator=None, **kw) -> torch.Tensor:
        _, g, _ = loss_and_grad(model, x, y, get_loss(self.loss), check=True, direction=self.saturation_safe)
        return x + self.threat.eps * self.threat.steepest(g)

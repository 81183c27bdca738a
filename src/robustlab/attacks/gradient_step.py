"""One gradient-ascent step clipped to the ball (the feature-learning paper's adversarial training step).

``x_adv = Π_ε(x + η̃ ∇ₓL)``: for ℓ∞ the projection is the elementwise clip of ``η̃ ∇ₓL`` to
±ε, exactly the feature-learning paper's ``x + clip(η̃ ∇ₓL)`` (feature learning, ICLR 2025, Alg. 1); for ℓ2 it rescales the step
onto the ball. Unlike FGSM the step keeps the gradient's magnitude, so small gradients give
small perturbations.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
from torch import nn

from ..config import ConfigError
from .base import Attack, Bounds, _check_loss, loss_and_grad
from .losses import get_loss

__all__ = ["GradientStep"]


@dataclasses.dataclass(frozen=True)
class GradientStep(Attack):
    """``GradientStep(Linf(eps), step=η̃)``: ``x + clip_ε(η̃ ∇ₓ loss)``."""

    step: float = 1.0
    loss: str | Callable = "ce"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.step, (int, float)) and math.isfinite(self.step) and self.step > 0):
            raise ConfigError("step", self.step, "a finite number > 0")
        _check_loss(self.loss)

    def run(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, bounds: Bounds, generator=None, **kw) -> torch.Tensor:
        _, g, _ = loss_and_grad(model, x, y, get_loss(self.loss), check=True)
        return x + self.step * g

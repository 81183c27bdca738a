"""The feature-direction attack of the feature-learning paper (ICLR 2025): subtract ε along the class's own feature.

For patch inputs ``X = (x_1..x_P)``, ``(N, P, d)``, the theory's attack is
``δ_p = −ε v_y`` on the non-robust patches (feature learning, ICLR 2025, Prop. 3.2), where ``v_y`` is the
non-robust feature of the true class. Generally: given one direction per class,
``directions (k, d)``, subtract ``ε · directions[y]`` on the selected patches (``mask (N, P)``,
default every patch), or from the whole input for flat data ``(N, d)``.
It needs no gradient. The base still projects onto the ℓ∞ ball of radius ε (a no-op for
unit-ℓ2 directions, whose entries are at most 1 in magnitude) and clamps to the box.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from ..config import ConfigError
from .base import Attack, Bounds
from .threat import Linf

__all__ = ["FeatureDirection"]


@dataclasses.dataclass(frozen=True, eq=False)
class FeatureDirection(Attack):
    """``FeatureDirection(eps, directions)``; call with ``mask=`` ``(N, P)`` bool for patches.

    Labels: class indices ``(N,)``; binary ±1 labels select row 1 for +1 and row 0 for −1.
    """

    threat: Linf = dataclasses.field(init=False)
    directions: torch.Tensor = dataclasses.field(init=False)

    def __init__(self, eps: float, directions: torch.Tensor):
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
            raise ConfigError("eps", eps, "a finite number >= 0")
        if not isinstance(directions, torch.Tensor) or directions.ndim != 2:
            raise ConfigError("directions", getattr(directions, "shape", directions), "a (k, d) tensor")
        object.__setattr__(self, "threat", Linf(float(eps)))
        object.__setattr__(self, "directions", directions.detach())

    def with_eps(self, eps: float) -> FeatureDirection:
        return FeatureDirection(eps, self.directions)

    def run(
        self,
        model: nn.Module,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        bounds: Bounds,
        generator: torch.Generator | None = None,
        mask: torch.Tensor | None = None,
        **kw,
    ) -> torch.Tensor:
        idx = (y > 0).long() if y.is_floating_point() else y.long()
        v = self.directions.to(device=x.device, dtype=x.dtype)[idx]  # (N, d)
        if x.ndim == 2:
            if mask is not None:
                raise ValueError("mask= applies to patch inputs (N, P, d) only")
            return x - self.threat.eps * v
        if x.ndim != 3:
            raise ValueError(f"FeatureDirection expects (N, d) or (N, P, d) inputs, got {tuple(x.shape)}")
        step = (-self.threat.eps * v)[:, None, :]  # (N, 1, d): broadcast over the patches, not materialised
        if mask is None:
            return x + step
        if mask.shape != x.shape[:2]:
            raise ValueError(f"mask must have shape (N, P) = {tuple(x.shape[:2])}, got {tuple(mask.shape)}")
        # x + mask·step in one pass: mask is 0/1, so mask·step is exact and the sum rounds once
        return torch.addcmul(x, mask.to(device=x.device, dtype=x.dtype)[..., None], step)

"""Threat models: small frozen objects that know their norm, projection, steepest direction
and random start (the foolbox design).

Norms and projections act per sample over every non-batch dimension, so images ``(N, C, H, W)``,
flat inputs ``(N, d)`` and patch inputs ``(N, P, d)`` are all handled the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..config import ConfigError

__all__ = ["Linf", "L2", "Threat", "per_sample_norm", "uniform_ball_l2"]


def _bcast(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(N,) -> (N, 1, ..., 1) to broadcast against ``like``."""
    return v.reshape(v.shape[0], *([1] * (like.ndim - 1)))


def per_sample_norm(v: torch.Tensor, p: float) -> torch.Tensor:
    """``‖v_n‖_p`` over all non-batch dims, ``(N,)``."""
    flat = v.reshape(v.shape[0], -1)
    if p == math.inf:
        return flat.abs().amax(1) if flat.shape[1] else flat.new_zeros(flat.shape[0])
    return torch.linalg.vector_norm(flat, ord=p, dim=1)


def _draw(shape: tuple[int, ...], like: torch.Tensor, generator: torch.Generator | None, kind: str) -> torch.Tensor:
    """Uniform [0, 1) or standard normal noise, drawn on the generator's device, moved to ``like``."""
    dev = generator.device if generator is not None else like.device
    fn = torch.rand if kind == "uniform" else torch.randn
    return fn(shape, generator=generator, device=dev, dtype=like.dtype).to(like.device)


def uniform_ball_l2(shape: tuple[int, ...], eps: float, like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """``δ ~ Uniform(B₂(0, ε))`` per sample (leading dim), ``shape``.

    Direction ``z / ‖z‖`` with Gaussian ``z``; radius ``ε U^{1/d}`` (d = numel per sample).
    """
    z = _draw(shape, like, generator, "normal")
    d = math.prod(shape[1:])
    u = _draw((shape[0],), like, generator, "uniform")
    r = eps * u.pow(1.0 / d) / per_sample_norm(z, 2).clamp_min(torch.finfo(like.dtype).tiny)
    return z.mul_(_bcast(r, z))


def _check_eps(eps: float) -> None:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ConfigError("eps", eps, "a finite number >= 0")


@dataclass(frozen=True)
class Linf:
    """The ℓ∞ ball ``{δ : max_i |δ_i| <= eps}``."""

    eps: float
    p = math.inf
    name = "linf"

    def __post_init__(self) -> None:
        _check_eps(self.eps)

    def norm(self, v: torch.Tensor) -> torch.Tensor:
        """``‖v_n‖_∞`` per sample, ``(N,)``."""
        return per_sample_norm(v, math.inf)

    def project(self, x: torch.Tensor, x_adv: torch.Tensor) -> torch.Tensor:
        """Nearest point of the ball around ``x``: clip ``x_adv - x`` elementwise to ±ε.

        A fresh tensor (never ``x`` or ``x_adv``), computed in place in the difference's
        memory: the bits of ``x + (x_adv - x).clamp(-ε, ε)`` (addition commutes exactly)."""
        return torch.sub(x_adv, x).clamp_(-self.eps, self.eps).add_(x)

    def steepest(self, g: torch.Tensor) -> torch.Tensor:
        """Unit-ℓ∞ steepest-ascent direction: ``sign(g)``."""
        return g.sign()

    def random_init(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """``x + δ``, ``δ ~ Uniform([-ε, ε]^d)``: a fresh tensor, ``x + (2u − 1)·ε`` computed in
        place in the draw's memory (the same bits)."""
        u = _draw(tuple(x.shape), x, generator, "uniform")
        return u.mul_(2).sub_(1).mul_(self.eps).add_(x)


@dataclass(frozen=True)
class L2:
    """The ℓ2 ball ``{δ : ‖δ‖₂ <= eps}`` (per sample, over all non-batch dims)."""

    eps: float
    p = 2.0
    name = "l2"

    def __post_init__(self) -> None:
        _check_eps(self.eps)

    def norm(self, v: torch.Tensor) -> torch.Tensor:
        """``‖v_n‖₂`` per sample, ``(N,)``."""
        return per_sample_norm(v, 2)

    def project(self, x: torch.Tensor, x_adv: torch.Tensor) -> torch.Tensor:
        """Nearest point of the ball around ``x``: rescale ``x_adv - x`` if its norm exceeds ε."""
        delta = x_adv - x
        n = per_sample_norm(delta, 2)
        scale = (self.eps / n.clamp_min(torch.finfo(delta.dtype).tiny)).clamp(max=1.0)
        return delta.mul_(_bcast(scale, delta)).add_(x)  # x + δ·s, in δ's memory (the same bits)

    def steepest(self, g: torch.Tensor) -> torch.Tensor:
        """Unit-ℓ2 steepest-ascent direction ``g / ‖g‖`` (zero where ``g = 0``)."""
        n = per_sample_norm(g, 2).clamp_min(torch.finfo(g.dtype).tiny)
        return g / _bcast(n, g)

    def random_init(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """``x + δ``, ``δ ~ Uniform(B₂(0, ε))``."""
        return uniform_ball_l2(tuple(x.shape), self.eps, x, generator).add_(x)


Threat = Linf | L2

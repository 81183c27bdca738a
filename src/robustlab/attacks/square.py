"""Square Attack, ℓ∞ (Andriushchenko et al. 2020, "Square Attack: a query-efficient black-box
adversarial attack via random search", Alg. 1 and 2; AutoAttack's fourth attack).

No gradients: it only reads the logits, so gradient masking does not fool it. It starts from
vertical stripes, ``x + ε·s`` with one random sign per (channel, column), then for each query
proposes to overwrite one random ``s×s`` window with ``x_best + 2ε·(random sign per channel)``,
projects onto the ball and the box, and keeps the proposal where the margin ``z_y − max_{j≠y}
z_j`` fell. The window side shrinks on the reference schedule: ``s = round(√(p·h·w))`` with
``p = p_init / 2^j`` past 10, 50, 200, 500, 1,000, 2,000, 4,000, 6,000 and 8,000 of 10,000
queries (rescaled to ``queries``). A row stops at its first misclassification; the window's
place is shared by the batch at each query, as in the reference code. Restarts are stacked
into the batch (``(N·R, ...)``, point-major) and the worst restart wins.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from ..config import ConfigError
from .apgd import worst_restart
from .base import Attack, Bounds
from .threat import Linf

__all__ = ["Square", "p_schedule"]

_SCHEDULE = ((10, 1), (50, 2), (200, 4), (500, 8), (1000, 16), (2000, 32), (4000, 64), (6000, 128), (8000, 256))


def p_schedule(p_init: float, it: int, queries: int) -> float:
    """The fraction of pixels a window covers at query ``it`` (the reference's halving schedule,
    written for 10,000 queries and rescaled to ``queries``)."""
    t = int(it / queries * 10000)
    div = next((d for lim, d in _SCHEDULE if t <= lim), 512)
    return p_init / div


def _margin(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = model(x)
    zy = z.gather(1, y.view(-1, 1)).squeeze(1)
    return zy - z.scatter(1, y.view(-1, 1), -math.inf).amax(1)


def _signs(shape: tuple[int, ...], like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    dev = generator.device if generator is not None else like.device
    s = torch.randint(0, 2, shape, generator=generator, device=dev).to(device=like.device, dtype=like.dtype)
    return s.mul_(2).sub_(1)


@dataclasses.dataclass(frozen=True)
class Square(Attack):
    """``Square(Linf(eps), queries=5000, p_init=0.8, restarts=1)`` on images ``(N, C, H, W)``
    with logits ``(N, k)``."""

    queries: int = 5000
    p_init: float = 0.8
    restarts: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.threat, Linf):
            raise ConfigError("threat", self.threat, "Linf(eps): robustlab's Square is the ℓ∞ attack")
        for name in ("queries", "restarts"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(name, v, "an integer >= 1")
        if not (isinstance(self.p_init, (int, float)) and 0 < self.p_init <= 1):
            raise ConfigError("p_init", self.p_init, "a number in (0, 1]")

    def run(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, bounds: Bounds,
            generator: torch.Generator | None = None, **kw) -> torch.Tensor:
        if x.ndim != 4:
            raise ValueError(f"Square needs images (N, C, H, W), got shape {tuple(x.shape)}")
        R, N = self.restarts, x.shape[0]
        x0 = x.repeat_interleave(R, dim=0) if R > 1 else x  # (M, C, H, W), row n·R + r
        y0 = y.repeat_interleave(R, dim=0) if R > 1 else y
        M, c, h, w = x0.shape
        lo, hi = bounds if bounds is not None else (-math.inf, math.inf)
        eps = self.eps
        with torch.no_grad():
            x_best = (x0 + eps * _signs((M, c, 1, w), x0, generator)).clamp_(lo, hi)  # vertical stripes
            m_best = _margin(model, x_best, y0)
            for it in range(self.queries):
                rows = (m_best > 0).nonzero().squeeze(1)  # still classified correctly
                if rows.numel() == 0:
                    break
                s = min(max(round(math.sqrt(p_schedule(self.p_init, it, self.queries) * h * w)), 1), h, w)
                at = torch.randint(0, (h - s + 1) * (w - s + 1), (1,), generator=generator,
                                   device=generator.device if generator is not None else x.device)
                vh, vw = divmod(int(at), w - s + 1)
                xr, xb = x0[rows], x_best[rows]
                x_new = xb.clone()
                x_new[:, :, vh:vh + s, vw:vw + s] += 2 * eps * _signs((c, 1, 1), x0, generator)
                x_new = torch.minimum(torch.maximum(x_new, xr - eps), xr + eps).clamp_(lo, hi)
                m_new = _margin(model, x_new, y0[rows])
                better = m_new < m_best[rows]  # a misclassification (m <= 0) is always lower
                x_best[rows] = torch.where(better.view(-1, 1, 1, 1), x_new, xb)
                m_best[rows] = torch.minimum(m_new, m_best[rows])
        return worst_restart(x_best, m_best <= 0, -m_best, N, R)

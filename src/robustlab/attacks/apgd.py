"""Auto-PGD (Croce & Hein 2020, "Reliable evaluation of adversarial robustness with an ensemble
of diverse parameter-free attacks", Alg. 1), with the cross-entropy or the DLR loss.

APGD is PGD without a step size to tune: it starts at ``η = 2ε``, adds momentum
(``α = 0.75``), and halves ``η`` at checkpoints — restarting from the best point so far —
wherever the loss rose in fewer than ``ρ = 0.75`` of the steps since the last checkpoint, or
where neither ``η`` nor the best loss changed over that interval. Checkpoints sit at
``p_0 = 0, p_1 = 0.22, p_{j+1} = p_j + max(p_j − p_{j−1} − 0.03, 0.06)`` of the steps (as
fractions; the spacings shrink from 22 % to 6 %). One step, per row::

    z       = Π(x_k + η · s(∇L(x_k)))                       s = sign (ℓ∞) or g/‖g‖ (ℓ2)
    x_{k+1} = Π(x_k + α (z − x_k) + (1 − α)(x_k − x_{k−1}))  (α = 1 on the first step)

with ``Π`` the projection onto the ball ∩ box. The random start is the paper's: for ℓ∞,
``x + ε t / ‖t‖_∞`` with ``t ~ U[−1, 1]^d`` (a corner of the ball along one coordinate); for
ℓ2 ``x + ε t / ‖t‖₂`` with Gaussian ``t``. The DLR loss (their eq. 5),
``−(z_y − max_{i≠y} z_i) / (z_π1 − z_π3)``, is invariant to shifting and scaling the logits, so
it is not fooled by a saturated softmax; it needs at least three classes.

Per sample the attack returns a misclassified iterate where it found one, else the iterate of
highest loss; restarts are stacked into the batch (``(N·R, ...)``, point-major, as in
:class:`~robustlab.attacks.PGD`), each row with its own step size, and the worst restart wins.
The step-size schedule follows AutoAttack's reference code (which torchattacks ports): the
checkpoint counter and the "increase in fewer than ρ of the steps" test count strict
increases of the per-step loss.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from ..config import ConfigError
from .base import Attack, Bounds, gradient_fn
from .losses import cross_entropy, dlr_loss
from .threat import Linf, per_sample_norm

__all__ = ["APGD", "dlr_loss", "checkpoints", "worst_restart"]


APGD_LOSSES = {"ce": cross_entropy, "dlr": dlr_loss}


def checkpoints(steps: int) -> list[int]:
    """The iterations (0-based, < ``steps``) after which APGD checks its step size: the
    reference code's spacing, ``k₀ = max(⌊0.22·steps⌋, 1)`` then ``k ← max(k − ⌊0.03·steps⌋,
    ⌊0.06·steps⌋)`` (each at least 1)."""
    k, decr, least = max(int(0.22 * steps), 1), max(int(0.03 * steps), 1), max(int(0.06 * steps), 1)
    out, at = [], k - 1
    while at < steps:
        out.append(at)
        k = max(k - decr, least)
        at += k
    return out


@dataclasses.dataclass(frozen=True)
class APGD(Attack):
    """``APGD(Linf(eps), steps=100, restarts=1, loss="ce")``; ``loss="dlr"`` is APGD-DLR.

    ``rho``: the fraction of steps in a checkpoint interval in which the loss must rise for the
    step size to be kept. ``momentum``: the ``α`` of the update above.
    """

    steps: int = 100
    restarts: int = 1
    loss: str = "ce"
    rho: float = 0.75
    momentum: float = 0.75

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ConfigError("steps", self.steps, "an integer >= 1")
        if isinstance(self.restarts, bool) or not isinstance(self.restarts, int) or self.restarts < 1:
            raise ConfigError("restarts", self.restarts, "an integer >= 1")
        if self.loss not in APGD_LOSSES:
            raise ConfigError("loss", self.loss, f"one of {', '.join(APGD_LOSSES)}")
        for name in ("rho", "momentum"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v <= 1):
                raise ConfigError(name, v, "a number in (0, 1]")

    def _start(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """The paper's random start: ``x + ε t / ‖t‖`` (uniform t for ℓ∞, Gaussian for ℓ2)."""
        dev = generator.device if generator is not None else x.device
        if isinstance(self.threat, Linf):
            t = torch.rand(x.shape, generator=generator, device=dev, dtype=x.dtype).to(x.device).mul_(2).sub_(1)
            n = per_sample_norm(t, math.inf)
        else:
            t = torch.randn(x.shape, generator=generator, device=dev, dtype=x.dtype).to(x.device)
            n = per_sample_norm(t, 2)
        scale = self.eps / n.clamp_min(torch.finfo(x.dtype).tiny)
        return x + t * scale.view(-1, *[1] * (x.ndim - 1))

    def _projection(self, x0: torch.Tensor, bounds: Bounds):
        """``z ↦`` its projection onto the ball around ``x0`` ∩ the box, in ``z``'s memory (ℓ∞:
        one clamp between the precomputed ``max(x0 − ε, lo)`` and ``min(x0 + ε, hi)``)."""
        if isinstance(self.threat, Linf):
            lo_t, hi_t = x0 - self.eps, x0 + self.eps
            if bounds is not None:
                lo_t.clamp_(min=bounds[0])
                hi_t.clamp_(max=bounds[1])
            return lambda z: z.clamp_(lo_t, hi_t)

        def project(z: torch.Tensor) -> torch.Tensor:
            z = self.threat.project(x0, z)
            return z.clamp_(bounds[0], bounds[1]) if bounds is not None else z

        return project

    def run(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, bounds: Bounds,
            generator: torch.Generator | None = None, **kw) -> torch.Tensor:
        R, N = self.restarts, x.shape[0]
        x0 = x.repeat_interleave(R, dim=0) if R > 1 else x  # (M, ...), row n·R + r
        y0 = y.repeat_interleave(R, dim=0) if R > 1 else y
        result, fooled, loss_best = self.run_rows(model, x0, y0, APGD_LOSSES[self.loss], bounds, generator)
        return worst_restart(result, fooled, loss_best, N, R)

    def run_rows(self, model: nn.Module, x0: torch.Tensor, y0: torch.Tensor, loss_fn, bounds: Bounds,
                 generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One APGD run per row of ``x0`` ascending ``loss_fn(out, y0) -> (M,)``: per row the
        returned point (a misclassified iterate where one was found, else the highest-loss one),
        whether it was misclassified ``(M,)``, and the highest loss ``(M,)``."""
        ones = [1] * (x0.ndim - 1)
        M = x0.shape[0]
        project = self._projection(x0, bounds)
        grad_fn = gradient_fn(model, loss_fn)
        x_adv = project(self._start(x0, generator))
        out, loss, g, ok = grad_fn(x_adv, y0, check=True)
        fooled = ~ok  # (M,) a misclassified iterate was found
        x_fooled = x_adv.clone()  # the last misclassified iterate (the start until one is found)
        x_best, g_best, loss_best = x_adv.clone(), g.clone(), loss.clone()  # highest loss so far
        step = torch.full((M, *ones), 2.0 * self.eps, dtype=x0.dtype, device=x0.device)
        x_prev = x_adv
        rises = torch.zeros(M, dtype=torch.long, device=x0.device)  # steps since the checkpoint that raised the loss
        loss_prev = loss
        loss_at_check, reduced_at_check = loss_best.clone(), torch.ones(M, dtype=torch.bool, device=x0.device)
        marks, since = set(checkpoints(self.steps)), 0
        # the loop is the attack's whole cost besides the model: one fused clamp per projection
        # and torch.where instead of boolean-mask assignment (each of those is three kernels)
        for i in range(self.steps):
            with torch.no_grad():
                z = project(torch.addcmul(x_adv, step, self.threat.steepest(g)))
                if i > 0:  # x + α(z − x) + (1 − α)(x − x_prev); α = 1 on the first step
                    z = project(torch.lerp(x_adv, z, self.momentum).add_(x_adv - x_prev, alpha=1 - self.momentum))
            x_prev, x_adv = x_adv, z
            out, loss, g, ok = grad_fn(x_adv, y0)
            x_fooled = torch.where(ok.view(-1, *ones), x_fooled, x_adv)
            fooled |= ~ok
            rises += loss > loss_prev
            loss_prev = loss
            up = loss > loss_best
            upv = up.view(-1, *ones)
            x_best, g_best, loss_best = (torch.where(upv, x_adv, x_best), torch.where(upv, g, g_best),
                                         torch.where(up, loss, loss_best))
            since += 1
            if i in marks:  # condition 1 (too few rises) or 2 (no reduction and no progress)
                halve = (rises <= self.rho * since) | (~reduced_at_check & (loss_at_check >= loss_best))
                reduced_at_check, loss_at_check = halve.clone(), loss_best.clone()
                if bool(halve.any()):
                    step[halve] /= 2.0
                    x_adv[halve], g[halve] = x_best[halve], g_best[halve]
                rises.zero_()
                since = 0
        return torch.where(fooled.view(-1, *ones), x_fooled, x_best), fooled, loss_best


def worst_restart(result: torch.Tensor, fooled: torch.Tensor, loss_best: torch.Tensor, N: int, R: int) -> torch.Tensor:
    """Per sample, of its ``R`` rows (point-major ``n·R + r``): a misclassified one, else the
    highest loss."""
    if R == 1:
        return result
    key = torch.where(fooled, torch.full_like(loss_best, math.inf), loss_best).view(N, R)
    idx = key.nan_to_num(nan=-math.inf).argmax(1)
    return result.view(N, R, *result.shape[1:])[torch.arange(N, device=result.device), idx]

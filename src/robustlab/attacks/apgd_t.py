"""Targeted Auto-PGD, APGD-T (Croce & Hein 2020, §4 and AutoAttack's standard suite): APGD on
the targeted DLR loss, once per target class, the ``targets`` classes with the highest clean
logits after the top one (AutoAttack: 9).

The targeted DLR loss (their eq. 6), per sample with target ``t``::

    −(z_y − z_t) / (z_π1 − (z_π3 + z_π4) / 2 + 1e−12)

(``π`` sorts the logits in decreasing order), shift- and scale-invariant like the DLR loss; it
needs at least four classes. Each target runs on the rows no earlier target has misclassified
(AutoAttack's order); a row counts as broken when *any* class other than ``y`` wins, as there.
Everything else — the schedule, the random start, restarts stacked into the batch — is
:class:`~robustlab.attacks.APGD`'s.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ..config import ConfigError
from .apgd import APGD, worst_restart
from .base import Bounds
from .losses import ratio_closed

__all__ = ["APGDT", "dlr_targeted_loss"]


def dlr_targeted_loss(out: torch.Tensor, y: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Targeted DLR per sample ``(N,)``: ``−(z_y − z_t) / (z_π1 − (z_π3 + z_π4)/2 + 1e−12)``
    for logits ``out`` ``(N, k)``, ``k >= 4``, labels ``y`` and targets ``target`` ``(N,)``."""
    if out.ndim != 2 or out.shape[1] < 4:
        raise ValueError(f"the targeted DLR loss needs logits of shape (N, k) with k >= 4 classes, got {tuple(out.shape)}")
    top = out.topk(4, dim=1).values  # (N, 4), decreasing
    zy = out.gather(1, y.view(-1, 1)).squeeze(1)
    zt = out.gather(1, target.view(-1, 1)).squeeze(1)
    return -(zy - zt) / (top[:, 0] - 0.5 * (top[:, 2] + top[:, 3]) + 1e-12)


class _Targeted:
    """``(out, y) ↦ dlr_targeted_loss(out, y, target)`` for the rows of one APGD run."""

    def __init__(self, target: torch.Tensor):
        self.target = target

    def __call__(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return dlr_targeted_loss(out, y, self.target)

    def closed_form(self, z: torch.Tensor, y: torch.Tensor, grad: bool, direction: bool = False):
        """The loss and its logit gradient in closed form (attacks then skip autograd of the loss)."""
        return ratio_closed(z, y, self.target, [(0, 1.0), (2, -0.5), (3, -0.5)], grad)


@dataclasses.dataclass(frozen=True)
class APGDT(APGD):
    """``APGDT(Linf(eps), steps=100, restarts=1, targets=9)``: APGD on the targeted DLR loss
    toward each of the ``targets`` highest-scoring other classes in turn (capped at ``k − 1``)."""

    loss: str = "dlr"
    targets: int = 9

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.targets, bool) or not isinstance(self.targets, int) or self.targets < 1:
            raise ConfigError("targets", self.targets, "an integer >= 1")

    def run(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, bounds: Bounds,
            generator: torch.Generator | None = None, **kw) -> torch.Tensor:
        R, N = self.restarts, x.shape[0]
        with torch.no_grad():
            z = model(x)
        if z.ndim != 2 or z.shape[1] < 4:
            raise ValueError(f"APGD-T needs logits (N, k) with k >= 4 classes, got {tuple(z.shape)}")
        order = z.argsort(1, descending=True)  # (N, k): the clean ranking fixes the targets
        x0 = x.repeat_interleave(R, dim=0) if R > 1 else x  # (M, ...), row n·R + r
        y0 = y.repeat_interleave(R, dim=0) if R > 1 else y
        order = order.repeat_interleave(R, dim=0) if R > 1 else order
        result = x0.clone()
        fooled = torch.zeros(x0.shape[0], dtype=torch.bool, device=x.device)
        loss_best = torch.full((x0.shape[0],), -torch.inf, dtype=x.dtype, device=x.device)
        for j in range(1, min(self.targets, z.shape[1] - 1) + 1):  # the 2nd, 3rd, ... highest class
            rows = (~fooled).nonzero().squeeze(1)
            if rows.numel() == 0:
                break
            res, f, lb = self.run_rows(model, x0[rows], y0[rows], _Targeted(order[rows, j]), bounds, generator)
            result[rows], fooled[rows], loss_best[rows] = res, f, lb
        return worst_restart(result, fooled, loss_best, N, R)

"""The "every patch" attack on patch data: add a wrong class's feature to every patch.

the feature-learning paper's model sums one shared detector over all ``P`` patches, so an attacker allowed a
budget in *every* patch can plant a wrong class's feature everywhere. For features
``f_1..f_k`` (the robust ``u`` or the non-robust ``v``) and a wrong class ``j``::

    linf:      δ_p = clip_ε(ε (f_j − f_y))             (= ε u_j − ε u_y for one-hot features)
    l2_patch:  δ_p = ε (f_j − f_y) / ‖f_j − f_y‖₂       (‖δ_p‖₂ = ε in every patch)

on every patch (or the patches of ``mask``); the returned point is the one of the wrong
class with the lowest margin ``F_y − max_{i≠y} F_i``. No gradient is used.

Closed form (one-hot features, noise-free data, hand-set robust weights ``w_{i,r} = a u_i``
in the polynomial part of σ̃): the true class keeps ``m σ̃((α − ε) a)`` from its robust
patch, the wrong class gains ``m P σ̃(ε a)``, so the attack fails iff

    (α/ε − 1)^q / P > 1        (:func:`every_patch_bound`; the best ratio over ``a``),

while Assumption 2.3 asks for the opposite order of size, ``P ≳ (α/β)^q ≥ (α/ε)^q``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..config import ConfigError

__all__ = ["every_patch", "every_patch_bound", "NORMS"]

NORMS = ("linf", "l2_patch")


def every_patch_bound(alpha: float, eps: float, q: float, P: float, *, norm: str = "linf",
                      own_patch: bool = True) -> float:
    """``(α/ε' − 1)^q / P``: the largest ratio of the true class's to the wrong class's logit
    that hand-set robust weights keep under the attack (robust iff > 1).

    ``ε'`` is the size of the step along each feature: ε for ``linf``, ε/√2 for
    ``l2_patch`` (the ℓ2 budget is split between ``u_j`` and ``−u_y``). ``own_patch=False``:
    the attacker may not touch the robust patch (perturbations confined to the non-robust
    patches): ``(α/ε')^q / (P − 1)``.
    """
    if norm not in NORMS:
        raise ConfigError("norm", norm, "one of " + ", ".join(NORMS))
    if eps <= 0:
        return math.inf
    e = eps if norm == "linf" else eps / math.sqrt(2.0)
    if own_patch:
        return max(alpha / e - 1.0, 0.0) ** q / P
    return (alpha / e) ** q / max(P - 1, 1e-12)


@torch.no_grad()
def every_patch(model: nn.Module, x: torch.Tensor, y: torch.Tensor, directions: torch.Tensor, eps: float,
                *, norm: str = "linf", mask: torch.Tensor | None = None) -> torch.Tensor:
    """Worst wrong class's every-patch point: ``x`` (N, P, d), ``y`` (N,), ``directions``
    (k, d) or per sample (N, k, d); ``mask`` (N, P) bool selects the patches (default all).
    ``model``: (N, P, d) -> (N, k) logits (run in eval mode, restored afterwards)."""
    if norm not in NORMS:
        raise ConfigError("norm", norm, "one of " + ", ".join(NORMS))
    if not (math.isfinite(eps) and eps >= 0):
        raise ConfigError("eps", eps, "a finite number >= 0")
    if x.ndim != 3:
        raise ValueError(f"every_patch expects (N, P, d) inputs, got {tuple(x.shape)}")
    N, P, d = x.shape
    dirs = directions.to(device=x.device, dtype=x.dtype)
    if dirs.ndim == 2:
        dirs = dirs.unsqueeze(0).expand(N, -1, -1)
    k = dirs.shape[1]
    if dirs.shape != (N, k, d):
        raise ValueError(f"directions must be (k, d) or (N, k, d) = ({N}, k, {d}), got {tuple(directions.shape)}")
    if eps == 0 or k < 2:
        return x.clone()
    rows = torch.arange(N, device=x.device)
    own = dirs[rows, y]  # (N, d)
    keep = torch.ones(N, P, 1, dtype=x.dtype, device=x.device) if mask is None \
        else mask.to(device=x.device, dtype=x.dtype).unsqueeze(-1)
    was_training = model.training
    model.eval()
    try:
        best, best_margin = x.clone(), torch.full((N,), math.inf, dtype=x.dtype, device=x.device)
        for j in range(k):
            diff = dirs[:, j] - own  # (N, d); zero where j == y
            if norm == "linf":
                step = (eps * diff).clamp(-eps, eps)
            else:
                step = eps * diff / diff.norm(dim=-1, keepdim=True).clamp_min(1e-30)
            # x + keep·step in one pass: keep is 0/1, so keep·step is exact and the sum rounds once,
            # fused or not (the bits of the two-pass form)
            cand = torch.addcmul(x, keep, step.unsqueeze(1))  # (N, P, d)
            out = model(cand)
            true = out[rows, y]
            other = out.clone()
            other[rows, y] = -math.inf
            margin = true - other.max(-1).values
            better = (margin < best_margin) & (y != j)
            best = torch.where(better.view(N, 1, 1), cand, best)
            best_margin = torch.where(better, margin, best_margin)
    finally:
        model.train(was_training)
    return best

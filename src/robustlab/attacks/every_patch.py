"""The "every patch" attack on patch data: add a wrong class's feature to every patch.

The feature-learning paper's model sums one shared detector over all ``P`` patches, so an attacker allowed a
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
from ..models.patch_cnn import PatchCNN

__all__ = ["every_patch", "every_patch_bound", "span_pgd", "NORMS"]

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


def span_pgd(model: PatchCNN, x: torch.Tensor, y: torch.Tensor, basis: torch.Tensor, eps: float, *,
             steps: int = 100, restarts: int = 4, generators: list[torch.Generator] | None = None,
             step_size: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """ℓ∞ PGD confined to a feature subspace in every patch, worst case per sample over restarts.

    The perturbation of patch ``p`` is ``δ_p = Σ_j c_{pj} f_j`` with ``|c_{pj}| ≤ ε``: the
    coefficients on the ``basis`` features ``f_1..f_k`` (the non-robust ``v``, for "robustness
    inside span{v}"), a box of side ε in every patch. For one-hot features it is exactly the ℓ∞
    ball of radius ε restricted to span{f}; the targeted swap ``ε(f_j − f_y)`` is a corner of it.

    ``model``: a :class:`PatchCNN` (E copies); ``x`` (E, N, P, d); ``y`` (E, N); ``basis``
    (E, k_f, d), each copy its own features. Sign steps of ``2.5 ε / steps`` (``step_size``) on
    the margin ``F_y − max_{j≠y} F_j`` from a uniform random start in the box, ``restarts``
    times; per sample the restart with the lowest final margin is kept. ``generators``: one per
    copy (its random starts then do not depend on E), or None.

    The patch CNN's first layer is linear, so ``⟨w, x_p + δ_p⟩ = ⟨w, x_p⟩ + Σ_j c_{pj} ⟨w, f_j⟩``,
    and the margin's gradient is closed form: ``∂/∂c_{pj} = Σ_K σ'(z_{pK}) ⟨w_K, f_j⟩ s_K`` with
    ``s_K = +1`` on the true class's neurons and ``−1`` on the runner-up's. The attack runs on the
    (E, N, P, k_f) coefficients, without autograd. Returns the perturbed inputs (E, N, P, d) and
    their margins (E, N) evaluated by the model itself on those inputs (not by the reduced form).
    """
    if not (math.isfinite(eps) and eps >= 0):
        raise ConfigError("eps", eps, "a finite number >= 0")
    if steps < 1 or restarts < 1:
        raise ConfigError("steps" if steps < 1 else "restarts", min(steps, restarts), ">= 1")
    E, N, P, d = x.shape
    if basis.ndim != 3 or basis.shape[0] != E or basis.shape[2] != d:
        raise ValueError(f"basis must be (E={E}, k_f, d={d}), got {tuple(basis.shape)}")
    if generators is not None and len(generators) != E:
        raise ValueError(f"need one generator per copy: got {len(generators)} for E={E}")
    f = basis.to(device=x.device, dtype=x.dtype)
    k, m, kf = model.k, model.m, f.shape[1]
    K = k * m
    alpha = 2.5 * eps / steps if step_size is None else step_size
    with torch.no_grad():
        W = model.W.detach().reshape(E, K, d)
        z0_all = torch.bmm(x.reshape(E, N * P, d), W.transpose(1, 2)).view(E, N, P, K)  # clean pre-activations
        fw = torch.bmm(f, W.transpose(1, 2))  # (E, k_f, K): each feature seen by each neuron
        cls = torch.arange(K, device=x.device) // m  # the class of each neuron
        best_c = torch.zeros(E, N, P, kf, dtype=x.dtype, device=x.device)
        best_m = torch.full((E, N), math.inf, dtype=x.dtype, device=x.device)
        for _ in range(restarts):
            if generators is None:
                start = torch.rand(E, N, P, kf, dtype=x.dtype, device=x.device)
            else:  # each copy draws its own starts, for every sample (the same bits whatever is dropped)
                start = torch.stack([torch.rand(N, P, kf, generator=g, dtype=x.dtype) for g in generators]).to(x.device)
            # a test point (a column over the copies) leaves once every copy has it misclassified:
            # the worst case per sample cannot get better than broken
            cols = (best_m >= 0).any(0).nonzero().squeeze(-1)
            if len(cols) == 0:
                break
            c = start[:, cols].mul_(2).sub_(1).mul_(eps)
            for t in range(steps):
                mc, g = _span_margin(model, z0_all[:, cols], c, fw, y[:, cols], cls, with_grad=True)
                if t and t % STEP_CHECK == 0:  # drop the columns broken in every copy (margin at c)
                    keep = ((mc >= 0) & (best_m[:, cols] >= 0)).any(0)
                    if not bool(keep.all()):
                        _keep_worst(best_c, best_m, cols[~keep], c[:, ~keep], mc[:, ~keep])
                        cols, c, g = cols[keep], c[:, keep], g[:, keep]
                        if len(cols) == 0:
                            break
                c.sub_(alpha * g.sign_()).clamp_(-eps, eps)
            if len(cols):
                mc, _ = _span_margin(model, z0_all[:, cols], c, fw, y[:, cols], cls, with_grad=False)
                _keep_worst(best_c, best_m, cols, c, mc)
        x_adv = x + torch.bmm(best_c.view(E, N * P, kf), f).view(E, N, P, d)
        out = model(x_adv)
        true = out.gather(-1, y.unsqueeze(-1)).squeeze(-1)
        other = out.scatter(-1, y.unsqueeze(-1), -math.inf).max(-1).values
    return x_adv, true - other


STEP_CHECK = 10  # span_pgd drops the test points broken in every copy this often (steps)


def _keep_worst(best_c: torch.Tensor, best_m: torch.Tensor, cols: torch.Tensor, c: torch.Tensor,
                mc: torch.Tensor) -> None:
    """Per copy and sample, keep the coefficients with the lower margin (in place)."""
    better = mc < best_m[:, cols]
    best_c[:, cols] = torch.where(better[..., None, None], c, best_c[:, cols])
    best_m[:, cols] = torch.where(better, mc, best_m[:, cols])


def _span_margin(model: PatchCNN, z0: torch.Tensor, c: torch.Tensor, fw: torch.Tensor, y: torch.Tensor,
                 cls: torch.Tensor, *, with_grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Margin (E, n) at coefficients ``c`` (E, n, P, k_f) and, with ``with_grad``, its gradient in c."""
    E, n, P, K = z0.shape
    k, m = model.k, model.m
    z = torch.baddbmm(z0.reshape(E, n * P, K), c.reshape(E, n * P, -1), fw)
    s, work = torch.empty_like(z), torch.empty_like(z)
    model.act_and_grad_(z, s, work)  # z <- σ(z), s <- σ'(z)
    logits = z.view(E, n, P, k, m).sum(dim=(2, 4))  # (E, n, k)
    true = logits.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    other = logits.scatter(-1, y.unsqueeze(-1), -math.inf)
    margin = true - other.max(-1).values
    if not with_grad:
        return margin, None
    runner = other.argmax(-1)  # (E, n)
    sign = (cls == y[..., None]).to(z.dtype) - (cls == runner[..., None]).to(z.dtype)  # (E, n, K)
    g = torch.bmm((s.view(E, n, P, K) * sign[:, :, None, :]).view(E, n * P, K), fw.transpose(1, 2))
    return margin, g.view(E, n, P, -1)

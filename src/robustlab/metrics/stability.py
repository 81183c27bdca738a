"""Perturbation stability (width-depth-init, NeurIPS 2022, Def. 1 and Def. 3).

``P(f, ε) = E_x E_δ ‖J_x f · δ‖²`` with ``δ ~ Uniform(B₂(0, ε))`` in ``R^d`` (d = numel of
one input), averaged over an ensemble of initialisations for Def. 1 or for one model
(Def. 3). Because ``E[δ δᵀ] = ε² I / (d + 2)`` for the uniform ball,
``E_δ ‖J δ‖² = ε² ‖J‖_F² / (d + 2)`` exactly — the default here. Monte Carlo
(``samples=S``) draws ``δ`` and pushes it through ``torch.func.jvp`` (forward mode, all
draws batched) and reports the mean with its standard error; it exists to check the
identity and for models where a Jacobian is awkward.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn

from ..attacks import checks
from ..attacks.threat import uniform_ball_l2
from ..models.deep import check_architecture, init_variance

__all__ = ["perturbation_stability", "jacobian_fro_sq", "MonteCarlo", "expected_stability_at_init"]


class MonteCarlo(NamedTuple):
    """A Monte Carlo estimate: ``mean`` and its standard error (floats, or ``(N,)`` tensors)."""

    mean: float | torch.Tensor
    stderr: float | torch.Tensor


def _flat_out(out: torch.Tensor) -> torch.Tensor:
    return out.reshape(out.shape[0], -1)  # (N, k); binary (N,) -> (N, 1)


def jacobian_fro_sq(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``‖J_x f(x_n)‖_F²`` per sample, ``(N,)``: squared norms of the input gradients of every output.

    One batched backward over the ``k`` outputs (``is_grads_batched``); each sample's
    outputs depend on that sample only (eval mode), so rows of the batch Jacobian are exact.
    """
    with checks.eval_mode(model), checks.frozen_params(model), torch.enable_grad():
        xg = x.detach().clone().requires_grad_(True)
        out = _flat_out(model(xg))  # (N, k)
        k = out.shape[1]
        if k == 1:
            (g,) = torch.autograd.grad(out.sum(), xg)
            g = g[None]
        else:
            eye = torch.eye(k, dtype=out.dtype, device=out.device)[:, None, :].expand(k, *out.shape)
            try:
                (g,) = torch.autograd.grad(out, xg, eye, is_grads_batched=True)  # (k, N, ...)
            except (RuntimeError, NotImplementedError):  # a model vmap cannot batch through: one backward per output
                g = torch.stack([torch.autograd.grad(out[:, j].sum(), xg, retain_graph=True)[0] for j in range(k)])
    checks.check_gradients(g)
    return g.reshape(k, x.shape[0], -1).pow(2).sum((0, 2))


def _exact(model: nn.Module, x: torch.Tensor, eps: float) -> torch.Tensor:
    d = x[0].numel()
    return eps**2 * jacobian_fro_sq(model, x) / (d + 2)


def _monte_carlo(
    model: nn.Module, x: torch.Tensor, eps: float, samples: int, generator: torch.Generator | None, chunk: int
) -> torch.Tensor:
    """``‖J δ_s‖²`` for ``S`` draws per point, ``(S, N)``.

    Each forward pass holds every point with ``per`` draws each, tiled point-major (row
    ``n·per + s``), so a models.Flat ensemble (rows grouped by copy) stays exact.
    """
    from torch.func import jvp

    x = x.detach()
    N = x.shape[0]
    vals = []
    with checks.eval_mode(model), checks.frozen_params(model):
        per = max(1, chunk // max(N, 1))  # draws per forward pass
        for s0 in range(0, samples, per):
            S = min(per, samples - s0)
            delta = uniform_ball_l2((N * S, *x.shape[1:]), eps, x, generator)  # (N·S, ...)
            xs = x.repeat_interleave(S, dim=0)
            with warnings.catch_warnings():
                # torch's first forward-AD call scripts its decompositions (a torch-internal
                # DeprecationWarning about torch.jit.script, nothing the caller can act on)
                warnings.filterwarnings("ignore", category=DeprecationWarning, module="torch")
                _, jd = jvp(model, (xs,), (delta,))
            vals.append(_flat_out(jd).pow(2).sum(1).view(N, S).T)
    return torch.cat(vals)


def perturbation_stability(
    model: nn.Module | Sequence[nn.Module],
    x: torch.Tensor,
    eps: float,
    *,
    samples: int | None = None,
    generator: torch.Generator | None = None,
    per_sample: bool = False,
    chunk: int = 65536,
) -> float | torch.Tensor | MonteCarlo:
    """Perturbation stability ``E_x E_δ ‖J_x f · δ‖²``, ``δ ~ Uniform(B₂(0, ε))`` (width-depth-init, NeurIPS 2022, Def. 1/3).

    Args:
        model: one model (Def. 3) or a list of models trained from different
            initialisations (Def. 1: also averaged over the list).
        x: ``(N, ...)`` points; ``d`` = numel per point.
        eps: radius of the ℓ2 ball.
        samples: ``None`` for the exact identity ``ε² ‖J‖_F² / (d + 2)``; an integer for a
            Monte Carlo estimate with that many draws per point.
        generator: drives the Monte Carlo draws.
        per_sample: return per-point values ``(N,)`` (averaged over the models) instead of
            the mean over points.
        chunk: rows per forward pass for Monte Carlo.

    Returns:
        Exact: a float (or ``(N,)`` tensor). Monte Carlo: ``MonteCarlo(mean, stderr)``, the
        standard error measuring only the δ sampling (the points are fixed).
    """
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps={eps!r} is not allowed: a finite number >= 0")
    models = [model] if isinstance(model, nn.Module) else list(model)
    if not models:
        raise ValueError("perturbation_stability needs at least one model")
    if samples is None:
        v = torch.stack([_exact(m, x, eps) for m in models]).mean(0)  # (N,)
        return v if per_sample else float(v.mean())
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 2:
        raise ValueError(f"samples={samples!r} is not allowed: an integer >= 2 (or None for exact)")
    v = torch.stack([_monte_carlo(m, x, eps, samples, generator, chunk) for m in models]).mean(0)  # (S, N)
    if per_sample:
        return MonteCarlo(v.mean(0), v.std(0) / math.sqrt(samples))
    per_draw = v.mean(1)  # (S,): draws independent across s, so their spread is the MC error
    return MonteCarlo(float(per_draw.mean()), float(per_draw.std() / math.sqrt(samples)))


def expected_stability_at_init(init: str, *, d: int, width: int, depth: int, k: int, eps: float,
                               gamma: float | None = None) -> float:
    """``E_W P(f, ε)`` at initialisation of a bias-free depth-``L`` ReLU network, in closed form.

    For any input ``x ≠ 0`` and weights drawn from the table of the width-depth-init paper (NeurIPS 2022) (see
    :func:`robustlab.models.deep.init_variance`)::

        E_W ‖J_x f‖_F² = d · k β_L · Π_{l<L} (m β_l / 2),     P = ε² E_W ‖J_x f‖_F² / (d + 2)

    Why it is exact at finite width: write ``J u = W_L D_{L-1} W_{L-1} … D_1 W_1 u``. Given the
    layer below (its activation ``h ≠ 0`` and the propagated direction ``v``), the pre-activation
    ``z_i`` and ``w_i = (W_l v)_i`` of unit ``i`` are jointly Gaussian with mean zero, so
    ``(z, w) → (−z, −w)`` leaves them in law and ``E[w_i² 1{z_i > 0}] = E[w_i²] / 2 = β_l ‖v‖² / 2``;
    the ``m`` units are independent given the layer below. The output layer adds ``k β_L``.
    (A layer whose every unit is dead, probability ``≤ 2^{-m}`` per layer, is ignored.)

    So LeCun (``m β = 1``) halves ``P`` per hidden layer, ``P = ε² k 2^{1−L} / (d + 2)``,
    while He (``m β = 2``) and NTK keep it constant in depth: ``P = 2 k`` and ``d k`` times
    ``ε² / (d + 2)``. the width-depth-init paper's Thm 1 bounds ``P`` from above by a polynomial in ``L`` for He
    and NTK; the quantity itself, in expectation at initialisation, does not grow.
    """
    check_architecture(width=width, depth=depth, init=init, gamma=gamma)
    if d < 1 or k < 1:
        raise ValueError(f"d={d}, k={k}: both must be >= 1")
    dims = [d] + [width] * (depth - 1) + [k]
    betas = [init_variance(init, layer=l + 1, n_layers=depth, fan_in=dims[l], fan_out=dims[l + 1],
                           width=width, gamma=gamma) for l in range(depth)]
    energy = float(d) * k * betas[-1]
    for beta in betas[:-1]:
        energy *= width * beta / 2.0
    return eps**2 * energy / (d + 2)

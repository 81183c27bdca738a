"""Perturbation stability (Seed 002, Def. 1 and Def. 3).

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

__all__ = ["perturbation_stability", "jacobian_fro_sq", "MonteCarlo"]


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
    """Perturbation stability ``E_x E_δ ‖J_x f · δ‖²``, ``δ ~ Uniform(B₂(0, ε))`` (Seed 002, Def. 1/3).

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

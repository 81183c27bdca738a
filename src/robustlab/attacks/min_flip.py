"""Smallest perturbation along the input gradient that flips a binary prediction.

For a binary model ``f`` and a point ``x`` with gradient ``g = ∇ₓ f(x)``, move along
``u = −sign(f(x)) g / ‖g‖`` and find the smallest ``t ≥ 0`` with
``sign f(x + t u) ≠ sign f(x)`` (lazy training, NeurIPS 2022, §5.1). Reported: ``‖δ‖ = t``, ``‖g‖`` and
``η = ‖δ‖ / ‖g‖`` (so that ``δ = −sign(f) η g``; Thm 3.1 predicts ``η = Θ(1/d)``).

The authors scan ``t = 0.001, 0.002, …`` one point at a time. Here every point moves at
once: (1) a bracket ``[0, hi]`` that doubles from the first-order guess ``|f| / ‖g‖``;
(2) a uniform grid of ``grid`` points inside the bracket, all evaluated in one batched
forward, to land on the *first* sign change rather than any; (3) bisection of that grid
cell until it is narrower than ``tol``. The returned ``t`` is the cell's upper end, so
``f`` has flipped there and the first crossing lies within ``tol`` below it.

A model that gives ``scores_along(x, u)`` (the two-layer network of the lazy studies, also
inside :class:`robustlab.models.Flat`) is evaluated along the line in closed form: its
pre-activations are affine in ``t``, so the search's tens of evaluations per point cost
``O(m)`` each instead of a forward pass. Its scores at ``t = 0`` are checked against the
model's own before it is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from . import checks
from .losses import is_binary, scores
from .threat import _bcast, per_sample_norm

__all__ = ["MinFlipResult", "min_flip_along_gradient"]


@dataclass(frozen=True)
class MinFlipResult:
    """Per-point results, all ``(N,)``.

    ``delta_norm`` and ``eta`` are NaN where the point is misclassified (when ``y`` was given)
    or did not flip within the cap; ``grad_norm`` is NaN only where misclassified.
    ``flipped``: the sign changed within the cap. ``correct``: ``sign f(x) == y`` (None if
    no labels were given).
    """

    delta_norm: torch.Tensor
    grad_norm: torch.Tensor
    eta: torch.Tensor
    flipped: torch.Tensor
    correct: torch.Tensor | None

    @property
    def valid(self) -> torch.Tensor:
        """Points with a finite result (correct, when known, and flipped)."""
        return ~torch.isnan(self.delta_norm)


def _flipped(model: nn.Module, x: torch.Tensor, u: torch.Tensor, s: torch.Tensor, ts: torch.Tensor, batch: int,
             line: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """``s_n f(x_n + t_{n,j} u_n) <= 0`` for ``ts (N, G)``, as ``(N, G)`` booleans.

    Rows are tiled point-major (row ``n·G + j``) and chunked along ``G`` only, so every
    forward pass sees all points in their order: models.Flat ensembles stay exact.
    ``line``: the model's scores along the lines (``scores_along``), used instead.
    """
    if line is not None:
        return s[:, None] * line(ts) <= 0
    N, G = ts.shape
    per = max(1, min(G, batch // max(N, 1)))
    cols = []
    for j0 in range(0, G, per):
        t = ts[:, j0 : j0 + per]  # (N, g)
        g = t.shape[1]
        pts = x[:, None] + t.reshape(N, g, *([1] * (x.ndim - 1))) * u[:, None]  # (N, g, ...)
        f = scores(model(pts.reshape(N * g, *x.shape[1:]))).view(N, g)
        cols.append(s[:, None] * f <= 0)
    return torch.cat(cols, 1)


@torch.no_grad()
def _search(
    model: nn.Module,
    x: torch.Tensor,
    u: torch.Tensor,
    s: torch.Tensor,
    t0: torch.Tensor,
    cap: torch.Tensor,
    tol: float,
    grid: int,
    batch: int,
    line: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """First ``t`` in ``(0, cap]`` with ``s f(x + t u) <= 0`` (to ``tol``), and whether one was found."""

    def flipped_at(t: torch.Tensor) -> torch.Tensor:  # (N,) -> (N,)
        return _flipped(model, x, u, s, t[:, None], batch, line)[:, 0]

    # (1) bracket: doubling from the linear guess, capped; all points in every pass.
    hi = torch.minimum(t0.clamp_min(tol), cap)
    found = flipped_at(hi)
    for _ in range(64):
        todo = ~found & (hi < cap)
        if not bool(todo.any()):
            break
        hi = torch.where(todo, torch.minimum(2 * hi, cap), hi)
        found = found | (todo & flipped_at(hi))
    # (2) first flipped point of a uniform grid on (0, hi], batched.
    frac = torch.arange(1, grid + 1, dtype=x.dtype, device=x.device) / grid  # (G,)
    ts = hi[:, None] * frac  # (N, G)
    fl = _flipped(model, x, u, s, ts, batch, line)
    fl[:, -1] |= found  # numerical safety: the bracket end did flip
    first = fl.to(torch.int8).argmax(1)  # first flipped grid index
    b = ts.gather(1, first[:, None]).squeeze(1)
    a = torch.where(first > 0, ts.gather(1, (first - 1).clamp_min(0)[:, None]).squeeze(1), torch.zeros_like(b))
    # (3) bisection on [a, b]: f not flipped at a (or a = 0), flipped at b.
    steps = max(0, math.ceil(math.log2(max(float((b - a).max()), tol) / tol)))
    for _ in range(steps):
        mid = 0.5 * (a + b)
        f_mid = flipped_at(mid)
        b = torch.where(f_mid, mid, b)
        a = torch.where(f_mid, a, mid)
    return b, found


@torch.no_grad()
def _line(model: nn.Module, x: torch.Tensor, u: torch.Tensor, f: torch.Tensor
          ) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The model's closed-form scores along ``x + t u`` (``scores_along``), if it has them and
    they agree with its own scores ``f`` at ``t = 0`` (to √eps of their scale); else None."""
    along = getattr(model, "scores_along", None)
    line = along(x, u) if along is not None else None
    if line is None:
        return None
    at0 = line(torch.zeros(len(x), 1, dtype=x.dtype, device=x.device))[:, 0]
    # rounding moves the scores by a few ulps of the sum's terms, far below this; a wrong
    # closed form (or an override it does not see) moves them by the scores' own size
    tol = math.sqrt(torch.finfo(x.dtype).eps) * float(f.abs().max().clamp_min(1.0))
    if not torch.allclose(at0, f, rtol=0.0, atol=tol):
        return None
    return line


def min_flip_along_gradient(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor | None = None,
    *,
    cap: float | None = None,
    tol: float = 1e-4,
    grid: int = 8,
    batch_size: int = 65536,
) -> MinFlipResult:
    """Minimal flipping perturbation along ``∇ₓ f`` for a binary model, batched over points.

    Args:
        model: ``(N, ...) -> (N,)`` or ``(N, 1)`` scores; evaluated in eval mode.
        x: ``(N, ...)`` points (not modified).
        y: optional ±1 labels ``(N,)``; misclassified points get NaN.
        cap: largest ``‖δ‖`` searched; default ``max(2‖x‖, 1)`` per point (beyond the
            diameter of the data's sphere).
        tol: bisection tolerance on ``‖δ‖`` (absolute).
        grid: points of the batched first-crossing grid inside the bracket.
        batch_size: rows per forward pass of the search.

    Returns:
        :class:`MinFlipResult` with ``(N,)`` tensors.
    """
    if tol <= 0:
        raise ValueError(f"tol={tol!r} is not allowed: a number > 0")
    x = x.detach()
    N = x.shape[0]
    if N == 0:
        empty = x.new_zeros(0)
        return MinFlipResult(empty, empty, empty, empty.bool(), None if y is None else empty.bool())
    with checks.eval_mode(model), checks.frozen_params(model):
        with torch.enable_grad():
            xg = x.clone().requires_grad_(True)
            out = model(xg)
            if not is_binary(out):
                raise ValueError(f"min_flip_along_gradient needs a binary model (N,) or (N, 1), got outputs {tuple(out.shape)}")
            f = scores(out)
            (g,) = torch.autograd.grad(f.sum(), xg)
        checks.check_gradients(g)
        f = f.detach()
        s = torch.where(f >= 0, 1.0, -1.0).to(x.dtype)
        gn = per_sample_norm(g, 2)
        u = -_bcast(s, g) * g / _bcast(gn.clamp_min(torch.finfo(g.dtype).tiny), g)
        cap_t = (
            (2 * per_sample_norm(x, 2)).clamp_min(1.0)
            if cap is None
            else torch.full((N,), float(cap), dtype=x.dtype, device=x.device)
        )
        t0 = f.abs() / gn.clamp_min(torch.finfo(g.dtype).tiny)
        already = f == 0  # sign 0: nothing to flip, t = 0 is not a move along g
        t, found = _search(model, x, u, s, t0, cap_t, tol, grid, batch_size, _line(model, x, u, f))
    flipped = found & (gn > 0) & ~already
    ok = None
    nan = torch.full_like(t, math.nan)
    valid = flipped
    grad_norm = gn
    if y is not None:
        checks.check_labels(f, y)
        ok = s == y.to(x.dtype).reshape(N)
        ok = ok & ~already
        valid = valid & ok
        grad_norm = torch.where(ok, gn, nan)
    delta = torch.where(valid, t, nan)
    return MinFlipResult(delta, grad_norm, delta / gn, flipped, ok)

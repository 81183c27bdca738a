"""The ensemble convention: E independent copies of a small model train in one pass.

An ensemble model keeps every parameter with a leading dimension ``E`` and maps inputs
``(E, N, ...)`` to outputs ``(E, N, k)`` (or ``(E, N)`` for a binary scalar output): copy
``e`` sees only ``x[e]``. Attacks and metrics expect a plain model ``(N, ...) -> (N, k)``;
:class:`Flat` adapts one to the other by folding ``E`` into the batch, so that sample
``e * N + n`` of the flat batch is sample ``n`` seen by copy ``e``. Because each flat sample
reaches exactly one copy, per-sample input gradients and per-sample attacks stay exact.
"""

from __future__ import annotations

import torch
from torch import nn

from .pullback import runs_as_written

__all__ = ["Flat", "Member", "fold", "unfold"]


def fold(x: torch.Tensor) -> torch.Tensor:
    """(E, N, ...) -> (E*N, ...)."""
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])


def unfold(x: torch.Tensor, E: int) -> torch.Tensor:
    """(E*N, ...) -> (E, N, ...)."""
    return x.reshape(E, x.shape[0] // E, *x.shape[1:])


class Flat(nn.Module):
    """View an ensemble model ``(E, N, ...) -> (E, N, ...)`` as ``(E*N, ...) -> (E*N, ...)``."""

    def __init__(self, model: nn.Module, E: int):
        super().__init__()
        self.model, self.E = model, E

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fold(self.model(unfold(x, self.E)))

    def output_and_vjp(self, x: torch.Tensor):
        """The wrapped model's closed-form ``output_and_vjp`` on the folded layout, or None
        when it has none (then attacks use autograd)."""
        inner = getattr(self.model, "output_and_vjp", None)
        if inner is None:
            return None
        out, vjp = inner(unfold(x, self.E))
        return fold(out), lambda dz: fold(vjp(unfold(dz, self.E)))

    def scores_along(self, x: torch.Tensor, u: torch.Tensor):
        """The wrapped model's closed-form ``scores_along`` on the folded layout: ``x``, ``u``
        (E·N, ...) -> a function of steps (E·N, G) -> scores (E·N, G); None when it has none
        (then a line search evaluates the model)."""
        inner = getattr(self.model, "scores_along", None) if runs_as_written(self, Flat) else None
        at = inner(unfold(x, self.E), unfold(u, self.E)) if inner is not None else None
        if at is None:
            return None
        return lambda t: fold(at(unfold(t, self.E)))


class Member(nn.Module):
    """Copy ``e`` of an ensemble model ``(E, N, ...) -> (E, N, ...)`` as a plain
    ``(N, ...) -> (N, ...)`` model, for code that attacks one model at a time (torchattacks).
    Every copy sees the same input; the others' outputs are computed and dropped."""

    def __init__(self, model: nn.Module, e: int):
        super().__init__()
        self.model, self.e = model, e

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x.unsqueeze(0).expand(self.model.E, *x.shape))[self.e]

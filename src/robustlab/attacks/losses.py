"""Per-sample losses (``reduction="none"``) for multi-class logits and binary scores.

A model maps ``(N, ...)`` to logits ``(N, k)``; a *binary* model returns scores ``(N,)`` or
``(N, 1)`` with labels ``y`` in {-1, +1}. The output shape decides which case applies.
Every loss is *ascended* by attacks: larger means worse for the model.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

__all__ = [
    "is_binary",
    "scores",
    "cross_entropy",
    "margin_loss",
    "logistic",
    "get_loss",
    "correct",
    "margins",
    "LOSSES",
]

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def is_binary(out: torch.Tensor) -> bool:
    """Binary scores: shape ``(N,)`` or ``(N, 1)``."""
    return out.ndim == 1 or (out.ndim == 2 and out.shape[1] == 1)


def scores(out: torch.Tensor) -> torch.Tensor:
    """Binary scores as ``(N,)``."""
    return out.reshape(out.shape[0])


def _pm1(y: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    return y.to(f.dtype).reshape(f.shape)


def logistic(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``log(1 + exp(-y f))`` for binary scores, ``(N,)`` (seed 001's loss)."""
    f = scores(out)
    return F.softplus(-_pm1(y, f) * f)


def cross_entropy(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Softmax cross-entropy per sample; for binary scores it is the logistic loss."""
    if is_binary(out):
        return logistic(out, y)
    return F.cross_entropy(out, y, reduction="none")


def margins(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Classification margin, ``(N,)``: ``y f`` (binary) or ``z_y - max_{j != y} z_j``.

    Positive means correctly classified.
    """
    if is_binary(out):
        f = scores(out)
        return _pm1(y, f) * f
    z_y = out.gather(1, y[:, None]).squeeze(1)
    others = out.scatter(1, y[:, None], float("-inf"))
    return z_y - others.amax(1)


def margin_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CW-style margin loss ``max_{j != y} z_j - z_y`` (binary: ``-y f``), ``(N,)``."""
    return -margins(out, y)


def correct(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Boolean ``(N,)``: prediction equals the label (binary: ``sign f == y``, ``f = 0`` wrong)."""
    if is_binary(out):
        f = scores(out)
        return _pm1(y, f) * f > 0
    return out.argmax(1) == y


LOSSES: dict[str, LossFn] = {"ce": cross_entropy, "margin": margin_loss, "logistic": logistic}


def get_loss(loss: str | LossFn) -> LossFn:
    """A loss by name (``ce``, ``margin``, ``logistic``) or a callable ``(out, y) -> (N,)``."""
    if callable(loss):
        return loss
    try:
        return LOSSES[loss]
    except KeyError:
        raise ValueError(f"loss={loss!r} is not allowed: one of {', '.join(LOSSES)} or a callable") from None

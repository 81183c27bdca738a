"""Runtime checks that catch evaluation mistakes, and the context managers attacks run in.

Each warning is issued once per process (per kind), as an :class:`EvaluationWarning`, so a
long sweep is not flooded but the first mistake is seen (AutoAttack / RobustBench habit).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch
from torch import nn

__all__ = [
    "EvaluationWarning",
    "warn_once",
    "reset_warnings",
    "check_train_mode",
    "check_outputs",
    "check_gradients",
    "check_bounds",
    "check_labels",
    "eval_mode",
    "frozen_params",
]


class EvaluationWarning(UserWarning):
    """A likely mistake in how a model is evaluated or attacked."""


_WARNED: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Warn about ``key`` the first time only (per process)."""
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(message, EvaluationWarning, stacklevel=3)


def reset_warnings() -> None:
    """Forget which warnings were issued (tests use this)."""
    _WARNED.clear()


def check_train_mode(model: nn.Module) -> None:
    """Warn if a model reaches an evaluation in train mode (it is evaluated in eval mode)."""
    if model.training:
        warn_once(
            "train_mode",
            "model is in train mode at evaluation time; robustlab evaluates it in eval mode "
            "and restores the mode afterwards (call model.eval() to silence this)",
        )


def check_outputs(out: torch.Tensor) -> None:
    """Warn if multi-class outputs look like probabilities (rows in [0, 1] summing to 1).

    Attacks and losses expect logits; softmax outputs flatten the loss surface and make
    attacks look weaker than they are. One host sync.
    """
    if out.ndim != 2 or out.shape[1] < 2 or out.shape[0] == 0:
        return
    o = out.detach()
    looks = (o.min() >= 0) & (o.max() <= 1) & ((o.sum(1) - 1).abs().max() < 1e-3)
    if bool(looks):
        warn_once(
            "probabilities",
            "model outputs look like probabilities (rows in [0,1] summing to 1); attacks and "
            "losses expect logits - remove the final softmax",
        )


def check_gradients(g: torch.Tensor) -> None:
    """Warn if every input gradient in the batch is exactly zero (masking or a detached model)."""
    if g.numel() and not bool(torch.count_nonzero(g.detach())):  # NaN counts as nonzero, as with ne(0)
        warn_once(
            "zero_gradients",
            "all input gradients are exactly zero: the model output does not depend on the "
            "input through autograd (detached, quantised, saturated or gradient-masked model)",
        )


def check_bounds(x: torch.Tensor, bounds: tuple[float, float] | None) -> None:
    """Refuse inputs outside the box: clamping them would silently change the data."""
    if bounds is None:
        return
    lo, hi = bounds
    if not lo <= hi:
        raise ValueError(f"bounds={bounds!r} is not allowed: need lo <= hi")
    if x.numel() and bool((x.min() < lo) | (x.max() > hi)):
        raise ValueError(
            f"inputs lie outside bounds={bounds!r} (min {float(x.min()):.4g}, max "
            f"{float(x.max()):.4g}); pass bounds=None for unbounded data"
        )


def check_labels(out: torch.Tensor, y: torch.Tensor) -> None:
    """Refuse labels that do not fit the outputs: ±1 for binary scores, 0..k-1 for logits.

    0/1 labels on a binary model would make the logistic loss constant for y = 0 and count
    every such point as misclassified, silently. One host sync.
    """
    n = out.shape[0]
    if y.shape[:1] != (n,):
        raise ValueError(f"labels have shape {tuple(y.shape)}, expected ({n},)")
    if n == 0:
        return
    if out.ndim == 1 or (out.ndim == 2 and out.shape[1] == 1):
        if not bool(((y == 1) | (y == -1)).all()):
            raise ValueError("a binary model (outputs (N,) or (N, 1)) needs labels in {-1, +1}")
        f = out.detach()
        if n >= 16 and bool((y == 1).any() & (y == -1).any() & (f.min() >= 0) & (f.max() <= 1)):
            warn_once(
                "sigmoid",
                "binary scores all lie in [0, 1] although both labels occur: this looks like a "
                "sigmoid probability; binary models must return real scores f with prediction sign(f)",
            )
        return
    if y.is_floating_point() or y.ndim != 1:
        raise ValueError(f"a {out.shape[1]}-class model needs integer class labels (N,), got {y.dtype} {tuple(y.shape)}")
    if not bool(((y >= 0) & (y < out.shape[1])).all()):
        raise ValueError(f"class labels must lie in 0..{out.shape[1] - 1}")


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Run ``model`` in eval mode and restore every submodule's own mode afterwards."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for m, mode in modes:
            m.training = mode


@contextlib.contextmanager
def frozen_params(model: nn.Module) -> Iterator[nn.Module]:
    """Turn off ``requires_grad`` on parameters while attacking, then restore it.

    Input gradients do not need parameter gradients; with parameters frozen autograd
    records a smaller graph and saves fewer activations (a real speed-up on small models).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield model
    finally:
        for p in params:
            p.requires_grad_(True)

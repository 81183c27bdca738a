"""Per-sample losses (``reduction="none"``) for multi-class logits and binary scores.

A model maps ``(N, ...)`` to logits ``(N, k)``; a *binary* model returns scores ``(N,)`` or
``(N, 1)`` with labels ``y`` in {-1, +1}. The output shape decides which case applies.
Every loss is *ascended* by attacks: larger means worse for the model.

:func:`loss_grad_correct` gives the built-in multi-class losses, their gradient w.r.t. the
logits and correctness in closed form, from one max pass: attacks feed that gradient to
``torch.autograd.grad(out, x, grad_outputs=...)`` instead of building a graph for the loss
(on small models the loss's own kernels and autograd nodes cost as much as a layer).
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
    "loss_grad_correct",
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
    """``log(1 + exp(-y f))`` for binary scores, ``(N,)`` (the lazy-training paper's loss)."""
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


def _predicted(z: torch.Tensor) -> torch.Tensor:
    """``z.argmax(1)`` for logits ``(N, k)`` in either layout: a class-major ``(k, N)`` tensor
    seen as ``(N, k)`` (robustlab's closed-form pull-backs return that) reduces along its
    contiguous axis instead (``max`` returns the first maximal index, as ``argmax`` does;
    ~50 µs -> ~9 µs at 512 x 10)."""
    return z.t().max(0).indices if z.ndim == 2 and not z.is_contiguous() else z.argmax(1)


def correct(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Boolean ``(N,)``: prediction equals the label (binary: ``sign f == y``, ``f = 0`` wrong)."""
    if is_binary(out):
        f = scores(out)
        return _pm1(y, f) * f > 0
    return _predicted(out) == y


def _ce_closed(z: torch.Tensor, y: torch.Tensor, grad: bool, direction: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Cross-entropy ``−log softmax(z)_y``, its logit gradient ``softmax(z) − onehot(y)``.

    ``direction=True`` returns that gradient divided by ``1 − p_y`` per sample, taken from the
    log-softmax: ``p_j / Σ_{i≠y} p_i`` for ``j ≠ y`` and ``−1`` at ``y``. A positive factor per
    sample leaves every sign and normalised step unchanged. Where the softmax saturates the
    plain one is wrong in float32: past a margin of about 17 ``p_y`` rounds to 1, its label
    entry to 0, and the direction loses its ``−∇z_y`` part; past about 100 every ``p_j`` underflows
    too, and the input gradient pulled back from it is exactly 0.

    Computed on the transpose ``(k, N)``: torch's CPU softmax over a short *last* dimension
    runs row by row (~140 µs at 512 × 10), over dim 0 it is vectorised across samples (~12 µs).
    """
    yr = y[None]  # (1, N)
    lsm = torch.log_softmax(z.t(), 0)  # (k, N), contiguous
    value = lsm.gather(0, yr).neg_().squeeze(0)
    dz = None
    if grad and direction:  # log(1 − p_y) = logsumexp of the other classes' log-probabilities
        others = lsm.scatter(0, yr, float("-inf"))
        dz = others.sub_(torch.logsumexp(others, 0, keepdim=True)).exp_().scatter_(
            0, yr, lsm.new_full(yr.shape, -1.0)).t()
    elif grad:  # an (N, k) view of the (k, N) result: pull-backs take it as it is (a copy costs
        # a kernel per step); the autograd route makes it contiguous
        dz = lsm.exp_().scatter_add_(0, yr, lsm.new_full(yr.shape, -1.0)).t()
    return value, dz, _predicted(z) == y


def _margin_closed(z: torch.Tensor, y: torch.Tensor, grad: bool, direction: bool = False
                   ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Margin loss ``max_{j≠y} z_j − z_y``; gradient ``top/|top| − onehot(y)``, where ``top``
    marks the maximising j (ties share it equally, as autograd's ``amax`` does). Its entries
    are O(1) whatever the logits, so ``direction`` changes nothing."""
    yi = y[:, None]
    others = z.scatter(1, yi, float("-inf"))
    m = others.amax(1, keepdim=True)
    value = -(z.gather(1, yi) - m).squeeze(1)
    dz = None
    if grad:
        top = (others == m).to(z.dtype)
        dz = top.div_(top.sum(1, keepdim=True)).scatter_add_(1, yi, z.new_full(yi.shape, -1.0))
    return value, dz, _predicted(z) == y


def loss_grad_correct(
    loss_fn: LossFn, out: torch.Tensor, y: torch.Tensor, *, grad: bool = True, direction: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor] | None:
    """Per-sample loss ``(N,)``, its gradient w.r.t. ``out`` (shape of ``out``; None unless
    ``grad``) and correctness ``(N,)``, in closed form, for :func:`cross_entropy` and
    :func:`margin_loss` on multi-class logits ``(N, k)``; None otherwise (binary scores,
    custom callables: use autograd).

    Equal to autograd of the loss up to rounding. ``out`` must be detached (or no-grad).
    The cross-entropy gradient is an ``(N, k)`` view of a class-major ``(k, N)`` tensor:
    call ``.contiguous()`` before handing it to code that ``.view()``s it. ``direction=True``:
    the gradient up to a positive factor per sample, one that cannot underflow (see
    :func:`_ce_closed`).
    """
    closed = closed_form(loss_fn)
    return None if closed is None or out.ndim != 2 or is_binary(out) else closed(out, y, grad, direction)


# the losses whose logit gradient :func:`loss_grad_correct` gives in closed form
CLOSED_FORM = ((cross_entropy, _ce_closed), (margin_loss, _margin_closed))


def closed_form(loss_fn: LossFn) -> Callable | None:
    """``(out, y, grad) ↦ (loss, logit gradient or None, correct)`` for multi-class logits
    ``(N, k)``, k >= 2, if ``loss_fn`` has one (see :func:`loss_grad_correct`), else None."""
    return next((f for fn, f in CLOSED_FORM if fn is loss_fn), None)  # any callable, hashable or not


def has_closed_form(loss_fn: LossFn) -> bool:
    return closed_form(loss_fn) is not None

LOSSES: dict[str, LossFn] = {"ce": cross_entropy, "margin": margin_loss, "logistic": logistic}


def get_loss(loss: str | LossFn) -> LossFn:
    """A loss by name (``ce``, ``margin``, ``logistic``) or a callable ``(out, y) -> (N,)``."""
    if callable(loss):
        return loss
    try:
        return LOSSES[loss]
    except KeyError:
        raise ValueError(f"loss={loss!r} is not allowed: one of {', '.join(LOSSES)} or a callable") from None

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
    "dlr_loss",
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


def dlr_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Difference of logits ratio per sample ``(N,)``: ``−(z_y − max_{i≠y} z_i) / (z_π1 − z_π3 + 1e−12)``
    (APGD paper, eq. 5); ``out`` is ``(N, k)`` logits with ``k >= 3``."""
    if out.ndim != 2 or out.shape[1] < 3:
        raise ValueError(f"the DLR loss needs logits of shape (N, k) with k >= 3 classes, got {tuple(out.shape)}")
    top, _ = out.sort(dim=1, descending=True)
    zy = out.gather(1, y.view(-1, 1)).squeeze(1)
    other = torch.where(top[:, 0] == zy, top[:, 1], top[:, 0])  # max over i != y (ties: the same value)
    return -(zy - other) / (top[:, 0] - top[:, 2] + 1e-12)


def ratio_closed(z: torch.Tensor, y: torch.Tensor, other: torch.Tensor, den: list[tuple[int, float]],
                 grad: bool) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """``L = −(z_y − z_o) / D`` with ``D = Σ_j c_j z_πj + 1e−12`` (``den``: pairs ``(j, c_j)``
    of sorted positions and weights) and its logit gradient ``(e_o − e_y)/D + (z_y − z_o)/D² ·
    Σ_j c_j e_πj``: the DLR losses, untargeted (``o`` the best other class) and targeted."""
    top = z.topk(max(j for j, _ in den) + 1, dim=1)  # (N, m) values and indices, decreasing
    yi, oi = y.view(-1, 1), other.view(-1, 1)
    num = (z.gather(1, yi) - z.gather(1, oi)).squeeze(1)
    d = sum(c * top.values[:, j] for j, c in den) + 1e-12
    value = -num / d
    dz = None
    if grad:
        inv, r = (1.0 / d).view(-1, 1), (num / d.square()).view(-1, 1)
        dz = torch.zeros_like(z).scatter_add_(1, oi, inv).scatter_add_(1, yi, -inv)
        for j, c in den:
            dz.scatter_add_(1, top.indices[:, j:j + 1], c * r)
    return value, dz, _predicted(z) == y


def _dlr_closed(z: torch.Tensor, y: torch.Tensor, grad: bool, direction: bool = False):
    """:func:`dlr_loss` and its logit gradient (see :func:`ratio_closed`)."""
    if z.shape[1] < 3:
        dlr_loss(z, y)  # raises: the DLR loss needs three classes
    top2 = z.topk(2, dim=1).indices
    other = torch.where(top2[:, 0] == y, top2[:, 1], top2[:, 0])  # the best class other than y
    return ratio_closed(z, y, other, [(0, 1.0), (2, -1.0)], grad)


# the losses whose logit gradient :func:`loss_grad_correct` gives in closed form
CLOSED_FORM = ((cross_entropy, _ce_closed), (margin_loss, _margin_closed), (dlr_loss, _dlr_closed))


def closed_form(loss_fn: LossFn) -> Callable | None:
    """``(out, y, grad) ↦ (loss, logit gradient or None, correct)`` for multi-class logits
    ``(N, k)``, k >= 2, if ``loss_fn`` has one (see :func:`loss_grad_correct`): a built-in loss,
    or a loss object with a ``closed_form`` method of that signature; else None."""
    found = next((f for fn, f in CLOSED_FORM if fn is loss_fn), None)  # any callable, hashable or not
    return found if found is not None else getattr(loss_fn, "closed_form", None)


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

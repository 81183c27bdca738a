"""Training inside the lazy ball (lazy training, NeurIPS 2022, §5): SGD that stops on leaving it, and the
authors' projected adversarial training (Alg. 1).

Both loops train an ensemble :class:`~robustlab.models.two_layer.TwoLayerReLU` of E
independent copies in one batched pass: copy ``e`` draws its own mini-batch order from
``generators[e]``, and a copy that has stopped is frozen while the others go on.
The loss is logistic, ``ℓ(f, y) = log(1 + exp(−y f)) = softplus(−y f)``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ..attacks import L2, checks, per_sample_norm
from ..errors import NumericalError
from ..models.ensemble import fold, unfold
from ..models.two_layer import TwoLayerReLU, outside_ball, project_to_ball

__all__ = ["logistic_loss", "TrainLog", "train_lazy_sgd", "adversarial_examples",
           "train_lazy_adversarial"]


def logistic_loss(scores: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``softplus(−y f)`` elementwise (same shape as ``scores``)."""
    return F.softplus(-y * scores)


@dataclasses.dataclass
class TrainLog:
    """What a training loop did, per copy.

    ``epochs`` (E,): epochs whose weights were kept; ``stopped`` (E,) bool: stopped by the rule
    (left the ball / no robust gain) rather than by the epoch cap; ``history``: one dict per
    epoch with (E,) tensors ``train_loss``, ``train_acc`` (and ``robust_train_acc``),
    ``active`` (which copies were still training during that epoch).
    """

    epochs: torch.Tensor
    stopped: torch.Tensor
    history: list[dict[str, torch.Tensor]]


def _orders(generators: Sequence[torch.Generator], n: int, device: torch.device) -> torch.Tensor:
    """One random permutation of range(n) per copy: (E, n)."""
    return torch.stack([torch.randperm(n, generator=g) for g in generators]).to(device)


def _check_finite(loss: torch.Tensor, what: str) -> None:
    if not torch.isfinite(loss).all():
        raise NumericalError(f"{what}: non-finite training loss {loss.tolist()}")


def _hidden(net: TwoLayerReLU, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Pre-activations ``⟨w_s, x_n⟩ + b_s``: (E, B, d) -> (E, B, m), one (batched) GEMM with the
    bias as its initial value, into ``out`` if given. ``net.weight`` is read as its (E, d, m)
    transpose, which is contiguous for the loops' networks (see :func:`_trainable`)."""
    w = net.weight.mT  # (E, d, m)
    if net.bias is None:
        return torch.bmm(x, w, out=out)
    return torch.baddbmm(net.bias[:, None, :], x, w, out=out)


def _top(net: TwoLayerReLU, act: torch.Tensor, scratch: torch.Tensor | None = None) -> torch.Tensor:
    """Scores ``(1/√m) Σ_s a_s act_s + c``: (E, B, m) -> (E, B); ``scratch`` (E, B, m) for the
    products, if given.

    A multiply and a row sum rather than a batched matrix-vector product: torch runs that on a
    slow path for E > 1 (~9× the cost at B = 64, m = 1000) and on another kernel, with other
    low bits, at E = 1. The row sum's bits depend only on the row, not on E or B.
    """
    prod = torch.mul(act, net.top[:, None, :], out=scratch)
    return prod.sum(-1) / math.sqrt(net.m) + net.top_bias[:, None]


def _scores(net: TwoLayerReLU, x: torch.Tensor) -> torch.Tensor:
    """``net(x)`` as the training loops compute it (the bits of :func:`_logistic_step`'s scores)."""
    return _top(net, torch.relu_(_hidden(net, x)))


def _loss_and_slope(out: torch.Tensor, yb: torch.Tensor, rows: torch.Tensor | None,
                    E: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``logistic_loss(out, yb)`` and its derivative ``∂ℓ/∂f = −y σ(−y f)``, both (E', B), for
    batch members sitting at ``rows`` of the full ensemble, computed in the full (E, B) layout.

    Torch's vectorised ``exp``/``log1p``/``sigmoid`` and their scalar tail loop differ in the
    last bit, and which elements fall in the tail depends on where they sit in the buffer;
    computing these (cheap) functions at each copy's own place of the full layout gives it
    the bits it has when every copy is in the batch. ``rows=None``: the batch is the full
    ensemble.
    """
    if rows is not None:
        out = out.new_zeros(E, out.shape[1]).index_copy(0, rows, out)
        yb = yb.new_zeros(E, yb.shape[1]).index_copy(0, rows, yb)
    z = -yb * out
    loss, slope = F.softplus(z), -yb * torch.sigmoid(z)
    if rows is not None:
        loss, slope = loss.index_select(0, rows), slope.index_select(0, rows)
    return loss, slope


@torch.no_grad()
def _logistic_step(net: TwoLayerReLU, xb: torch.Tensor, yb: torch.Tensor, lr: float, *,
                   rows: torch.Tensor | None = None, E: int | None = None,
                   mask: torch.Tensor | None = None, what: str = "lazy SGD") -> tuple[torch.Tensor, torch.Tensor]:
    """One SGD step of every copy on its mean logistic loss over ``xb`` (E', B, d), ``yb`` (E', B),
    in closed form (no autograd). Returns the scores before the step (E', B) and each copy's
    mean loss (E',); raises :class:`NumericalError` on a non-finite loss, before updating.

    With ``h = x Wᵀ + b`` (E', B, m), ``f = a·ReLU(h)/√m + c`` and ``L = (1/B) Σ_n ℓ(f_n, y_n)``:
    ``∂L/∂h_{ns} = ℓ'(f_n)/B · a_s/√m · 1[h_{ns} > 0]``, ``∂L/∂W = (∂L/∂h)ᵀ x``,
    ``∂L/∂b = Σ_n ∂L/∂h_n``. The weight update ``W ← W − lr·(∂L/∂h)ᵀ x`` is one in-place GEMM
    into ``W``'s (E', d, m) memory (:func:`_trainable`); about half the time of the autograd
    step, whose backward is two more kernels per layer and a separate update pass.

    ``mask`` (E',) 0/1 freezes copies: their slope is zeroed, so ``W`` gets ``+0`` exactly.
    ``rows``, ``E``: see :func:`_loss_and_slope`. Every operation on a copy's numbers is either
    a per-copy GEMM, a row reduction or an exactly rounded elementwise operation, so its
    bits do not depend on which other copies share the batch.
    """
    B = xb.shape[1]
    act = torch.relu_(_hidden(net, xb))  # (E', B, m)
    out = _top(net, act)  # (E', B)
    loss, slope = _loss_and_slope(out, yb, rows, net.E if E is None else E)
    loss = loss.mean(1)
    _check_finite(loss, what)
    coef = slope / (B * math.sqrt(net.m))  # (E', B): ℓ'(f_n) / (B √m)
    if mask is not None:
        coef = coef * mask[:, None]
    dh = act.sign_().mul_(coef[:, :, None]).mul_(net.top[:, None, :])  # (E', B, m), in act's memory
    if net.bias is not None:
        g = dh.sum(1)
        g.mul_(lr)  # b − (lr·g): two exactly rounded operations (a fused one may take an FMA)
        net.bias.sub_(g)
    net.weight.mT.baddbmm_(xb.mT, dh, alpha=-lr)  # (E', d, m) += −lr · (d, B)(B, m)
    return out, loss


@torch.no_grad()
def _epoch_scores(net: TwoLayerReLU, xp: torch.Tensor, yp: torch.Tensor, batch_size: int, *,
                  rows: torch.Tensor | None = None, E: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed loss and correct count of every copy of ``net`` over one epoch's batches,
    accumulated as the training loops do: ``xp`` (E', N, d), ``yp`` (E', N) in the epoch's
    order; ``rows``, ``E`` as in :func:`_loss_and_slope`."""
    En, N = yp.shape
    tot_loss = torch.zeros(En, device=xp.device)
    tot_acc = torch.zeros(En, device=xp.device)
    for i in range(0, N, batch_size):
        xb, yb = xp[:, i:i + batch_size], yp[:, i:i + batch_size]
        out = _scores(net, xb)
        tot_loss += _loss_and_slope(out, yb, rows, En if E is None else E)[0].mean(1) * yb.shape[1]
        tot_acc += ((out * yb) > 0).float().sum(1)
    return tot_loss, tot_acc


def _trainable(model: TwoLayerReLU, members: torch.Tensor) -> TwoLayerReLU:
    """The copies ``members`` as a network to train, its weight held as (E, d, m) in memory.

    The forward product ``x Wᵀ`` and the update ``Wᵀ += −lr·xᵀ ∂L/∂h`` then both run as plain
    GEMMs on contiguous memory (5 % faster than the (E, m, d) layout at m = 1000, d = 196).
    """
    sub = model.select(members)
    sub.weight = torch.nn.Parameter(sub.weight.detach().mT.contiguous().mT, requires_grad=False)
    if sub.bias is not None:
        sub.bias.requires_grad_(False)
    return sub


def _on_support(model: TwoLayerReLU, x: torch.Tensor) -> tuple[TwoLayerReLU, torch.Tensor, torch.Tensor | None]:
    """The network and inputs restricted to the input coordinates ``cols`` that are non-zero for
    some training point (``cols=None``, and the same network and inputs, when all are).

    A coordinate that is zero in every ``x_n`` adds nothing to ``⟨w_s, x_n⟩`` and its weights
    get no gradient (``∂L/∂w_sj = Σ_n ∂L/∂h_ns x_nj = 0``), so SGD on the rest is the same
    SGD with shorter GEMMs: MNIST's blank border leaves 494 of 784 pixels at 28×28 (166 of
    196 at 14×14). The neuron offsets ``‖θ_s − θ_s(0)‖`` are the same too (the dropped
    weights stay at their initial values), up to the rounding of a shorter sum.
    """
    used = (x != 0).any(0)
    if bool(used.all()):
        return model, x, None
    cols = used.nonzero().squeeze(1)
    narrow = TwoLayerReLU(model.weight.detach()[:, :, cols], model.top,
                          model.bias.detach() if model.bias is not None else None, model.top_bias)
    narrow.weight0 = model.weight0[:, :, cols]
    if model.bias0 is not None:
        narrow.bias0 = model.bias0
    return narrow, x[:, cols].contiguous(), cols


def _per_copy(radius: float | torch.Tensor, rows: torch.Tensor) -> float | torch.Tensor:
    return radius[rows] if isinstance(radius, torch.Tensor) and radius.ndim else radius


def _spread(values: torch.Tensor, live: torch.Tensor, E: int) -> torch.Tensor:
    """The (E',) ``values`` of the copies ``live`` as an (E,) tensor, NaN for the other copies."""
    full = torch.full((E,), math.nan, device=values.device)
    full[live] = values
    return full


def _in_order(x_adv: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """Each copy's examples in its own order: ``x_adv`` (E', N, d), ``order`` (E', N) -> (E', N, d)."""
    return x_adv[torch.arange(order.shape[0], device=order.device)[:, None], order]


@torch.no_grad()
def _sgd_epoch(sub: TwoLayerReLU, xp: torch.Tensor, yp: torch.Tensor, *, lr: float, batch_size: int,
               check: str, radius: float | torch.Tensor, running: torch.Tensor, live: torch.Tensor,
               epochs: torch.Tensor, rows: torch.Tensor | None, E: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One epoch of :func:`train_lazy_sgd` for the copies in ``sub`` (the ensemble's ``live``),
    ``xp`` (E', N, d) and ``yp`` (E', N) in each copy's order. Returns each copy's summed loss
    and correct count over the epoch's batches (E',).

    A copy with a neuron outside its ball at a check is put back to its weights at the
    previous check and leaves ``running`` (E',), updated in place; under ``check="step"`` it
    is frozen for the rest of the epoch and ``epochs`` (E,) gets the fraction of the epoch it
    kept. ``rows``, ``E``: see :func:`_loss_and_slope`.
    """
    N = yp.shape[1]
    params = [p for p in (sub.weight, sub.bias) if p is not None]
    saved = [p.clone() for p in params]
    tot_loss = torch.zeros(live.numel(), device=xp.device)
    tot_acc = torch.zeros(live.numel(), device=xp.device)
    mask = None
    for i in range(0, N, batch_size):
        xb, yb = xp[:, i:i + batch_size], yp[:, i:i + batch_size]  # views, no copy
        if check == "step":
            saved = [p.clone() for p in params]
        out, loss = _logistic_step(sub, xb, yb, lr, rows=rows, E=E, mask=mask)  # (E', B), (E',)
        tot_loss += loss * yb.shape[1]
        tot_acc += ((out * yb) > 0).float().sum(1)
        if check == "step":
            out_now = outside_ball(sub, radius) & running
            if out_now.any():
                for p, s_ in zip(params, saved):
                    p[out_now] = s_[out_now]
                epochs[live[out_now]] += i / N  # the fraction of this epoch it kept
                running &= ~out_now
                mask = running.float()  # frozen for the rest of the epoch
    if check == "epoch":
        out_now = outside_ball(sub, radius) & running
        for p, s_ in zip(params, saved):
            p[out_now] = s_[out_now]
        running &= ~out_now
    return tot_loss, tot_acc


@torch.no_grad()
def _score_stopped(model: TwoLayerReLU, last: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                   order: torch.Tensor, *, batch_size: int, E: int, pgd: functools.partial | None = None) -> None:
    """Fill the history entry ``last`` of the final epoch for the copies that had stopped before
    it: their final networks over that epoch's batches (``order`` (E, N)), the loss at their
    places of the full layout, as the loop that trains every copy to the end scores them.
    With ``pgd`` (:func:`_pgd` bound to the data), over their own PGD examples, and their
    robust accuracy on those."""
    idle = (~last["active"]).nonzero().squeeze(1)
    net = _trainable(model, idle)
    o = order[idle]
    if pgd is None:
        xp = x[o]
    else:
        x_adv = pgd(net, rows=idle, E=E)
        last["robust_train_acc"][idle] = ((_scores(net, x_adv) * y) > 0).float().mean(1)
        xp = _in_order(x_adv, o)
    tot_loss, tot_acc = _epoch_scores(net, xp, y[o], batch_size, rows=idle, E=E)
    N = y.shape[0]
    last["train_loss"][idle] = tot_loss / N
    last["train_acc"][idle] = tot_acc / N


@torch.no_grad()
def train_lazy_sgd(
    model: TwoLayerReLU,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    radius: float | torch.Tensor,
    generators: Sequence[torch.Generator],
    lr: float = 0.1,
    batch_size: int = 64,
    max_epochs: int = 1000,
    check: str = "epoch",
) -> TrainLog:
    """Mini-batch SGD on the logistic loss until a copy leaves its lazy ball (lazy training, NeurIPS 2022, §5.1).

    ``x`` (N, d) and ``y`` (N,) ±1 are shared by all copies. After each epoch (``check="epoch"``,
    the authors' rule) or each step (``check="step"``), a copy with a neuron outside
    ``‖θ_s − θ_s(0)‖ ≤ radius`` is put back to its weights at the previous check — the last
    ones inside the ball — and stops. So the returned networks are always lazy.

    Stopped copies leave the batch at the end of their epoch (the ensemble is compacted), so
    the copies still running do not pay for them. Every copy's generator still draws one
    permutation per epoch, and a copy's arithmetic does not depend on which others share
    the batch (see :func:`_logistic_step`), so the networks are bit for bit those of the
    loop that computed every copy to the end. Each step is computed in closed form
    (:func:`_logistic_step`), not by autograd, and only on the input coordinates that some
    training point uses (:func:`_on_support`). History: a copy not training
    during an epoch has NaN loss and accuracy there, except in the last entry, which scores
    the final network of every copy that stopped before that epoch over its batches; a copy
    that trained during the last epoch keeps the running loss of its steps there, also when it
    left its ball in that epoch and was put back. So a copy's last entry depends on whether it
    stopped in the ensemble's last epoch, which depends on the other copies (measured: a
    ``train_loss`` 0.7 % apart for one of 5 seeds trained among 5 and among 39 copies); its
    weights and epochs do not (the same seed's weights were bit for bit equal there).
    """
    if check not in ("epoch", "step"):
        raise ValueError(f"check={check!r}: one of epoch, step")
    E, (N, _) = model.E, x.shape
    if len(generators) != E:
        raise ValueError(f"{len(generators)} generators for {E} copies")
    dev = x.device
    outer, (model, x, cols) = model, _on_support(model, x)
    active = torch.ones(E, dtype=torch.bool, device=dev)
    stopped = torch.zeros(E, dtype=torch.bool, device=dev)
    epochs = torch.zeros(E, device=dev)
    history: list[dict[str, torch.Tensor]] = []
    live = torch.arange(E, device=dev)  # the copies still training
    running = torch.ones(E, dtype=torch.bool, device=dev)  # in the batch: still in this epoch
    sub, rows = _trainable(model, live), None  # rows: the live copies' places in the full ensemble
    order = None
    for _ in range(max_epochs):
        if live.numel() == 0:
            break
        order = _orders(generators, N, dev)  # (E, N): every generator draws, stopped or not
        was_active = active.clone()
        tot_loss, tot_acc = _sgd_epoch(sub, x[order[live]], y[order[live]], lr=lr, batch_size=batch_size,
                                       check=check, radius=_per_copy(radius, live), running=running, live=live,
                                       epochs=epochs, rows=rows, E=E)
        gone = live[~running]
        active[gone] = False
        stopped[gone] = True
        epochs[active] += 1
        history.append({"train_loss": _spread(tot_loss / N, live, E), "train_acc": _spread(tot_acc / N, live, E),
                        "active": was_active})
        if not running.all():  # compact: the stopped copies leave the batch
            model.put(live, sub)
            live = live[running]
            running = running[running]
            sub, rows = _trainable(model, live), live
    model.put(live, sub)
    if history and not history[-1]["active"].all():
        _score_stopped(model, history[-1], x, y, order, batch_size=batch_size, E=E)
    if cols is not None:
        outer.weight[:, :, cols] = model.weight
        if outer.bias is not None:
            outer.bias.copy_(model.bias)
    return TrainLog(epochs=epochs, stopped=stopped, history=history)


@torch.no_grad()
def _pgd(net: TwoLayerReLU, x: torch.Tensor, y: torch.Tensor, *, eps: float, steps: int,
         step_size: float, bounds: tuple[float, float] | None, rows: torch.Tensor | None = None,
         E: int | None = None) -> torch.Tensor:
    """ℓ2 PGD from ``x`` (N, d) against every copy of ``net`` -> (E', N, d): the semantics of
    ``attacks.PGD(L2(eps), steps, step_size, random_start=False, loss="ce")`` on
    ``Flat(net)`` — per sample the worst iterate (the start included; a misclassified one
    beats a correct one, then the higher logistic loss wins), each step
    ``x ← clip(Π_ε(x + α g/‖g‖))``, the result projected and clipped once more — with the
    input gradient in closed form instead of autograd:
    ``∇ₓℓ(f(x), y) = ℓ'(f) · (1/√m) Σ_s a_s 1[⟨w_s, x⟩ + b_s > 0] w_s``.

    ``rows``, ``E``: the copies' places in a larger ensemble, for the bits of the loss
    (:func:`_loss_and_slope`); every other operation acts on one copy's numbers alone, so a
    copy's examples do not depend on which other copies share the batch.
    """
    En, (N, d) = net.E, x.shape
    x0 = x.expand(En, N, d).reshape(En * N, d)  # (E'N, d), a copy
    if eps == 0 or steps == 0 or N == 0:
        return unfold(x0, En)
    checks.check_bounds(x, bounds)
    threat = L2(eps)
    yy = y.expand(En, N)
    full_E = En if E is None else E
    x_adv = x0.clone()
    best = x0.clone()  # the worst iterate so far
    best_key = torch.full((En * N,), -math.inf, dtype=x.dtype, device=x.device)
    # the (E', N, m) work tensors are allocated once: tens of MB each, allocated afresh every
    # step they cost a page fault per 4 kB (a fifth of the step's time at N = 800, m = 1024)
    h_buf = x.new_empty(En, N, net.m)
    scratch = torch.empty_like(h_buf)
    g_buf = x.new_empty(En, N, d)
    tiny = torch.finfo(x.dtype).tiny
    for t in range(steps + 1):
        act = torch.relu_(_hidden(net, unfold(x_adv, En), out=h_buf))  # (E', N, m)
        out = _top(net, act, scratch)  # (E', N)
        if t == 0:
            checks.check_labels(out.reshape(-1), yy.reshape(-1))  # ±1, as attacks.PGD requires
        loss, slope = _loss_and_slope(out, yy, rows, full_E)
        # the rank key of attacks.PGD for the logistic loss: misclassified rows first
        key = torch.where(yy * out > 0, loss, loss + 1.0).reshape(-1)
        better = key > best_key
        # on a CPU: a plain copy where every row improved (the first pass, and most later ones),
        # half the cost of the masked select; on a GPU counting would cost a sync every step
        n_better = int(better.sum()) if better.device.type == "cpu" else -1
        if n_better == better.numel():
            best.copy_(x_adv)
        elif n_better:
            torch.where(better[:, None], x_adv, best, out=best)
        torch.where(better, key, best_key, out=best_key)
        if t == steps:
            break
        coef = slope / math.sqrt(net.m)
        dh = act.sign_().mul_(coef[:, :, None]).mul_(net.top[:, None, :])  # ∂ℓ/∂h, (E', N, m)
        g = fold(torch.bmm(dh, net.weight, out=g_buf))  # (E'N, d)
        if t == 0:
            checks.check_gradients(g)
        # x ← clip(Π_ε(x + α·g/‖g‖)): L2.steepest, then L2.project, in place in g's memory
        g.div_(per_sample_norm(g, 2).clamp_min(tiny)[:, None]).mul_(step_size).add_(x_adv)
        delta = g.sub_(x0)
        scale = (eps / per_sample_norm(delta, 2).clamp_min(tiny)).clamp(max=1.0)
        torch.add(x0, delta.mul_(scale[:, None]), out=x_adv)
        if bounds is not None:
            x_adv.clamp_(bounds[0], bounds[1])
    best = threat.project(x0, best)
    if bounds is not None:
        best = best.clamp_(bounds[0], bounds[1])
    return unfold(best, En)


def adversarial_examples(model: TwoLayerReLU, x: torch.Tensor, y: torch.Tensor, *, eps: float,
                         steps: int, step_size: float | None = None,
                         bounds: tuple[float, float] = (0.0, 1.0)) -> torch.Tensor:
    """ℓ2 PGD against every copy (lazy training, NeurIPS 2022, Alg. 1: start at x, step ε/40, clip to the box,
    project to the ε-ball): ``x`` (N, d) shared -> ``x_adv`` (E, N, d), one set per copy.

    The attack of ``attacks.PGD(L2(eps), random_start=False)`` over ``models.Flat(model)``,
    with the input gradient in closed form (:func:`_pgd`; the same examples up to float
    rounding; ~1.3× faster per step at N = 800, d = 196, m = 1024, where the two GEMMs are
    most of a step)."""
    return _pgd(model, x, y, eps=eps, steps=steps,
                step_size=eps / 40 if step_size is None else step_size, bounds=bounds)


@torch.no_grad()
def _adversarial_epoch(sub: TwoLayerReLU, x: torch.Tensor, y: torch.Tensor, *, pgd: functools.partial,
                       generators: Sequence[torch.Generator], live: torch.Tensor, rows: torch.Tensor | None,
                       E: int, lr: float, batch_size: int,
                       radius: float | torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One epoch of Alg. 1 for the copies in ``sub`` (the ensemble's ``live``): ℓ2 PGD on the
    whole training set ``x`` (N, d), ``y`` (N,) against each copy (``pgd``: :func:`_pgd` bound
    to the data), then one SGD pass over its examples in the epoch's order, every neuron
    projected back onto its ball after each step. ``rows``, ``E``: see :func:`_loss_and_slope`.

    Returns the epoch's orders (E, N: every generator draws, stopped copy or not) and the
    history entry: (E,) ``train_loss`` and ``train_acc`` over the epoch's batches,
    ``clean_train_acc`` and ``robust_train_acc`` at the weights the epoch starts from; NaN
    for the copies not in ``live``.
    """
    N = x.shape[0]
    x_adv = pgd(sub, rows=rows, E=E)  # (E', N, d)
    robust = ((_scores(sub, x_adv) * y) > 0).float().mean(1)  # (E',)
    clean = ((_scores(sub, x.expand(live.numel(), *x.shape)) * y) > 0).float().mean(1)
    order = _orders(generators, N, x.device)  # (E, N)
    o = order[live]
    xp, yp = _in_order(x_adv, o), y[o]  # gathered once
    tot_loss = torch.zeros(live.numel(), device=x.device)
    tot_acc = torch.zeros(live.numel(), device=x.device)
    for i in range(0, N, batch_size):
        xb, yb = xp[:, i:i + batch_size], yp[:, i:i + batch_size]  # views
        out, loss = _logistic_step(sub, xb, yb, lr, rows=rows, E=E, what="lazy adversarial training")
        tot_loss += loss * yb.shape[1]
        tot_acc += ((out * yb) > 0).float().sum(1)
        project_to_ball(sub, radius)
    return order, {"train_loss": _spread(tot_loss / N, live, E), "train_acc": _spread(tot_acc / N, live, E),
                   "clean_train_acc": _spread(clean, live, E), "robust_train_acc": _spread(robust, live, E)}


@dataclasses.dataclass
class _Patience:
    """The stopping rule of :func:`train_lazy_adversarial`, per copy: stop once the robust
    training accuracy has not beaten its best by ``min_gain`` for ``patience`` armed epochs."""

    patience: int
    min_gain: float
    arm_acc: float | None
    burn_in: int
    best: torch.Tensor  # (E,) the best robust training accuracy so far
    since: torch.Tensor  # (E,) armed epochs since it last improved
    armed: torch.Tensor  # (E,) bool

    @classmethod
    def start(cls, E: int, device: torch.device, *, patience: int, min_gain: float, arm_acc: float | None,
              burn_in: int) -> _Patience:
        return cls(patience, min_gain, arm_acc, burn_in, best=torch.full((E,), -1.0, device=device),
                   since=torch.zeros(E, dtype=torch.long, device=device),
                   armed=torch.full((E,), burn_in <= 0 and arm_acc is None, dtype=torch.bool, device=device))

    def update(self, epoch: int, entry: dict[str, torch.Tensor], active: torch.Tensor) -> torch.Tensor:
        """Read epoch ``epoch``'s history ``entry``; the (E,) bool copies among ``active`` that stop now."""
        self.armed |= epoch >= self.burn_in > 0
        if self.arm_acc is not None:
            self.armed |= entry["clean_train_acc"] >= self.arm_acc
        robust_acc = entry["robust_train_acc"]
        gain = robust_acc > self.best + self.min_gain
        self.best = torch.where(gain & active, robust_acc, self.best)
        self.since = torch.where(gain | ~self.armed, torch.zeros_like(self.since), self.since + 1)
        return active & (self.since >= self.patience)


@torch.no_grad()
def train_lazy_adversarial(
    model: TwoLayerReLU,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    radius: float | torch.Tensor,
    eps: float,
    generators: Sequence[torch.Generator],
    attack_steps: int = 100,
    attack_step_size: float | None = None,
    bounds: tuple[float, float] = (0.0, 1.0),
    lr: float = 0.01,
    batch_size: int = 32,
    patience: int = 20,
    min_gain: float = 1e-4,
    max_epochs: int = 1000,
    arm_acc: float | None = None,
    burn_in: int = 0,
) -> TrainLog:
    """Projected adversarial training inside the lazy ball (lazy training, NeurIPS 2022, Alg. 1).

    Each epoch: ℓ2 PGD on the whole training set against the current copy (:func:`_pgd`);
    one SGD pass over the perturbed set (:func:`_logistic_step`); after every step, each
    neuron is projected back onto its ball ``‖θ_s − θ_s(0)‖ ≤ radius``. A copy stops once its
    robust training accuracy (the accuracy on that epoch's PGD examples) has not beaten its
    best by ``min_gain`` for ``patience`` epochs *counted once it is armed*: from the first
    epoch whose clean training accuracy (its weights at the start of the epoch, on the clean
    training set) reaches ``arm_acc``, or from epoch ``burn_in``, whichever comes first.
    ``arm_acc=None, burn_in=0`` is the authors' rule, armed from the start; there the
    untrained network's robust accuracy (0.5 for a network that predicts one class) is the
    first "best", and a copy that does not beat it within ``patience`` epochs stops
    untrained (at lr 0.01, d = 25: 3 of 5 seeds stop at epoch 21, clean accuracy ~0.5).

    Stopped copies leave the batch at the end of their last epoch, as in
    :func:`train_lazy_sgd`: the 100-step PGD, which is most of the cost, runs only on the
    copies still training. A stopped copy keeps its weights exactly (it is neither updated
    nor re-projected), and a copy's arithmetic does not depend on which others share the
    batch, so the networks are bit for bit those of the loop that computes every copy to
    the end with the stopped ones frozen. History as in :func:`train_lazy_sgd`: NaN for a
    copy that was not training during an epoch, except in the last entry, which scores every
    copy's final network (its PGD examples, robust accuracy, and loss and accuracy over
    that epoch's batches of them).
    """
    E = model.E
    if len(generators) != E:
        raise ValueError(f"{len(generators)} generators for {E} copies")
    dev = x.device
    pgd = functools.partial(_pgd, x=x, y=y, eps=eps, steps=attack_steps, bounds=bounds,
                            step_size=eps / 40 if attack_step_size is None else attack_step_size)
    rule = _Patience.start(E, dev, patience=patience, min_gain=min_gain, arm_acc=arm_acc, burn_in=burn_in)
    active = torch.ones(E, dtype=torch.bool, device=dev)
    stopped = torch.zeros(E, dtype=torch.bool, device=dev)
    epochs = torch.zeros(E, device=dev)
    history: list[dict[str, torch.Tensor]] = []
    live = torch.arange(E, device=dev)  # the copies still training
    sub, rows = _trainable(model, live), None  # rows: the live copies' places in the full ensemble
    order = None
    for epoch in range(max_epochs):
        if live.numel() == 0:
            break
        order, entry = _adversarial_epoch(sub, x, y, pgd=pgd, generators=generators, live=live, rows=rows, E=E,
                                          lr=lr, batch_size=batch_size, radius=_per_copy(radius, live))
        done = rule.update(epoch, entry, active)
        epochs[active] += 1
        stopped |= done
        history.append({**entry, "active": active.clone()})
        active &= ~done
        if done.any():  # compact: the stopped copies leave the batch
            model.put(live, sub)
            live = live[active[live]]
            sub, rows = _trainable(model, live), live
    model.put(live, sub)
    if history and not history[-1]["active"].all():
        _score_stopped(model, history[-1], x, y, order, batch_size=batch_size, E=E, pgd=pgd)
    return TrainLog(epochs=epochs, stopped=stopped, history=history)

"""Training inside the lazy ball (Seed 001, §5): SGD that stops on leaving it, and the
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

from ..attacks import L2, PGD
from ..errors import NumericalError
from ..models.ensemble import Flat, fold, unfold
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


def _sgd_step(params: list[torch.Tensor], grads: Sequence[torch.Tensor], lr: float,
              mask: torch.Tensor | None) -> None:
    """``p -= lr·g`` (times a per-copy 0/1 ``mask``) in place, reusing ``g`` as the scratch:
    the same float operations, in the same order, as ``p -= lr * g * mask``."""
    for p, g in zip(params, grads):
        g.mul_(lr)
        if mask is not None:
            g.mul_(mask.reshape(-1, *([1] * (g.ndim - 1))))
        p.sub_(g)


def _lone_scores(model: TwoLayerReLU, x: torch.Tensor) -> torch.Tensor:
    """``model(x)`` for a single copy (E = 1) with the bits it has inside a larger ensemble.

    Torch multiplies a lone matrix by a vector with another kernel than a batch of them
    (``einsum("enm,em->en")`` at E = 1 is a gemv, not a batched gemm), and the low bits
    differ; the big products ``⟨w_s, x⟩`` do not. So only the cheap top-layer contraction is
    padded with a zero copy, to run as the batched kernel.
    """
    act = torch.relu(model.preactivation(x))  # (1, B, m)
    act2 = torch.cat([act, torch.zeros_like(act)])
    top2 = torch.cat([model.top, torch.zeros_like(model.top)])
    return torch.einsum("enm,em->en", act2, top2)[:1] / math.sqrt(model.m) + model.top_bias[:, None]


def _mean_loss(out: torch.Tensor, yb: torch.Tensor, rows: torch.Tensor | None, E: int) -> torch.Tensor:
    """``logistic_loss(out, yb).mean(1)`` for batch members sitting at ``rows`` of the full
    ensemble, computed in the full (E, B) layout.

    Torch's vectorised ``exp``/``log1p`` and their scalar tail loop differ in the last bit,
    and which elements fall in the tail depends on where they sit in the buffer; computing
    the (cheap) loss at each copy's own place of the full layout gives it the bits it has
    when every copy is in the batch. ``rows=None``: the batch is the full ensemble.
    """
    if rows is None:
        return logistic_loss(out, yb).mean(1)
    full = out.new_zeros(E, out.shape[1]).index_copy(0, rows, out)
    yfull = yb.new_zeros(E, yb.shape[1]).index_copy(0, rows, yb)
    return logistic_loss(full, yfull).mean(1).index_select(0, rows)


@torch.no_grad()
def _epoch_scores(model: TwoLayerReLU, xp: torch.Tensor, yp: torch.Tensor,
                  batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed loss and correct count of every copy over one epoch's batches, accumulated as
    the training loop does: ``xp`` (E, N, d), ``yp`` (E, N) in the epoch's order."""
    E, N = yp.shape
    tot_loss = torch.zeros(E, device=xp.device)
    tot_acc = torch.zeros(E, device=xp.device)
    for i in range(0, N, batch_size):
        xb, yb = xp[:, i:i + batch_size], yp[:, i:i + batch_size]
        out = model(xb)
        tot_loss += logistic_loss(out, yb).mean(1) * yb.shape[1]
        tot_acc += ((out * yb) > 0).float().sum(1)
    return tot_loss, tot_acc


def _trainable(model: TwoLayerReLU, members: torch.Tensor) -> TwoLayerReLU:
    """The copies ``members`` as a model to train, its weight held as (E, d, m) in memory.

    Autograd returns the weight gradient of ``einsum("end,emd->enm")`` transposed, (E, d, m)
    in memory; with the weight laid out the same way, the in-place update streams through
    both instead of transposing on the fly (5× faster at m = 1000, d = 784). The products
    and hence the bits are the same in either layout (the reference test checks it).
    """
    sub = model.select(members)
    sub.weight = torch.nn.Parameter(sub.weight.detach().mT.contiguous().mT)
    return sub


def _per_copy(radius: float | torch.Tensor, rows: torch.Tensor) -> float | torch.Tensor:
    return radius[rows] if isinstance(radius, torch.Tensor) and radius.ndim else radius


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
    """Mini-batch SGD on the logistic loss until a copy leaves its lazy ball (Seed 001, §5.1).

    ``x`` (N, d) and ``y`` (N,) ±1 are shared by all copies. After each epoch (``check="epoch"``,
    the authors' rule) or each step (``check="step"``), a copy with a neuron outside
    ``‖θ_s − θ_s(0)‖ ≤ radius`` is put back to its weights at the previous check — the last
    ones inside the ball — and stops. So the returned networks are always lazy.

    Stopped copies leave the batch at the end of their epoch (the ensemble is compacted), so
    the copies still running do not pay for them. Every copy's generator still draws one
    permutation per epoch, and a copy's arithmetic does not depend on which others share
    the batch (see :func:`_lone_scores`, :func:`_mean_loss`), so the networks are bit for bit
    those of the loop that computed every copy to the end. History: a copy not training
    during an epoch has NaN loss and accuracy there, except in the last entry, which scores
    every copy's final network over that epoch's batches.
    """
    if check not in ("epoch", "step"):
        raise ValueError(f"check={check!r}: one of epoch, step")
    E, (N, _) = model.E, x.shape
    if len(generators) != E:
        raise ValueError(f"{len(generators)} generators for {E} copies")
    dev = x.device
    active = torch.ones(E, dtype=torch.bool, device=dev)
    stopped = torch.zeros(E, dtype=torch.bool, device=dev)
    epochs = torch.zeros(E, device=dev)
    history: list[dict[str, torch.Tensor]] = []
    live = torch.arange(E, device=dev)  # the copies still training
    running = torch.ones(E, dtype=torch.bool, device=dev)  # in the batch: still in this epoch
    sub, rows = _trainable(model, live), None  # rows: the live copies' places in the full ensemble
    forward = sub
    order = None
    for _ in range(max_epochs):
        if live.numel() == 0:
            break
        params = [p for p in (sub.weight, sub.bias) if p is not None]
        r = _per_copy(radius, live)
        order = _orders(generators, N, dev)  # (E, N): every generator draws, stopped or not
        xp, yp = x[order[live]], y[order[live]]  # (E', N, d), (E', N): one gather per epoch
        saved = [p.detach().clone() for p in params]
        tot_loss = torch.zeros(live.numel(), device=dev)
        tot_acc = torch.zeros(live.numel(), device=dev)
        was_active = active.clone()
        mask = None
        for i in range(0, N, batch_size):
            xb, yb = xp[:, i:i + batch_size], yp[:, i:i + batch_size]  # views, no copy
            out = forward(xb)  # (E', B)
            loss = _mean_loss(out, yb, rows, E)  # (E',)
            _check_finite(loss, "lazy SGD")
            grads = torch.autograd.grad(loss.sum(), params)  # copies are independent: sum is fine
            with torch.no_grad():
                tot_loss += loss * yb.shape[1]
                tot_acc += ((out * yb) > 0).float().sum(1)
                if check == "step":
                    saved = [p.detach().clone() for p in params]
                _sgd_step(params, grads, lr, mask)
                if check == "step":
                    out_now = outside_ball(sub, r) & running
                    if out_now.any():
                        for p, s_ in zip(params, saved):
                            p[out_now] = s_[out_now]
                        epochs[live[out_now]] += i / N  # the fraction of this epoch it kept
                        running &= ~out_now
                        mask = running.float()  # frozen for the rest of the epoch
        with torch.no_grad():
            if check == "epoch":
                out_now = outside_ball(sub, r) & running
                for p, s_ in zip(params, saved):
                    p[out_now] = s_[out_now]
                running &= ~out_now
            gone = live[~running]
            active[gone] = False
            stopped[gone] = True
            epochs[active] += 1
            full_loss = torch.full((E,), math.nan, device=dev)
            full_acc = torch.full((E,), math.nan, device=dev)
            full_loss[live], full_acc[live] = tot_loss / N, tot_acc / N
        history.append({"train_loss": full_loss, "train_acc": full_acc, "active": was_active})
        if not running.all():  # compact: the stopped copies leave the batch
            model.put(live, sub)
            live = live[running]
            running = running[running]
            sub, rows = _trainable(model, live), live
            forward = functools.partial(_lone_scores, sub) if live.numel() == 1 < E else sub
    model.put(live, sub)
    if history and not history[-1]["active"].all():
        # the copies that had stopped before the last epoch: their final networks over its
        # batches, all copies in one pass (the full layout, as the full loop scored them)
        last, idle = history[-1], ~history[-1]["active"]
        tot_loss, tot_acc = _epoch_scores(model, x[order], y[order], batch_size)
        last["train_loss"][idle] = tot_loss[idle] / N
        last["train_acc"][idle] = tot_acc[idle] / N
    return TrainLog(epochs=epochs, stopped=stopped, history=history)


def adversarial_examples(model: TwoLayerReLU, x: torch.Tensor, y: torch.Tensor, *, eps: float,
                         steps: int, step_size: float | None = None,
                         bounds: tuple[float, float] = (0.0, 1.0)) -> torch.Tensor:
    """ℓ2 PGD against every copy (Seed 001, Alg. 1: start at x, step ε/40, clip to the box,
    project to the ε-ball): ``x`` (N, d) shared -> ``x_adv`` (E, N, d), one set per copy."""
    E = model.E
    xe = x.unsqueeze(0).expand(E, *x.shape)  # (E, N, d)
    if eps == 0 or steps == 0:
        return xe.clone()
    attack = PGD(L2(eps), steps=steps, step_size=eps / 40 if step_size is None else step_size,
                 random_start=False)
    x_adv = attack(Flat(model, E), fold(xe), fold(y.unsqueeze(0).expand(E, -1)), bounds=bounds)
    return unfold(x_adv.detach(), E)


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
) -> TrainLog:
    """Projected adversarial training inside the lazy ball (Seed 001, Alg. 1).

    Each epoch: ℓ2 PGD on the whole training set against the current copy; one SGD pass
    over the perturbed set; after every step, each neuron is projected back onto its ball
    ``‖θ_s − θ_s(0)‖ ≤ radius``. A copy stops once its robust training accuracy (the accuracy
    on that epoch's PGD examples) has not beaten its best by ``min_gain`` for ``patience``
    epochs.

    Stopped copies stay in the batch (frozen): the projection re-rounds a frozen copy's
    weights and the PGD loss's low bits depend on a sample's place in the batch, so dropping
    them would change the others' bits (:func:`train_lazy_sgd` compacts; this loop does not).
    """
    E, (N, _) = model.E, x.shape
    if len(generators) != E:
        raise ValueError(f"{len(generators)} generators for {E} copies")
    params = [p for p in (model.weight, model.bias) if p is not None]
    active = torch.ones(E, dtype=torch.bool, device=x.device)
    stopped = torch.zeros(E, dtype=torch.bool, device=x.device)
    epochs = torch.zeros(E, device=x.device)
    best = torch.full((E,), -1.0, device=x.device)
    since = torch.zeros(E, dtype=torch.long, device=x.device)
    history: list[dict[str, torch.Tensor]] = []
    for _ in range(max_epochs):
        if not active.any():
            break
        x_adv = adversarial_examples(model, x, y, eps=eps, steps=attack_steps,
                                     step_size=attack_step_size, bounds=bounds)  # (E, N, d)
        with torch.no_grad():
            robust_acc = ((model(x_adv) * y) > 0).float().mean(1)  # (E,)
        order = _orders(generators, N, x.device)
        tot_loss = torch.zeros(E, device=x.device)
        tot_acc = torch.zeros(E, device=x.device)
        ar = torch.arange(E, device=x.device)[:, None]
        xp, yp = x_adv[ar, order], y[order]  # each copy's own adversarial set, gathered once
        mask = None if active.all() else active.float()
        for i in range(0, N, batch_size):
            xb, yb = xp[:, i:i + batch_size], yp[:, i:i + batch_size]  # views
            out = model(xb)
            loss = logistic_loss(out, yb).mean(1)
            _check_finite(loss, "lazy adversarial training")
            grads = torch.autograd.grad(loss.sum(), params)
            with torch.no_grad():
                tot_loss += loss * yb.shape[1]
                tot_acc += ((out * yb) > 0).float().sum(1)
                _sgd_step(params, grads, lr, mask)
                project_to_ball(model, radius)
        with torch.no_grad():
            gain = robust_acc > best + min_gain
            best = torch.where(gain & active, robust_acc, best)
            since = torch.where(gain, torch.zeros_like(since), since + 1)
            epochs[active] += 1
            done = active & (since >= patience)
            stopped |= done
            history.append({"train_loss": tot_loss / N, "train_acc": tot_acc / N,
                            "robust_train_acc": robust_acc, "active": active.clone()})
            active &= ~done
    return TrainLog(epochs=epochs, stopped=stopped, history=history)

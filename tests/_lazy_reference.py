"""The lazy loops as they were before ensembles were compacted (every copy computed until the
last one stops, a masked update, a per-step gather): the reference the compacted loops
must match bit for bit. The SGD reference takes its steps with the same closed-form step
(:func:`robustlab.train.lazy._logistic_step`, checked against autograd in
``test_lazy_train.py``), so what it pins down is that compaction changes no bits. Test code
only."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from robustlab.models.two_layer import TwoLayerReLU, outside_ball, project_to_ball
from robustlab.train.lazy import (
    TrainLog,
    _logistic_step,
    _orders,
    _pgd,
    _scores,
    _trainable,
)


def reference_lazy_sgd(
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
    """
    if check not in ("epoch", "step"):
        raise ValueError(f"check={check!r}: one of epoch, step")
    E, (N, _) = model.E, x.shape
    if len(generators) != E:
        raise ValueError(f"{len(generators)} generators for {E} copies")
    net = _trainable(model, torch.arange(E))  # the weight laid out as the training loop holds it
    params = [p for p in (net.weight, net.bias) if p is not None]
    active = torch.ones(E, dtype=torch.bool, device=x.device)
    stopped = torch.zeros(E, dtype=torch.bool, device=x.device)
    epochs = torch.zeros(E, device=x.device)
    history: list[dict[str, torch.Tensor]] = []

    def snapshot() -> list[torch.Tensor]:
        return [p.detach().clone() for p in params]

    def revert(saved: list[torch.Tensor], which: torch.Tensor) -> None:
        with torch.no_grad():
            for p, s in zip(params, saved):
                p[which] = s[which]

    for _ in range(max_epochs):
        if not active.any():
            break
        saved = snapshot()
        order = _orders(generators, N, x.device)  # (E, N)
        tot_loss = torch.zeros(E, device=x.device)
        tot_acc = torch.zeros(E, device=x.device)
        was_active = active.clone()
        for i in range(0, N, batch_size):
            idx = order[:, i:i + batch_size]  # (E, B)
            xb, yb = x[idx], y[idx]  # (E, B, d), (E, B)
            if check == "step":
                saved = snapshot()
            out, loss = _logistic_step(net, xb, yb, lr, mask=active.float())  # (E, B), (E,)
            with torch.no_grad():
                tot_loss += loss * idx.shape[1]
                tot_acc += ((out * yb) > 0).float().sum(1)
                if check == "step":
                    out_now = outside_ball(net, radius) & active
                    if out_now.any():
                        revert(saved, out_now)
                        epochs[out_now] += i / N  # the fraction of this epoch it kept
                        active &= ~out_now
                        stopped |= out_now
        with torch.no_grad():
            if check == "epoch":
                out_now = outside_ball(net, radius) & active
                revert(saved, out_now)
                active &= ~out_now
                stopped |= out_now
            epochs[active] += 1
        history.append({"train_loss": tot_loss / N, "train_acc": tot_acc / N, "active": was_active})
    model.put(torch.arange(E), net)
    return TrainLog(epochs=epochs, stopped=stopped, history=history)


def reference_lazy_adversarial(
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

    Each epoch: ℓ2 PGD on the whole training set against the current copy; one SGD pass
    over the perturbed set; after every step, each neuron is projected back onto its ball
    ``‖θ_s − θ_s(0)‖ ≤ radius``. A copy stops once its robust training accuracy (the accuracy
    on that epoch's PGD examples) has not beaten its best by ``min_gain`` for ``patience``
    epochs. Stopped copies stay in the batch, frozen: not updated (a zero mask) and not
    re-projected.
    """
    E, (N, _) = model.E, x.shape
    if len(generators) != E:
        raise ValueError(f"{len(generators)} generators for {E} copies")
    net = _trainable(model, torch.arange(E))  # the weight laid out as the training loop holds it
    params = [p for p in (net.weight, net.bias) if p is not None]
    step = eps / 40 if attack_step_size is None else attack_step_size
    active = torch.ones(E, dtype=torch.bool, device=x.device)
    stopped = torch.zeros(E, dtype=torch.bool, device=x.device)
    epochs = torch.zeros(E, device=x.device)
    best = torch.full((E,), -1.0, device=x.device)
    since = torch.zeros(E, dtype=torch.long, device=x.device)
    armed = torch.zeros(E, dtype=torch.bool, device=x.device)
    history: list[dict[str, torch.Tensor]] = []
    for epoch in range(max_epochs):
        if not active.any():
            break
        x_adv = _pgd(net, x, y, eps=eps, steps=attack_steps, step_size=step, bounds=bounds)  # (E, N, d)
        with torch.no_grad():
            robust_acc = ((_scores(net, x_adv) * y) > 0).float().mean(1)  # (E,)
            clean = ((_scores(net, x.expand(E, *x.shape)) * y) > 0).float().mean(1)
            # patience counts once armed: clean training accuracy reached arm_acc, or burn-in over
            armed |= (burn_in <= 0 and arm_acc is None) or epoch >= burn_in > 0
            if arm_acc is not None:
                armed |= clean >= arm_acc
        order = _orders(generators, N, x.device)
        tot_loss = torch.zeros(E, device=x.device)
        tot_acc = torch.zeros(E, device=x.device)
        ar = torch.arange(E, device=x.device)[:, None]
        mask = active.float()
        for i in range(0, N, batch_size):
            idx = order[:, i:i + batch_size]  # (E, B)
            xb, yb = x_adv[ar, idx], y[idx]  # each copy trains on its own adversarial set
            out, loss = _logistic_step(net, xb, yb, lr, mask=mask, what="lazy adversarial training")
            with torch.no_grad():
                tot_loss += loss * idx.shape[1]
                tot_acc += ((out * yb) > 0).float().sum(1)
                frozen = [p[~active].clone() for p in params]
                project_to_ball(net, radius)
                for p, f in zip(params, frozen):  # a stopped copy is not re-projected
                    p[~active] = f
        with torch.no_grad():
            gain = robust_acc > best + min_gain
            best = torch.where(gain & active, robust_acc, best)
            since = torch.where(gain | ~armed, torch.zeros_like(since), since + 1)
            epochs[active] += 1
            done = active & (since >= patience)
            stopped |= done
            history.append({"train_loss": tot_loss / N, "train_acc": tot_acc / N,
                            "robust_train_acc": robust_acc, "active": active.clone()})
            active &= ~done
    model.put(torch.arange(E), net)
    return TrainLog(epochs=epochs, stopped=stopped, history=history)

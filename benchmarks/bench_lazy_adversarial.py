"""Benchmark: one ``lazy-adversarial`` paper-preset point, the generic epoch vs the lazy loop's.

* **generic** (the loop before issue 14): each epoch ``attacks.PGD(L2)`` over a
  ``models.Flat`` wrapper with autograd input gradients on every copy, then the SGD pass
  with autograd parameter gradients, every copy in the batch until the last one stops.
* **robustlab** (:func:`robustlab.train.lazy.train_lazy_adversarial`): the PGD input
  gradient and the SGD step in closed form, and stopped copies leave the batch.

Both run the same epochs from the same initial networks and shuffles; the printed
agreement is the largest difference of their robust training accuracies (float rounding
only: a PGD example may land on the other side of a boundary, 1/N). ``--full`` also runs
the lazy loop to its stopping rule and estimates the generic loop's time for the same
epochs (per-epoch time × the longest seed's epochs: it keeps every copy until then).
Run: ``python benchmarks/bench_lazy_adversarial.py [--group 62] [--epochs 2] [--full]``.
CPU seconds of this one-thread process.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from robustlab.attacks import L2, PGD  # noqa: E402
from robustlab.models import TwoLayerReLU, project_to_ball  # noqa: E402
from robustlab.models.ensemble import Flat, fold, unfold  # noqa: E402
from robustlab.studies import get_study  # noqa: E402
from robustlab.studies.base import plan  # noqa: E402
from robustlab.studies.lazy.common import build_model, input_bounds, load_data, radius_of  # noqa: E402
from robustlab.sweep.runner import group_points  # noqa: E402
from robustlab.train.lazy import logistic_loss, train_lazy_adversarial  # noqa: E402
from robustlab.utils import make_generator  # noqa: E402

CLOCK = time.process_time


def generic_epochs(model: TwoLayerReLU, x, y, cfg, epochs: int) -> list[torch.Tensor]:
    """``epochs`` epochs of the generic loop (autograd everywhere, every copy in the batch);
    the robust training accuracy of each, (E,)."""
    E, N = model.E, len(y)
    step = cfg.eps / cfg.attack_step_div
    attack = PGD(L2(cfg.eps), steps=cfg.attack_steps, step_size=step, random_start=False)
    gens = [make_generator(c, "lazy-order") for c in range(E)]
    params = [p for p in (model.weight, model.bias) if p is not None]
    accs = []
    for _ in range(epochs):
        xe = x.unsqueeze(0).expand(E, *x.shape)
        x_adv = unfold(attack(Flat(model, E), fold(xe), fold(y.expand(E, -1)), bounds=input_bounds(cfg)).detach(), E)
        with torch.no_grad():
            accs.append(((model(x_adv) * y) > 0).float().mean(1))
        order = torch.stack([torch.randperm(N, generator=g) for g in gens])
        xp, yp = x_adv[torch.arange(E)[:, None], order], y[order]
        for i in range(0, N, cfg.batch_size):
            xb, yb = xp[:, i:i + cfg.batch_size], yp[:, i:i + cfg.batch_size]
            loss = logistic_loss(model(xb), yb).mean(1)
            grads = torch.autograd.grad(loss.sum(), params)
            with torch.no_grad():
                for p, g in zip(params, grads):
                    p -= cfg.lr * g
                project_to_ball(model, radius_of(cfg))
    return accs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--group", type=int, default=62, help="which group of the paper preset's grid")
    ap.add_argument("--epochs", type=int, default=2, help="epochs timed on both sides")
    ap.add_argument("--full", action="store_true", help="also run the lazy loop to its stopping rule")
    args = ap.parse_args()
    torch.set_num_threads(1)
    study = get_study("lazy-adversarial")
    p = plan(study, preset="paper")
    group = group_points(p.points, True, study.max_ensemble)[args.group]
    cfg = group[0]
    assert [c.seed for c in group] == list(range(len(group))), "seeds 0..E-1 expected"
    data = load_data(cfg)
    x, y = data.x_train, data.y_train
    E = len(group)
    print(f"lazy-adversarial --preset paper, group {args.group}: size {cfg.size} (d={data.d}), eps {cfg.eps}, "
          f"m {cfg.m}, R {cfg.R}, C0 {cfg.C0}, N {len(y)}, {E} seeds, {cfg.attack_steps} PGD steps; 1 thread; "
          f"CPU seconds; load {os.getloadavg()[0]:.2f}", flush=True)
    kw = dict(radius=radius_of(cfg), eps=cfg.eps, attack_steps=cfg.attack_steps,
              attack_step_size=cfg.eps / cfg.attack_step_div, bounds=input_bounds(cfg), lr=cfg.lr,
              batch_size=cfg.batch_size, patience=cfg.patience, min_gain=cfg.min_gain)

    model = build_model(group, data.d, torch.device("cpu"))
    t0 = CLOCK()
    accs = generic_epochs(model, x, y, cfg, args.epochs)
    t_old = (CLOCK() - t0) / args.epochs

    model = build_model(group, data.d, torch.device("cpu"))
    t0 = CLOCK()
    log = train_lazy_adversarial(model, x, y, generators=[make_generator(c.seed, "lazy-order") for c in group],
                                 max_epochs=args.epochs, **kw)
    t_new = (CLOCK() - t0) / args.epochs
    diff = max(float((h["robust_train_acc"] - a).abs().max()) for h, a in zip(log.history, accs))
    print(f"  per epoch, all {E} copies training: generic {t_old:6.2f} s | robustlab {t_new:6.2f} s "
          f"-> {t_old / t_new:.2f}x | max |robust train acc difference| {diff:.4f} (1/N = {1 / len(y):.4f})",
          flush=True)
    if args.full:
        model = build_model(group, data.d, torch.device("cpu"))
        t0 = CLOCK()
        log = train_lazy_adversarial(model, x, y, generators=[make_generator(c.seed, "lazy-order") for c in group],
                                     max_epochs=cfg.epochs, **kw)
        t_full = CLOCK() - t0
        ep = log.epochs.tolist()
        est = t_old * max(ep)
        print(f"  to the stopping rule: epochs per seed {[int(e) for e in ep]}; robustlab {t_full:7.1f} s | "
              f"generic (estimated: {t_old:.2f} s × {int(max(ep))} epochs) {est:7.1f} s -> {est / t_full:.2f}x "
              f"(load now {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()

"""Benchmark: the whole ``lazy-attack`` quick grid, ensemble vs the authors' protocol.

* **robustlab**: every grid point trains its seeds as one ensemble (leading dim E) and finds
  every test point's minimal flipping step at once (bracket, batched grid, bisection).
* **authors' protocol**: one training run per seed (E = 1), then the minimal flipping step
  by scanning ``t = 0.001, 0.002, …`` along ``−sign(f)∇f/‖∇f‖``. The authors scan one point
  at a time; here the scan is at least batched over the test points (a generous baseline),
  and the cost of a one-point-at-a-time scan is estimated from a sample of points.

Both sides run the same training code on the same data, so the networks agree (up to float
rounding) and so must the flipping steps (within the scan's 0.001). Run:
``python benchmarks/bench_lazy.py [--preset quick]``.
"""

from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from robustlab.studies import get_study  # noqa: E402
from robustlab.studies._lazy_common import build_model, load_data, radius_of  # noqa: E402
from robustlab.studies.base import plan  # noqa: E402
from robustlab.sweep.runner import group_points  # noqa: E402
from robustlab.train.lazy import train_lazy_sgd  # noqa: E402
from robustlab.utils import make_generator  # noqa: E402

STEP = 1e-3  # the authors' scan step


@torch.no_grad()
def scan_batched(model, x: torch.Tensor, y: torch.Tensor, cap: float = 2.0) -> torch.Tensor:
    """‖δ‖ of the first flip on the grid t = 0.001 k, all points at once; NaN if misclassified."""
    f = model(x[None])[0]
    g = model.input_grad(x[None])[0]
    s = torch.sign(f)
    u = -s[:, None] * g / g.norm(dim=1, keepdim=True)
    t = torch.full_like(f, math.nan)
    todo = (s == y).clone()
    k = 0
    while bool(todo.any()) and k * STEP < cap:
        k += 1
        idx = todo.nonzero().squeeze(1)
        fl = model((x[idx] + k * STEP * u[idx])[None])[0] * s[idx] <= 0
        t[idx[fl]] = k * STEP
        todo[idx[fl]] = False
    return t


@torch.no_grad()
def scan_one(model, x: torch.Tensor, cap: float = 2.0) -> float:
    """The authors' loop for one point."""
    f = model(x[None, None])[0, 0]
    g = model.input_grad(x[None, None])[0, 0]
    u = -torch.sign(f) * g / g.norm()
    k = 0
    while k * STEP < cap:
        k += 1
        if model((x + k * STEP * u)[None, None])[0, 0] * torch.sign(f) <= 0:
            return k * STEP
    return math.nan


def authors_point(cfg, sample_loop: int = 0) -> tuple[float, float]:
    """One seed, authors' way. Returns (mean ‖δ‖, seconds of a per-point loop on `sample_loop` points)."""
    data = load_data(cfg)
    model = build_model([cfg], data.d, torch.device("cpu"))
    train_lazy_sgd(model, data.x_train, data.y_train, radius=radius_of(cfg),
                   generators=[make_generator(cfg.seed, "lazy-order")], lr=cfg.lr,
                   batch_size=cfg.batch_size, max_epochs=cfg.epochs, check=cfg.ball_check)
    model.eval()
    t = scan_batched(model, data.x_test, data.y_test)
    loop_s = 0.0
    if sample_loop:
        t0 = time.perf_counter()
        for i in range(sample_loop):
            scan_one(model, data.x_test[i])
        loop_s = time.perf_counter() - t0
    return float(t.nanmean()), loop_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="quick")
    args = ap.parse_args()
    torch.set_num_threads(1)
    study = get_study("lazy-attack")
    p = plan(study, preset=args.preset)
    groups = group_points(p.points, True, study.max_ensemble)
    for cfg in {(c.dataset, c.size, c.sphere): c for c in p.points}.values():
        load_data(cfg)  # both sides start with the data loaded
    print(f"lazy-attack --preset {args.preset}: {len(p.points)} runs in {len(groups)} points")

    t0 = time.perf_counter()
    ours: dict[str, float] = {}
    for g in groups:
        for cfg, rows in zip(g, study.run_points(g, "cpu")):
            ours[str(cfg)] = rows[0]["delta"]
    t_ours = time.perf_counter() - t0
    print(f"robustlab (ensemble E={len(p.seeds)}, bisection): {t_ours:7.1f} s")

    t0 = time.perf_counter()
    theirs: dict[str, float] = {}
    loop_s, loop_n, n_correct = 0.0, 0, 0
    for i, cfg in enumerate(p.points):
        sample = 5 if i % 10 == 0 else 0  # time the authors' per-point loop on a few points
        theirs[str(cfg)], s = authors_point(cfg, sample)
        loop_s, loop_n = loop_s + s, loop_n + sample
        n_correct += len(load_data(cfg).y_test)
    t_theirs = time.perf_counter() - t0
    print(f"authors' protocol (one run per seed, 0.001 scan batched over points): {t_theirs:7.1f} s")
    print(f"ratio (authors' protocol / robustlab): {t_theirs / t_ours:.2f}x")
    if loop_n:
        per_point = loop_s / loop_n
        est = t_theirs + per_point * n_correct
        print(f"estimated with the authors' one-point-at-a-time scan "
              f"({per_point * 1e3:.1f} ms per point, {n_correct} points): {est:7.0f} s "
              f"-> ratio {est / t_ours:.0f}x")
    diffs = [abs(ours[k] - theirs[k]) for k in ours if ours[k] is not None and not math.isnan(theirs[k])]
    print(f"agreement: max |mean ‖δ‖ (bisection) − mean ‖δ‖ (0.001 scan)| over runs = {max(diffs):.4f} "
          f"(scan resolution {STEP})")


if __name__ == "__main__":
    main()

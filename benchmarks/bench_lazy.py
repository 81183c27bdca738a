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

``--authors`` instead compares ``run_points`` of ``lazy-attack`` with a plain PyTorch
transcription of the authors' loop on their protocol (lazy training, NeurIPS 2022, §5.1: raw pixels, biases,
lr 0.1, at most 1000 epochs, C0 = 10, m = 1000, sizes 5…28, 3 seeds): per seed an
``nn.Linear`` network, ``torch.optim.SGD``, a reshuffle per epoch, the ball checked after each
epoch (the last weights inside it kept), then the 0.001-step line search along
``−sign(f)∇f/‖∇f‖``, batched over the test points. Both start from the same initial weights
and the same shuffles, so the numbers agree up to float rounding. ``--sizes`` picks a subset.
"""

from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from robustlab.studies import get_study  # noqa: E402
from robustlab.studies.base import plan  # noqa: E402
from robustlab.studies.lazy.common import (  # noqa: E402
    NON_LAZY_C0,
    RICH_INIT_SCALE,
    build_model,
    load_data,
    radius_of,
)
from robustlab.sweep.runner import group_points  # noqa: E402
from robustlab.train.lazy import train_lazy_sgd  # noqa: E402
from robustlab.utils import make_generator  # noqa: E402

STEP = 1e-3  # the authors' scan step
POINT_SAMPLE = 8  # --authors: points timed with the one-point-at-a-time scan
CLOCK = time.process_time  # --authors: CPU seconds of this one-thread process (load-robust)


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
    """The authors' loop for one point (an ensemble model (1, 1, d), or a plain one (1, d))."""
    plain = isinstance(model, AuthorsNet)
    xb = x[None] if plain else x[None, None]
    first = (lambda v: v[0]) if plain else (lambda v: v[0, 0])
    f = first(model(xb))
    g = first(model.input_grad(xb))
    u = -torch.sign(f) * g / g.norm()
    k = 0
    while k * STEP < cap:
        k += 1
        z = x + k * STEP * u
        if first(model(z[None] if plain else z[None, None])) * torch.sign(f) <= 0:
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


class AuthorsNet(torch.nn.Module):
    """The authors' network: ``f(x) = a·ReLU(Wx + b)/√m + c`` with ``a``, ``c`` fixed."""

    def __init__(self, w: torch.Tensor, b: torch.Tensor, a: torch.Tensor, c: torch.Tensor):
        super().__init__()
        self.fc = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            self.fc.weight.copy_(w)
            self.fc.bias.copy_(b)
        self.register_buffer("a", a.clone())
        self.register_buffer("c", c.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x)) @ self.a / math.sqrt(self.a.numel()) + self.c

    def input_grad(self, x: torch.Tensor) -> torch.Tensor:
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            (g,) = torch.autograd.grad(self(x).sum(), x)
        return g


def authors_seed(cfg, data) -> dict:
    """One seed of the authors' protocol, plain PyTorch: train, then the 0.001 line search."""
    init = build_model([cfg], data.d, torch.device("cpu"))  # the same initial weights as ours
    net = AuthorsNet(init.weight[0].detach(), init.bias[0].detach(), init.top[0], init.top_bias[0])
    w0, b0 = net.fc.weight.detach().clone(), net.fc.bias.detach().clone()
    r = radius_of(cfg)
    opt = torch.optim.SGD(net.parameters(), lr=cfg.lr)
    gen = make_generator(cfg.seed, "lazy-order")  # the same shuffles as ours
    x, y = data.x_train, data.y_train
    epochs, left = 0, False
    t0 = CLOCK()
    for _ in range(cfg.epochs):
        saved = [p.detach().clone() for p in net.parameters()]
        perm = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), cfg.batch_size):
            idx = perm[i:i + cfg.batch_size]
            loss = torch.nn.functional.softplus(-y[idx] * net(x[idx])).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            dist = ((net.fc.weight - w0).pow(2).sum(1) + (net.fc.bias - b0).pow(2)).sqrt()
            if (dist > r * (1 + 1e-5)).any():
                for p, s_ in zip(net.parameters(), saved):
                    p.copy_(s_)
                left = True
                break
        epochs += 1
    t_train = CLOCK() - t0
    t0 = CLOCK()
    net.eval()
    t = scan_batched(net, data.x_test, data.y_test, cap=50.0)
    scan_s = CLOCK() - t0
    # the authors scan one point at a time: time that on a few correct points, extrapolate
    ok = (torch.sign(net(data.x_test).detach()) == data.y_test).nonzero().squeeze(1)
    sample = ok[:POINT_SAMPLE]
    t0 = CLOCK()
    for i in sample.tolist():
        scan_one(net, data.x_test[i], cap=50.0)
    per_point = (CLOCK() - t0) / max(1, len(sample))
    return {"delta": float(t.nanmean()), "epochs": epochs, "left": left,
            "train_s": t_train, "scan_s": scan_s, "scan_one_s": per_point * len(ok)}


# the control rows every run of lazy-attack's paper preset carries on raw pixels: the rich network
# (first layer ×0.01, a ball that never binds) at m = 256 for 100 epochs; the authors have none
CONTROL = {"C0": NON_LAZY_C0, "init_scale": RICH_INIT_SCALE, "m": 256, "epochs": 100}


def authors_main(sizes: list[int], n_seeds: int, epochs: int, m: int, controls: bool = True) -> None:
    study = get_study("lazy-attack")
    base = study.config(lr=0.1, epochs=epochs, C0=10.0, m=m, sphere=False, bias=True)
    print(f"lazy-attack, the authors' protocol: raw pixels, biases, lr 0.1, <= {epochs} epochs, C0 10, "
          f"m {m}, sizes {sizes}, {n_seeds} seeds; 1 thread; CPU seconds; load {os.getloadavg()[0]:.2f}; "
          f"robustlab's time {'includes' if controls else 'excludes'} the control rows {CONTROL}")
    tot_ours = tot_theirs = tot_one = 0.0
    worst = 0.0
    same_epochs = n_runs = 0
    for size in sizes:
        cfgs = [base.replace(size=size, seed=s) for s in range(n_seeds)]
        data = load_data(cfgs[0])  # loaded before either side is timed
        t0 = CLOCK()
        rows = [r[0] for r in study.run_points(cfgs, "cpu")]
        if controls:  # robustlab's side also pays for the control rows (the rich network, same seeds)
            study.run_points([c.replace(**CONTROL) for c in cfgs], "cpu")
        t_ours = CLOCK() - t0
        theirs = [authors_seed(c, data) for c in cfgs]
        t_theirs = sum(a["train_s"] + a["scan_s"] for a in theirs)
        t_one = sum(a["train_s"] + a["scan_one_s"] for a in theirs)
        tot_ours, tot_theirs, tot_one = tot_ours + t_ours, tot_theirs + t_theirs, tot_one + t_one
        for r, a in zip(rows, theirs):
            worst = max(worst, abs(r["delta"] - a["delta"]))
            same_epochs += int(r["epochs_run"] == a["epochs"])
            n_runs += 1
        print(f"  size {size:2d} (d={data.d:3d}): robustlab {t_ours:7.1f} s | authors {t_theirs:7.1f} s "
              f"(train {sum(a['train_s'] for a in theirs):.1f} + scan {sum(a['scan_s'] for a in theirs):.1f})"
              f" -> {t_theirs / t_ours:5.2f}x; with their one-point scan {t_one:7.1f} s -> "
              f"{t_one / t_ours:5.2f}x | epochs ours {[r['epochs_run'] for r in rows]} "
              f"theirs {[a['epochs'] for a in theirs]} | mean ‖δ‖ ours "
              f"{[round(r['delta'], 4) for r in rows]} theirs {[round(a['delta'], 4) for a in theirs]}",
              flush=True)
    print(f"total: robustlab {tot_ours:.1f} s, authors' loop {tot_theirs:.1f} s -> ratio "
          f"{tot_theirs / tot_ours:.2f}x (load now {os.getloadavg()[0]:.2f})")
    print(f"with the authors' one-point-at-a-time scan (timed on {POINT_SAMPLE} points per seed, "
          f"extrapolated to every correct test point): {tot_one:.1f} s -> ratio {tot_one / tot_ours:.2f}x")
    print(f"agreement: same stopping epoch in {same_epochs}/{n_runs} runs; max |mean ‖δ‖ ours − theirs| = "
          f"{worst:.4f} (their scan resolution {STEP})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--authors", action="store_true", help="the authors' protocol vs their plain loop")
    ap.add_argument("--sizes", default="5,7,10,14,20,28", help="--authors: image sizes")
    ap.add_argument("--seeds", type=int, default=3, help="--authors: seeds")
    ap.add_argument("--epochs", type=int, default=1000, help="--authors: epoch cap")
    ap.add_argument("--m", type=int, default=1000, help="--authors: width")
    ap.add_argument("--no-controls", action="store_true",
                    help="--authors: leave out the rich control rows robustlab's runs carry (counted by default)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.authors:
        authors_main([int(v) for v in args.sizes.split(",")], args.seeds, args.epochs, args.m,
                     controls=not args.no_controls)
        return
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

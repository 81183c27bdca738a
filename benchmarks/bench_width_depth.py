"""Training speed of the width-depth-init study, measured side by side in one run.

1. The machine's dense matmul rate (``robustlab.utils.matmul_rate``: float32 ``torch.mm``, n = 1024,
   one thread): the yardstick, the same one ``--dry-run`` uses for its floor.
2. Ensemble over seeds against a loop: E = 3 seeds of one grid point trained as one
   ``(E, ·, ·)`` model (``torch.bmm``) against three single-seed models trained one after the
   other — same data, same epochs, same arithmetic — at several widths and depths.
3. The closed-form training step of a ``DeepMLP`` (the default: no autograd, the momentum
   update fused into the weight-gradient product) against autograd, as a fraction of the
   matmul rate, at the widths >= 256 where the products dominate.
4. Grid throughput: one epoch of every point of the ``quick`` preset's grid (ensembles of its
   seeds, 5 or 7 a point), as training FLOP/s and as a fraction of the matmul rate; and the widest model
   alone as that fraction. The same in steady state (the epochs a 5-epoch call adds to a
   1-epoch one), as a study trains: its call's setup is paid once for all its epochs.
5. Perturbation stability: the closed-form Jacobian norm against autograd.
6. ``stop_at_target``: copies that reached the target loss dropped from the batch (the
   default) against kept in it with a masked update, 8 seeds; the same stop epochs and
   weights equal to rounding, printed beside the times.
7. With ``--paper``: the paper preset's training shapes (d 784, 4000 points in batches of 64,
   5 seeds, widths 1024-4096), in steady state, as a fraction of the matmul rate (about three
   minutes more).

Training FLOPs count the matrix products only: ``6 · N · Σ_l fan_in_l · fan_out_l`` per copy
and epoch (forward 2, backward 4 multiply-adds per weight and sample). Run:
``python benchmarks/bench_width_depth.py [--paper]`` (CPU, one thread, about a minute and a
half). Times are CPU times of the process (robust to a shared machine), best of interleaved
repeats.
"""

from __future__ import annotations

import time

import torch
from _timing import best_times  # benchmarks/ is on sys.path when run as a script

from robustlab.models.deep import DeepMLP
from robustlab.studies import width_depth_init as W
from robustlab.studies.base import plan
from robustlab.train.supervised import SGDSpec, train_supervised
from robustlab.utils import make_generator, matmul_rate


def train_flops(d: int, width: int, depth: int, k: int, n: int, epochs: int, E: int) -> float:
    dims = [d] + [width] * (depth - 1) + [k]
    return 6.0 * n * sum(a * b for a, b in zip(dims, dims[1:])) * epochs * E


def make_trainer(x, y, k, width, depth, E, epochs, *, ensemble: bool, backprop: str = "auto"):
    spec = SGDSpec(epochs=epochs, lr=0.1, batch_size=20, momentum=0.9)

    def run_ensemble():
        m = DeepMLP(x.shape[1], width, depth, k, generators=[make_generator(s, "b") for s in range(E)])
        train_supervised(m, x, y, spec, generators=[make_generator(s, "o") for s in range(E)], backprop=backprop)

    def run_loop():
        for s in range(E):
            m = DeepMLP(x.shape[1], width, depth, k, generators=[make_generator(s, "b")])
            train_supervised(m, x, y, spec, generators=[make_generator(s, "o")])

    return run_ensemble if ensemble else run_loop


def make_epochs(x, y, k, width, depth, E, *, batch: int = 20, backprop: str = "auto"):
    """``epochs ↦`` train one prebuilt ensemble that many more epochs in one call (it keeps
    training across calls)."""
    m = DeepMLP(x.shape[1], width, depth, k, generators=[make_generator(s, "b") for s in range(E)])
    gens = [make_generator(s, "o") for s in range(E)]

    def run(epochs: int) -> None:
        spec = SGDSpec(epochs=epochs, lr=0.01, batch_size=batch, momentum=0.9)
        train_supervised(m, x, y, spec, generators=gens, backprop=backprop)

    return run


def make_training(x, y, k, width, depth, E, epochs, backprop: str):
    """Train one prebuilt ensemble for ``epochs`` per call."""
    run = make_epochs(x, y, k, width, depth, E, backprop=backprop)
    return lambda: run(epochs)


def make_products(d, k, width, depth, E, B, steps):
    """The matrix products of ``steps`` SGD steps alone: forward h·W, backward δ·Wᵀ and the
    weight gradient hᵀ·δ accumulated into a buffer, at the training shapes."""
    dims = [d] + [width] * (depth - 1) + [k]
    Ws = [torch.randn(E, a, b) / a**0.5 for a, b in zip(dims, dims[1:])]
    bufs = [torch.zeros_like(W) for W in Ws]
    hs = [torch.randn(E, B, a) for a in dims[:-1]]
    ds = [torch.randn(E, B, b) for b in dims[1:]]

    def run():
        for _ in range(steps):
            for h, weight in zip(hs, Ws):
                torch.bmm(h, weight)
            for l in range(depth - 1, -1, -1):
                if l:
                    torch.bmm(ds[l], Ws[l].mT)
                bufs[l].baddbmm_(hs[l].mT, ds[l], beta=0.9)
    return run


def main(paper: bool = False) -> None:
    torch.set_num_threads(1)
    cfg = W.WidthDepthInitConfig(**W.QUICK_BASE)
    data = W.load_data(cfg)
    x, y, k, d, N = data.x_train, data.y_train, data.n_classes, data.d, len(data.x_train)
    rate = matmul_rate(threads=1)
    print(f"machine: dense float32 matmul (n=1024, 1 thread) = {rate / 1e9:.1f} GFLOP/s")
    print(f"data: {cfg.dataset} {cfg.size}x{cfg.size}, N={N}, d={d}, k={k}; batch 20, 1 thread\n")

    print("ensemble of E=3 seeds vs a loop over seeds (2 epochs each; CPU seconds, best of 3)")
    print(f"{'width':>6} {'depth':>5} {'ensemble s':>11} {'loop s':>8} {'loop/ensemble':>14}")
    for width, depth in ((4, 2), (32, 2), (128, 2), (1024, 2), (128, 4), (512, 3)):
        t = best_times({"ens": make_trainer(x, y, k, width, depth, 3, 2, ensemble=True),
                        "loop": make_trainer(x, y, k, width, depth, 3, 2, ensemble=False)})
        print(f"{width:>6} {depth:>5} {t['ens']:>11.3f} {t['loop']:>8.3f} {t['loop'] / t['ens']:>14.2f}")

    print("\ntraining only (the model built once, outside the clock), E=3, 2 epochs: the closed-form step\n"
          "(fused momentum, the default for DeepMLP) vs autograd, and the step's matrix products alone\n"
          "(same shapes, nothing else): the ceiling a step can reach at batch 20. Fractions of the rate.")
    print(f"{'width':>6} {'depth':>5} {'closed s':>9} {'autograd s':>11} {'speed-up':>9} "
          f"{'closed':>7} {'autograd':>9} {'products':>9}")
    for width, depth in ((256, 2), (1024, 2), (2048, 2), (512, 3), (256, 4), (1024, 3)):
        fl = train_flops(d, width, depth, k, N, 2, 3)
        t = best_times({"c": make_training(x, y, k, width, depth, 3, 2, "auto"),
                        "a": make_training(x, y, k, width, depth, 3, 2, "autograd"),
                        "p": make_products(d, k, width, depth, 3, 20, 2 * -(-N // 20))})
        print(f"{width:>6} {depth:>5} {t['c']:>9.3f} {t['a']:>11.3f} {t['a'] / t['c']:>8.2f}x "
              f"{fl / t['c'] / rate:>7.2f} {fl / t['a'] / rate:>9.2f} {fl / t['p'] / rate:>9.2f}")

    # one epoch of every point of the quick grid, ensembles of its seeds
    p = plan(W.STUDY, preset="quick")
    groups: dict[tuple, int] = {}  # one ensemble per point without its seed, as the sweep runs them
    for c in p.points:
        key = (c.init, c.lr, c.width, c.depth)
        groups[key] = groups.get(key, 0) + 1
    sums = {"all": [0.0, 0.0], "wide": [0.0, 0.0]}  # [flops, seconds]; wide: widths >= 256
    for (_init, _lr, width, depth), E in groups.items():
        fl = train_flops(d, width, depth, k, N, 1, E)
        t = best_times({"g": make_training(x, y, k, width, depth, E, 1, "auto")}, rounds=1)["g"]
        for key in ("all", "wide") if width >= 256 else ("all",):
            sums[key][0] += fl
            sums[key][1] += t
    n_wide = sum(1 for g in groups if g[2] >= 256)
    print(f"\nquick grid, training only, one epoch of all {len(p.points)} points ({len(groups)} ensembles): "
          f"{sums['all'][1]:.2f} CPU s, {sums['all'][0] / sums['all'][1] / 1e9:.2f} GFLOP/s "
          f"= {sums['all'][0] / sums['all'][1] / rate:.2f} of the matmul rate")
    print(f"  its {n_wide} ensembles of width >= 256: {sums['wide'][0] / sums['wide'][1] / 1e9:.2f} GFLOP/s "
          f"= {sums['wide'][0] / sums['wide'][1] / rate:.2f} of the matmul rate")

    # the same ensembles in steady state: a study trains its 50 epochs in one call, so the
    # call's setup (the initial weights copied, their norms, the momentum buffers) is paid once,
    # where the one-epoch pass above pays it every epoch; the 4 epochs a 5-epoch call adds to a
    # 1-epoch call, per epoch (each epoch still computes its lazy ratio, as the study's do)
    steady = {"all": [0.0, 0.0], "wide": [0.0, 0.0]}
    for (_init, _lr, width, depth), E in groups.items():
        fl = train_flops(d, width, depth, k, N, 4, E)
        t = marginal_epochs(make_epochs(x, y, k, width, depth, E, batch=20), 1, 5)
        for key in ("all", "wide") if width >= 256 else ("all",):
            steady[key][0] += fl
            steady[key][1] += t
    print(f"  steady state (4 epochs added to a 1-epoch call, all {len(groups)} ensembles): "
          f"{steady['all'][0] / steady['all'][1] / 1e9:.2f} GFLOP/s = {steady['all'][0] / steady['all'][1] / rate:.2f}; "
          f"width >= 256: {steady['wide'][0] / steady['wide'][1] / 1e9:.2f} GFLOP/s "
          f"= {steady['wide'][0] / steady['wide'][1] / rate:.2f} of the matmul rate")

    _i, _l, width, depth = max(groups, key=lambda g: train_flops(d, g[2], g[3], k, N, 1, 1))
    t = best_times({"w": make_training(x, y, k, width, depth, 3, 2, "auto")})["w"]
    fl = train_flops(d, width, depth, k, N, 2, 3)
    print(f"widest model (width {width}, depth {depth}, E=3), training only: {fl / t / 1e9:.2f} GFLOP/s "
          f"= {fl / t / rate:.2f} of the matmul rate")

    xt = data.x_test
    print(f"\nstability eps^2 |J|_F^2/(d+2) on the {len(xt)} test points, E=3 (CPU s, best of 3): "
          "closed form (DeepMLP.jacobian_fro_sq) vs autograd")
    print(f"{'width':>6} {'depth':>5} {'closed s':>9} {'autograd s':>11} {'speed-up':>9} {'max rel diff':>13}")
    for width, depth in ((16, 2), (128, 3), (256, 4), (1024, 2), (1024, 3)):
        m = DeepMLP(d, width, depth, k, init="he", generators=[make_generator(s, "b") for s in range(3)])
        got, want = {}, {}
        t = best_times({"c": make_stability(m, xt, got, closed=True), "a": make_stability(m, xt, want, closed=False)})
        diff = float(((got["v"] - want["v"]).abs() / want["v"].abs()).max())
        print(f"{width:>6} {depth:>5} {t['c']:>9.3f} {t['a']:>11.3f} {t['a'] / t['c']:>8.2f}x {diff:>13.1e}")

    bench_stop_at_target(x, y, k)
    if paper:
        bench_paper_shapes(rate)


def marginal_epochs(run, short: int, long: int) -> float:
    """CPU seconds of the ``long - short`` epochs a ``long``-epoch call of ``run`` adds to a
    ``short`` one."""
    def cpu_seconds(epochs: int) -> float:
        t0 = time.process_time()
        run(epochs)
        return time.process_time() - t0

    return cpu_seconds(long) - cpu_seconds(short)


def bench_paper_shapes(rate: float) -> None:
    """The paper preset's training shapes: d 784 (28x28), 4000 training points in batches of 64
    (63 steps an epoch), 5 seeds, at the widths that hold its FLOPs (two thirds at width 4096,
    depths 4-8). Random inputs and labels: a dense step's cost does not depend on the values.
    Steady state as above: the epoch a 2-epoch call adds to a 1-epoch one."""
    d, k, B, E, n = 784, 10, 64, 5, 4000
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(n, d, generator=g), torch.randint(0, k, (n,), generator=g)
    print(f"\npaper preset's shapes (d {d}, {n} points, batch {B}, E {E}), steady state, training only:")
    print(f"{'width':>6} {'depth':>5} {'s/epoch':>8} {'GFLOP/s':>8} {'of rate':>8}")
    for width, depth in ((1024, 4), (4096, 4), (4096, 2)):
        t = marginal_epochs(make_epochs(x, y, k, width, depth, E, batch=B), 1, 2)
        fl = train_flops(d, width, depth, k, n, 1, E)
        print(f"{width:>6} {depth:>5} {t:>8.2f} {fl / t / 1e9:>8.1f} {fl / t / rate:>8.2f}")


def bench_stop_at_target(x, y, k, E=8, width=256, depth=4, epochs=80) -> None:
    """LeCun init, lr 0.05, batch 20, target loss 0.05: every seed stops within the schedule.
    The saving is bounded by the spread of the stop epochs (printed): seeds that stop
    together leave nothing to drop."""
    spec = SGDSpec(epochs=epochs, lr=0.05, batch_size=20, momentum=0.9, target_loss=0.05, stop_at_target=True)
    out: dict = {}

    def make(compact: bool):
        def run():
            m = DeepMLP(x.shape[1], width, depth, k, init="lecun", generators=[make_generator(s, "b") for s in range(E)])
            log = train_supervised(m, x, y, spec, generators=[make_generator(s, "o") for s in range(E)],
                                   compact=compact)
            out[compact] = (m, log)
        return run

    t = best_times({"c": make(True), "m": make(False)}, rounds=2)
    (mc, lc), (mm, lm) = out[True], out[False]
    diff = max(float((a - b).detach().abs().max()) for a, b in zip(mc.weights, mm.weights))
    stops = lc.stopped.tolist()
    print(f"\nstop_at_target (target loss {spec.target_loss}, width {width}, depth {depth}, E={E}, "
          f"<= {epochs} epochs; CPU s, best of 2)")
    print(f"stop epochs {stops} (masked run: {lm.stopped.tolist()}); copy-epochs trained {sum(stops)} "
          f"of {E * max(stops)} computed by the masked run (at most {E * max(stops) / sum(stops):.2f}x to save)")
    print(f"stopped copies dropped {t['c']:.2f} s, kept and masked {t['m']:.2f} s: {t['m'] / t['c']:.2f}x; "
          f"largest weight difference {diff:.1e}")


def make_stability(model, x, out: dict, *, closed: bool):
    """Def. 3 per copy on ``x``: the study's closed-form path, or autograd through ``Flat``."""
    from robustlab.metrics import perturbation_stability
    from robustlab.models.ensemble import Flat, fold

    E = model.E
    if closed:
        return lambda: out.update(v=W._per_member_stability(model, x, 0.1, E, width=model.width))
    xe = fold(x.expand(E, *x.shape))
    return lambda: out.update(v=perturbation_stability(Flat(model, E), xe, 0.1, per_sample=True).reshape(E, -1).mean(1))


if __name__ == "__main__":
    import sys

    main(paper="--paper" in sys.argv[1:])

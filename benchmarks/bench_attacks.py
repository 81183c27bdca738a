"""Attack and metric speed, measured side by side in one run.

1. PGD throughput (attacked samples / s) against torchattacks' PGD: same trained MLP, same
   data, ε, step and number of steps; robust accuracy printed beside each so that speed is
   never bought with strength.
2. ``min_flip_along_gradient`` against the reference scan of the lazy-training paper's code (steps of
   0.001 along the normalised gradient, one point at a time): same ‖δ‖ to 1e-3, speed ratio.
3. Perturbation stability: the exact identity ε²‖J‖_F²/(d+2) against Monte Carlo with 1,000
   draws: both values and the time ratio.

Run: ``python benchmarks/bench_attacks.py`` (CPU, one thread, about a minute). Times are
CPU times of the process (robust to a shared machine), best of interleaved repeats.
"""

from __future__ import annotations

import os
import sys
import time

import torch
from _timing import best_times  # benchmarks/ is on sys.path when run as a script
from sklearn.datasets import load_digits
from torch import nn

from robustlab.attacks import L2, PGD, Linf, min_flip_along_gradient
from robustlab.metrics import accuracy, perturbation_stability
from robustlab.utils import retain_freed_memory


def digits(classes=None, sphere=False):
    X, Y = load_digits(return_X_y=True)
    x, y = torch.tensor(X / 16.0, dtype=torch.float32), torch.tensor(Y)
    if classes is not None:
        keep = (y == classes[0]) | (y == classes[1])
        x, y = x[keep], torch.where(y[keep] == classes[1], 1.0, -1.0)
    if sphere:
        x = x / x.norm(dim=1, keepdim=True)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    return x[perm], y[perm]


def train(model, x, y, loss_fn, steps=150, lr=1e-2):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(x), y).mean().backward()
        opt.step()
    return model.eval()


def bench_pgd() -> None:
    import torchattacks

    x, y = digits()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    train(model, x[:1200], y[:1200], nn.functional.cross_entropy)
    steps = 20
    print(f"\n[1] l-inf PGD, MLP 64-256-256-10 (digits, clean acc {accuracy(model, x, y):.3f}), {steps} steps, step eps/4")
    print(f"{'attack':<44}{'samples/s':>11}{'vs TA':>8}{'rob.acc':>9}")
    for eps in (0.03, 0.1):
        alpha = eps / 4
        fns = {
            "torchattacks PGD": lambda eps=eps, alpha=alpha: torchattacks.PGD(model, eps=eps, alpha=alpha, steps=steps, random_start=False)(x, y),
            "robustlab PGD (same work + worst iterate)": lambda eps=eps, alpha=alpha: PGD(Linf(eps), steps=steps, step_size=alpha, random_start=False)(model, x, y),
            "robustlab PGD early_stop": lambda eps=eps, alpha=alpha: PGD(Linf(eps), steps=steps, step_size=alpha, early_stop=True, random_start=False)(model, x, y),
        }
        times = best_times(fns, rounds=5)
        print(f"  eps={eps}, N={len(x)}")
        for name, fn in fns.items():
            print(f"  {name:<42}{len(x) / times[name]:>11.0f}{times['torchattacks PGD'] / times[name]:>7.2f}x"
                  f"{accuracy(model, fn(), y):>9.3f}")
    # an adversarial-training minibatch with random restarts: TA needs one call per restart
    xb, yb, R, eps = x[:64], y[:64], 4, 0.1

    def ta_restarts():
        return [torchattacks.PGD(model, eps=eps, alpha=eps / 4, steps=steps, random_start=True)(xb, yb) for _ in range(R)]

    gen = torch.Generator().manual_seed(0)
    fns = {
        "torchattacks PGD x4 restarts (loop)": ta_restarts,
        "robustlab PGD restarts=4 (one batch)": lambda: PGD(
            Linf(eps), steps=steps, step_size=eps / 4, random_start=True, restarts=R
        )(model, xb, yb, generator=gen),
    }
    times = best_times(fns, rounds=5)
    print(f"  eps={eps}, N={len(xb)} (a minibatch), {R} random restarts")
    ta_t = times["torchattacks PGD x4 restarts (loop)"]
    for name in fns:
        print(f"  {name:<42}{len(xb) / times[name]:>11.0f}{ta_t / times[name]:>7.2f}x")


class SmallCNN(nn.Module):
    """A small CNN on 8x8 digits: conv 1->16 (3x3), ReLU, conv 16->32 (3x3, stride 2), ReLU, linear."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(32 * 16, 10))

    def forward(self, x):
        return self.net(x)


class Opaque(nn.Module):
    """A model behind a forward that torch.fx cannot trace (a branch on the input): autograd."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x):
        if x.dim() != 2:
            raise ValueError("expected (N, 64) digits")
        return self.net(x)


class Custom(nn.Module):
    """The MLP as a user writes it, layers as attributes: its forward traces to a chain."""

    def __init__(self, mlp: nn.Sequential):
        super().__init__()
        self.fc1, self.fc2 = mlp[0], mlp[2]

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def bench_pgd_overhead(threads: int = 2, rounds: int = 7, memory: str = "glibc's default malloc") -> None:
    """Issue 14's setting: small models, where per-step overhead (not the matmuls) decides."""
    import torchattacks

    x, y = digits()
    xb, yb, eps, steps = x[:512], y[:512], 0.1, 20
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    print(f"\n[0] l-inf PGD at equal work, {len(xb)} digits, {steps} steps, eps={eps}, step eps/4, "
          f"{threads} threads, best of {rounds} interleaved, {memory} (load {os.getloadavg()[0]:.2f})")
    print(f"{'model':<44}{'torchattacks ms':>16}{'robustlab ms':>14}{'ratio':>8}{'TA rob.acc':>12}{'rl rob.acc':>12}")
    torch.manual_seed(0)
    mlp = train(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)), x[:1200], y[:1200],
                nn.functional.cross_entropy)
    torch.manual_seed(0)
    cnn = train(SmallCNN(), x[:1200], y[:1200], nn.functional.cross_entropy)
    # an nn.Sequential takes robustlab's closed-form pull-back (models/pullback.py), and so does
    # a custom forward() that torch.fx traces to a chain of its layers; a forward it cannot
    # trace takes the autograd route, as any other user module does
    models = (("MLP 64-128-10", mlp), ("MLP, custom forward (traced)", Custom(mlp).eval()),
              ("MLP, untraceable forward (autograd)", Opaque(mlp).eval()),
              ("small CNN, custom forward (traced)", cnn), ("small CNN, nn.Sequential", cnn.net),
              ("small CNN, untraceable (autograd)", Opaque(cnn.net).eval()))
    for name, model in models:
        fns = {
            "ta": lambda model=model: torchattacks.PGD(model, eps=eps, alpha=eps / 4, steps=steps,
                                                       random_start=False)(xb, yb),
            "rl": lambda model=model: PGD(Linf(eps), steps=steps, step_size=eps / 4, random_start=False)(model, xb, yb),
        }
        for clock, label in ((time.perf_counter, "wall"), (time.process_time, "cpu")):
            t = best_times(fns, rounds=rounds, clock=clock)
            print(f"{name + ' (' + label + ')':<44}{t['ta'] * 1e3:>16.2f}{t['rl'] * 1e3:>14.2f}"
                  f"{t['ta'] / t['rl']:>7.2f}x{accuracy(model, fns['ta'](), yb):>12.3f}"
                  f"{accuracy(model, fns['rl'](), yb):>12.3f}")
    # where the MLP's time goes: a call's fixed cost (0 steps: robustlab still checks its
    # inputs, scores the start and projects) and the cost of one more step, both sides
    fixed = {
        "ta0": lambda: torchattacks.PGD(mlp, eps=eps, alpha=eps / 4, steps=0, random_start=False)(xb, yb),
        "rl0": lambda: PGD(Linf(eps), steps=0, step_size=eps / 4, random_start=False)(mlp, xb, yb),
        "ta": lambda: torchattacks.PGD(mlp, eps=eps, alpha=eps / 4, steps=steps, random_start=False)(xb, yb),
        "rl": lambda: PGD(Linf(eps), steps=steps, step_size=eps / 4, random_start=False)(mlp, xb, yb),
    }
    t = best_times(fixed, rounds=rounds)
    step_ta, step_rl = (t["ta"] - t["ta0"]) / steps, (t["rl"] - t["rl0"]) / steps
    print(f"MLP, wall: fixed cost per call torchattacks {t['ta0'] * 1e3:.2f} ms, robustlab {t['rl0'] * 1e3:.2f} ms; "
          f"per step {step_ta * 1e6:.0f} vs {step_rl * 1e6:.0f} us ({step_ta / step_rl:.2f}x)")
    torch.set_num_threads(old)


def reference_scan(model, x, step=1e-3, cap=2.0):
    """The lazy-training paper's procedure: per point, step 0.001 along −sign(f) ∇f/‖∇f‖ until the sign flips."""
    out = []
    for i in range(len(x)):
        xi = x[i : i + 1].clone().requires_grad_(True)
        f = model(xi)
        (g,) = torch.autograd.grad(f.sum(), xi)
        s = torch.sign(f.detach())
        u = -s * g / g.norm()
        t = 0.0
        with torch.no_grad():
            while t < cap and torch.sign(model(x[i : i + 1] + t * u)) == s:
                t += step
        out.append(t if t < cap else float("nan"))
    return torch.tensor(out)


class TwoLayer(nn.Module):
    """The lazy-training paper's network: f(x) = (1/√m) Σ_s a_s ReLU(<w_s, x>), top layer fixed."""

    def __init__(self, d: int, m: int, g: torch.Generator):
        super().__init__()
        self.W = nn.Parameter(torch.randn(m, d, generator=g))
        self.register_buffer("a", torch.randint(0, 2, (m,), generator=g).float() * 2 - 1)

    def forward(self, x):
        return torch.relu(x @ self.W.T) @ self.a / self.a.numel() ** 0.5


def bench_min_flip() -> None:
    x, y = digits(classes=(0, 1), sphere=True)
    model = TwoLayer(64, 512, torch.Generator().manual_seed(0))
    train(model, x[:200], y[:200], lambda f, y: nn.functional.softplus(-y * f), steps=50, lr=1e-3)
    xt, yt = x[200:], y[200:]
    ok = torch.sign(model(xt)).detach() == yt
    xt = xt[ok][:120]
    times = best_times({"ref": lambda: reference_scan(model, xt), "ours": lambda: min_flip_along_gradient(model, xt)}, 2)
    t_ref, t_ours = times["ref"], times["ours"]
    ref, r = reference_scan(model, xt), min_flip_along_gradient(model, xt)
    both = ~ref.isnan() & ~r.delta_norm.isnan()
    diff = float((r.delta_norm[both] - ref[both]).abs().max())
    print(f"\n[2] min flip along the gradient, lazy-training paper net (d=64, m=512, sphere), {len(xt)} correct points")
    print(f"mean |delta| {float(r.delta_norm.nanmean()):.4f} (reference {float(ref.nanmean()):.4f}); "
          f"max |difference| {diff:.2e} (<= 1e-3: {diff <= 1e-3}); both flipped {int(both.sum())}/{len(xt)}")
    print(f"reference scan {t_ref * 1e3:.0f} ms, batched bisection {t_ours * 1e3:.1f} ms: {t_ref / t_ours:.0f}x")


def bench_stability() -> None:
    x, y = digits()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    train(model, x[:1200], y[:1200], nn.functional.cross_entropy)
    xs, eps = x[1200:1400], 0.5
    times = best_times(
        {
            "exact": lambda: perturbation_stability(model, xs, eps),
            "mc": lambda: perturbation_stability(model, xs, eps, samples=1000, generator=torch.Generator().manual_seed(0)),
        },
        rounds=1,
    )
    t_ex, t_mc = times["exact"], times["mc"]
    ex = perturbation_stability(model, xs, eps)
    mc = perturbation_stability(model, xs, eps, samples=1000, generator=torch.Generator().manual_seed(0))
    print(f"\n[3] perturbation stability, MLP 64-256-256-10, {len(xs)} points, eps={eps}")
    print(f"exact {ex:.5f}; Monte Carlo (1000 draws) {mc.mean:.5f} ± {mc.stderr:.5f} "
          f"(z = {(mc.mean - ex) / mc.stderr:+.2f})")
    print(f"exact {t_ex * 1e3:.1f} ms, Monte Carlo {t_mc * 1e3:.0f} ms: exact is {t_mc / t_ex:.0f}x faster")


def bench_pgd_l2() -> None:
    """ℓ2 PGD has no torchattacks twin with the same box handling; time it for the record."""
    x, y = digits()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    train(model, x[:1200], y[:1200], nn.functional.cross_entropy)
    a = PGD(L2(1.0), steps=20, step_size=0.25, random_start=False)
    t = best_times({"l2": lambda: a(model, x, y)}, rounds=3)["l2"]
    print(f"\n[4] l2 PGD (for the record): {len(x) / t:.0f} samples/s, robust acc {accuracy(model, a(model, x, y), y):.3f}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    for n in (2, 1):  # the 2 threads (wall time is what users see), then 1 (CPU time is load-robust)
        bench_pgd_overhead(threads=n)
    # Again with glibc keeping freed memory, as sweep workers run (it cannot be undone, so it
    # comes last): with the default malloc each call's 2 MB convolution output is a fresh
    # mapping, page-faulted in anew (the CNN's first convolution: 1.4 ms a call, 0.12 ms from
    # the heap). Both attacks gain alike; the ratios are what to compare.
    if retain_freed_memory():
        bench_pgd_overhead(threads=2, memory="glibc keeping freed memory (utils.retain_freed_memory)")
    if "--overhead-only" in sys.argv:
        sys.exit(0)
    bench_pgd()
    bench_min_flip()
    bench_stability()
    bench_pgd_l2()
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")

"""``robustlab.evaluate`` against torchattacks for the same work: APGD-CE + APGD-DLR (100 steps,
one restart, ℓ∞) on the same model, inputs and ε, side by side in one run.

The torchattacks side is what a user writes to get the same table: clean accuracy, each attack,
the accuracy after it and the per-sample worst case. Both sides attack only the samples
classified correctly clean (torchattacks' APGD does so itself). Two small digits CNNs: a plain
``nn.Sequential`` (robustlab pulls gradients back in closed form) and one with BatchNorm and a
normalisation layer (autograd on both sides). Robust accuracies are printed beside the times so
that speed is never bought with strength.

Run: ``python benchmarks/bench_evaluate.py [--rounds 5] [--n 300]`` (CPU, one thread). Times are
CPU seconds of this process (robust to a shared machine), interleaved; the ratio printed is
robustlab / torchattacks of the medians (< 1: robustlab is faster).
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import time

import torch
from sklearn.datasets import load_digits
from torch import nn

import robustlab


def digits(n_test: int):
    d = load_digits()
    x = torch.tensor(d.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(d.target)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    return x[perm[:1400]], y[perm[:1400]], x[perm[1400:1400 + n_test]], y[perm[1400:1400 + n_test]]


class Normalize(nn.Module):
    def __init__(self, mean: float, std: float):
        super().__init__()
        self.mean, self.std = mean, std

    def forward(self, x):
        return (x - self.mean) / self.std


def models() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1, stride=2),
                          nn.ReLU(), nn.Flatten(), nn.Linear(32 * 16, 10))
    torch.manual_seed(1)
    bn = nn.Sequential(Normalize(0.3, 0.4), nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                       nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32), nn.ReLU(), nn.Flatten(),
                       nn.Linear(32 * 16, 10))
    return {"CNN (nn.Sequential)": plain, "CNN + BatchNorm + Normalize": bn}


def train(net: nn.Module, x, y, epochs: int = 20) -> nn.Module:
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    net.train()
    for _ in range(epochs):
        for b in torch.split(torch.randperm(len(x), generator=g), 100):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x[b]), y[b]).backward()
            opt.step()
    return net.eval()


def torchattacks_evaluate(net, x, y, eps: float) -> int:
    """Clean accuracy, APGD-CE and APGD-DLR (torchattacks), the per-sample worst case."""
    import torchattacks

    with torch.no_grad():
        ok = net(x).argmax(1) == y
    for loss in ("ce", "dlr"):
        x_adv = torchattacks.APGD(net, norm="Linf", eps=eps, steps=100, n_restarts=1, loss=loss, seed=0)(x, y)
        with torch.no_grad():
            ok &= net(x_adv).argmax(1) == y
    return int(ok.sum())


def robustlab_evaluate(net, x, y, eps: float) -> int:
    # progress=False where the version has it (this script also times older checkouts)
    kw = {"progress": False} if "progress" in inspect.signature(robustlab.evaluate).parameters else {}
    ev = robustlab.evaluate(net, x, y, eps=eps, attacks=["apgd-ce", "apgd-dlr"], **kw)
    return int(ev.table["n_correct"].iloc[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--eps", type=float, default=0.1)
    args = p.parse_args()
    torch.set_num_threads(1)
    xtr, ytr, x, y = digits(args.n)
    print(f"APGD-CE + APGD-DLR, 100 steps, 1 restart, eps={args.eps}, {args.n} digits, 1 thread, "
          f"CPU seconds, {args.rounds} interleaved rounds (load {os.getloadavg()[0]:.2f})")
    print(f"{'model':<30}{'torchattacks s':>16}{'robustlab s':>13}{'ratio rl/ta':>13}{'robust TA':>11}{'robust rl':>11}")
    for name, net in models().items():
        train(net, xtr, ytr)
        fns = {"ta": lambda net=net: torchattacks_evaluate(net, x, y, args.eps),
               "rl": lambda net=net: robustlab_evaluate(net, x, y, args.eps)}
        robust = {k: fn() for k, fn in fns.items()}  # warm-up, and the numbers
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(args.rounds):
            for k, fn in fns.items():
                t0 = time.process_time()
                fn()
                times[k].append(time.process_time() - t0)
        ta, rl = statistics.median(times["ta"]), statistics.median(times["rl"])
        print(f"{name:<30}{ta:>16.3f}{rl:>13.3f}{rl / ta:>12.3f}x{robust['ta']:>11}{robust['rl']:>11}", flush=True)


if __name__ == "__main__":
    main()

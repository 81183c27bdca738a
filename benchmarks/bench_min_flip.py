"""Benchmark: the minimal flipping step of ``lazy-attack``, along the line in closed form
against the model's forward passes.

For every group of a ``lazy-attack`` preset (its networks at initialisation, its test set,
all seeds as one ensemble, as ``run_points`` measures them), ``min_flip_along_gradient``
runs twice on the same inputs:

* **line**: the two-layer network's ``scores_along`` (pre-activations ``z + t·v`` computed
  once, then ``O(m)`` per point and step of the search);
* **forward**: the same search evaluating the model at every step (``O(d·m)`` each), as for
  any other model.

CPU seconds of this one-thread process, best of ``--rounds`` interleaved calls. Both must
find the same points flipped and each ‖δ‖ within the search's tolerance of the other (the
answer is the first crossing to that tolerance either way). Run:
``python benchmarks/bench_min_flip.py [--preset quick]``.
"""

from __future__ import annotations

import argparse
import functools
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from _timing import best_times  # noqa: E402

import robustlab.attacks.min_flip as mf  # noqa: E402
from robustlab.models import Flat, fold  # noqa: E402
from robustlab.studies import get_study  # noqa: E402
from robustlab.studies.base import plan  # noqa: E402
from robustlab.studies.lazy.common import start_point  # noqa: E402
from robustlab.sweep.runner import group_points  # noqa: E402


def _forward_only(*args):
    return None


def _run(name: str, res: dict, flat, xt: torch.Tensor, yt: torch.Tensor, tol: float) -> None:
    line = mf._line
    if name == "forward":
        mf._line = _forward_only
    try:
        res[name] = mf.min_flip_along_gradient(flat, xt, yt, tol=tol)
    finally:
        mf._line = line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    study = get_study("lazy-attack")
    groups = group_points(plan(study, preset=args.preset).points, study.ensemble, study.max_ensemble)
    # one group per shape (d, m, data): the others repeat its cost
    shapes: dict[tuple, list] = {}
    for g in groups:
        c = g[0]
        shapes.setdefault((c.size, c.m, c.sphere, c.bias), g)
    tot = {"line": 0.0, "forward": 0.0}
    print(f"{'size':>4} {'m':>5} {'inputs':>7} {'E':>3} {'N':>5}  {'line s':>8} {'forward s':>9}  ratio  "
          "same flips  max |Δ‖δ‖|")
    for (size, m, sphere, bias), g in sorted(shapes.items()):
        st = start_point(g)
        E, tol = st.E, g[0].flip_tol
        st.model.eval()
        flat = Flat(st.model, E).eval()
        xt = fold(st.data.x_test.expand(E, -1, -1))
        yt = st.data.y_test.repeat(E)
        res: dict = {}
        t = best_times({k: functools.partial(_run, k, res, flat, xt, yt, tol) for k in ("line", "forward")},
                       rounds=args.rounds)
        a, b = res["line"], res["forward"]
        ok = ~a.delta_norm.isnan() & ~b.delta_norm.isnan()
        same = bool(torch.equal(a.flipped, b.flipped) and torch.equal(a.delta_norm.isnan(), b.delta_norm.isnan()))
        gap = float((a.delta_norm - b.delta_norm)[ok].abs().max()) if ok.any() else 0.0
        for k in tot:
            tot[k] += t[k] * len(groups_of(groups, size, m, sphere, bias))
        print(f"{size:>4} {m:>5} {'sphere' if sphere else 'raw':>7} {E:>3} {len(st.data.x_test):>5}  "
              f"{t['line']:8.3f} {t['forward']:9.3f}  {t['forward'] / t['line']:5.1f}×  {str(same):>10}  "
              f"{gap:.1e} (tol {tol:g})")
    print(f"the preset's {len(groups)} groups, each measured twice (at initialisation and trained), by shape: "
          f"line {2 * tot['line']:.2f} s, forward {2 * tot['forward']:.2f} s, "
          f"{tot['forward'] / tot['line']:.1f}× (CPU seconds, 1 thread)")


def groups_of(groups: list, size: int, m: int, sphere: bool, bias: bool) -> list:
    return [g for g in groups if (g[0].size, g[0].m, g[0].sphere, g[0].bias) == (size, m, sphere, bias)]


if __name__ == "__main__":
    main()

"""Sweep benchmarks, measured side by side in one run.

1. A 32-seed grid of one small study point, three ways:
   * batched ensemble — the sweep groups the 32 seeds into one call (E = 32);
   * plain loop       — the same sweep with grouping off: 32 calls with E = 1, in-process
     (these two: best of two runs);
   * one process per point — a fresh Python process per seed (interpreter, imports, data,
     one E = 1 point), as a shell loop or a job array would do; timed on a few seeds and
     scaled to 32 (it excludes writing a report per point, so it flatters this way).
   Subjects: a two-layer ReLU network sized like SPEC study A's prototype (N = 200,
   d = 64, m = 8, 300 GD steps; benchmarks/sweep_subject.py) and the smoke study as it is.
2. The local backend with 2 workers vs 1 on a grid of independent smoke points (one seed
   each, so nothing to batch), run as a user would (`robustlab run ... --workers N`):
   the sweep's own time (from the manifest; pool start-up included) and the wall time end
   to end (imports and the report included, the same for both); best of two runs each,
   in the order 1, 2, 2, 1 workers.

The machine may be shared: the load average is printed around each part, and a
calibration measures how much parallel CPU two processes actually get right now.

    python benchmarks/bench_sweep.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from sweep_subject import TwoLayerConfig  # noqa: E402
from sweep_subject import run_points as two_layer_run  # noqa: E402

from robustlab import records  # noqa: E402
from robustlab.studies.smoke import SmokeConfig  # noqa: E402
from robustlab.studies.smoke import run_points as smoke_run  # noqa: E402
from robustlab.sweep.backends import execute  # noqa: E402
from robustlab.sweep.runner import SweepOptions, run_sweep  # noqa: E402
from robustlab.sweep.store import Store  # noqa: E402

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
    [str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load avg {one:.2f} (1 min) {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def timed_sweep(points, fn, *, ensemble: bool) -> tuple[float, list]:
    with tempfile.TemporaryDirectory() as d, Store(Path(d) / "s.sqlite") as st:
        t0 = time.perf_counter()
        run_sweep(points, fn, st, SweepOptions(quiet=True), execute=execute, ensemble=ensemble)
        seconds = time.perf_counter() - t0
        assert st.count("done") == len(points), "a benchmark point failed"
        return seconds, st.table()


def cli_run(out: Path, lrs: str, epochs: int, *, workers: int) -> tuple[float, float, float]:
    """(wall seconds end to end, seconds of the sweep itself as the manifest records them,
    mean compute seconds of a point as its worker measured them)."""
    cmd = [sys.executable, "-m", "robustlab.cli", "run", "smoke", "--grid", f"lr={lrs}", "--seeds", "1",
           "--set", f"epochs={epochs}", "--quiet", "--out", str(out), "--workers", str(workers)]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=ENV, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    with Store(out / "store.sqlite", readonly=True) as st:
        per_point = [r["seconds"] for r in st.done()]
    return wall, records.read_json(out / "manifest.json")["sweep"]["seconds"], sum(per_point) / len(per_point)


_ONE_POINT = ("import importlib, sys\n"
              "from robustlab.sweep.runner import run_group\n"
              "m = importlib.import_module(sys.argv[1])\n"
              "cfg = getattr(m, sys.argv[2])(seed=int(sys.argv[3]))\n"
              "(e,) = run_group(m.run_points, [cfg], 'cpu', threads=1)\n"
              "assert e['status'] == 'done', e\n")


def process_per_point(module: str, cls: str, n_sample: int) -> float:
    """Mean wall time of one fresh process running one point."""
    times = []
    for seed in range(n_sample):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", _ONE_POINT, module, cls, str(seed)], env=ENV, check=True)
        times.append(time.perf_counter() - t0)
    return sum(times) / len(times)


_SPIN = ("import sys, time\n"
         "t, c = time.perf_counter(), time.process_time()\n"
         "x = 0\n"
         "for i in range(int(sys.argv[1])):\n"
         "    x += i\n"
         "print((time.process_time() - c) / (time.perf_counter() - t))\n")


def calibrate(iters: int) -> float:
    """How many CPUs' worth two busy processes get right now (2.00 on an idle 2-core box):
    the sum over two concurrent spinners of their CPU time over their wall time."""
    procs = [subprocess.Popen([sys.executable, "-c", _SPIN, str(iters)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    return sum(float(p.communicate()[0]) for p in procs)


def ensemble_part(name: str, module: str, cls: type, fn, n_seeds: int, n_sample: int) -> dict:
    points = [cls(seed=s) for s in range(n_seeds)]
    fn(points[:1], "cpu")  # warm caches (data, allocator) for both in-process timings
    t_ens, table_ens = min(timed_sweep(points, fn, ensemble=True) for _ in range(2))
    t_loop, table_loop = min(timed_sweep(points, fn, ensemble=False) for _ in range(2))
    t_proc = process_per_point(module, cls.__name__, n_sample) * n_seeds
    assert len(table_ens) == len(table_loop) == n_seeds
    print(f"  {name:<34} ensemble {t_ens:6.2f}s | loop {t_loop:6.2f}s | "
          f"process/point {t_proc:6.1f}s (from {n_sample} runs)")
    print(f"  {'':<34} loop/ensemble {t_loop / t_ens:5.1f}x   process/ensemble {t_proc / t_ens:6.1f}x   "
          f"process/loop {t_proc / t_loop:5.1f}x")
    return {"ensemble": t_ens, "loop": t_loop, "process": t_proc}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller workloads (a sanity check, not a measurement)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    n_seeds = 32
    n_sample = 2
    n_points, epochs = (6, 300) if args.quick else (12, 1200)

    print(f"robustlab sweep benchmarks — torch {torch.__version__}, threads per point 1")
    cap = calibrate(10_000_000 if args.quick else 30_000_000)
    print(f"machine: {load()}; two busy processes get {cap:.2f} CPUs now (2.00 = idle 2-core box)")

    print(f"\n1. {n_seeds} seeds of one small point: batched ensemble vs plain loop vs process per point")
    print(f"   before: {load()}")
    r1 = ensemble_part("two-layer net (N=200,d=64,m=8,300 st)", "sweep_subject", TwoLayerConfig,
                       two_layer_run, n_seeds, n_sample)
    r2 = ensemble_part("smoke study (digits, 30 epochs)", "robustlab.studies.smoke", SmokeConfig,
                       smoke_run, n_seeds, n_sample)
    print(f"   after:  {load()}")

    print(f"\n2. local backend, 2 workers vs 1: {n_points} independent smoke points ({epochs} epochs each),"
          " end to end through the CLI")
    print(f"   before: {load()}")
    lrs = ",".join(f"{0.05 + 0.05 * i:.2f}" for i in range(n_points))
    runs: dict[int, list[tuple[float, float, float]]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as d:
        for i, workers in enumerate((1, 2, 2, 1)):  # ABBA: a drift in load hits both alike
            runs[workers].append(cli_run(Path(d) / f"r{i}", lrs, epochs, workers=workers))
        outs = [(Path(d) / f"r{i}" / "results.jsonl").read_bytes() for i in range(4)]
    assert len(set(outs)) == 1, "1 and 2 workers gave different results"
    w1 = (min(r[0] for r in runs[1]), min(r[1] for r in runs[1]))
    w2 = (min(r[0] for r in runs[2]), min(r[1] for r in runs[2]))
    for k, w in ((1, w1), (2, w2)):
        each = ", ".join(f"{r[1]:.2f}" for r in runs[k])
        pp = ", ".join(f"{r[2]:.2f}" for r in runs[k])
        print(f"   {k} worker{'s' if k > 1 else ' '}: {w[0]:6.2f}s end to end, sweep {w[1]:6.2f}s  "
              f"(best of 2; sweeps {each}; mean s/point {pp})")
    print("   results.jsonl byte-identical in all four runs; pool start-up included; s/point higher")
    print("   with 2 workers than with 1 means the workers did not get a core each (other load)")
    print(f"   2 workers' sweep minus half the 1-worker sweep (start-up and imbalance): "
          f"{w2[1] - w1[1] / 2:5.2f}s")
    print(f"   after:  {load()}")
    cap_after = calibrate(10_000_000 if args.quick else 30_000_000)

    print("\nsummary (ratios measured side by side in this run)")
    print(f"  ensemble over loop:            two-layer {r1['loop'] / r1['ensemble']:5.1f}x   "
          f"smoke {r2['loop'] / r2['ensemble']:5.1f}x   (target >= 8x)")
    print(f"  ensemble over process/point:   two-layer {r1['process'] / r1['ensemble']:5.1f}x   "
          f"smoke {r2['process'] / r2['ensemble']:5.1f}x")
    print(f"  2 workers over 1:              sweep {w1[1] / w2[1]:5.2f}x   end to end {w1[0] / w2[0]:5.2f}x   "
          f"(target >= 1.7x on 2 free cores;")
    print(f"                                 CPUs two busy processes got: {cap:.2f} before, {cap_after:.2f} after)")


if __name__ == "__main__":
    main()

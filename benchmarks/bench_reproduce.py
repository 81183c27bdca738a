"""Benchmark `robustlab reproduce`: wall time of the whole job against its budget.

    python benchmarks/bench_reproduce.py [--preset quick] [--only NAME,NAME] [--keep DIR]

Runs ``robustlab reproduce`` exactly as a user does (a subprocess, default thread
settings), then ``robustlab report`` on the result, and prints side by side: per study its
points, failed points, claims passed and wall time; the total against the issue's budget
(600 s on 2 CPU cores, goal 300 s); the report rebuild time and the run/rebuild ratio; the
report's size. Studies not yet in this installation are listed and skipped (with none
available it falls back to the smoke study). It takes as long as the preset does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from robustlab import records
from robustlab.config import UserError
from robustlab.studies import REPRODUCE_ORDER
from robustlab.studies.reproduce import resolve_studies
from robustlab.sweep.store import Store

BUDGET_S, GOAL_S = 600.0, 300.0


def available(names: list[str]) -> tuple[list[str], list[str]]:
    ok, missing = [], []
    for n in names:
        try:
            resolve_studies([n])
            ok.append(n)
        except UserError:
            missing.append(n)
    return ok, missing


def cli(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "robustlab.cli", *args], capture_output=True, text=True)
    return time.perf_counter() - t0, r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--only", default=None, help="comma-separated studies (default: all available)")
    ap.add_argument("--keep", type=Path, default=None, help="write the run here instead of a temp dir")
    args = ap.parse_args()
    wanted = args.only.split(",") if args.only else list(REPRODUCE_ORDER)
    names, missing = available(wanted)
    if missing:
        print(f"not available in this installation (skipped): {', '.join(missing)}")
    if not names:
        names = ["smoke"]
        print("no real study available: benchmarking the smoke study instead")
    with tempfile.TemporaryDirectory(prefix="bench-reproduce-") as tmp:
        out = args.keep or Path(tmp) / "run"
        print(f"robustlab reproduce --preset {args.preset} --only {','.join(names)} "
              f"(cpus={os.cpu_count()}) ...", flush=True)
        wall, r = cli("reproduce", "--preset", args.preset, "--only", ",".join(names), "--out", str(out),
                      "--quiet")
        if r.returncode != 0:
            print(r.stdout[-4000:], r.stderr[-4000:], sep="\n")
            print(f"reproduce exited with {r.returncode}")
            return 1
        rebuild_wall, rb = cli("report", str(out))
        if rb.returncode != 0:
            print(rb.stderr[-4000:])
            return 1
        meta = records.read_json(out / "reproduce.json")
        rows = []
        for n in names:
            man = records.read_json(out / n / "manifest.json")
            claims = records.read_json(out / n / "claims.json")
            with Store(out / n / "store.sqlite", readonly=True) as store:
                failed = len(store.failures())
            rows.append((n, man["n_points"], failed, sum(c["passed"] for c in claims), len(claims),
                         meta["timings"][n]))
        table_run = r.stdout.split("reproduce (preset")[0].splitlines()
        table_rebuild = rb.stdout.split("report rebuilt:")[0].splitlines()
        same_table = table_run == table_rebuild
        if not same_table:  # e.g. a study's code changed between the run and the rebuild
            diff = [(a, b) for a, b in zip(table_run, table_rebuild) if a != b][:3]
            print("claim tables differ, first lines:", *(f"  run:     {a}\n  rebuild: {b}" for a, b in diff),
                  sep="\n")
        report = out / "report.html"
        n_figs = report.read_text().count("data:image/png;base64,")
        size_mb = report.stat().st_size / 2**20

    print()
    print(f"{'study':<18} {'points':>6} {'failed':>6} {'claims':>8} {'wall s':>8} {'share':>6}")
    total_study = sum(r_[5] for r_ in rows)
    for n, pts, failed, ok, tot, sec in rows:
        print(f"{n:<18} {pts:>6} {failed:>6} {f'{ok}/{tot}':>8} {sec:>8.1f} {sec / total_study:>6.0%}")
    print(f"{'all studies':<18} {sum(r_[1] for r_ in rows):>6} {sum(r_[2] for r_ in rows):>6} "
          f"{f'{sum(r_[3] for r_ in rows)}/{sum(r_[4] for r_ in rows)}':>8} {total_study:>8.1f}")
    print()
    print(f"reproduce wall time (process, incl. start-up and report): {wall:.1f} s")
    print(f"  vs budget {BUDGET_S:.0f} s: {wall / BUDGET_S:.2f}x of budget   vs goal {GOAL_S:.0f} s: "
          f"{wall / GOAL_S:.2f}x of goal   -> {'within budget' if wall <= BUDGET_S else 'OVER BUDGET'}")
    print(f"  outside the studies (start-up, planning, top report): {wall - total_study:.1f} s")
    print(f"report rebuild (robustlab report): {rebuild_wall:.1f} s   run/rebuild = {wall / rebuild_wall:.1f}x   "
          f"same claim table: {same_table}")
    print(f"report.html: {size_mb:.2f} MB, {n_figs} embedded figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())

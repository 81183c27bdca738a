"""Shared timing for the benchmarks: interleaved best-of CPU times of competing functions."""

from __future__ import annotations

import time


def best_times(fns: dict, rounds: int = 3, clock=time.process_time) -> dict:
    """Best CPU time of each function over ``rounds`` interleaved calls, after a warm-up.

    CPU time of this (single-threaded) process, not wall time: on a shared machine other
    processes' load would otherwise swamp the comparison; interleaving spreads drift evenly.
    ``clock=time.perf_counter`` gives wall times instead (for multi-threaded runs).
    """
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = clock()
            fn()
            best[name] = min(best[name], clock() - t0)
    return best

"""Execute a list of point configs into a store.

Points already in the store are skipped (resume). With ``ensemble=True`` points that
differ only in ``seed`` are grouped and handed to the study in one call, which trains them
as one batched model. A group that raises is recorded as failed, point by point, with its
reason and traceback, and the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import math
import time
import traceback
from collections.abc import Callable
from typing import Any

from ..config import Config, config_hash
from .store import Store

__all__ = ["SweepOptions", "run_sweep", "group_points", "run_group"]


@dataclasses.dataclass(frozen=True)
class SweepOptions:
    backend: str = "local"
    workers: int = 1
    device: str = "cpu"
    ray_address: str | None = None
    quiet: bool = False


def group_points(points: list[Config], ensemble: bool, max_group: int) -> list[list[Config]]:
    """Group configs that differ only in seed (order of first appearance kept)."""
    if not ensemble:
        return [[p] for p in points]
    groups: dict[str, list[Config]] = {}
    for p in points:
        d = p.to_dict()
        d.pop("seed")
        groups.setdefault(config_hash(d), []).append(p)
    out: list[list[Config]] = []
    for g in groups.values():
        for i in range(0, len(g), max_group):
            out.append(g[i:i + max_group])
    return out


def _has_nonfinite(rows: list[dict]) -> str | None:
    for r in rows:
        for k, v in r.items():
            if k in ("loss", "final_loss", "train_loss") and isinstance(v, float) and not math.isfinite(v):
                return f"non-finite {k}={v}"
    return None


def run_group(fn: Callable[[list[Config], str], list[Any]], group: list[Config], device: str) -> list[dict]:
    """Run one group and turn its outcome into store entries (never raises for a study error)."""
    t0 = time.perf_counter()
    try:
        outcomes = fn(group, device)
        if len(outcomes) != len(group):
            raise RuntimeError(f"study returned {len(outcomes)} results for {len(group)} points")
    except Exception as exc:  # noqa: BLE001 - the failure is data, recorded in the store
        tb = traceback.format_exc()
        outcomes = [exc] * len(group)
        tbs = [tb] * len(group)
    else:
        tbs = ["".join(traceback.format_exception(o)) if isinstance(o, BaseException) else None
               for o in outcomes]
    seconds = (time.perf_counter() - t0) / len(group)
    entries = []
    for cfg, out, tb in zip(group, outcomes, tbs):
        params = cfg.to_dict()
        entry = {"key": config_hash(params), "params": params, "seconds": seconds}
        if isinstance(out, BaseException):
            entry.update(status="failed", rows=[], reason=f"{type(out).__name__}: {out}", traceback=tb)
        else:
            bad = _has_nonfinite(out)
            if bad:
                entry.update(status="failed", rows=out, reason=f"NumericalError: {bad}", traceback=None)
            else:
                entry.update(status="done", rows=out)
        entries.append(entry)
    return entries


def run_sweep(points: list[Config], fn: Callable[[list[Config], str], list[Any]], store: Store,
              options: SweepOptions, *, ensemble: bool = False, max_group: int = 64,
              label: str = "sweep") -> dict[str, Any]:
    """Run every point not yet in the store; returns counts."""
    finished = store.keys()
    todo = [p for p in points if config_hash(p.to_dict()) not in finished]
    groups = group_points(todo, ensemble, max_group)
    from . import backends

    t0 = time.perf_counter()
    failed = backends.execute(groups, fn, store, options, total=len(points),
                              already=len(points) - len(todo), label=label)
    return {"points": len(points), "skipped": len(points) - len(todo), "ran": len(todo),
            "failed_now": failed, "seconds": round(time.perf_counter() - t0, 3)}

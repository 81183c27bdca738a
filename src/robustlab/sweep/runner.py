"""Execute a list of point configs into a store.

A sweep is a list of point configs. With ``ensemble=True`` points that differ only in
``seed`` are grouped and handed to the study in one call, which trains them as one batched
model. Groups are formed from the *whole* grid, before finished points are dropped, so a
resumed sweep runs every remaining group exactly as an uninterrupted one would have.

Points already in the store are skipped (resume); failed points too, unless
``retry_failed``. A group that raises is recorded as failed, point by point, with its reason
and traceback; a point whose rows hold NaN or inf is recorded as failed (diverged); the
sweep goes on.

Bit-identity across backends. Torch CPU kernels split reductions and matrix products over
threads, so the float bits of a result can depend on the thread count. Every point therefore
runs with the same intra-op thread count, ``SweepOptions.threads`` (default 1), whichever
backend, process or worker runs it; groups are the same whatever the backend. Together these
make results.jsonl byte-identical across ``local`` (in-process or a pool) and ``ray``.

Seeded globals. A study that draws from torch's, numpy's or Python's global generators (an
``nn.Linear`` built without a generator, ``np.random.rand``, ``random.shuffle``) would get
whatever state the process happens to hold: a different one in every worker and on every
rerun. So every group runs inside :func:`seeded_globals`, seeded from its (first) point's
seed, and the generators are restored after it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from .. import records
from ..config import Config, UserError, config_hash
from .store import Store

__all__ = ["SweepOptions", "check_threads", "run_sweep", "group_points", "costliest_first", "run_group", "failed_entries",
           "intra_op_threads", "captured_warnings", "study_code", "Sigint", "MAX_DEPTH", "seeded_globals", "BACKENDS"]

BACKENDS = ("local", "ray")
# what runs a sweep's groups on a backend into the store and returns how many points failed:
# robustlab.sweep.backends.execute (groups, fn, store, options, *, total, already, label, describe)
Execute = Callable[..., int]
CHECKPOINTS = "checkpoints"  # the folder, beside the store, of the local backend's group checkpoints


@dataclasses.dataclass(frozen=True)
class SweepOptions:
    """How a sweep runs (never what it computes: results do not depend on these)."""

    backend: str = "local"  # local (in-process, or a process pool when workers > 1) or ray
    workers: int = 1  # local backend: parallel worker processes
    device: str = "cpu"
    ray_address: str | None = None  # join this Ray cluster (default: start a local one)
    quiet: bool = False  # no progress bar
    threads: int = 1  # intra-op CPU threads of every point, on every backend (bit-identity)
    retry_failed: bool = False  # re-run points recorded as failed
    ray_num_cpus: int | None = None  # CPUs of a Ray cluster started here (default os.cpu_count())
    # local backend, one worker: run the points in a worker process all the same, so that a point
    # that kills its process (os._exit, a segfault, the OOM killer) is recorded as failed and the
    # run goes on, instead of taking the driver down with it (the CLI's choice; where the study's
    # functions cannot be sent to a process they run here)
    isolate: bool = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UserError(f"backend={self.backend!r} is not allowed: one of {', '.join(BACKENDS)}")
        if self.workers < 1:
            raise UserError(f"workers={self.workers} is not allowed: a value >= 1")
        if self.threads < 1:
            raise UserError(f"threads={self.threads} is not allowed: a value >= 1")
        if self.ray_num_cpus is not None and self.ray_num_cpus < 1:
            raise UserError(f"ray_num_cpus={self.ray_num_cpus} is not allowed: a value >= 1")

    @property
    def parallel(self) -> bool:
        """Points run outside this process, several at once (a worker pool, or Ray)."""
        return self.backend != "local" or self.workers > 1


def check_threads(threads: int) -> None:
    """``threads`` per point within this machine's cores (more can crash torch's thread pool:
    ``--threads 100000`` segfaults); a UserError otherwise."""
    cores = os.cpu_count() or 1
    if threads > cores:
        raise UserError(f"threads={threads} is not allowed: this machine has {cores} CPU core"
                        f"{'s' if cores != 1 else ''}; a value from 1 to {cores}")


def default_workers(threads: int) -> int:
    """Worker processes that fill the machine: its cores divided by each point's threads.
    The one default of ``--workers`` (``run``, ``reproduce``, ``rerun``) and of ``workers`` in
    :func:`robustlab.run` and :func:`robustlab.rerun`."""
    return max(1, (os.cpu_count() or 1) // max(1, threads))


def warning_sentence(line: str) -> str:
    """A stored warning ``"Category: message"`` as a reader sees it: the message alone, as a
    sentence (the Python class name is for the records, not for a person)."""
    head, sep, rest = line.partition(": ")
    if sep and head.isidentifier() and (head.endswith(("Warning", "Error")) or head[:1].isupper()):
        line = rest
    line = line.strip()
    return line[:1].upper() + line[1:] if line else line


def group_points(points: list[Config], ensemble: bool, max_group: int) -> list[list[Config]]:
    """Group configs that differ only in seed (order of first appearance kept).

    Groups larger than ``max_group`` are cut into consecutive chunks.
    """
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


@contextlib.contextmanager
def intra_op_threads(n: int | None) -> Iterator[None]:
    """Run the body with ``torch.set_num_threads(n)``, restoring the old count after."""
    if n is None:
        yield
        return
    import torch

    old = torch.get_num_threads()
    if old != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if old != n:
            torch.set_num_threads(old)


@contextlib.contextmanager
def seeded_globals(seed: int) -> Iterator[None]:
    """Run the body with torch's (CPU and every CUDA device), numpy's and ``random``'s global
    generators seeded from ``seed``; their previous states are restored after.

    The seed is ``derive_seed(seed, "globals")``, not ``seed`` itself, so that a draw from the
    global generator is not the same stream as one from ``make_generator(seed)``. CUDA states
    are saved and restored only where CUDA is already initialised (querying them would
    initialise it); ``torch.manual_seed`` seeds the devices either way.
    """
    import random

    import numpy as np
    import torch

    from ..utils import derive_seed

    s = derive_seed(int(seed), "globals")
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    saved = (torch.get_rng_state(), torch.cuda.get_rng_state_all() if cuda else None,
             np.random.get_state(), random.getstate())
    torch.manual_seed(s)
    np.random.seed(s % 2**32)
    random.seed(s)
    try:
        yield
    finally:
        torch.set_rng_state(saved[0])
        if saved[1] is not None:
            torch.cuda.set_rng_state_all(saved[1])
        np.random.set_state(saved[2])
        random.setstate(saved[3])


# how deep a point's result may nest (a row's dict is level 1): deeper is no table's cell, and
# would overflow the recursion of the JSON writer
MAX_DEPTH = 32


def _first_nonfinite(rows: list[dict]) -> str | None:
    """Where the first value that is not a finite number sits in a point's rows (NaN or inf as a
    float, inside a torch tensor, a numpy array, a nested dict or list; an integer too large
    for a float): the store would hold null there, or fail to write it."""
    def bad(v: Any, depth: int) -> str | None:
        if depth > MAX_DEPTH:
            raise TypeError(f"a point's result nests deeper than {MAX_DEPTH} levels")
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return None
        if isinstance(v, float):
            return None if math.isfinite(v) else repr(v)
        if isinstance(v, int):
            try:
                float(v)
            except OverflowError:
                return "an integer too large for a float"
            return None
        if isinstance(v, dict):
            return next((b for x in v.values() if (b := bad(x, depth + 1))), None)
        if isinstance(v, list | tuple):
            return next((b for x in v if (b := bad(x, depth + 1))), None)
        if hasattr(v, "tolist") and not isinstance(v, bytes):  # numpy and torch values, arrays and scalars
            try:
                return bad(v.tolist(), depth)
            except (TypeError, ValueError, RuntimeError):
                return None  # not numbers: the writer's type check decides
        return None

    for i, r in enumerate(rows):
        for k, v in r.items():
            b = bad(v, 1)
            if b:
                return f"{k} in row {i} is {b}" if b.startswith("an integer") else f"non-finite {k}={b} in row {i}"
    return None


def _check_rows(out: Any) -> list[dict]:
    """The rows of one point, checked to be a list of dicts nested at most :data:`MAX_DEPTH` deep."""
    if not isinstance(out, list) or not all(isinstance(r, dict) for r in out):
        raise TypeError(f"a point's result must be a list of dicts or an Exception, got {type(out).__name__}")
    _first_nonfinite(out)  # raises TypeError for a result nested too deep
    return out


def _storable(rows: list[dict]) -> bool:
    """Whether the store can hold ``rows`` as JSON."""
    try:
        records.dumps(rows)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def failed_entries(group: list[Config], reason: str, tb: str | None, seconds: float = 0.0) -> list[dict]:
    """Store entries marking every point of a group failed (e.g. its worker died)."""
    return [{"key": c.key(), "params": c.to_dict(), "seconds": seconds,
             "status": "failed", "rows": [], "reason": reason, "traceback": tb} for c in group]


def run_group(fn: Callable[[list[Config], str], list[Any]], group: list[Config], device: str,
              *, threads: int | None = None, checkpoints: str | None = None) -> list[dict]:
    """Run one group and turn its outcome into store entries (never raises for a study error).

    ``threads``: intra-op thread count to run with (None: leave torch's setting alone).
    ``checkpoints``: the run's folder where a study may keep the group's training state
    (:mod:`robustlab.sweep.checkpoint`; None: it keeps none).
    Warnings issued while the group runs are not printed: each entry carries them as
    ``warnings`` (distinct one-line texts, see :func:`captured_warnings`).
    """
    from ..utils import retain_freed_memory
    from .checkpoint import folder

    retain_freed_memory()  # in this process or worker: large ensemble tensors are reused, not refaulted
    with captured_warnings() as caught, folder(checkpoints):
        entries = _run_group(fn, group, device, threads)
    if caught:
        for e in entries:
            e["warnings"] = list(caught)
    return entries


@contextlib.contextmanager
def captured_warnings() -> Iterator[list[str]]:
    """Collect the warnings issued in the body, instead of printing them, as distinct
    one-line texts ``"Category: message"`` (first line of the message), in order.

    The warning filters in force decide what counts (those ignored stay ignored); the
    evaluation checks' once-per-process memory is reset first, so that every group reports
    the warnings that concern it.
    """
    from ..attacks.checks import reset_warnings

    reset_warnings()
    found: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        try:
            yield found
        finally:
            for w in caught:
                text = " ".join(str(w.message).split()) or "(no message)"
                line = f"{w.category.__name__}: {text}"
                if line not in found:
                    found.append(line)


class Sigint:
    """Whether a real SIGINT (Ctrl-C) arrived while study code ran (:func:`study_code`)."""

    seen = False


@contextlib.contextmanager
def study_code() -> Iterator[Sigint]:
    """Run study code (a group's points, ``claims()``, ``figures()``): ``SystemExit`` and
    ``KeyboardInterrupt`` raised there are the study's failures, caught as such by the caller,
    but a real Ctrl-C must still stop the run. In the main thread, where SIGINT has Python's
    default handler, a handler that notes the signal is installed for the body (``.seen``);
    elsewhere (a worker ignores SIGINT: the driver ends it) no signal can arrive."""
    import signal
    import threading

    seen = Sigint()
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield seen
        return

    def noted(signum, frame):  # noqa: ANN001
        seen.seen = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, noted)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _run_group(fn: Callable[[list[Config], str], list[Any]], group: list[Config], device: str,
               threads: int | None) -> list[dict]:
    t0 = time.perf_counter()
    sigint = Sigint()
    try:
        with intra_op_threads(threads), seeded_globals(group[0].seed), study_code() as sigint:
            outcomes = fn(group, device)
            if not isinstance(outcomes, list | tuple):
                raise TypeError(f"study returned {type(outcomes).__name__}, not a list of results")
            if len(outcomes) != len(group):
                raise RuntimeError(f"study returned {len(outcomes)} results for {len(group)} points")
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # noqa: BLE001 - the failure is data, in the store
        if isinstance(exc, KeyboardInterrupt) and sigint.seen:
            raise  # a real Ctrl-C: the run stops (finished points are kept)
        tb = traceback.format_exc()
        return failed_entries(group, f"{type(exc).__name__}: {exc}", tb,
                              (time.perf_counter() - t0) / len(group))
    seconds = (time.perf_counter() - t0) / len(group)
    entries = []
    for cfg, out in zip(group, outcomes):
        params = cfg.to_dict()
        entry: dict[str, Any] = {"key": cfg.key(), "params": params, "seconds": seconds}
        if isinstance(out, BaseException):
            entry.update(status="failed", rows=[], reason=f"{type(out).__name__}: {out}",
                         traceback="".join(traceback.format_exception(out)))
            entries.append(entry)
            continue
        try:
            rows = _check_rows(out)
        except TypeError as exc:
            entry.update(status="failed", rows=[], reason=f"TypeError: {exc}", traceback=None)
            entries.append(entry)
            continue
        bad = _first_nonfinite(rows)
        if bad:
            # kept for inspection where the store can hold them; load() and results.jsonl only
            # read points that are done
            entry.update(status="failed", rows=rows if _storable(rows) else [],
                         reason=f"NumericalError: {bad}", traceback=None)
        elif not _storable(rows):
            entry.update(status="failed", rows=[], traceback=None,
                         reason="TypeError: a point's result must hold numbers, strings, true/false, null, "
                                "lists and dicts (JSON), got something else")
        else:
            entry.update(status="done", rows=rows)
        entries.append(entry)
    return entries


def _describer(points: list[Config], ensemble: bool) -> Callable[[list[Config]], str]:
    """A short label for a group: the fields that vary over the grid, seeds as a range."""
    dicts = [p.to_dict() for p in points]
    varying = [k for k in (dicts[0] if dicts else {})
               if k != "seed" and len({records.dumps(d[k]) for d in dicts}) > 1]

    def describe(group: list[Config]) -> str:
        d = group[0].to_dict()
        parts = [f"{k}={d[k]:.4g}" if isinstance(d[k], float) else f"{k}={d[k]}" for k in varying]
        seeds = [c.seed for c in group]
        parts.append(f"seed={seeds[0]}" if len(seeds) == 1 else f"seeds={seeds[0]}..{seeds[-1]}")
        return " ".join(parts)

    return describe


def costliest_first(groups: list[list[Config]], weight: Callable[[Config], float | None] | None) -> list[list[Config]]:
    """The groups with the largest total ``weight`` first (ties keep their order), or as given
    when there is no weight or one is missing, negative or not finite.

    Workers take groups in this order, and a group started last is a tail the other workers
    wait out: running the costliest first (longest-processing-time order) leaves only small
    groups for the end. Results do not depend on the order (each group is independent, and
    the records are read back in the plan's order)."""
    if weight is None or len(groups) < 2:
        return groups
    totals = []
    for g in groups:
        vals = [weight(c) for c in g]
        if any(v is None or not math.isfinite(v) or v < 0 for v in vals):
            return groups
        totals.append(float(sum(vals)))
    order = sorted(range(len(groups)), key=lambda i: -totals[i])  # stable: ties in plan order
    return [groups[i] for i in order]


def run_sweep(points: list[Config], fn: Callable[[list[Config], str], list[Any]], store: Store,
              options: SweepOptions, *, execute: Execute, ensemble: bool = False, max_group: int = 64,
              label: str = "sweep", weight: Callable[[Config], float | None] | None = None) -> dict[str, Any]:
    """Run every point not yet in the store; returns counts.

    ``execute``: what runs the groups on a backend, :func:`robustlab.sweep.backends.execute`
    (passed in: the backends import this module for :func:`run_group`, never the reverse).
    ``weight``: a point's relative cost; with more than one worker (or Ray) the costliest
    groups start first (:func:`costliest_first`). One local worker runs them in plan order.
    """
    done = store.keys("done")
    skip = done if options.retry_failed else store.keys()
    groups, n_todo = [], 0
    for g in group_points(points, ensemble, max_group):
        todo = [p for p in g if p.key() not in skip]
        n_todo += len(todo)
        # an ensemble chunk runs whole even when some of its members are recorded: a member's numbers
        # depend on its batch's shapes (a (E, ...) product of E = 1 and of E = 2 can differ in the last
        # bit on some BLAS builds), so a resume that trained the missing seeds alone would record other
        # numbers than the first sitting did; the recorded members' outcomes are dropped (``recorded``)
        if todo:
            groups.append(g if ensemble else todo)
    if options.parallel:
        groups = costliest_first(groups, weight)
    t0 = time.perf_counter()
    recorded = frozenset(p.key() for g in groups for p in g if p.key() in skip)
    failed = execute(groups, fn, store, options, total=len(points),
                              already=len(points) - n_todo, label=label,
                              describe=_describer(points, ensemble), **({"recorded": recorded} if recorded else {}))
    with contextlib.suppress(OSError):  # the groups remove their own; keep any a failed group left
        (store.path.parent / CHECKPOINTS).rmdir()
    return {"points": len(points), "skipped": len(points) - n_todo, "ran": n_todo,
            "groups": len(groups), "failed_now": failed, "backend": options.backend,
            "seconds": round(time.perf_counter() - t0, 3)}

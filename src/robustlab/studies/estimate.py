"""The dry-run estimator behind ``--dry-run``: a planned run's wall time, from a few of its
groups of points timed through the same sweep code in a temporary directory.

Reads a :class:`~robustlab.studies.base.Plan`; writes nothing where the run would go.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import Config
from ..sweep.backends import execute
from ..sweep.runner import SweepOptions, group_points, run_sweep
from ..sweep.store import Store
from .base import Plan, Study


def estimate(plan_: Plan, options: SweepOptions, *, samples: int = 3,
             say: Callable[[str], None] | None = None, skip: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """Estimate a planned run's wall time without writing anything where the run would go.

    ``skip``: keys of points the run will not compute (:func:`~robustlab.studies.base.finished_keys`: done in
    ``--out`` already, or taken with ``--reuse``); the estimate covers the rest, grouped as
    the run groups them.

    Runs ``samples`` groups of points (seeds trained together count as one group, exactly as
    the run forms them) through the same sweep code into a store in a temporary directory
    that is deleted afterwards.

    * Where the study counts each point's FLOPs (``Study.cost``), the samples are drawn from
      the cheaper half of the groups (a paper grid's widest group can take hours alone), and
      their seconds per FLOP × the cheaper half's FLOPs is that half's time. The costlier
      half gets its own seconds per FLOP, from the group at the middle of its FLOPs and its
      costliest (:func:`_time_costly_half`): each runs whole where the cheaper half's rate
      says it is quick, and otherwise through the study's probe (``Study.probe``) at two
      lengths, whose difference is a step's time at those shapes with the memory warm. With
      neither (no probe), the cheaper half's seconds per FLOP serve for every group, which
      leans far high where the cost sits in large products (the width-depth-init paper grid
      on 11-25: 31 h, where its probes say 9.8–13.9 h; its ``paper-width`` slice 37 min for
      5.5 measured, with the probes 5.3–5.6 min). The estimate is the two halves' time / the
      workers, or the costliest group's time where that is longer (a group runs on one
      worker), and never below ``floor_seconds``: the run's FLOPs at the machine's measured
      matmul rate (:func:`robustlab.utils.matmul_rate`, at the run's threads per worker) /
      the workers, or with ``device=cuda`` at the GPU's rate, once (the local workers share
      one GPU): a run dominated by large products cannot finish sooner on this machine. On a
      GPU, where a small group's time is mostly fixed (launches, evaluation), the estimate is
      instead the samples' fixed time per group × the groups / the workers, plus the floor:
      it leans low where large products run below the GPU's square-matmul rate (the
      width-depth-init paper grid on one H100, 4 workers: estimated 3.9 min, measured 7.2
      min of sweep; time per FLOP of the samples had said 3.0 h).
    * Where the study weighs its points (``Study.weight``, the relative cost that orders a
      parallel run), the samples are spread evenly over the groups ranked by weight (the
      lightest and the heaviest included), and the estimate is the sampled seconds per unit
      of weight × the run's weight / the workers. On the recorded group times of the paper
      runs this was within 0.8–2.0× of the measured sweep (feature-learning,
      lazy-adversarial, lazy-attack), where groups spread over the grid were 1.3–5.8×: a
      grid's order puts like groups side by side, and three picks can all land on costly
      ones; run for real, 0.79×, 0.83× and 1.91×. It stays rough where a weight cannot see the
      cost (epochs that stop early). Where the study also probes a point (``Study.probe``,
      its probes counted by ``weight``), a group too long to run whole is timed through its
      probes (:func:`_time_weighed`): feature-learning's image groups, which on the full
      MNIST take hours each.
    * With neither, the groups are spread evenly over the grid, and the estimate is their
      mean time × the number of groups / the workers that run at once. It is rough where
      the cost of a point varies along the grid (sizes, widths, epochs that stop early).

    The result also lists every timing (``calibration``: what was timed, its FLOPs where the
    study counts them, its seconds), the cost model in words (``model``), and ``busy``: the
    timings' CPU seconds over their wall seconds (they run in this process), the share of
    its cores they got on a shared machine; the estimate × ``busy`` is the run on idle cores.
    On the width-depth-init paper-width slices that read 0.72–0.80× the measured CPU-seconds
    / 2 workers (issue 54; the probes leave out part of a group's measurements).
    """
    study = plan_.study
    groups = [g for g in ([c for c in g if c.key() not in skip]
                          for g in group_points(plan_.points, study.ensemble, study.max_ensemble)) if g]
    out: dict[str, Any] = {
        "study": study.name, "points": len(plan_.points), "to_run": sum(len(g) for g in groups),
        "groups": len(groups), "sampled_groups": 0, "sampled_points": 0, "sample_seconds": 0.0,
        "sample_failed": 0, "parallel": 0, "flops": None, "floor_seconds": None, "matmul_gflops": None,
        "floor_device": None, "floor_parallel": None, "probed_groups": 0, "estimate_seconds": 0.0,
        "calibration": [], "model": "", "busy": None}
    if not groups:  # everything is finished already
        return out
    costs = _group_totals(groups, study.cost, zero_ok=False)
    weights = _group_totals(groups, study.weight, zero_ok=True) if costs is None else None
    if weights is not None and not sum(weights) > 0:
        weights = None
    picked_i, heavy = _pick(groups, costs, weights, samples)
    picked = [groups[i] for i in picked_i]
    sampled = sum(costs[i] for i in picked_i) if costs is not None else 0.0  # their FLOPs
    from ..utils import resolve_device

    device = resolve_device(options.device)
    heavy_part: _CostlyHalf | None = None
    with tempfile.TemporaryDirectory(prefix="robustlab-dry-run-") as tmp:
        timer = _Timer(study, options, Path(tmp), say, _varying(plan_.points))
        if costs is None and weights is not None and study.probe is not None:  # a group may be probed
            times, probed, spent = _time_weighed(study, picked, [weights[i] for i in picked_i], timer)
            seconds = sum(times)
        else:
            times = [timer(g, f"sampled group {i}/{len(picked)} ({len(g)} points)")  # one at a time, each said
                     for i, g in enumerate(picked, 1)]
            seconds = spent = sum(times)
            probed = [False] * len(picked)
        if heavy and device.type != "cuda":
            heavy_part = _time_costly_half(study, groups, costs, heavy, seconds / sampled, timer)
    parallel = min(len(groups), options.workers if options.backend == "local" else
                   max(1, (os.cpu_count() or 1) // options.threads))
    out.update(sampled_groups=probed.count(False), sampled_points=sum(len(g) for g, p in zip(picked, probed) if not p),
               sample_seconds=spent, sample_failed=timer.failed, parallel=parallel, probed_groups=probed.count(True),
               calibration=timer.timed, model=_model(costs, weights, study.probe is not None, heavy, heavy_part),
               busy=_busy(timer, options, device))
    if costs is None:
        sampled_weight = sum(weights[i] for i in picked_i) if weights is not None else 0.0
        if sampled_weight > 0:
            guess = seconds / sampled_weight * sum(weights) / parallel
        else:
            guess = seconds / len(picked) * len(groups) / parallel
        # a group runs on one worker: the run takes at least its longest sampled group (the
        # full MNIST's two image groups on 2 workers: the PGD one's time, not their mean)
        out["estimate_seconds"] = max(guess, max(times))
        return out
    _scale_by_flops(out, options, device, costs, heavy, heavy_part, seconds, sampled, len(picked))
    return out


def _busy(timer: _Timer, options: SweepOptions, device: Any) -> float | None:
    """The share of its cores (``options.threads``) the timings got: their CPU seconds over
    their wall seconds, at most 1; None on a GPU (its time is not this process's CPU) or
    without timings. Under contention (other jobs on the machine) it is below 1, and the
    estimate x it is the run's time on idle cores (the CPU seconds it would take)."""
    if device.type != "cpu" or not timer.wall > 0:
        return None
    return min(1.0, timer.cpu / (timer.wall * max(1, options.threads)))


def _model(costs: list[float] | None, weights: list[float] | None, probes: bool, heavy: list[int],
           heavy_part: _CostlyHalf | None) -> str:
    """The cost model an estimate used, in words (``--dry-run`` prints it above its calibration)."""
    if costs is None:
        if weights is None:
            return "time per group = the sampled groups' mean (groups spread evenly over the grid)"
        return ("time per group = its weight x the sampled groups' seconds per unit of weight"
                + (" (a long group timed through its probes)" if probes else ""))
    text = ("time per group = its FLOPs (the study's count: training's matrix products) x the cheaper half's "
            "seconds per FLOP")
    if heavy_part is not None:
        text += ("; the costlier half at its own seconds per FLOP, from its middle and costliest groups (run whole, "
                 "or probed at 8 and 16 steps (one copy of a large ensemble), their difference the warm time per FLOP, "
                 "the rest the setup, counted once per copy)")
    elif heavy:
        text += " (the costlier half too: it could be neither run whole nor probed)"
    return text + "; never below the FLOPs at this machine's matmul rate; / parallel workers"


def _varying(points: list[Config]) -> tuple[str, ...]:
    """The config fields whose value differs between the plan's points."""
    dicts = [c.to_dict() for c in points]
    return tuple(k for k in dicts[0] if any(repr(d[k]) != repr(dicts[0][k]) for d in dicts[1:])) if dicts else ()


def _group_totals(groups: list[list[Config]], fn: Callable[[Config], float | None] | None,
                  zero_ok: bool) -> list[float] | None:
    """Each group's summed ``fn``, or None where a value is missing, not finite, negative, or
    zero unless ``zero_ok`` (then the estimate cannot use ``fn`` at all)."""
    if fn is None:
        return None
    per = [[fn(c) for c in g] for g in groups]
    if not all(v is not None and math.isfinite(v) and (v > 0 or (zero_ok and v == 0)) for g in per for v in g):
        return None
    return [float(sum(g)) for g in per]


def _pick(groups: list[list[Config]], costs: list[float] | None, weights: list[float] | None,
          samples: int) -> tuple[list[int], list[int]]:
    """The groups to time whole (indices), spread evenly over a pool, and, with a cost model,
    the costlier half (in order of cost), which is never sampled whole blindly. The pool: the
    cheaper half in order of cost; else every group in order of weight; else in plan order."""
    k = max(1, min(samples, len(groups)))
    heavy: list[int] = []
    if costs is not None:
        ranked = sorted(range(len(groups)), key=costs.__getitem__)
        pool = ranked[:max(k, (len(groups) + 1) // 2)]
        heavy = ranked[len(pool):]
    elif weights is not None:
        pool = sorted(range(len(groups)), key=weights.__getitem__)
    else:
        pool = list(range(len(groups)))
    picked = [pool[round(i * (len(pool) - 1) / max(1, k - 1))] for i in range(k)] if k > 1 else pool[:1]
    return picked, heavy


class _Timer:
    """Times groups of points through the real sweep code, one worker, each into a store of its
    own in ``tmp`` (a store skips the points it holds, and a probe may equal another: the
    warm-up and the shortest probe, where a study rounds up); counts the points that failed."""

    def __init__(self, study: Study, options: SweepOptions, tmp: Path, say: Callable[[str], None] | None,
                 varying: tuple[str, ...] = ()):
        self.study, self.tmp, self.say, self.varying = study, tmp, say, varying
        self.options = dataclasses.replace(options, workers=1, quiet=True, retry_failed=False)
        self.failed, self.serial = 0, itertools.count()
        self.timed: list[tuple[str, float]] = []  # (what, seconds) of every timing: the calibration
        # this process's CPU seconds and the wall seconds of the timings (the points run in this
        # process, workers=1 and isolate=False): on a shared machine their ratio is the share of
        # its cores the timings got, and the estimate on idle cores is the estimate x that share
        self.cpu = self.wall = 0.0

    def __call__(self, points: list[Config], said: str) -> float:
        st = self.study
        with Store(self.tmp / f"{next(self.serial)}.sqlite") as store:
            t0, c0 = time.perf_counter(), time.process_time()
            run_sweep(points, st.run_points, store, self.options, execute=execute, ensemble=st.ensemble,
                      max_group=st.max_ensemble, label=f"{st.name} (dry run)")
            dt = time.perf_counter() - t0
            self.cpu += time.process_time() - c0
            self.wall += dt
            self.failed += len(store.failures())
        said += self._what(points)
        self.timed.append((said, dt))
        if self.say is not None:
            self.say(f"{st.name}: {said} in {dt:.1f} s")
        return dt

    def _what(self, points: list[Config]) -> str:
        """The timed points as the plan tells them apart (its varying fields), and their FLOPs."""
        c = points[0].to_dict()
        text = ", ".join(f"{k}={c[k]}" for k in self.varying if k != "seed")
        f = _group_totals([points], self.study.cost, zero_ok=False)
        return (f": {text}" if text else "") + (f"; {f[0] / 1e9:.3g} GFLOP" if f else "")


def _scale_by_flops(out: dict[str, Any], options: SweepOptions, device: Any, costs: list[float], heavy: list[int],
                    heavy_part: _CostlyHalf | None, seconds: float, sampled: float, n_picked: int) -> None:
    """The estimate of a study that counts its FLOPs (see :func:`estimate`), with its floor."""
    from ..utils import matmul_rate

    total, parallel = sum(costs), out["parallel"]
    if device.type == "cuda":
        # The local workers all use one GPU: its rate, once, bounds the whole run. A GPU runs a
        # small group far below that rate (kernel launches, evaluation and Python dominate), so
        # time per FLOP does not scale: each group costs a fixed part, measured on the samples
        # and spread over the workers, plus its products at the GPU's rate.
        rate = matmul_rate(n=4096, reps=10, device=device)
        floor_parallel = 1 if options.backend == "local" else parallel
        fixed = max(0.0, seconds - sampled / rate) / n_picked
        guess = fixed * out["groups"] / parallel + total / rate / floor_parallel
    else:
        rate, floor_parallel = matmul_rate(threads=options.threads), parallel
        guess = seconds / sampled * total / parallel
        if heavy_part is not None:  # the costlier half at its own time per FLOP
            h = heavy_part
            h_total = sum(costs[i] for i in heavy)
            guess = max((seconds / sampled * (total - h_total) + h.seconds / h.flops * h_total) / parallel,
                        h.longest)
            out.update(sampled_groups=n_picked + h.whole, sampled_points=out["sampled_points"] + h.whole_points,
                       probed_groups=h.probed, sample_seconds=seconds + h.spent)
    out.update(flops=total, matmul_gflops=rate / 1e9, floor_device=device.type, floor_parallel=floor_parallel,
               floor_seconds=total / rate / floor_parallel,
               estimate_seconds=max(guess, total / rate / floor_parallel))


# a costlier-half group that the cheaper half's time per FLOP says takes at most this long is
# timed whole by --dry-run; a longer one through its probes (Study.probe) at PROBE_STEPS and
# twice that many steps, and, while the longer probe's extra time is under PROBE_RESOLVED of the
# shorter's (the setup's noise would swamp it), one more probe twice the last one's length,
# paired with it: at most PROBE_ROUNDS pairs, so probes of 8 to 256 steps
WHOLE_SAMPLE_SECONDS = 30.0
# a probed group whose longer first probe the cheaper half's time per FLOP puts above this is probed
# through one copy (its first point), its setup counted once per copy
ONE_COPY_SECONDS = 5.0
PROBE_STEPS = 8
PROBE_ROUNDS = 5
PROBE_RESOLVED = 0.25


@dataclasses.dataclass(frozen=True)
class _CostlyHalf:
    seconds: float  # the picked groups' time, measured whole or from their probes
    longest: float  # of them, the costliest group's: no worker can split a group
    flops: float  # their FLOPs
    spent: float  # the seconds the dry-run spent timing them
    whole: int  # groups run whole
    whole_points: int  # their points
    probed: int  # groups timed through their probes


def _time_costly_half(study: Study, groups: list[list[Config]], costs: list[float], heavy: list[int],
                      per_flop: float, timed: Callable[[list[Config], str], float]) -> _CostlyHalf | None:
    """The time the costlier half of a run's groups (``heavy``, indices in order of cost)
    takes per FLOP, from the group at the middle of its FLOPs and its costliest; None when a
    pick can be neither run whole nor probed (no :attr:`Study.probe`, or a probe's ``cost``
    cannot count it), and the cheaper half's time per FLOP then serves for the whole run.

    A pick runs whole where the cheaper half's time per FLOP (``per_flop``, an upper bound
    there: small products run slower) puts it within :data:`WHOLE_SAMPLE_SECONDS`. Otherwise
    a probe of one of its points at 1 step (a study may round it up) runs first, untimed in
    the estimate, to warm what a process caches (the probe's data), then its probes at
    :data:`PROBE_STEPS` and twice as many steps: the difference of their times over the
    difference of their FLOPs is a step's time per FLOP once the memory is warm (the first
    steps of a large ensemble fault in its weights and buffers), and what the shorter probe
    took beyond its steps is the group's setup (initialisation, evaluation); the group
    counts as that setup plus its own FLOPs at the warm rate. Where the cheaper half's rate puts
    the longer first probe of the whole group above :data:`ONE_COPY_SECONDS`, the probes are of
    its first point alone (one copy of an ensemble: the same shapes a step, 1/E of its FLOPs),
    its setup counted once per copy: on the width-depth-init paper grid five-copy probes
    took minutes each (its depth-8 width-4096 group, 2e11 FLOPs a step), one copy's seconds.
    Where the difference is under
    :data:`PROBE_RESOLVED` of the shorter probe's time, the setup's noise could swamp it: one
    more probe, twice as long as the longer, runs and pairs with it (at most
    :data:`PROBE_ROUNDS` pairs), so each round costs one probe, not two."""
    # the group where the costlier half's cumulative FLOPs pass half their sum: the middle
    # of its FLOPs, not of its groups (a paper grid's FLOPs sit in its last few groups)
    cum = list(itertools.accumulate(costs[i] for i in heavy))
    middle = heavy[next(j for j, c in enumerate(cum) if c >= cum[-1] / 2)]
    picks = sorted({middle, heavy[-1]}, key=costs.__getitem__)
    whole = [i for i in picks if per_flop * costs[i] <= WHOLE_SAMPLE_SECONDS]
    first: dict[int, tuple] = {}  # each probed pick's first pair, all checked before anything runs
    probed_points = {i: groups[i] for i in picks}  # the points a pick is probed through
    if len(whole) < len(picks):
        if study.probe is None or study.cost is None:
            return None
        first = {i: _probe_pair(study, groups[i], study.cost) for i in picks if i not in whole}
        if not all(v is not None for v in first.values()):
            return None
        # one copy of a group whose probes would be long: its step runs at the group's shapes, and a
        # large ensemble's probes cost E times as much (the width-depth-init paper grid's depth-8
        # width-4096 group: about 2e11 FLOPs a step at 5 seeds); a small one keeps every copy, so that
        # its probes' steps stand out of the setup's noise (one depth-8 width-256 copy: 0.1 s a probe)
        for i in first:
            if len(groups[i]) > 1 and per_flop * first[i][1][1] > ONE_COPY_SECONDS:
                one = _probe_pair(study, groups[i][:1], study.cost)
                if one is not None:
                    probed_points[i], first[i] = groups[i][:1], one
    seconds = flops_ = spent = t = 0.0
    for n, i in enumerate(picks, 1):
        what = f"costlier half: group {n}/{len(picks)} ({len(groups[i])} points"
        if i in whole:
            t = timed(groups[i], what + ", whole)")
            spent += t
        else:
            t, took = _probed(study, probed_points[i], costs[i], first[i], study.cost, timed, what,
                              copies=len(groups[i]) // len(probed_points[i]))
            spent += took
        seconds += t
        flops_ += costs[i]
    # the picks run in order of cost: the last is the costliest group, `t` its time
    return _CostlyHalf(seconds, t, flops_, spent, len(whole), sum(len(groups[i]) for i in whole),
                       len(picks) - len(whole))


_Probe = tuple[list[Config], float]  # a group's probes at one length, and their measure


def _probes(study: Study, group: list[Config], steps: int, measure: Callable[[Config], float | None]) -> _Probe | None:
    """The group's probes at ``steps`` and their summed ``measure`` (the study's ``cost`` or
    ``weight``); None where the study declines to probe a point or cannot count a probe."""
    points = [study.probe(c, steps) for c in group]
    if any(c is None for c in points):
        return None
    f = [measure(c) for c in points]
    if not all(v is not None and math.isfinite(v) and v > 0 for v in f):
        return None
    return points, float(sum(f))


def _probe_pair(study: Study, group: list[Config], measure: Callable[[Config], float | None]
                ) -> tuple[_Probe, _Probe] | None:
    """The group's first pair of probes (:data:`PROBE_STEPS` and twice as many), or None
    where either cannot be counted or the longer does not measure more."""
    a, b = (_probes(study, group, s, measure) for s in (PROBE_STEPS, 2 * PROBE_STEPS))
    return (a, b) if a is not None and b is not None and b[1] > a[1] else None


def _probed(study: Study, group: list[Config], size: float, first: tuple[_Probe, _Probe],
            measure: Callable[[Config], float | None], timed: Callable[[list[Config], str], float],
            what: str, copies: int = 1) -> tuple[float, float]:
    """A group's time from its probes (see :func:`_time_costly_half`): the setup plus ``size``
    (its measure) at the warm rate, and the seconds the probes took. ``group``: the points
    probed; where they are one of a group's ``copies`` (seeds trained together), the setup
    counts ``copies`` times (an upper bound: the data's loading is shared) and ``size`` is the
    whole group's."""
    spent = timed([study.probe(group[0], 1)], what + ", a warm-up: one point's probe at 1 step)")
    steps, (short, long_) = PROBE_STEPS, first
    its = "its" if copies == 1 else f"one copy's (setup x {copies})"
    t1, t2 = timed(short[0], what + f", {its} probe of {steps} steps)"), 0.0
    spent += t1
    t = t1
    for round_ in range(PROBE_ROUNDS):
        if round_:  # the last pair's longer probe, against one twice as long
            nxt = _probes(study, group, 2 * steps, measure)
            if nxt is None or not nxt[1] > long_[1]:
                break  # a probe the study cannot count: keep the last pair's time
            short, long_, t1 = long_, nxt, t2
        t2 = timed(long_[0], what + f", {its} probe of {2 * steps} steps)")
        spent += t2
        warm = max(0.0, t2 - t1) / (long_[1] - short[1])
        t = max(0.0, t1 - warm * short[1]) * copies + warm * size
        if t2 - t1 >= PROBE_RESOLVED * t1:
            break
        steps *= 2
    return t, spent


def _time_weighed(study: Study, picked: list[list[Config]], weights: list[float],
                  timed: Callable[[list[Config], str], float]) -> tuple[list[float], list[bool], float]:
    """The picked groups' times (in order of weight, lightest first), each run whole or, where
    the study probes it (:attr:`Study.probe`, counted by its ``weight``) and it would take
    more than :data:`WHOLE_SAMPLE_SECONDS`, as its probes' setup plus its weight at their warm
    rate (the full MNIST's image groups take hours each, their probes seconds). A group's
    expected time: the last whole group's seconds per unit of weight (an upper bound for
    heavier groups, whose work runs at larger shapes), or, before any, its probes'; a group
    whose probes say it is quick runs whole after them. Returns each group's time, whether
    it was probed, and the seconds the timing took."""
    times, probed, spent, rate = [], [], 0.0, None
    for n, (g, w) in enumerate(zip(picked, weights), 1):
        what = f"sampled group {n}/{len(picked)} ({len(g)} points"
        first = _probe_pair(study, g, study.weight) if study.probe is not None and study.weight is not None else None
        if first is not None and (rate is None or rate * w > WHOLE_SAMPLE_SECONDS):
            t, took = _probed(study, g, w, first, study.weight, timed, what)
            spent += took
            if t > WHOLE_SAMPLE_SECONDS:
                times.append(t)
                probed.append(True)
                continue
        t = timed(g, what + ")")
        spent += t
        times.append(t)
        probed.append(False)
        rate = t / w if w > 0 else rate
    return times, probed, spent

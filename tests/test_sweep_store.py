"""The result store, failure recording, resume and retry, grouping, progress (in-process)."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import robustlab
from robustlab.config import Config, UserError, config_hash, param
from robustlab.errors import NumericalError
from robustlab.sweep.backends import execute
from robustlab.sweep.progress import Progress
from robustlab.sweep.runner import SweepOptions, group_points, run_group, run_sweep
from robustlab.sweep.store import Store


@dataclasses.dataclass(frozen=True)
class PointConfig(Config):
    study = "store-test"
    x: float = param(1.0, "a number")
    mode: str = param("ok", "what the point does", choices=("ok", "raise", "nan", "nan-list", "exc", "bad"))


CALLS: list[list[tuple]] = []


def fake_run(cfgs: list[PointConfig], device: str) -> list:
    """Returns, per config, rows / an exception / NaN rows, as ``mode`` says."""
    CALLS.append([(c.x, c.seed) for c in cfgs])
    if cfgs[0].mode == "raise":
        raise ValueError(f"broken at x={cfgs[0].x}")
    out = []
    for c in cfgs:
        if c.mode == "exc":
            out.append(NumericalError(f"diverged at seed {c.seed}") if c.seed % 2 else
                       [{"step": 1, "loss": c.x}])
        elif c.mode == "nan":
            out.append([{"step": 1, "loss": 1.0}, {"step": 2, "loss": math.nan}])
        elif c.mode == "nan-list":
            out.append([{"step": 1, "curve": [0.5, math.inf]}])
        elif c.mode == "bad":
            out.append({"loss": 1.0})  # not a list of rows
        else:
            out.append([{"step": s, "loss": c.x * 10 + c.seed + s} for s in (1, 2)])
    return out


def points(xs=(1.0, 2.0), seeds=(0, 1), mode="ok") -> list[PointConfig]:
    return [PointConfig(x=x, seed=s, mode=mode) for x in xs for s in seeds]


def entry(key: str, status: str = "done", rows=None) -> dict:
    return {"key": key, "params": {"k": key}, "status": status, "rows": rows or [{"a": 1}]}


# ----------------------------------------------------------------------------------------
# the store

def test_store_never_records_a_point_twice(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        st.record([entry("a"), entry("b", "failed")])
        st.record([entry("a", rows=[{"a": 2}])])
        assert st.count() == 2 and st.keys("done") == {"a"} and st.keys("failed") == {"b"}
        assert st.done()[0]["rows"] == [{"a": 1}]  # the first record stands


def test_retry_replaces_failed_records_but_never_finished_ones(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        st.record([entry("a"), entry("b", "failed")])
        st.record([entry("a", rows=[{"a": 9}]), entry("b", rows=[{"b": 1}])], replace_failed=True)
        assert st.count() == 2 and st.keys("done") == {"a", "b"}
        assert {r["key"]: r["rows"] for r in st.done()} == {"a": [{"a": 1}], "b": [{"b": 1}]}


def test_a_group_is_recorded_whole_or_not_at_all(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        bad = {"key": "c", "params": {}, "status": "weird", "rows": []}  # violates the CHECK
        with pytest.raises(sqlite3.IntegrityError):
            st.record([entry("a"), entry("b"), bad])
        assert st.count() == 0
        st.record([entry("a")])
        assert st.keys() == {"a"}


def _killed_mid_transaction(path, statements: str) -> None:
    """Run ``statements`` on a connection ``c`` to the SQLite file ``path`` in another process,
    then SIGKILL it there: what is left is a hot journal beside the file."""
    code = ("import os, signal, sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            f"{statements}"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    r = subprocess.run([sys.executable, "-c", code, str(path)])
    assert r.returncode == -signal.SIGKILL
    assert Path(f"{path}-journal").exists()


def test_a_writer_killed_mid_transaction_leaves_the_store_as_before(tmp_path):
    path = tmp_path / "s.sqlite"
    with Store(path) as st:
        st.record([entry("a")])
    # a big transaction spills changed pages into the database file before its commit;
    # SIGKILL then leaves a hot journal, which the next reader — even a read-only one,
    # as robustlab.load opens — must roll back
    _killed_mid_transaction(path, (
        "c.execute('PRAGMA cache_size=1'); c.execute('BEGIN IMMEDIATE')\n"
        "for i in range(3000):\n"
        "    c.execute(\"INSERT INTO points (key, params, status, rows, reason, traceback, seconds) "
        "VALUES (?, '{}', 'done', ?, NULL, NULL, 0)\", (f'k{i}', 'x' * 500))\n"))
    with Store(path, readonly=True) as ro:
        assert ro.keys() == {"a"}
    with Store(path) as st:
        assert st.keys() == {"a"}


def test_a_store_killed_before_its_schema_reads_as_empty_and_resumes(tmp_path):
    """SQLite creates the file at connect, before the schema is written: a writer killed in
    between leaves a file with no table (here: an empty file). Readers see no point, and the
    next writer adds the schema and records; a store with tables but no ``points`` is still
    damaged."""
    path = tmp_path / "s.sqlite"
    path.touch()
    with Store(path, readonly=True) as ro:
        assert ro.keys() == set() and ro.count("done") == 0 and ro.done() == [] and ro.failures() == []
    assert path.stat().st_size == 0  # reading wrote nothing
    with Store(path) as st:
        st.record([entry("a")])
    with Store(path, readonly=True) as ro:
        assert ro.keys() == {"a"}
    other = tmp_path / "other.sqlite"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE unrelated (x)")
    c.close()
    with pytest.raises(UserError, match="damaged"):
        Store(other, readonly=True)


def test_a_store_killed_while_its_schema_commits_reads_as_empty_and_resumes(tmp_path):
    """A writer killed mid-commit of the transaction that creates the store leaves a hot
    journal over a store with no table once rolled back: a reader (the next run's resume
    check) rolls it back and reads an empty store, not a damaged one. (Seen in CI: a run
    killed just after taking its lock could not be resumed.)"""
    path = tmp_path / "s.sqlite"
    _killed_mid_transaction(path, (
        "c.execute('PRAGMA journal_mode=DELETE'); c.execute('PRAGMA cache_size=1'); c.execute('BEGIN')\n"
        "c.execute('CREATE TABLE points (key TEXT PRIMARY KEY)'); c.execute('CREATE TABLE filler (a BLOB)')\n"
        "for _ in range(200):\n"
        "    c.execute('INSERT INTO filler VALUES (?)', (os.urandom(4000),))\n"))
    assert path.stat().st_size > 0
    with Store(path, readonly=True) as ro:
        assert ro.keys() == set()
    with Store(path) as st:
        st.record([entry("a")])
        assert st.keys() == {"a"}


# ----------------------------------------------------------------------------------------
# failures become data

def test_an_exception_fails_the_whole_group_with_reason_and_traceback():
    entries = run_group(fake_run, points(mode="raise", xs=(3.0,)), "cpu")
    assert [e["status"] for e in entries] == ["failed", "failed"]
    assert entries[0]["reason"] == "ValueError: broken at x=3.0"
    assert "Traceback" in entries[0]["traceback"] and "fake_run" in entries[0]["traceback"]


def test_a_returned_exception_fails_only_its_point():
    entries = run_group(fake_run, points(mode="exc", xs=(3.0,)), "cpu")
    assert [e["status"] for e in entries] == ["done", "failed"]
    assert entries[1]["reason"] == "NumericalError: diverged at seed 1"


@pytest.mark.parametrize("mode, needle", [("nan", "loss=nan in row 1"), ("nan-list", "curve=")])
def test_nan_or_inf_anywhere_in_the_rows_is_a_failure(mode, needle):
    entries = run_group(fake_run, points(mode=mode, xs=(3.0,), seeds=(0,)), "cpu")
    assert entries[0]["status"] == "failed"
    assert entries[0]["reason"].startswith("NumericalError: non-finite") and needle in entries[0]["reason"]


def test_rows_that_are_not_a_list_of_dicts_fail_the_point():
    entries = run_group(fake_run, points(mode="bad", xs=(3.0,), seeds=(0,)), "cpu")
    assert entries[0]["status"] == "failed" and "list of dicts" in entries[0]["reason"]


def test_a_wrong_number_of_results_fails_the_group():
    entries = run_group(lambda cfgs, dev: [[{"a": 1}]], points(xs=(3.0,)), "cpu")
    assert all(e["status"] == "failed" and "1 results for 2 points" in e["reason"] for e in entries)


def test_run_group_pins_the_thread_count_and_restores_it():
    import torch

    seen = []
    before = torch.get_num_threads()
    run_group(lambda cfgs, dev: seen.append(torch.get_num_threads()) or [[{"a": 1}]],
              points(xs=(1.0,), seeds=(0,)), "cpu", threads=1)
    assert seen == [1] and torch.get_num_threads() == before


# ----------------------------------------------------------------------------------------
# grouping, resume, retry

def test_ensemble_groups_hold_points_that_differ_only_in_seed():
    pts = points(xs=(1.0, 2.0), seeds=(0, 1, 2))
    groups = group_points(pts, ensemble=True, max_group=2)
    assert [[(c.x, c.seed) for c in g] for g in groups] == [
        [(1.0, 0), (1.0, 1)], [(1.0, 2)], [(2.0, 0), (2.0, 1)], [(2.0, 2)]]
    assert group_points(pts, ensemble=False, max_group=64) == [[p] for p in pts]


def test_sweep_skips_finished_and_failed_points_and_retries_on_request(tmp_path):
    CALLS.clear()
    ok = points(xs=(1.0, 2.0))
    bad = points(xs=(5.0,), mode="raise")
    opts = SweepOptions(quiet=True)
    with Store(tmp_path / "s.sqlite") as st:
        s1 = run_sweep(ok + bad, fake_run, st, opts, execute=execute, ensemble=True)
        assert s1 == {**s1, "points": 6, "ran": 6, "skipped": 0, "groups": 3, "failed_now": 2}
        assert CALLS == [[(1.0, 0), (1.0, 1)], [(2.0, 0), (2.0, 1)], [(5.0, 0), (5.0, 1)]]
        s2 = run_sweep(ok + bad, fake_run, st, opts, execute=execute, ensemble=True)
        assert s2["ran"] == 0 and s2["skipped"] == 6 and len(CALLS) == 3  # nothing re-run
        s3 = run_sweep(ok + bad, fake_run, st, dataclasses.replace(opts, retry_failed=True), execute=execute, ensemble=True)
        assert s3["ran"] == 2 and CALLS[-1] == [(5.0, 0), (5.0, 1)]  # only the failed group
        assert st.count() == 6 and st.count("failed") == 2
        fails = st.failures()
        assert fails[0]["reason"] == "ValueError: broken at x=5.0" and "Traceback" in fails[0]["traceback"]


def test_a_retried_failure_that_now_succeeds_is_replaced(tmp_path):
    state = {"broken": True}

    def flaky(cfgs, device):
        if state["broken"]:
            raise RuntimeError("transient")
        return [[{"v": c.x}] for c in cfgs]

    pts = points(xs=(1.0,), seeds=(0,))
    with Store(tmp_path / "s.sqlite") as st:
        run_sweep(pts, flaky, st, SweepOptions(quiet=True), execute=execute)
        assert st.count("failed") == 1
        state["broken"] = False
        run_sweep(pts, flaky, st, SweepOptions(quiet=True, retry_failed=True), execute=execute)
        assert st.count() == 1 and st.count("done") == 1 and st.done()[0]["rows"] == [{"v": 1.0}]


def test_groups_are_formed_from_the_whole_grid_so_a_resume_runs_the_same_batches(tmp_path):
    CALLS.clear()
    pts = points(xs=(1.0,), seeds=(0, 1, 2, 3))
    with Store(tmp_path / "s.sqlite") as st:
        # as if a killed run had recorded the first chunk of two seeds
        st.record(run_group(fake_run, pts[:2], "cpu"))
        CALLS.clear()
        run_sweep(pts, fake_run, st, SweepOptions(quiet=True), execute=execute, ensemble=True, max_group=2)
    assert CALLS == [[(1.0, 2), (1.0, 3)]]


def test_options_are_validated():
    for bad in (dict(backend="slurm"), dict(workers=0), dict(threads=0), dict(ray_num_cpus=0)):
        with pytest.raises(UserError):
            SweepOptions(**bad)


# ----------------------------------------------------------------------------------------
# progress, load

class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_current_point_failures_and_eta_on_a_terminal(monkeypatch):
    fake = _Tty()
    monkeypatch.setattr("sys.stderr", fake)
    with Progress(total=10, initial=2, label="smoke") as bar:
        bar.running("lr=0.1 seeds=0..3")
        bar.advance(4, failed=1)
        bar.bar.refresh()
    text = fake.getvalue()
    assert "smoke" in text and "6/10" in text and "lr=0.1 seeds=0..3" in text and "failed=1" in text
    assert "<" in text  # tqdm's elapsed<remaining (the ETA)


def test_progress_is_silent_off_a_terminal_in_a_short_run_or_when_quiet(monkeypatch):
    fake = io.StringIO()
    monkeypatch.setattr("sys.stderr", fake)
    with Progress(total=3, label="x") as bar:
        bar.advance(3, failed=1)
    tty = _Tty()
    monkeypatch.setattr("sys.stderr", tty)
    with Progress(total=3, label="x", quiet=True) as bar:
        bar.advance(3)
    assert fake.getvalue() == "" and tty.getvalue() == ""


def test_progress_off_a_terminal_prints_a_line_now_and_then_while_a_run_lasts(monkeypatch):
    """A run left in the background (stderr a log file) says every LOG_EVERY_S seconds how far
    it is and what runs; none when quiet, and nothing more once it ended."""
    import time

    from robustlab.sweep import progress

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.05)
    fake = io.StringIO()
    monkeypatch.setattr("sys.stderr", fake)
    with Progress(total=10, initial=2, label="wdi", saved=lambda: ["he depth 8 width 4096 epoch 13/50"]) as bar:
        bar.running("init=he depth=8 width=4096 seeds=0..4")
        bar.advance(3, failed=1)
        deadline = time.monotonic() + 10
        while "\n" not in fake.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = fake.getvalue().splitlines()
    assert lines and lines[0] == ("wdi: 5/10 points, failed=1, 0 min elapsed; running init=he depth=8 width=4096 "
                                  "seeds=0..4; saved: he depth 8 width 4096 epoch 13/50")
    n = len(lines)
    time.sleep(0.2)
    assert len(fake.getvalue().splitlines()) == n  # the line stops with the run
    with Progress(total=3, label="x", quiet=True) as bar:
        time.sleep(0.2)
    assert len(fake.getvalue().splitlines()) == n


def test_load_returns_a_dataframe_of_finished_points(tmp_path):
    from robustlab.studies.base import execute, plan
    from robustlab.studies.smoke import STUDY, SmokeConfig

    out = tmp_path / "run"
    execute(plan(STUDY, grids=["lr=0.5,1e30"], n_seeds=2, sets={"epochs": "3"}), out, SweepOptions(quiet=True))
    df = robustlab.load(out)
    assert len(df) == 2 * 3 and set(df["lr"]) == {0.5} and {"epoch", "loss", "seed", "point"} <= set(df.columns)
    with Store(out / "store.sqlite", readonly=True) as st:
        fails = st.failures()
    assert len(fails) == 2 and all("diverged" in f["reason"] for f in fails)
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 6
    for r in lines:  # every row names its point by the hash of the point's full config
        assert r["point"] == config_hash({k: r[k] for k in SmokeConfig.field_names()})


def test_retain_freed_memory_is_idempotent_and_keeps_results():
    # a process-wide allocator setting (glibc): applied once, no arithmetic involved
    import torch

    from robustlab.utils import retain_freed_memory

    first = retain_freed_memory()
    assert isinstance(first, bool) and retain_freed_memory() is first
    x = torch.arange(3_000_000, dtype=torch.float32)  # 12 MB: above glibc's default mmap threshold
    assert float((x * 2).sum()) == float(x.sum()) * 2


def test_large_blocks_mapped_maps_big_requests_inside_then_retains_again(monkeypatch):
    # the passes much larger than a step: big requests get their own mappings inside the block;
    # leaving it (also by an error) goes back to the retained heap and gives freed pages back
    import robustlab.utils as u

    calls = []

    class FakeLibc:
        def mallopt(self, what, value):
            calls.append(("mallopt", what, value))
            return 1

        def malloc_trim(self, pad):
            calls.append(("malloc_trim", pad))
            return 1

    monkeypatch.setattr(u.ctypes, "CDLL", lambda name: FakeLibc())
    monkeypatch.setattr(u, "_RETAINED", [True])
    with pytest.raises(KeyError), u.large_blocks_mapped():
        assert calls == [("mallopt", -3, 32 * 2**20), ("mallopt", -4, 65536)]  # M_MMAP_THRESHOLD, M_MMAP_MAX
        raise KeyError("inside")
    assert calls[2:] == [("mallopt", -4, 0), ("malloc_trim", 0)]
    # where retaining did not apply (not glibc, or never asked): nothing is touched
    calls.clear()
    monkeypatch.setattr(u, "_RETAINED", [False])
    with u.large_blocks_mapped():
        pass
    assert calls == [] and u.release_freed_memory() is False


def test_an_ensemble_chunk_with_recorded_members_runs_whole_and_keeps_their_records(tmp_path):
    """A member's numbers depend on its batch's shapes on some BLAS builds (E = 1 against E = 2 differ in
    the last bit): a resume runs the whole chunk, as the first sitting did, and records only the missing
    member; the recorded one is kept as it was and counted once."""
    CALLS.clear()
    pts = points(xs=(1.0,), seeds=(0, 1, 2, 3))
    with Store(tmp_path / "s.sqlite") as st:
        st.record(run_group(fake_run, pts[:2], "cpu"))
        before = {d["key"]: d for d in st.done()}
        with st.conn:
            st.conn.execute("DELETE FROM points WHERE key = ?", (pts[1].key(),))
        CALLS.clear()
        stats = run_sweep(pts, fake_run, st, SweepOptions(quiet=True), execute=execute, ensemble=True, max_group=2)
        assert CALLS == [[(1.0, 0), (1.0, 1)], [(1.0, 2), (1.0, 3)]]
        assert stats["ran"] == 3 and stats["skipped"] == 1 and st.count() == 4
        assert {d["key"]: d for d in st.done()}[pts[0].key()] == before[pts[0].key()]

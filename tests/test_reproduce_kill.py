"""SIGKILL a real `robustlab reproduce` three times at random moments, then resume it to
the end: every study's results.jsonl and claims.json equal an uninterrupted run's, byte for
byte."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robustlab import records
from robustlab.cli import main
from robustlab.sweep import lock
from robustlab.sweep.store import Store

# the built-in smoke study at its paper scale: 12 points in 3 groups of 4 seeds (ensembles),
# a few seconds in all — a reproduce with every stage a real one has (sweep, finalize, report)
ARGS = ["reproduce", "--only", "smoke", "--preset", "paper", "--quiet"]
N_POINTS = 12


def _stored(out: Path) -> int:
    try:
        with Store(out / "smoke" / "store.sqlite", readonly=True) as st:
            return st.count()
    except Exception:  # not there yet, or its table is being created
        return 0


def _start(out: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "robustlab.cli", *ARGS, "--out", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _finished(out: Path) -> bool:
    try:
        return bool(records.read_json(out / "reproduce.json").get("finished"))
    except Exception:  # not there yet, or being replaced
        return False


def _second_writer_refused(out: Path, capsys) -> None:
    """While another process holds ``out``'s writer lock (as a reproduce does from start to
    end), a reproduce into ``out`` is refused at once with one line naming the holder. (Asked
    of a separate holder: the real reproduce's sweep is shorter than a refused CLI call.)"""
    code = ("import sys, time; from pathlib import Path; from robustlab.sweep import lock\n"
            "with lock.writer(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)\n")
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main([*ARGS, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"pid {holder.pid}" in err
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert [p.name for p in out.iterdir()] == [lock.LOCK_NAME]  # nothing else written


def _kill_at(out: Path, stored: int, delay: float) -> int:
    """Start the reproduce; once it holds the lock and ``stored`` points are in the store,
    wait ``delay`` seconds and SIGKILL it. Returns the points stored at the kill."""
    proc = _start(out)
    deadline = time.monotonic() + 120
    try:
        while not (lock.holder(out) == proc.pid and _stored(out) >= stored):
            assert proc.poll() is None, f"reproduce ended before it was killed: {proc.stderr.read()!r}"
            assert time.monotonic() < deadline, "reproduce too slow"
            time.sleep(0.02)
        time.sleep(delay)
        assert proc.poll() is None, "reproduce ended before the kill"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    return _stored(out)


@pytest.mark.slow
def test_reproduce_killed_three_times_then_resumed_equals_an_uninterrupted_run(tmp_path, capsys):
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    _second_writer_refused(killed, capsys)
    assert main([*ARGS, "--out", str(clean)]) == 0
    rng = random.Random(15)
    at_kill = []
    # three random moments: two while the sweep runs (after 0, 1 or 2 stored groups, two of
    # these at random, plus a random delay up to 0.4 s) and one once every point is stored,
    # while claims, figures and reports are being written: a window of about 0.4 s on this
    # machine's 2 cores, so the delay there is drawn from its first quarter
    for stored in sorted(rng.sample([0, 4, 8], 2)):
        at_kill.append(_kill_at(killed, stored, rng.uniform(0.0, 0.4)))
    at_kill.append(_kill_at(killed, N_POINTS, rng.uniform(0.0, 0.1)))
    assert at_kill[0] < N_POINTS and at_kill[-1] == N_POINTS, at_kill
    assert not records.read_json(killed / "reproduce.json").get("finished"), "the last kill came after the run finished"
    assert main([*ARGS, "--out", str(killed)]) == 0  # resume to the end
    capsys.readouterr()

    meta = records.read_json(killed / "reproduce.json")
    assert meta["finished"] and meta["resumed"] >= 1
    for name in ("results.jsonl", "claims.json"):
        assert (killed / "smoke" / name).read_bytes() == (clean / "smoke" / name).read_bytes(), name
    with Store(killed / "smoke" / "store.sqlite", readonly=True) as a, \
            Store(clean / "smoke" / "store.sqlite", readonly=True) as b:
        assert a.count("done") == N_POINTS
        assert a.table() == b.table()  # every point once, same params, status and rows
    man = records.read_json(killed / "smoke" / "manifest.json")
    # the sweep that stored the last points keeps its record: the final resume found nothing to
    # run and does not overwrite it (issue 55), unless the last kill came before that sweep wrote it
    sweep = man["sweep"]
    assert man["finished"] and sweep["skipped"] in at_kill and sweep["skipped"] + sweep["ran"] == N_POINTS, sweep
    assert (killed / "report.html").exists()

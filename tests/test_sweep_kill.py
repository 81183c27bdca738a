"""SIGKILL a real sweep part-way, resume it: every point exactly once, same store as a clean run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from robustlab import records
from robustlab.cli import main
from robustlab.sweep.store import Store

LRS = "0.1,0.2,0.3,0.4,0.5,0.6"
# six groups of two seeds, each group a second or so of training: slow enough to kill part-way
ARGS = ["run", "smoke", "--grid", f"lr={LRS}", "--seeds", "2", "--set", "epochs=400", "--quiet"]
N_POINTS = 12


def _recorded(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with Store(path, readonly=True) as st:
            return st.count()
    except Exception:  # the driver may be creating the table right now
        return 0


def _group_of(pgid: int) -> list[int]:
    """Live processes in a process group (zombies excluded)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(d.name))
    return out


def kill_part_way(out: Path, extra: list[str]) -> int:
    """Start the sweep in a subprocess, SIGKILL it once 2+ groups are stored; returns how
    many points the store held then."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "robustlab.cli", *ARGS, "--out", str(out), *extra],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # its own process group: we can find its workers
    store = out / "store.sqlite"
    deadline = time.monotonic() + 240
    try:
        while _recorded(store) < 4:
            assert proc.poll() is None, f"sweep ended before it could be killed: {proc.stderr.read()!r}"
            assert time.monotonic() < deadline, "sweep too slow to record 2 groups"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    # worker processes (and the fork server) notice their driver is gone and exit
    deadline = time.monotonic() + 15
    while _group_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _group_of(proc.pid) == [], "worker processes outlived the killed driver"
    return _recorded(store)


def check_resume_equals_clean_run(tmp_path: Path, extra: list[str]) -> None:
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    at_kill = kill_part_way(killed, extra)
    assert 4 <= at_kill < N_POINTS
    with Store(killed / "store.sqlite", readonly=True) as st:
        # a group is all in or all out: each stored lr has both seeds
        assert set(Counter(r[1] for r in _lr_seed(st)).values()) == {2}

    assert main([*ARGS, "--out", str(killed), *extra]) == 0  # re-running into the dir resumes
    assert main([*ARGS, "--out", str(clean)]) == 0  # uninterrupted, in-process

    man = records.read_json(killed / "manifest.json")
    assert man["resumed"] == 1 and man["sweep"]["skipped"] == at_kill
    assert man["sweep"]["ran"] == N_POINTS - at_kill
    with Store(killed / "store.sqlite", readonly=True) as a, Store(clean / "store.sqlite", readonly=True) as b:
        keys = [r[0] for r in a.table()]
        assert len(keys) == len(set(keys)) == N_POINTS  # every point exactly once
        assert set(keys) == set(man["point_keys"])
        assert a.count("done") == N_POINTS
        assert a.table() == b.table()  # same params, status, rows for every point
    assert (killed / "results.jsonl").read_bytes() == (clean / "results.jsonl").read_bytes()


def _lr_seed(st: Store) -> list[tuple[int, float]]:
    return [(r["params"]["seed"], r["params"]["lr"]) for r in st.done()]


def test_sigkill_then_resume_in_process_backend(tmp_path):
    check_resume_equals_clean_run(tmp_path, [])


@pytest.mark.slow
def test_sigkill_then_resume_with_a_worker_pool(tmp_path):
    check_resume_equals_clean_run(tmp_path, ["--workers", "2"])


def test_resume_flag_continues_a_partial_run(tmp_path):
    out = tmp_path / "run"
    args = ["run", "smoke", "--grid", "lr=0.1,0.5", "--seeds", "2", "--set", "epochs=5", "--quiet", "--out", str(out)]
    assert main(args) == 0
    with Store(out / "store.sqlite") as st:  # forget one group, as if killed before it finished
        st.conn.execute("DELETE FROM points WHERE json_extract(params, '$.lr') = 0.5")
    assert main([*args, "--resume"]) == 0
    sweep = records.read_json(out / "manifest.json")["sweep"]
    assert sweep["ran"] == 2 and sweep["skipped"] == 2

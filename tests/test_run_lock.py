"""One writer per run directory: a second writer is refused, readers never wait, a killed
writer never blocks the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import robustlab
from robustlab import records
from robustlab.cli import main
from robustlab.sweep import lock
from robustlab.sweep.store import Store

# six groups of two seeds, each a second or so of training: the first writer is still busy
# when the second one arrives
# one worker, many points: the writer must still be running while the test looks at it
SLOW = ["run", "smoke", "--grid", "lr=0.1,0.15,0.2,0.25,0.3,0.35,0.4,0.45,0.5,0.55,0.6,0.65", "--seeds", "2",
        "--set", "epochs=400", "--workers", "1", "--quiet"]


def _start(args: list[str], out: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "robustlab.cli", *args, "--out", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_writer(proc: subprocess.Popen, out: Path, *, points: int = 0) -> None:
    """Until ``proc`` holds the lock of ``out`` (and has stored ``points`` points)."""
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, f"the writer ended early: {proc.communicate()!r}"
        assert time.monotonic() < deadline, "the writer never took the lock"
        if lock.holder(out) == proc.pid and (out / "manifest.json").exists():
            if points == 0:
                return
            try:
                with Store(out / "store.sqlite", readonly=True) as st:
                    if st.count() >= points:
                        return
            except Exception:  # the table is being created
                pass
        time.sleep(0.05)


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_second_writer_is_refused_and_readers_do_not_wait(tmp_path, capsys):
    out = tmp_path / "run"
    first = _start(SLOW, out)
    try:
        _wait_for_writer(first, out, points=2)
        before = _listing(out)
        # a second writer: one line naming the holder's pid, exit 2, nothing written
        assert main([*SLOW, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith("robustlab: error: out=") and f"pid {first.pid}" in err
        # readers: load() reads the points stored so far; report prints claims from a
        # snapshot and leaves every file as it is
        t0 = time.monotonic()
        df = robustlab.load(out)
        assert len(df) >= 2
        assert main(["report", str(out)]) == 0
        printed = capsys.readouterr().out
        assert f"pid {first.pid}" in printed and "no file in" in printed
        assert time.monotonic() - t0 < 60
        after = _listing(out)
        # the writer itself may have stored more points meanwhile; nothing else changed
        assert {k: v for k, v in after.items() if k != "store.sqlite"} == \
               {k: v for k, v in before.items() if k != "store.sqlite"}
        assert not (out / "report.html").exists()
    finally:
        stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr  # the first writer finished normally
    assert "error" not in stderr
    with Store(out / "store.sqlite", readonly=True) as st:
        assert st.count("done") == 24
    man = records.read_json(out / "manifest.json")
    assert man["finished"] and "resumed" not in man
    assert lock.holder(out) is None


def test_a_run_killed_before_its_store_had_a_schema_resumes(tmp_path, capsys):
    """The moment the killed-writer test can hit by chance, made certain: the manifest is
    written and SQLite has created store.sqlite, but the schema is not in yet. The same
    command resumes (runs every point), rather than calling the store damaged."""
    out = tmp_path / "run"
    args = ["run", "smoke", "--grid", "lr=0.1,0.2", "--seeds", "2", "--quiet", "--out", str(out)]
    assert main(args) == 0
    (out / "store.sqlite").write_bytes(b"")
    man = records.read_json(out / "manifest.json")
    man["finished"] = None
    records.write_json(out / "manifest.json", man)
    capsys.readouterr()
    assert main(args) == 0, capsys.readouterr().err
    with Store(out / "store.sqlite", readonly=True) as st:
        assert st.count("done") == man["n_points"]
    assert records.read_json(out / "manifest.json")["finished"]


def test_a_killed_writer_does_not_block_the_next_run(tmp_path):
    out = tmp_path / "run"
    args = ["run", "smoke", "--grid", "lr=0.1,0.2", "--seeds", "2", "--set", "epochs=400", "--quiet"]
    proc = _start(args, out)
    try:
        _wait_for_writer(proc, out)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    # the pid stays in the file, but the kernel dropped the lock with the process
    assert (out / lock.LOCK_NAME).read_text().strip() == str(proc.pid)
    assert lock.holder(out) is None
    assert main([*args, "--out", str(out)]) == 0  # resumes, not refused
    man = records.read_json(out / "manifest.json")
    assert man["resumed"] == 1 and man["finished"]
    assert (out / lock.LOCK_NAME).read_text().strip() == str(os.getpid())


def test_the_lock_is_reentrant_in_one_process_and_exclusive_across_processes(tmp_path):
    with lock.writer(tmp_path):
        with lock.writer(tmp_path):  # nested, e.g. reproduce's directory and a study's
            assert lock.holder(tmp_path) is None  # our own lock is nobody's
        code = ("import sys; from robustlab.sweep import lock\n"
                "try:\n    lock.writer(sys.argv[1]).__enter__()\n"
                "except lock.LockedError as e:\n    print(e.pid); sys.exit(3)\n")
        res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
        assert res.returncode == 3 and res.stdout.strip() == str(os.getpid())
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 0  # released when the outer block ended


def test_report_refuses_a_directory_that_is_no_run_without_writing(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["run", "reproduce"])
def test_a_lock_file_alone_is_no_foreign_content(tmp_path, name):
    # a writer that died right after taking the lock of a new directory left only .lock
    out = tmp_path / "x"
    out.mkdir()
    (out / lock.LOCK_NAME).write_text("12345\n")
    args = (["run", "smoke", "--set", "epochs=2", "--quiet"] if name == "run"
            else ["reproduce", "--only", "smoke", "--quiet"])
    assert main([*args, "--out", str(out)]) == 0


def test_report_on_a_reproduce_directory_being_written_changes_nothing(tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["reproduce", "--only", "smoke", "--quiet", "--out", str(out)]) == 0
    (out / "smoke" / "claims.json").write_text("[]")  # stale: a rebuild would rewrite it
    before = {k: v for k, v in _listing(out).items() if not k.endswith(lock.LOCK_NAME)}
    capsys.readouterr()
    # another process holds the lock of the study's directory (as a running reproduce would)
    code = ("import sys, time; from robustlab.sweep import lock\n"
            "with lock.writer(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(out / "smoke")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["report", str(out)]) == 0
        printed = capsys.readouterr().out
        assert "self-checks: 1/1 hold" in printed  # the claim tally, computed from a snapshot
        assert f"pid {holder.pid}" in printed and "no file in" in printed
        assert {k: v for k, v in _listing(out).items() if not k.endswith(lock.LOCK_NAME)} == before
    finally:
        holder.kill()
        holder.wait()
    assert main(["report", str(out)]) == 0  # nobody writes now: rebuilt in place
    assert "report rebuilt" in capsys.readouterr().out
    assert (out / "smoke" / "claims.json").read_text() != "[]"

"""The local process pool, bit-identity across backends, forced failures and bad inputs (CLI)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from robustlab import records
from robustlab.cli import main
from robustlab.config import Config, param
from robustlab.sweep import backends
from robustlab.sweep.runner import SweepOptions, run_sweep
from robustlab.sweep.store import Store

SMOKE = ["run", "smoke", "--grid", "lr=0.1,0.5", "--seeds", "3", "--quiet"]


def run_cli(*argv) -> int:
    return main([str(a) for a in argv])


def table(out) -> list[tuple]:
    with Store(out / "store.sqlite", readonly=True) as st:
        return st.table()


# ----------------------------------------------------------------------------------------
# the same results whichever backend, process or thread setting ran them

def test_pool_and_in_process_runs_are_byte_identical(tmp_path):
    a, b = tmp_path / "inproc", tmp_path / "pool"
    old = torch.get_num_threads()
    torch.set_num_threads(2)  # the driver's own setting must not leak into the points
    try:
        assert run_cli(*SMOKE, "--out", a, "--workers", "1") == 0
    finally:
        torch.set_num_threads(old)
    assert run_cli(*SMOKE, "--out", b, "--workers", "2") == 0
    assert (a / "results.jsonl").read_bytes() == (b / "results.jsonl").read_bytes()
    assert table(a) == table(b) and len(table(a)) == 6
    man = records.read_json(b / "manifest.json")
    assert man["workers"] == 2 and man["threads"] == 1 and man["sweep"]["groups"] == 2


def test_default_workers_fill_the_machine_and_keep_the_bits(tmp_path, capsys, monkeypatch):
    """No --workers: cores // threads processes (said on stderr); results as with one."""
    from robustlab import cli

    monkeypatch.setattr(cli.os, "cpu_count", lambda: 5)
    assert cli.default_workers(1) == 5 and cli.default_workers(2) == 2 and cli.default_workers(8) == 1
    monkeypatch.setattr(cli.os, "cpu_count", lambda: None)  # unknown: one
    assert cli.default_workers(1) == 1
    monkeypatch.setattr(cli.os, "cpu_count", lambda: 3)
    one, dflt = tmp_path / "one", tmp_path / "default"
    assert run_cli(*SMOKE, "--out", one, "--workers", "1") == 0
    capsys.readouterr()
    assert run_cli(*[a for a in SMOKE if a != "--quiet"], "--out", dflt) == 0
    err = capsys.readouterr().err
    assert "robustlab run smoke: 6 points, local backend: 3 workers x 1 thread" in err, err
    assert records.read_json(dflt / "manifest.json")["workers"] == 3
    assert (one / "results.jsonl").read_bytes() == (dflt / "results.jsonl").read_bytes()


@dataclasses.dataclass(frozen=True)
class SumConfig(Config):
    study = "sum-test"
    n: int = param(4_000_000, "how many numbers to add up")


def big_sum(cfgs: list[SumConfig], device: str) -> list:
    """A float32 sum of millions of numbers: torch splits it over its threads, so its low
    bits depend on the thread count."""
    out = []
    for c in cfgs:
        x = torch.randn(c.n, generator=torch.Generator().manual_seed(c.seed))
        out.append([{"sum": float(x.sum())}])
    return out


def test_the_thread_count_changes_bits_and_the_sweep_pins_it(tmp_path):
    pts = [SumConfig(seed=s) for s in range(4)]
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = big_sum(pts, "cpu")
        torch.set_num_threads(2)
        two = big_sum(pts, "cpu")
        with Store(tmp_path / "a.sqlite") as st:  # in-process, the driver left at 2 threads
            run_sweep(pts, big_sum, st, SweepOptions(quiet=True), execute=backends.execute)
            in_process = st.table()
    finally:
        torch.set_num_threads(old)
    if one == two:
        pytest.skip("this machine's torch adds up the same bits with 1 and 2 threads")
    with Store(tmp_path / "b.sqlite") as st:
        run_sweep(pts, big_sum, st, SweepOptions(workers=2, quiet=True), execute=backends.execute)
        pool = st.table()
    assert in_process == pool
    assert [json.loads(r[3])[0]["sum"] for r in sorted(in_process, key=lambda r: json.loads(r[1])["seed"])] == \
        [rows[0]["sum"] for rows in one]


@dataclasses.dataclass(frozen=True)
class CrashConfig(Config):
    study = "crash-test"
    x: float = param(1.0, "a number")
    crash: bool = param(False, "kill the worker process running this point")


def crashy_run(cfgs: list[CrashConfig], device: str) -> list:
    if cfgs[0].crash:
        os._exit(3)  # like a segfault or the OOM killer: no exception, the process is gone
    time.sleep(0.2)
    return [[{"x": c.x, "y": float(torch.tensor(c.x, dtype=torch.float64).exp())}] for c in cfgs]


def test_a_worker_that_dies_fails_its_point_and_the_sweep_goes_on(tmp_path):
    pts = [CrashConfig(x=float(i), crash=(i == 2)) for i in range(5)]
    with Store(tmp_path / "s.sqlite") as st:
        stats = run_sweep(pts, crashy_run, st, SweepOptions(workers=2, quiet=True), execute=backends.execute)
        assert stats["failed_now"] == 1
        assert st.count() == 5 and st.count("done") == 4
        (fail,) = st.failures()
        assert fail["params"]["x"] == 2.0 and fail["reason"].startswith("WorkerDied")
        assert sorted(r["rows"][0]["x"] for r in st.done()) == [0.0, 1.0, 3.0, 4.0]


SRC = str(Path(records.__file__).resolve().parents[1])  # for scripts run in a subprocess
SCRIPT_CALLS = {
    "cli": "import sys\nfrom robustlab.cli import main\n{guard}sys.exit(main({argv!r}))\n",
    "api": "import robustlab\n{guard}robustlab.run('smoke', grid={{'lr': [0.1, 0.5]}}, seeds=3, {workers}"
           "quiet=True, out={out!r})\n",
}


@pytest.mark.parametrize("entry", sorted(SCRIPT_CALLS))
def test_a_script_calls_robustlab_at_its_top_level_with_workers(tmp_path, entry):
    """robustlab's worker processes never re-import the driver's main script, so a script
    that calls robustlab at its top level, without ``if __name__ == "__main__":``, runs (it
    used to start a run inside every worker, then was refused); with the guard too."""
    out = tmp_path / "r"
    argv = [*SMOKE, "--workers", "2", "--out", str(out)]
    for guard in ("", 'if __name__ == "__main__":\n    '):
        script = tmp_path / f"my_{entry}_script.py"
        script.write_text(SCRIPT_CALLS[entry].format(guard=guard, argv=argv, out=str(out), workers="workers=2, "))
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": SRC})
        assert r.returncode == 0, r.stderr
        assert [row[2] for row in table(out)] == ["done"] * 6
        assert records.read_json(out / "manifest.json")["workers"] == 2
        shutil.rmtree(out)


@pytest.mark.parametrize("how", ["file", "stdin"])
def test_robustlab_run_with_default_options_from_a_script_and_from_standard_input(tmp_path, how):
    """``robustlab.run(...)`` with the default options (workers: the CPU cores) at a script's
    top level, and from a script read from standard input (which no worker could re-import).
    A script whose top level fails when imported again in a worker runs too: nothing
    re-imports it. (A notebook: tests/test_notebook.py.)"""
    out = tmp_path / "r"
    code = ('if __name__ == "__mp_main__":\n    raise ImportError("only if a worker re-imports it")\n'
            + SCRIPT_CALLS["api"].format(guard="", out=str(out), workers=""))
    if how == "file":
        (tmp_path / "top.py").write_text(code)
        cmd, stdin = [sys.executable, str(tmp_path / "top.py")], None
    else:
        cmd, stdin = [sys.executable, "-"], code
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr
    assert [row[2] for row in table(out)] == ["done"] * 6
    assert records.read_json(out / "manifest.json")["workers"] == max(1, os.cpu_count() or 1)


def test_workers_do_not_import_main_and_exit_with_their_driver():
    """The pool's start method sends no ``__main__`` to its processes (forkserver here; spawn
    on Windows), and a worker watches its driver through the parent's sentinel."""
    fn = backends._work  # any run function outside __main__
    ctx = backends._mp_context(fn)
    with backends._main_not_sent():
        data = backends.mp_spawn.get_preparation_data("x")
    assert not set(backends._MAIN_KEYS) & set(data)
    assert backends.mp_spawn.get_preparation_data("x").get("init_main_from_path") or \
        backends.mp_spawn.get_preparation_data("x").get("init_main_from_name")  # others' pools: as before
    assert ctx.get_start_method() in ("forkserver", "spawn") and "NoMain" in ctx.Process.__name__
    main_fn = type(fn)(fn.__code__, {"__name__": "__main__", **fn.__globals__})
    main_fn.__module__ = "__main__"
    assert "NoMain" not in backends._mp_context(main_fn).Process.__name__  # it needs __main__

def test_a_run_function_that_cannot_be_pickled_is_a_user_error(tmp_path):
    pts = [CrashConfig(x=1.0), CrashConfig(x=2.0)]
    with Store(tmp_path / "s.sqlite") as st, pytest.raises(Exception, match="cannot be sent to worker"):
        run_sweep(pts, lambda cfgs, dev: [[{"a": 1}]], st, SweepOptions(workers=2, quiet=True), execute=backends.execute)


# ----------------------------------------------------------------------------------------
# a forced failure: the sweep finishes, the store and the report show it

def test_a_forced_failure_is_recorded_reported_and_not_rerun_unless_asked(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [*SMOKE, "--out", out, "--set", "fail_on_lr=0.5"]
    assert run_cli(*argv) == 0
    assert "3/6 points done (3 failed)" in capsys.readouterr().out
    with Store(out / "store.sqlite", readonly=True) as st:
        fails = st.failures()
        assert st.count("done") == 3
    assert len(fails) == 3 and {f["params"]["lr"] for f in fails} == {0.5}
    assert all(f["reason"] == "RuntimeError: forced failure at lr=0.5" for f in fails)
    assert all("Traceback" in f["traceback"] and "run_points" in f["traceback"] for f in fails)
    html = (out / "report.html").read_text()
    assert "Failed points (3" in html and "forced failure at lr=0.5" in html
    assert len((out / "results.jsonl").read_text().splitlines()) == 3 * 30  # lr=0.1 only

    first = records.read_json(out / "manifest.json")
    assert run_cli(*argv) == 0  # re-running into the directory: nothing to do
    again = records.read_json(out / "manifest.json")
    # a no-op resume keeps the record of the sweep that did the work (its timing too)
    assert again["sweep"] == first["sweep"] and again["finished"] == first["finished"]
    assert again["resumed"] == 1 and len(again["sittings"]) == 2
    assert run_cli(*argv, "--retry-failed") == 0  # the failed group runs (and fails) again
    sweep = records.read_json(out / "manifest.json")["sweep"]
    assert sweep["ran"] == 3 and sweep["failed_now"] == 3
    assert len(table(out)) == 6


def test_diverged_points_fail_with_their_reason(tmp_path):
    out = tmp_path / "run"
    assert run_cli("run", "smoke", "--grid", "lr=0.5,1e30", "--seeds", "2", "--quiet", "--out", out) == 0
    with Store(out / "store.sqlite", readonly=True) as st:
        fails = st.failures()
    assert len(fails) == 2 and all(f["reason"] == "NumericalError: loss diverged (lr=1e+30)" for f in fails)


# ----------------------------------------------------------------------------------------
# bad inputs: one line, exit 2, no run directory

def assert_user_error(capsys, out, needle: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith("robustlab: error: ") and err.count("\n") == 1, err
    assert needle in err, err
    assert not out.exists()
    return err


@pytest.mark.parametrize("extra, needle", [
    (["--grid", "lr=0.1:0.5"], "lo:hi:n"),
    (["--grid", "lr"], "expected key=v1,v2"),
    (["--grid", "lr=0.1:x:3"], "numbers"),
    (["--grid", "learning_rate=0.1,0.2"], "unknown key for study 'smoke'"),
    (["--grid", "lr="], "empty"),
    (["--grid", "lr=,"], "empty"),
    (["--grid", "lr=abc"], "expected a number"),
    (["--grid", "lr=0.1,-1"], "lr=-1.0 is not allowed"),
    (["--grid", "dataset=digits,cifar"], "one of digits, mnist5k"),
    (["--workers", "0"], "workers=0"),
    (["--threads", "0"], "threads=0"),
    (["--backend", "slurm"], "one of local, ray"),
    (["--ray-address", "127.0.0.1:1"], "without --backend ray"),
    (["--resume"], "--resume needs an existing run"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, needle):
    out = tmp_path / "never"
    assert run_cli("run", "smoke", "--out", out, *extra) == 2
    assert_user_error(capsys, out, needle)


def test_resuming_with_another_thread_count_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_cli("run", "smoke", "--seeds", "1", "--quiet", "--out", out) == 0
    capsys.readouterr()
    assert run_cli("run", "smoke", "--seeds", "1", "--quiet", "--out", out, "--threads", "2") == 2
    assert "started with threads=1" in capsys.readouterr().err


def test_missing_ray_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # `import ray` now fails
    out = tmp_path / "never"
    assert run_cli("run", "smoke", "--out", out, "--backend", "ray") == 2
    assert_user_error(capsys, out, "pip install 'robustlab[ray]'")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_ray_address_fails_fast(tmp_path, capsys):
    pytest.importorskip("ray")
    out = tmp_path / "never"
    t0 = time.monotonic()
    rc = run_cli("run", "smoke", "--out", out, "--backend", "ray", "--ray-address", f"127.0.0.1:{_closed_port()}")
    assert rc == 2 and time.monotonic() - t0 < 30
    assert_user_error(capsys, out, "cannot reach it")


@pytest.mark.slow
def test_a_ray_address_that_answers_but_is_no_ray_cluster_fails_within_30s(tmp_path, capsys):
    pytest.importorskip("ray")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []

    def accept_and_hold():  # takes connections and never says a word
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept_and_hold, daemon=True).start()
    out = tmp_path / "never"
    t0 = time.monotonic()
    try:
        rc = run_cli("run", "smoke", "--out", out, "--backend", "ray",
                     "--ray-address", f"127.0.0.1:{server.getsockname()[1]}")
    finally:
        server.close()
        for c in held:
            c.close()
    elapsed = time.monotonic() - t0
    assert rc == 2 and elapsed <= backends.RAY_PROBE_TIMEOUT_S + 10, elapsed
    assert_user_error(capsys, out, "ray_address=")


def test_reproduce_checks_the_backend_before_making_its_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)
    out = tmp_path / "never"
    assert run_cli("reproduce", "--out", out, "--backend", "ray") == 2
    assert_user_error(capsys, out, "robustlab[ray]")


def test_results_jsonl_rows_are_sorted_json(tmp_path):
    out = tmp_path / "run"
    assert run_cli("run", "smoke", "--seeds", "1", "--quiet", "--out", out, "--set", "epochs=2") == 0
    line = (out / "results.jsonl").read_text().splitlines()[0]
    assert line == json.dumps(json.loads(line), sort_keys=True)


# ----------------------------------------------------------------------------------------
# the costliest groups first

@dataclasses.dataclass(frozen=True)
class WorkConfig(Config):
    study = "work-test"
    cost: float = param(1.0, "a point's relative cost")


def timed_run(cfgs: list[WorkConfig], device: str) -> list:
    start = time.monotonic()  # system-wide on Linux: comparable across the worker processes
    time.sleep(0.15)
    return [[{"cost": c.cost, "start": start}] for c in cfgs]


def test_costliest_first_orders_by_total_weight_and_keeps_ties_and_unknowns():
    from robustlab.sweep.runner import costliest_first

    g = [[WorkConfig(cost=c, seed=s) for s in range(n)] for c, n in ((1.0, 1), (2.0, 3), (3.0, 1), (6.0, 1), (3.0, 2))]
    order = [(grp[0].cost, len(grp)) for grp in costliest_first(g, lambda c: c.cost)]
    assert order == [(2.0, 3), (6.0, 1), (3.0, 2), (3.0, 1), (1.0, 1)]  # totals 6, 6, 6, 3, 1
    assert costliest_first(g, None) == g
    for bad in (None, float("nan"), -1.0):  # one unknown weight: the plan's order
        assert costliest_first(g, lambda c, bad=bad: bad if c.cost == 3.0 else c.cost) == g


def test_a_pool_starts_the_costliest_groups_first_with_the_same_results(tmp_path):
    pts = [WorkConfig(cost=float(c)) for c in (1, 2, 5, 3, 4)]
    with Store(tmp_path / "a.sqlite") as st:
        run_sweep(pts, timed_run, st, SweepOptions(workers=2, quiet=True), execute=backends.execute, weight=lambda c: c.cost)
        pool = {r["params"]["cost"]: r["rows"][0] for r in st.done()}
    with Store(tmp_path / "b.sqlite") as st:  # one worker: the plan's order, the same records
        run_sweep(pts, timed_run, st, SweepOptions(quiet=True), execute=backends.execute, weight=lambda c: c.cost)
        one = {r["params"]["cost"]: r["rows"][0] for r in st.done()}
    assert sorted(pool) == sorted(one) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert all(pool[c]["cost"] == one[c]["cost"] == c for c in pool)  # each point's own result, either way
    # two workers take the first two groups handed out, the others only as one finishes
    first_two = sorted(pool, key=lambda c: pool[c]["start"])[:2]
    assert sorted(first_two) == [4.0, 5.0]
    assert sorted(one, key=lambda c: one[c]["start"]) == [1.0, 2.0, 5.0, 3.0, 4.0]


def test_the_lazy_studies_weigh_their_points_by_their_products():
    from robustlab.studies.lazy import adversarial as lazy_adversarial
    from robustlab.studies.lazy import attack as lazy_attack

    small = lazy_attack.LazyAttackConfig(size=10, m=64, epochs=20)
    assert lazy_attack.STUDY.weight(small) == 100 * 64 * 20
    assert lazy_attack.STUDY.weight(dataclasses.replace(small, m=256)) == 4 * lazy_attack.STUDY.weight(small)
    adv = lazy_adversarial.LazyAdversarialConfig(size=10, m=64, epochs=20, attack_steps=5)
    assert lazy_adversarial.STUDY.weight(adv) == 100 * 64 * 20 * 7

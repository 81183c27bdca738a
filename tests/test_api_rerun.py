"""robustlab.run (the Python entry point), experiment files (run --config) and rerun."""

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

import robustlab
from robustlab.cli import main

SRC = str(Path(robustlab.__file__).resolve().parents[1])


def cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "robustlab.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=env)


def one_line_error(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("robustlab: error:"), r.stderr
    return lines[0]


def test_python_run_is_the_cli_run(tmp_path):
    """The same engine and run directory: byte-identical results.jsonl and claims.json."""
    api = robustlab.run("smoke", set={"epochs": 12}, grid={"lr": [0.2, 0.5]}, seeds=2, seed=3,
                        out=tmp_path / "api", quiet=True)
    assert main(["run", "smoke", "--set", "epochs=12", "--grid", "lr=0.2,0.5", "--seeds", "2",
                 "--seed", "3", "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    for name in ("results.jsonl", "claims.json"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert isinstance(api.results, pd.DataFrame)
    assert set(api.results["lr"]) == {0.2, 0.5} and set(api.results["seed"]) == {3, 4}
    assert len(api.results) == 2 * 2 * 12
    assert list(api.claims["id"]) == ["smoke-accuracy", "smoke-loss-falls"]
    assert [c["id"] for c in api.claim_dicts] == ["smoke-accuracy", "smoke-loss-falls"]
    assert api.report_path.is_file() and api.out == tmp_path / "api"
    assert [p.name for p in api.figures] == ["loss.png"]
    m = api.manifest
    assert m["request"] == {"study": "smoke", "preset": "quick", "set": {"epochs": "12"},
                            "grid": ["lr=0.2,0.5"], "seed": 3, "seeds": 2}


@pytest.mark.parametrize("kwargs, exc", [
    ({"set": {"lr": -1}}, robustlab.ConfigError),
    ({"set": {"bogus": 1}}, robustlab.ConfigError),
    ({"grid": {"lr": 0.5}}, robustlab.ConfigError),
    ({"preset": "nope"}, robustlab.UserError),
    ({"workers": 0}, robustlab.UserError),
    ({"device": "tpu"}, robustlab.UserError),
])
def test_python_run_bad_input_raises_before_writing(tmp_path, kwargs, exc):
    with pytest.raises(exc):
        robustlab.run("smoke", out=tmp_path / "r", quiet=True, **kwargs)
    assert not (tmp_path / "r").exists()
    with pytest.raises(robustlab.UserError):
        robustlab.run("no-such-study", out=tmp_path / "r")


def test_progress_shows_in_a_notebook_kernel(monkeypatch):
    from robustlab.sweep import progress

    assert progress.Progress(total=3).disabled == (not sys.stderr.isatty())  # no kernel here
    shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    fake_ipython = types.ModuleType("IPython")
    fake_ipython.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython)
    assert progress.in_notebook()
    bar = progress.Progress(total=3)
    assert not bar.disabled
    bar.advance(3)
    bar.__exit__(None, None, None)
    assert progress.Progress(total=3, quiet=True).disabled


# ----------------------------------------------------------------------------------------
# experiment files

EXP = """\
study = "smoke"
preset = "quick"
seed = 5
seeds = 2
out = "runs/exp"
threads = 1
[set]
epochs = 10
[grid]
lr = [0.25, 0.5]
"""


def test_run_config_file_and_rerun_byte_identical(tmp_path):
    (tmp_path / "exp.toml").write_text(EXP)
    r = cli("run", "--config", "exp.toml", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "runs" / "exp"  # relative to the file
    m = json.loads((out / "manifest.json").read_text())
    assert m["request"] == {"study": "smoke", "preset": "quick", "set": {"epochs": "10"},
                            "grid": ["lr=0.25,0.5"], "seed": 5, "seeds": 2}
    assert m["seeds"] == [5, 6] and m["n_points"] == 4 and m["threads"] == 1
    assert m["config_file"] == {"path": str((tmp_path / "exp.toml").resolve()), "text": EXP}
    # the same with flags gives the same bytes
    assert main(["run", "smoke", "--seed", "5", "--seeds", "2", "--set", "epochs=10", "--grid",
                 "lr=0.25,0.5", "--out", str(tmp_path / "flags"), "--quiet"]) == 0
    assert (out / "results.jsonl").read_bytes() == (tmp_path / "flags" / "results.jsonl").read_bytes()
    # rerun from the record alone: byte-identical results, also with a worker pool
    for i, workers in enumerate(("1", "2")):
        new = tmp_path / f"again{i}"
        r = cli("rerun", out, "--out", new, "--workers", workers, "--quiet")
        assert r.returncode == 0, r.stderr
        assert "byte-identical to the original" in r.stdout
        assert (new / "results.jsonl").read_bytes() == (out / "results.jsonl").read_bytes()
        assert (new / "claims.json").read_bytes() == (out / "claims.json").read_bytes()
        m2 = json.loads((new / "manifest.json").read_text())
        assert m2["rerun_of"] == str(out.resolve()) and m2["request"] == m["request"]
        assert m2["base_config"] == m["base_config"] and m2["point_keys"] == m["point_keys"]


def test_command_line_overrides_the_file(tmp_path):
    (tmp_path / "exp.toml").write_text(EXP)
    assert main(["run", "--config", str(tmp_path / "exp.toml"), "--seeds", "1", "--grid", "lr=0.3",
                 "--set", "epochs=8", "--out", str(tmp_path / "o"), "--quiet"]) == 0
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["seeds"] == [5] and m["base_config"]["epochs"] == 8
    assert m["request"]["grid"] == ["lr=0.3"] and m["n_points"] == 1


@pytest.mark.parametrize("text, expected", [
    ('study = "smoke"\nbogus = 1\n', "bogus=1 is not allowed: unknown key in exp.toml"),
    ('study = "smoke"\nseeds = "three"\n', "seeds='three' is not allowed: expected an integer >= 1"),
    ('study = "smoke"\nworkers = true\n', "workers=True is not allowed: expected an integer >= 1"),
    ('study = "smoke"\nset = 3\n', "set=3 is not allowed: expected a table"),
    ('study = "smoke"\n[set]\nlr = "abc"\n', "lr='abc' is not allowed: expected a number"),
    ('study = "smoke"\n[set]\nbogus = 1\n', "bogus='1' is not allowed: unknown key for study 'smoke'"),
    ('study = "smoke"\n[set]\nlr = {a = 1}\n', "set.lr={'a': 1} is not allowed"),
    ('study = "smoke"\n[grid]\nlr = 0.5\n', "grid.lr=0.5 is not allowed: expected a list"),
    ('study = "smoke"\nseed = -1\n', "seed=-1 is not allowed"),
    ('study = "smoke"\npreset = "nope"\n', "preset='nope' is not allowed"),
    ('study = smoke\n', "is not allowed: not valid TOML"),
    ('preset = "quick"\n', "study is required"),
])
def test_bad_config_file_one_line_exit_2_nothing_written(tmp_path, capsys, text, expected):
    (tmp_path / "exp.toml").write_text(text + 'out = "o"\n')
    code = main(["run", "--config", str(tmp_path / "exp.toml")])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("robustlab: error:"), err
    assert expected in lines[0], lines[0]
    assert not (tmp_path / "o").exists()


def test_bad_config_file_through_the_command_line(tmp_path):
    (tmp_path / "exp.toml").write_text('study = "smoke"\nworkers = "two"\nout = "o"\n')
    line = one_line_error(cli("run", "--config", "exp.toml", cwd=tmp_path))
    assert line == ("robustlab: error: workers='two' is not allowed: expected an integer >= 1 "
                    "(in exp.toml)")
    assert not (tmp_path / "o").exists()


def test_rerun_bad_input(tmp_path, capsys):
    assert "not a robustlab run directory" in one_line_error(cli("rerun", tmp_path))
    assert main(["run", "smoke", "--set", "epochs=3", "--seeds", "1", "--out", str(tmp_path / "a"),
                 "--quiet"]) == 0
    assert main(["rerun", str(tmp_path / "a"), "--out", str(tmp_path / "a")]) == 2
    assert "it is the run being re-run" in capsys.readouterr().err
    # a record the study's config no longer accepts cannot be re-executed exactly
    m = json.loads((tmp_path / "a" / "manifest.json").read_text())
    m["base_config"]["bogus"] = 1
    (tmp_path / "a" / "manifest.json").write_text(json.dumps(m))
    line = one_line_error(cli("rerun", tmp_path / "a", "--out", tmp_path / "b"))
    assert "no longer accepts the recorded run" in line and not (tmp_path / "b").exists()


@pytest.mark.slow
def test_rerun_of_a_real_study_is_byte_identical(tmp_path):
    """lazy-attack (quick preset, a reduced grid): rerun from the record alone, with a pool."""
    a = tmp_path / "a"
    assert main(["run", "lazy-attack", "--grid", "size=5,10", "--set", "m=64", "--seeds", "2",
                 "--out", str(a), "--quiet"]) == 0
    r = cli("rerun", a, "--out", tmp_path / "b", "--workers", "2", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "byte-identical to the original" in r.stdout
    assert (tmp_path / "b" / "results.jsonl").read_bytes() == (a / "results.jsonl").read_bytes()
    assert (tmp_path / "b" / "claims.json").read_bytes() == (a / "claims.json").read_bytes()


def test_an_interrupted_rerun_resumes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", "smoke", "--set", "epochs=3", "--grid", "lr=0.2,0.5", "--out", str(a), "--quiet"]) == 0
    assert main(["rerun", str(a), "--out", str(b), "--quiet"]) == 0
    from robustlab.sweep.store import Store

    with Store(b / "store.sqlite") as store:  # forget one point, as if the rerun had been killed
        store.conn.execute("DELETE FROM points WHERE key = (SELECT key FROM points LIMIT 1)")
    assert main(["rerun", str(a), "--out", str(b), "--quiet"]) == 0
    assert (b / "results.jsonl").read_bytes() == (a / "results.jsonl").read_bytes()
    assert json.loads((b / "manifest.json").read_text())["sweep"]["ran"] == 1


def test_claims_do_not_depend_on_the_order_points_finished_in(tmp_path):
    """Workers finish points in any order; the store keeps that order. The claims (sums over
    rows, whose last bits depend on the order) are computed in the plan's order: a store
    written back to front gives byte-identical results.jsonl and claims.json."""
    from robustlab.studies import get_study
    from robustlab.studies.base import finalize, load
    from robustlab.sweep.store import Store

    a = tmp_path / "a"
    assert main(["run", "lazy-attack", "--grid", "size=5,10", "--set", "m=64", "--seeds", "2",
                 "--workers", "1", "--out", str(a), "--quiet"]) == 0
    b = tmp_path / "b"
    b.mkdir()
    (b / "manifest.json").write_bytes((a / "manifest.json").read_bytes())
    with Store(a / "store.sqlite", readonly=True) as src:
        done = src.done()
    with Store(b / "store.sqlite") as dst:
        for rec in reversed(done):
            dst.record([{**rec, "status": "done"}])
    finalize(b, get_study("lazy-attack"))
    for name in ("results.jsonl", "claims.json"):
        assert (b / name).read_bytes() == (a / name).read_bytes(), name
    assert load(b).equals(load(a))


def test_rerun_names_a_different_cpu(tmp_path):
    """A run records its CPU and the instruction set of torch's kernels; a rerun on another
    CPU says so beside its byte comparison (there the last bits may differ)."""
    import torch

    a = tmp_path / "a"
    assert main(["run", "smoke", "--set", "epochs=3", "--seeds", "1", "--out", str(a), "--quiet"]) == 0
    m = json.loads((a / "manifest.json").read_text())
    host = m["host"]
    assert host["cpu"] and host["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    r = cli("rerun", a, "--out", tmp_path / "b", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "byte-identical to the original" in r.stdout and "note: recorded on" not in r.stdout
    m["host"] = {**host, "cpu": "Another CPU", "cpu_capability": "AVX2" if host["cpu_capability"] != "AVX2" else "AVX512"}
    (a / "manifest.json").write_text(json.dumps(m))
    r = cli("rerun", a, "--out", tmp_path / "c", "--quiet")
    assert r.returncode == 0, r.stderr
    note = [line for line in r.stdout.splitlines() if line.startswith("note: recorded on Another CPU")]
    assert len(note) == 1 and f"re-run on {host['cpu']} ({host['cpu_capability']} kernels)" in note[0]


def test_rerun_names_a_study_file_that_changed(tmp_path):
    """A run of a study file records the file's sha256; a rerun after the file was edited says
    so on its result line (and as a warning before it runs), whether or not the results moved."""
    f = tmp_path / "file_smoke.py"
    f.write_text("import dataclasses\nfrom robustlab.studies.smoke import STUDY as SMOKE\n\n"
                 "STUDY = dataclasses.replace(SMOKE, name='file-smoke')\n")
    a = tmp_path / "a"
    assert main(["run", str(f), "--set", "epochs=3", "--seeds", "1", "--out", str(a), "--quiet", "--workers", "1"]) == 0
    r = cli("rerun", a, "--out", tmp_path / "b", "--quiet", "--workers", "1")
    assert r.returncode == 0 and "byte-identical to the original" in r.stdout and "changed since" not in r.stdout + r.stderr
    f.write_text(f.read_text() + "# edited after the run\n")
    r = cli("rerun", a, "--out", tmp_path / "c", "--quiet", "--workers", "1")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("rerun of "))
    assert f"(the study file {f.resolve()} changed since the run (sha256 " in line
    assert "robustlab: warning: the study file" in r.stderr
    assert robustlab.api.study_file_change(json.loads((a / "manifest.json").read_text())).startswith("the study file")

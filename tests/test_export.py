"""`robustlab export DIR --format csv|parquet --out FILE`: results with their configs, the claims
beside them; an existing file refused without --force (one line, exit 2, nothing written)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import robustlab
from robustlab.cli import main
from robustlab.export import export

SRC = str(Path(robustlab.__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("r") / "smoke"
    assert main(["run", "smoke", "--set", "epochs=4", "--grid", "lr=0.2,0.5", "--out", str(out), "--quiet",
                 "--workers", "1"]) == 0
    return out


def test_csv_holds_results_with_configs_and_claims_beside(smoke_run, tmp_path):
    assert main(["export", str(smoke_run), "--out", str(tmp_path / "smoke.csv")]) == 0
    df = pd.read_csv(tmp_path / "smoke.csv")
    loaded = robustlab.load(smoke_run)
    assert len(df) == len(loaded) == 2 * 2 * 4  # lr × seeds × epochs
    assert list(df.columns[:2]) == ["study", "run"] and set(df["study"]) == {"smoke"}
    assert {"lr", "epochs", "seed", "point", "loss"} <= set(df.columns)
    assert df["loss"].tolist() == pytest.approx(loaded["loss"].tolist())
    claims = pd.read_csv(tmp_path / "smoke.claims.csv")
    assert list(claims["id"]) == ["smoke-accuracy", "smoke-loss-falls"] and "verdict" in claims


def test_parquet_round_trip(smoke_run, tmp_path):
    pytest.importorskip("pyarrow")
    export(smoke_run, tmp_path / "s.parquet", fmt="parquet")
    df = pd.read_parquet(tmp_path / "s.parquet")
    assert len(df) == 16 and df["loss"].tolist() == pytest.approx(robustlab.load(smoke_run)["loss"].tolist())
    assert list(pd.read_parquet(tmp_path / "s.claims.parquet")["id"]) == ["smoke-accuracy", "smoke-loss-falls"]


def test_parquet_without_pyarrow_is_one_clear_error(smoke_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(robustlab.UserError, match=r"pip install 'robustlab\[parquet\]'"):
        export(smoke_run, tmp_path / "s.parquet", fmt="parquet")
    assert not list(tmp_path.iterdir())


def test_reproduce_directory_exports_every_study(smoke_run, tmp_path):
    rep = tmp_path / "rep"
    rep.mkdir()
    shutil.copytree(smoke_run, rep / "smoke")
    (rep / "reproduce.json").write_text(json.dumps({"studies": ["smoke", "not-run"]}))
    export(rep, tmp_path / "all.csv")
    df = pd.read_csv(tmp_path / "all.csv")
    assert set(df["run"]) == {str(rep / "smoke")} and len(df) == 16


def test_existing_file_refused_without_force(smoke_run, tmp_path):
    target = tmp_path / "smoke.csv"
    target.write_text("mine\n")
    r = subprocess.run([sys.executable, "-m", "robustlab.cli", "export", str(smoke_run), "--out", str(target)],
                       capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "exists" in lines[0] and "--force" in lines[0], r.stderr
    assert target.read_text() == "mine\n" and not (tmp_path / "smoke.claims.csv").exists()
    # the claims file existing is refused too, and nothing is written
    target.unlink()
    (tmp_path / "smoke.claims.csv").write_text("mine\n")
    assert main(["export", str(smoke_run), "--out", str(target)]) == 2
    assert not target.exists()
    assert main(["export", str(smoke_run), "--out", str(target), "--force"]) == 0
    assert len(pd.read_csv(target)) == 16


@pytest.mark.parametrize("args, expected", [
    (["--format", "xlsx"], "--format 'xlsx' is not allowed"),
    (["--out", "/no/such/dir/x.csv"], "no such directory"),
])
def test_bad_export_arguments(smoke_run, tmp_path, args, expected, capsys):
    argv = ["export", str(smoke_run), "--out", str(tmp_path / "x.csv"), *args]
    assert main(argv) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
    assert main(["export", str(tmp_path / "nothing"), "--out", str(tmp_path / "y.csv")]) == 2


def test_the_example_notebook_is_clean_and_runs_what_it_says():
    """The notebook CI executes (.ci/run): stored without outputs; it runs a study, reads it as
    DataFrames, plots, evaluates a model and exports."""
    nb = json.loads((Path(SRC).parent / "examples" / "notebook.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")
    for needed in ("robustlab.run(", "run.results", "robustlab.runs(", "robustlab.compare(", "robustlab.evaluate(",
                   "ev.figure(", "export("):
        assert needed in code, needed


def test_several_runs_export_into_one_table(smoke_run, tmp_path):
    """Two runs (the same study at other settings here; any studies do) in one CSV: their rows
    one after the other, each with its run; the claims of both beside."""
    other = tmp_path / "other"
    assert main(["run", "smoke", "--set", "epochs=3", "--out", str(other), "--quiet", "--workers", "1"]) == 0
    assert main(["export", str(smoke_run), str(other), "--out", str(tmp_path / "both.csv")]) == 0
    df = pd.read_csv(tmp_path / "both.csv")
    n_other = len(robustlab.load(other))
    assert len(df) == 16 + n_other and list(dict.fromkeys(df["run"])) == [str(smoke_run), str(other)]
    assert sorted(set(df["epochs"])) == [3, 4]
    claims = pd.read_csv(tmp_path / "both.claims.csv")
    assert list(claims["run"].value_counts().sort_index()) == [2, 2]
    pytest.importorskip("pyarrow")
    export([smoke_run, other], tmp_path / "both.parquet", fmt="parquet")
    assert len(pd.read_parquet(tmp_path / "both.parquet")) == len(df)


class _FakeMlflow:
    """Records what export_mlflow asks of MLflow (the real one may be absent)."""

    def __init__(self):
        self.calls, self.runs = [], []

    def __getattr__(self, name):
        return lambda *a, **k: self.calls.append((name, a, k))

    def start_run(self, run_name=None):
        import contextlib
        import types

        fake = self
        run = {"name": run_name, "params": {}, "metrics": {}, "tags": {}, "artifacts": []}
        self.runs.append(run)
        fake.log_params = lambda p: run["params"].update(p)
        fake.log_metrics = lambda m: run["metrics"].update(m)
        fake.set_tags = lambda t: run["tags"].update(t)
        fake.log_artifact = lambda path: run["artifacts"].append(Path(path).name)
        return contextlib.nullcontext(types.SimpleNamespace(info=types.SimpleNamespace(run_id=f"id{len(self.runs)}")))


def test_mlflow_export_logs_params_claim_metrics_and_the_report(smoke_run, monkeypatch):
    from robustlab.export import export_mlflow

    fake = _FakeMlflow()
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    assert export_mlflow([smoke_run], tracking_uri="file:///tmp/x") == ["id1"]
    (run,) = fake.runs
    assert ("set_tracking_uri", ("file:///tmp/x",), {}) in fake.calls
    assert run["params"]["study"] == "smoke" and run["params"]["config.epochs"] == "4"
    claims = robustlab.api.Run(smoke_run).claims.set_index("id")
    for cid, c in claims.iterrows():
        assert run["metrics"][f"{cid}.effect"] == pytest.approx(c["effect"])
        assert run["tags"][f"claim.{cid}.verdict"] == c["verdict"]
    assert run["artifacts"] == ["report.html", "claims.json", "manifest.json"]


def test_mlflow_export_without_mlflow_is_one_line(smoke_run, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    assert main(["export", str(smoke_run), "--format", "mlflow", "--out", str(tmp_path / "mlruns")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'robustlab[mlflow]'" in err


def test_mlflow_export_into_a_real_tracking_folder(smoke_run, tmp_path):
    mlflow = pytest.importorskip("mlflow")
    from robustlab.export import export_mlflow

    (rid,) = export_mlflow(smoke_run, tracking_uri=(tmp_path / "mlruns").as_uri())
    got = mlflow.get_run(rid)
    assert got.data.params["study"] == "smoke" and "smoke-loss-falls.effect" in got.data.metrics

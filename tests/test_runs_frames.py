"""Looking across runs from Python: `robustlab.runs`, `robustlab.compare`, `Run.claims` as
DataFrames; `robustlab compare` names the configuration differences; HTML reprs escape."""

import json
from pathlib import Path

import pandas as pd
import pytest

import robustlab
from robustlab.api import Run
from robustlab.cli import main


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    assert main(["run", "smoke", "--set", "epochs=6", "--out", str(root / "a"), "--quiet", "--workers", "1"]) == 0
    assert main(["run", "smoke", "--set", "epochs=10", "--grid", "lr=0.5,1.0", "--seed", "3", "--out",
                 str(root / "b"), "--quiet", "--workers", "1"]) == 0
    return root


def test_compare_names_what_differs_in_the_configs(two_runs, capsys):
    assert main(["compare", str(two_runs / "a"), str(two_runs / "b")]) == 0
    out = capsys.readouterr().out
    assert "differs: base_config.epochs: A 6 | B 10" in out
    assert 'differs: grid: A [{"lr": [0.5]}] | B [{"lr": [0.5, 1.0]}]' in out
    assert "differs: seeds: A 0,1 | B 3,4" in out
    assert "configuration differences" in out.splitlines()[-1]
    # the same run against itself: nothing differs
    assert main(["compare", str(two_runs / "a"), str(two_runs / "a")]) == 0
    out = capsys.readouterr().out
    assert "configuration: the same" in out and "differs:" not in out


def test_compare_from_python_returns_dataframes(two_runs):
    c = robustlab.compare(two_runs / "a", two_runs / "b")
    assert isinstance(c.config, pd.DataFrame) and isinstance(c.claims, pd.DataFrame)
    assert set(c.config["field"]) >= {"base_config.epochs", "grid", "seeds"}
    row = c.config.set_index("field").loc["base_config.epochs"]
    assert (row["a"], row["b"]) == ("6", "10")
    assert list(c.claims["claim"]) == ["smoke-accuracy", "smoke-loss-falls"]
    assert set(c.claims.columns) >= {"verdict_a", "verdict_b", "effect_a", "effect_b", "changed", "apart"}
    assert "base_config.epochs" in c._repr_html_()


def test_runs_lists_every_run_with_its_tally(two_runs):
    df = robustlab.runs(two_runs)
    assert list(df["study"]) == ["smoke", "smoke"] and list(df["path"]) == [str(two_runs / "a"), str(two_runs / "b")]
    assert list(df["n_points"]) == [2, 4]
    tally = df[["reproduced", "contradicted", "inconclusive", "not_applicable"]].sum(axis=1)
    assert list(tally) == [0, 0] and list(df["self_checks"]) == [1, 1]  # smoke: one self-check, one exploratory reading
    assert list(df["exploratory"]) == [1, 1] and df["exploratory_reproduced"].between(0, 1).all()
    assert list(df["self_checks_failed"]) == [0, 0]
    assert (df["seconds"] >= 0).all()
    with pytest.raises(robustlab.UserError):
        robustlab.runs(two_runs / "absent")


def test_runs_is_a_typed_table(two_runs):
    """Config fields as their own typed columns, seeds as ints, times as datetimes."""
    df = robustlab.runs(two_runs)
    assert list(df["set.epochs"]) == [6, 10] and pd.api.types.is_integer_dtype(df["set.epochs"])
    assert list(df["grid.lr"]) == [[0.5], [0.5, 1.0]]  # the resolved grid (the preset sweeps lr too)
    assert [list(s) for s in df["seeds"]] == [[0, 1], [3, 4]]
    assert all(isinstance(x, int) for s in df["seeds"] for x in s)
    for col in ("started", "finished"):
        assert isinstance(df[col].dtype, pd.DatetimeTZDtype) and str(df[col].dt.tz) == "UTC"
    assert (df["finished"] >= df["started"]).all()
    assert df["rerun_of"].isna().all()
    for col in ("n_points", "reproduced", "exploratory", "self_checks"):
        assert pd.api.types.is_integer_dtype(df[col]), col


def test_a_rerun_is_marked_with_its_source(two_runs, tmp_path):
    again = robustlab.rerun(two_runs / "a", out=tmp_path / "again", quiet=True, workers=1)
    df = robustlab.runs(tmp_path)
    assert list(df["rerun_of"]) == [str((two_runs / "a").resolve())] and df["path"].iloc[0] == str(again.out)


def test_compare_claims_split_the_interval_as_run_claims_does(two_runs):
    c = robustlab.compare(two_runs / "a", two_runs / "b").claims
    run = Run(two_runs / "a").claims.set_index("id")
    assert "interval_a" not in c.columns and {"interval_lo_a", "interval_hi_a", "interval_lo_b", "interval_hi_b"} <= set(c.columns)
    for _, row in c.iterrows():
        assert row["interval_lo_a"] == pytest.approx(run.loc[row["claim"], "interval_lo"])
        assert row["interval_hi_a"] == pytest.approx(run.loc[row["claim"], "interval_hi"])
        assert row["kind_a"] == run.loc[row["claim"], "kind"]
    assert pd.api.types.is_float_dtype(c["interval_lo_b"])


def test_run_claims_is_a_dataframe(two_runs):
    run = Run(two_runs / "a")
    df = run.claims
    assert isinstance(df, pd.DataFrame) and list(df["id"]) == ["smoke-accuracy", "smoke-loss-falls"]
    assert {"verdict", "effect", "interval_lo", "interval_hi", "control_verdict", "excluded"} <= set(df.columns)
    assert run.claim_dicts[0]["id"] == "smoke-accuracy"


def test_html_reprs_escape(tmp_path, two_runs):
    evil = '<script>alert("x")</script>'
    d = tmp_path / "evil"
    d.mkdir()
    claims = json.loads((two_runs / "a" / "claims.json").read_text())
    claims[0]["statement"] = evil
    claims[0]["id"] = evil
    (d / "claims.json").write_text(json.dumps(claims))
    (d / "manifest.json").write_text((two_runs / "a" / "manifest.json").read_text())
    for html in (Run(d)._repr_html_(), robustlab.compare(d, d)._repr_html_()):
        assert "<script>" not in html and "&lt;script&gt;" in html
    ev = robustlab.Evaluation(pd.DataFrame([{"attack": evil}]), pd.DataFrame(), threat="linf", attacks=[])
    assert "<script>" not in ev._repr_html_()


def test_compare_of_fake_runs_without_manifests_details(tmp_path):
    """Old manifests (no base_config, grid, code): only what they record is compared."""
    for name, seeds in (("a", [0, 1]), ("b", [0, 1])):
        p = tmp_path / name
        p.mkdir()
        (p / "manifest.json").write_text(json.dumps({"study": "s", "seeds": seeds}))
        (p / "claims.json").write_text(json.dumps([{"id": "x", "verdict": "reproduced", "statement": "x"}]))
    c = robustlab.compare(tmp_path / "a", tmp_path / "b")
    assert c.config.empty and list(c.claims["changed"]) == [False]
    assert Path(tmp_path / "a").is_dir()

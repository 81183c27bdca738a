"""The worked example, examples/linear-margin: an external study installed as its own package
(entry point ``linear-margin`` in the group ``robustlab.studies``). CI installs it (.ci/run);
without it these tests skip."""

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import robustlab

pytestmark = [
    pytest.mark.example,
    pytest.mark.skipif(not any(ep.name == "linear-margin" for ep in entry_points(group="robustlab.studies")),
                       reason="examples/linear-margin is not installed (pip install -e examples/linear-margin)"),
]

SRC = str(Path(robustlab.__file__).resolve().parents[1])
SMALL = ["--set", "epochs=5", "--grid", "size=7,14", "--seeds", "2"]  # a few seconds


def test_run_through_the_command_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC}
    r = subprocess.run([sys.executable, "-m", "robustlab.cli", "list"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0 and "[package robustlab-linear-margin" in r.stdout
    r = subprocess.run([sys.executable, "-m", "robustlab.cli", "run", "linear-margin", *SMALL, "--quiet",
                        "--out", str(tmp_path / "r")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert m["study_origin"]["package"] == "robustlab-linear-margin"
    claims = {c["id"]: c for c in json.loads((tmp_path / "r" / "claims.json").read_text())}
    # the two identities hold on any run; the dimension claim is a measurement (any verdict)
    assert claims["fgsm-drop-is-eps-l1"]["verdict"] == "reproduced"
    assert claims["robust-accuracy-closed-form"]["verdict"] == "reproduced"
    assert claims["critical-budget-falls-with-d"]["verdict"] in ("reproduced", "contradicted", "inconclusive")
    assert (tmp_path / "r" / "figures" / "robust_accuracy.png").is_file()


def test_run_through_python_and_claims_can_fail(tmp_path):
    run = robustlab.run("linear-margin", set={"epochs": 5}, grid={"size": [7, 14]}, seeds=2,
                        out=tmp_path / "r", quiet=True)
    df = run.results
    assert set(df["d"]) == {49, 196} and set(df["seed"]) == {0, 1}
    # robust accuracy read off the margins equals what the attacks reach, at every ε
    assert (df["pgd_acc"] == df["closed_form_acc"]).all() and (df["fgsm_acc"] == df["closed_form_acc"]).all()
    assert (df.groupby(["seed", "d"])["closed_form_acc"].apply(lambda s: s.is_monotonic_decreasing)).all()
    from robustlab_linear_margin.study import claims

    bad = df.copy()
    bad.loc[bad["eps"] > 0, "drop_rel_dev"] = 1e-3  # a drop 0.1 % off ε‖w‖₁
    bad["pgd_acc"] = bad["closed_form_acc"] + 2 / bad["n_test"]  # PGD misses two points
    bad["eps50"] = bad["eps50"] * bad["d"]  # ε₅₀ growing with d
    verdicts = {c.id: c.verdict.verdict for c in claims(bad, None)}
    assert verdicts == {"fgsm-drop-is-eps-l1": "contradicted", "robust-accuracy-closed-form": "contradicted",
                        "critical-budget-falls-with-d": "contradicted"}, verdicts

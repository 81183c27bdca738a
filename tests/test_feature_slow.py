"""End-to-end runs of Study A (slow: run with ``pytest -m slow``)."""

import json

import pytest

from robustlab.studies.base import execute, plan
from robustlab.studies.feature_learning import STUDY
from robustlab.sweep.runner import SweepOptions

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]

TINY = {"P": "16", "d": "16", "n_train": "24", "n_test": "32", "m": "2", "steps": "30", "probe_every": "5",
        "eval_every": "15", "eval_pgd_steps": "2", "epochs": "1", "max_train": "200", "max_test": "100",
        "image_pgd_steps": "1", "ilyas_steps": "2", "pgd_steps": "2"}


def test_tiny_run_writes_claims_figures_and_report(tmp_path):
    p = plan(STUDY, preset="quick", sets=TINY, n_seeds=2)
    summary = execute(p, tmp_path / "run", SweepOptions(quiet=True))
    assert not summary["failures"] and not summary["problems"]
    claims = json.loads((tmp_path / "run" / "claims.json").read_text())
    assert [c["id"].split("-")[0] for c in claims] == ["A1", "A2a", "A2b", "A2c", "A2d", "A2e", "A3a", "A3b",
                                                        "A4", "A5", "A6"]
    # the one-step path at ε = 1e-4 … 1e-2 converges to the standard run of the same seed
    assert claims[8]["kind"] == "self-check" and claims[8]["evidence"]["monotone"]
    figs = sorted(f.name for f in (tmp_path / "run" / "figures").iterdir())
    assert figs == ["ab_dynamics.png", "accuracy.png", "clipped_fraction.png", "crossing_eta.png",
                    "eps_spectrum.png", "every_patch.png", "extensions.png", "images.png"]
    assert (tmp_path / "run" / "report.html").stat().st_size > 1000


def test_quick_preset_measurements(tmp_path):
    """What the quick preset measures at base seed 0 (issue 13's report; 3 seeds are too few for
    A2a, A2b, A2d, A3 and A6 to be decided: those are checked on their effects, not verdicts)."""
    summary = execute(plan(STUDY, preset="quick"), tmp_path / "run", SweepOptions(quiet=True))
    c = {x["id"].split("-")[0]: x for x in summary["claims"]}
    assert c["A1"]["verdict"] == "reproduced" and c["A1"]["evidence"]["B_over_A"] > 10
    # the max over neurons says A overtakes B; the four parts say the models use v (issue 33)
    assert c["A2a"]["verdict"] == "contradicted" and c["A2a"]["evidence"]["A_minus_B_max_over_neurons"]["effect"] > 0
    assert c["A2a"]["evidence"]["span_v_accuracy"]["mean"] < 0.5 and c["A2b"]["effect"] >= 0.9
    assert c["A2a"]["control"]["verdict"] == "contradicted"
    # the PGD obstruction at Assumption-2.3 scales: a disagreement with the paper
    assert c["A2c"]["verdict"] == "contradicted" and c["A2c"]["effect"] < 0.1
    assert c["A2d"]["effect"] >= 0.9
    assert c["A3a"]["evidence"]["regime_counts"]["inactive"] == 9  # η̃ = 0.5, 1.5, 5: the attack never bites
    assert c["A3b"]["verdict"] == "not applicable"  # no run saturates before its crossing
    assert c["A4"]["verdict"] == "reproduced" and c["A5"]["kind"] == "exploratory"

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
    assert [c["id"][:2] for c in claims] == ["A1", "A2", "A3", "A4", "A5", "A6"]
    # the eps = 0 run and the standard run share every other setting: exact reproduction
    assert claims[3]["passed"] and claims[3]["evidence"]["max_abs_diff"] == 0.0
    figs = sorted(f.name for f in (tmp_path / "run" / "figures").iterdir())
    assert figs == ["ab_dynamics.png", "accuracy.png", "crossing_eta.png", "eps_spectrum.png",
                    "extensions.png", "images.png"]
    assert (tmp_path / "run" / "report.html").stat().st_size > 1000


def test_quick_preset_measurements(tmp_path):
    """What the quick preset measures (documented in the study's docstring and the report)."""
    summary = execute(plan(STUDY, preset="quick"), tmp_path / "run", SweepOptions(quiet=True))
    c = {x["id"][:2]: x for x in summary["claims"]}
    assert c["A1"]["passed"] and c["A1"]["evidence"]["B_over_A"] > 10
    ev = c["A2"]["evidence"]
    assert ev["A_mean"] > ev["B_mean"] and ev["feature_attack_acc"] >= 0.9
    assert ev["pgd_acc"] < 0.1  # the PGD obstruction at Assumption-2.3 scales (see the docstring)
    assert c["A3"]["evidence"]["two_phases_in_every_run"]
    assert c["A4"]["passed"] and c["A5"]["passed"] and c["A6"]["passed"]

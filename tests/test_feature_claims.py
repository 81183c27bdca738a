"""Study A's claims (each fed results where it must pass and where it must fail), its config
validation and its presets."""

import math

import pandas as pd
import pytest

from robustlab.cli import main
from robustlab.config import ConfigError
from robustlab.studies import get_study
from robustlab.studies.base import plan
from robustlab.studies.feature_learning import (
    STUDY,
    FeatureLearningConfig,
    _claim_adversarial,
    _claim_eps_spectrum,
    _claim_eps_zero,
    _claim_images,
    _claim_standard,
    _claim_two_phases,
    claims,
    run_points,
)

BASE = FeatureLearningConfig().to_dict()


def rows(kind, seed=0, **fields):
    """One result row as the store's DataFrame holds it: config params + row fields + point."""
    params = {**BASE, "seed": seed}
    for k in list(fields):
        if k in params:
            params[k] = fields.pop(k)
    point = "|".join(f"{k}={params[k]}" for k in ("experiment", "method", "eps", "eta_tilde", "dataset", "seed"))
    return {**params, "kind": kind, **fields, "point": point}


def final(**kw):
    base = dict(A=0.5, B=0.5, A_minus_B=0.0, clean_acc=1.0, feature_acc=0.5, pgd_acc=0.0, cross_step=None,
                b_peak_step=10, chance=0.5, step=200, loss=0.1)
    base.update(kw)
    if "A_minus_B" not in kw:
        base["A_minus_B"] = base["A"] - base["B"]
    return rows("final", **base)


def df_of(items):
    return pd.DataFrame(items)


# -- claim 1 -------------------------------------------------------------------------------

def std_final(seed=0, **kw):
    return final(experiment="main", method="standard", seed=seed, **{"A": 0.05, "B": 2.0, "feature_acc": 0.5, **kw})


def test_claim1_passes_on_a_nonrobust_standard_model():
    c = _claim_standard(df_of([std_final(s) for s in range(3)]))
    assert c.passed and c.evidence["B_over_A"] == pytest.approx(40.0)


@pytest.mark.parametrize("kw", [{"B": 0.08}, {"clean_acc": 0.9}, {"feature_acc": 0.7}])
def test_claim1_fails(kw):
    assert not _claim_standard(df_of([std_final(s, **kw) for s in range(3)])).passed


def test_claim1_fails_without_results():
    c = _claim_standard(df_of([final(experiment="main", method="gradient_step")]))
    assert not c.passed and "missing" in c.evidence


# -- claim 2 -------------------------------------------------------------------------------

def adv_final(seed=0, **kw):
    return final(experiment="main", method="gradient_step", seed=seed,
                 **{"A": 1.0, "B": 0.2, "feature_acc": 0.95, "pgd_acc": 0.95, **kw})


def test_claim2_passes_and_fails():
    assert _claim_adversarial(df_of([adv_final(s) for s in range(3)])).passed
    assert not _claim_adversarial(df_of([adv_final(s, pgd_acc=0.0) for s in range(3)])).passed
    assert not _claim_adversarial(df_of([adv_final(s, feature_acc=0.85) for s in range(3)])).passed
    assert not _claim_adversarial(df_of([adv_final(s, A=0.1) for s in range(3)])).passed


# -- claim 3 -------------------------------------------------------------------------------

def eta_rows(law, missing=False):
    out = []
    for eta in (15.0, 30.0, 60.0, 120.0):
        for s in range(3):
            cross = None if (missing and eta == 120.0 and s == 0) else law(eta) * (1 + 0.03 * (s - 1))
            out.append(final(experiment="main" if eta == 15.0 else "eta", method="gradient_step",
                             eta_tilde=eta, seed=s, cross_step=cross, b_peak_step=int(law(eta) / 3)))
    return df_of(out)


def test_claim3_passes_for_inverse_eta_law():
    c = _claim_two_phases(eta_rows(lambda eta: 3000.0 / eta))
    assert c.passed and c.evidence["slope"] == pytest.approx(-1.0, abs=0.05)
    lo, hi = c.evidence["slope_ci95"]
    assert lo < -1.0 < hi


def test_claim3_fails_for_growing_crossing_time_or_a_missing_crossing():
    c = _claim_two_phases(eta_rows(lambda eta: 5.0 * eta))
    assert not c.passed and c.evidence["slope"] == pytest.approx(1.0, abs=0.05)
    c = _claim_two_phases(eta_rows(lambda eta: 3000.0 / eta, missing=True))
    assert not c.passed and not c.evidence["two_phases_in_every_run"]


# -- claim 4 -------------------------------------------------------------------------------

def probe_rows(method, eps, experiment, shift=0.0):
    out = []
    for s in range(2):
        for t in range(0, 20, 5):
            out.append(rows("probe", seed=s, method=method, eps=eps, experiment=experiment, step=t,
                            A=0.1 * t + s + (shift if t == 15 else 0.0), B=0.2 * t, loss=1.0 / (t + 1)))
    return out


def test_claim4_compares_matching_runs():
    ok = _claim_eps_zero(df_of(probe_rows("standard", 0.4, "main") + probe_rows("gradient_step", 0.0, "eps")))
    assert ok.passed and ok.evidence["probes_compared"] == 8
    bad = _claim_eps_zero(df_of(probe_rows("standard", 0.4, "main") + probe_rows("gradient_step", 0.0, "eps", 1e-3)))
    assert not bad.passed and bad.evidence["max_abs_diff"] == pytest.approx(1e-3)
    assert not _claim_eps_zero(df_of(probe_rows("gradient_step", 0.0, "eps"))).passed


def test_claim4_ignores_standard_runs_with_other_settings():
    std = [dict(r, d=32) for r in probe_rows("standard", 0.4, "main")]
    c = _claim_eps_zero(df_of(std + probe_rows("gradient_step", 0.0, "eps")))
    assert not c.passed and "missing" in c.evidence


@pytest.mark.filterwarnings("ignore::robustlab.data.patches.AssumptionWarning")
def test_claim4_real_runs_reproduce_exactly():
    tiny = dict(P=12, d=8, n_train=16, n_test=16, m=2, steps=12, probe_every=3, eval_every=6, eval_pgd_steps=1)
    std = [FeatureLearningConfig(seed=s, experiment="main", method="standard", **tiny) for s in (0, 1)]
    adv = [FeatureLearningConfig(seed=s, experiment="eps", method="gradient_step", eps=0.0, **tiny) for s in (0, 1)]
    items = []
    for cfgs in (std, adv):
        for cfg, out in zip(cfgs, run_points(cfgs, "cpu")):
            items += [{**cfg.to_dict(), **r, "point": f"{cfg.experiment}-{cfg.seed}"} for r in out]
    c = _claim_eps_zero(df_of(items))
    assert c.passed and c.evidence["max_abs_diff"] == 0.0 and c.evidence["probes_compared"] == 2 * 5


# -- claim 5 -------------------------------------------------------------------------------

def eps_rows(values):
    out = []
    for eps, amb in values:
        for s in range(3):
            out.append(final(experiment="eps" if eps != 0.4 else "main", method="gradient_step", eps=eps, seed=s,
                             A=0.5 + amb + 0.01 * (s - 1), B=0.5))
    return df_of(out)


def test_claim5_increasing_spectrum_passes_and_reports_the_sign_change():
    c = _claim_eps_spectrum(eps_rows([(0.0, -2.0), (0.2, -1.0), (0.4, 0.5), (0.5, 0.6), (0.7, 0.4)]))
    assert c.passed
    assert c.evidence["sign_change_eps"] == pytest.approx(0.2 + 0.2 * 1.0 / 1.5)
    assert c.evidence["eps_max"] == 0.5  # 0.7 > alpha/2 is shown but not judged


def test_claim5_fails_when_a_step_drops():
    assert not _claim_eps_spectrum(eps_rows([(0.0, -2.0), (0.2, 0.5), (0.4, -1.0), (0.5, 0.6)])).passed
    assert not _claim_eps_spectrum(eps_rows([(0.0, 0.5), (0.2, 0.5)])).passed  # too few values


# -- claim 6 -------------------------------------------------------------------------------

def image_rows(std_rob, adv_rob, ilyas=True):
    out = []
    for ds in ("digits", "mnist5k"):
        for s in range(2):
            for method, rob in (("standard", std_rob), ("pgd", adv_rob)):
                out.append(rows("image_final", seed=s, experiment="images", dataset=ds, method=method,
                                clean_acc=0.9, robust_acc=rob, n_test=300, chance=0.1))
            if ilyas:
                out.append(rows("ilyas", seed=s, experiment="images", dataset=ds, method="standard",
                                ilyas_acc=0.35, attack_success=0.5, chance=0.1, n_test=300))
    return df_of(out)


def test_claim6_passes_and_fails():
    c = _claim_images(image_rows(0.2, 0.6))
    assert c.passed and c.evidence["digits"]["ilyas"]["above_chance"]
    assert c.evidence["digits"]["ilyas"]["wilson95_low"] > 0.1
    assert not _claim_images(image_rows(0.6, 0.2)).passed
    assert not _claim_images(image_rows(0.2, 0.6, ilyas=False)).passed


def test_all_claims_on_empty_results_fail_not_crash():
    out = claims(df_of([rows("timing", seconds=1.0)]), None)
    assert len(out) == 6 and not any(c.passed for c in out)
    assert all(isinstance(c.evidence, dict) for c in out)


# -- config and presets ---------------------------------------------------------------------

@pytest.mark.parametrize("kw, field", [
    ({"k": 1}, "k"), ({"k": 40}, "d"), ({"n_robust": 0}, "n_robust"), ({"P": 2, "n_robust": 3}, "P"),
    ({"q": 0.5}, "q"), ({"rho": 0.0}, "rho"), ({"rho": -1.0}, "rho"), ({"eps": -0.1}, "eps"),
    ({"eta_tilde": -1.0}, "eta_tilde"), ({"sigma0": -0.01}, "sigma0"),
    ({"experiment": "images", "method": "fgsm"}, "method"),
    ({"experiment": "images", "method": "standard", "dataset": "cifar10"}, "data_dir"),
])
def test_bad_config(kw, field):
    with pytest.raises(ConfigError) as e:
        FeatureLearningConfig(**kw)
    assert e.value.field == field


@pytest.mark.parametrize("setting", ["k=1", "d=3", "n_robust=0", "P=0", "q=0.5", "rho=0", "eps=-1",
                                     "eta_tilde=-2", "sigma0=-1"])
def test_cli_bad_input_one_line_exit_2(tmp_path, capsys, setting):
    out = tmp_path / "run"
    code = main(["run", "feature-learning", "--set", setting, "--out", str(out)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("robustlab: error:")
    assert not out.exists()


def test_presets_plan_and_defaults_satisfy_assumption_2_3():
    assert get_study("feature-learning") is STUDY
    quick = plan(STUDY, preset="quick")
    assert len(quick.points) == 24 * 3
    assert {p.experiment for p in quick.points} == {"main", "eta", "eps", "activation", "attack", "basis",
                                                    "overlap", "images"}
    assert len(plan(STUDY, preset="paper").points) > len(quick.points)
    from robustlab.data.patches import assumption_report

    base = FeatureLearningConfig()
    rep = assumption_report(base.patch_spec(), q=base.q, eps=base.eps)
    assert rep["holds"], rep["violations"]
    assert math.isclose(base.eps, base.beta)  # the theory's attack erases v_y exactly

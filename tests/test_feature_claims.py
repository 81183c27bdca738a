"""Study A's claims (each fed results where it must pass and where it must fail), its config
validation and its presets."""

import dataclasses
import math

import pandas as pd
import pytest
import torch

from robustlab import stats
from robustlab.attacks.every_patch import every_patch, every_patch_bound
from robustlab.cli import main
from robustlab.config import ConfigError
from robustlab.models.patch_cnn import PatchCNN, smoothed_relu
from robustlab.studies import get_study
from robustlab.studies.base import plan
from robustlab.studies.feature_learning import STUDY, FeatureLearningConfig, run_points
from robustlab.studies.feature_learning.claims import (
    DIVERGED,
    _claim_adv_feature_attack,
    _claim_adv_overtakes,
    _claim_adv_pgd,
    _claim_eps_spectrum,
    _claim_eps_zero,
    _claim_every_patch,
    _claim_images,
    _claim_standard,
    _claim_two_phases,
    claims,
)
from robustlab.studies.feature_learning.presets import (
    QUICK_ETA_ACTIVE,
    QUICK_ETA_ACTIVE_SEEDS,
    QUICK_IMAGE_SEEDS,
    QUICK_MAIN_SEEDS,
    QUICK_STEPS,
)

BASE = FeatureLearningConfig().to_dict()
R, C, I, NA = stats.REPRODUCED, stats.CONTRADICTED, stats.INCONCLUSIVE, stats.NOT_APPLICABLE
VIOLATED = "non-robust not denser: sum beta^q / sum alpha^q = 0.1 < 2"


def rows(kind, seed=0, **fields):
    """One result row as the store's DataFrame holds it: config params + row fields + point."""
    params = {**BASE, "seed": seed}
    for k in list(fields):
        if k in params:
            params[k] = fields.pop(k)
    point = "|".join(f"{k}={params[k]}" for k in ("experiment", "method", "eps", "eta_tilde", "dataset", "seed", "P"))
    return {**params, "kind": kind, **fields, "point": point}


def final(**kw):
    base = dict(A=0.5, B=0.5, A_minus_B=0.0, clean_acc=1.0, feature_acc=0.5, pgd_acc=0.0, cross_step=None,
                b_peak_step=10, chance=0.5, step=200, loss=0.1, assume_violations="")
    base.update(kw)
    if "A_minus_B" not in kw:
        base["A_minus_B"] = base["A"] - base["B"]
    return rows("final", **base)


def df_of(items):
    return pd.DataFrame(items)


def spread(s, scale=0.01):
    return scale * (s - 1)  # a little seed-to-seed spread (sd = scale over 3 seeds)


# -- claim 1 -------------------------------------------------------------------------------

def std_final(seed=0, **kw):
    return final(experiment="main", method="standard", seed=seed,
                 **{"A": 0.05, "B": 2.0 + spread(seed, 0.1), "feature_acc": 0.5 + spread(seed), **kw})


def test_claim1_reproduced_on_a_nonrobust_standard_model():
    c = _claim_standard(df_of([std_final(s) for s in range(3)]))
    assert c.decision.verdict == R and c.evidence["B_over_A"] == pytest.approx(40.0)


@pytest.mark.parametrize("kw", [{"B": 0.05}, {"clean_acc": 0.5}, {"feature_acc": 0.9}])
def test_claim1_contradicted(kw):
    c = _claim_standard(df_of([std_final(s, **kw) for s in range(3)]))
    assert c.decision.verdict == C


def test_claim1_inconclusive_on_the_edge_and_not_applicable_when_the_assumption_fails():
    edge = [std_final(s, B=0.1 + 0.05 * (s - 1)) for s in range(3)]  # B − 2A straddles 0
    c = _claim_standard(df_of(edge))
    assert c.decision.verdict == I and c.decision.seeds_needed is None or c.decision.seeds_needed > 3
    bad = _claim_standard(df_of([std_final(s, assume_violations=VIOLATED) for s in range(3)]))
    assert bad.decision.verdict == NA and "Assumption 2.3" in bad.decision.reason


def test_claim1_not_applicable_without_results():
    c = _claim_standard(df_of([final(experiment="main", method="gradient_step")]))
    assert c.decision.verdict == NA and "missing" in c.evidence and "not measured" in c.decision.reason


# -- claim 2 (a, b, c) and the counter-experiment (d) ------------------------------------------

def adv_final(seed=0, **kw):
    return final(experiment="main", method="gradient_step", seed=seed,
                 **{"A": 1.0 + spread(seed), "B": 0.2, "feature_acc": 0.95 + spread(seed),
                    "pgd_acc": 0.95 + spread(seed), "threat_linf_all": 0.5, "every_patch_bound": 0.07, **kw})


@pytest.mark.parametrize("fn, key, good, bad", [
    (_claim_adv_overtakes, "A", 1.0, 0.1),
    (_claim_adv_feature_attack, "feature_acc", 0.95, 0.6),
    (_claim_adv_pgd, "pgd_acc", 0.95, 0.0),
])
def test_claim2_parts_each_reach_each_verdict(fn, key, good, bad):
    def df(value, **kw):
        return df_of([adv_final(s, **{key: value + spread(s), **kw}) for s in range(3)])
    assert fn(df(good)).decision.verdict == R
    assert fn(df(bad)).decision.verdict == C
    edge = {"A": 0.2, "feature_acc": 0.9, "pgd_acc": 0.9}[key]
    assert fn(df(edge)).decision.verdict == I
    assert fn(df(good, assume_violations=VIOLATED)).decision.verdict == NA


def test_claim2c_names_the_disagreement():
    c = _claim_adv_pgd(df_of([adv_final(s, pgd_acc=0.0) for s in range(3)]))
    assert c.decision.verdict == C and "Disagreement with the paper" in c.decision.reason
    assert "not a software failure" in c.evidence["finding"]
    assert c.evidence["threat_models_trained"]["linf_all"]["survives"] is False


def counter_rows(flip=None, seeds=3):
    out = []
    for P in (2, 8, 64):
        for eps in (0.1, 0.4):
            ratio = every_patch_bound(1.0, eps, 3.0, P)
            for s in range(seeds):
                acc = 1.0 if ratio > 1 else 0.0
                if flip is not None and flip(P, eps):
                    acc = 1.0 - acc
                out.append(rows("counter", seed=s, experiment="counter", method="standard", P=P, eval_eps=eps,
                                clean_acc=1.0, feature_acc=1.0, pgd_acc=acc, threat_linf_all=acc,
                                threat_linf_nonrobust_patches=acc, threat_l2_per_patch=acc,
                                threat_nonrobust_subspace=1.0, bound_ratio=ratio, eps_over_alpha=eps,
                                density=0.064 * (P - 1), assume_holds=P == 64 and eps >= 0.4, chance=0.5))
    return df_of(out)


def test_counter_claim_reproduced_contradicted_inconclusive():
    # 5 judged grid points: full agreement over 3 seeds (15 cells) cannot clear 0.95 (Wilson),
    # over 80 seeds (400 cells) it does; seeds_needed says how many would
    few = _claim_every_patch(counter_rows())
    assert few.decision.verdict == I and few.decision.effect == 1.0 and few.decision.seeds_needed > 3
    c = _claim_every_patch(counter_rows(seeds=80))
    assert c.decision.verdict == R and "Disagreement with the paper" in c.decision.reason
    assert c.decision.seeds_needed is None and few.decision.seeds_needed <= 80
    assert c.evidence["robust_where_assumption_holds"] == 0.0  # P = 64, ε = β = 0.4: broken
    # the attack fails where the bound says it wins, at every point: contradicted
    assert _claim_every_patch(counter_rows(flip=lambda P, e: True)).decision.verdict == C
    # one point (of 5 judged) disagrees, in every seed: agreement 0.8 over 15 cells, Wilson
    # [0.55, 0.93] < 0.95 -> contradicted
    assert _claim_every_patch(counter_rows(flip=lambda P, e: P == 8 and e == 0.1)).decision.verdict == C
    assert _claim_every_patch(df_of([rows("timing")])).decision.verdict == NA


# -- the every-patch attack against its closed form (hand-set weights, float64) ---------------

def _hand(k, m, d, a, E=1):
    model = PatchCNN(E, k, m, d, sigma0=0.0, dtype=torch.float64)
    with torch.no_grad():
        model.W.copy_(a * torch.eye(d, dtype=torch.float64)[:k].view(1, k, 1, d).expand(E, k, m, d))
    return model


@pytest.mark.parametrize("P, eps", [(2, 0.2), (3, 0.3), (4, 0.3), (10, 0.25), (48, 0.4), (48, 0.15)])
@pytest.mark.parametrize("norm", ["linf", "l2_patch"])
def test_every_patch_matches_the_closed_form_on_hand_set_weights(P, eps, norm):
    k, m, d, alpha, beta, q, rho, a = 2, 3, 8, 1.0, 0.3, 3.0, 1.0, 0.5
    u, v = torch.eye(d, dtype=torch.float64)[:k], torch.eye(d, dtype=torch.float64)[k:2 * k]
    y = torch.tensor([0, 1])
    x = beta * v[y][:, None, :].repeat(1, P, 1)  # noise-free: robust patch 0, the rest non-robust
    x[:, 0] = alpha * u[y]
    model = _hand(k, m, d, a)
    flat = lambda z: model(z.unsqueeze(0))[0]  # noqa: E731
    flat.training = False  # a plain callable stands in for the module
    x_adv = every_patch(_Wrap(flat), x, y, u, eps, norm=norm)
    e = eps if norm == "linf" else eps / math.sqrt(2)
    out = flat(x_adv)
    true = m * smoothed_relu(torch.tensor((alpha - e) * a, dtype=torch.float64), q, rho)
    wrong = m * P * smoothed_relu(torch.tensor(e * a, dtype=torch.float64), q, rho)
    assert torch.allclose(out[torch.arange(2), y], true.expand(2), rtol=1e-12, atol=1e-15)
    assert torch.allclose(out[torch.arange(2), 1 - y], wrong.expand(2), rtol=1e-12, atol=1e-15)
    ratio = every_patch_bound(alpha, eps, q, P, norm=norm)
    assert float(true / wrong) == pytest.approx(ratio, rel=1e-12)  # polynomial part: the bound is exact
    broken = (out.argmax(-1) != y).all().item()
    assert broken == (ratio < 1)
    if norm == "linf":
        assert (x_adv - x).abs().max() <= eps + 1e-15
    else:
        assert torch.allclose((x_adv - x).norm(dim=-1), torch.full((2, P), eps, dtype=torch.float64))


def test_every_patch_confined_to_nonrobust_patches_leaves_the_robust_patch():
    k, m, d, P, alpha, eps, q, a = 2, 1, 6, 20, 1.0, 0.4, 3.0, 0.5
    u = torch.eye(d, dtype=torch.float64)[:k]
    y = torch.tensor([1])
    x = torch.zeros(1, P, d, dtype=torch.float64)
    x[0, 0] = alpha * u[1]
    mask = torch.ones(1, P, dtype=torch.bool)
    mask[0, 0] = False
    model = _hand(k, m, d, a)
    flat = _Wrap(lambda z: model(z.unsqueeze(0))[0])
    x_adv = every_patch(flat, x, y, u, eps, mask=mask)
    assert torch.equal(x_adv[0, 0], x[0, 0])
    with torch.no_grad():
        out = flat(x_adv)[0]
    assert float(out[1] / out[0]) == pytest.approx(every_patch_bound(alpha, eps, q, P, own_patch=False), rel=1e-12)


class _Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def test_every_patch_bad_input():
    with pytest.raises(ConfigError):
        every_patch(_Wrap(lambda z: z.sum(1)), torch.zeros(2, 3, 4), torch.zeros(2, dtype=torch.long),
                    torch.eye(4)[:2], 0.1, norm="l1")


# -- claim 3 -------------------------------------------------------------------------------

def eta_rows(law, missing=False, clip=0.1, etas=(15.0, 30.0, 60.0, 120.0), missing_seeds=(0,)):
    out = []
    for eta in etas:
        for s in range(3):
            cross = None if (missing and s in missing_seeds) else law(eta) * (1 + 0.03 * (s - 1))
            out.append(final(experiment="main" if eta == 15.0 else "eta", method="gradient_step",
                             eta_tilde=eta, seed=s, cross_step=cross, b_peak_step=10,
                             clip_frac_v_phase1=clip(eta) if callable(clip) else clip,
                             clip_frac_v_max=1.5 * (clip(eta) if callable(clip) else clip),
                             clip_frac_phase1=0.01))
    return df_of(out)


def verdicts(df):
    a, b = _claim_two_phases(df)
    assert a.id == "A3a-two-phases" and b.id == "A3b-crossing-time-inverse-eta"
    return a, b


def test_claim3_reproduced_for_inverse_eta_law():
    a, b = verdicts(eta_rows(lambda eta: 3000.0 / eta))
    assert a.decision.verdict == R and b.decision.verdict == R
    sl = b.evidence["slope_unsaturated"]
    assert sl["effect"] == pytest.approx(-1.0, abs=0.05) and sl["interval"][0] < -1.0 < sl["interval"][1]


def test_claim3_contradicted_for_growing_crossing_time_or_missing_crossings():
    a, b = verdicts(eta_rows(lambda eta: 5.0 * eta))
    assert a.decision.verdict == R and b.decision.verdict == C
    assert b.evidence["slope_unsaturated"]["effect"] == pytest.approx(1.0, abs=0.05)
    a, _ = verdicts(eta_rows(lambda eta: 3000.0 / eta, missing=True))  # 8 of 12 cross: Wilson [0.39, 0.86]
    assert a.decision.verdict == I and a.evidence["phases"]["effect"] == pytest.approx(8 / 12)
    a, _ = verdicts(eta_rows(lambda eta: 3000.0 / eta, missing=True, missing_seeds=(0, 1)))
    assert a.decision.verdict == C  # 4 of 12: the Wilson interval lies below 0.75


def test_claim3_judges_the_slope_only_where_unsaturated():
    # saturated at 60 and 120 (a plateau there): the slope is fitted on 15 and 30 only
    law = lambda eta: 3000.0 / min(eta, 30.0)  # noqa: E731
    _, b = verdicts(eta_rows(law, clip=lambda eta: 0.8 if eta > 30 else 0.1))
    assert b.decision.verdict == R
    assert b.evidence["regime_counts"] == {"unsaturated": 6, "saturated": 6}
    assert b.evidence["slope_saturated"]["effect"] == pytest.approx(0.0, abs=0.05)
    # everything saturated: the −1 law has no unsaturated run to be judged on
    a, b = verdicts(eta_rows(law, clip=0.8))
    assert a.decision.verdict == R and b.decision.verdict == NA
    # inactive runs (the attack never reaches the ball) are not counted against the phases
    a, b = verdicts(eta_rows(lambda eta: 3000.0 / eta, clip=lambda eta: 0.0 if eta < 20 else 0.1,
                             missing=False))
    assert b.evidence["regime_counts"]["inactive"] == 3
    assert a.evidence["phases"]["n"] == 9 and a.evidence["phases"]["effect"] == 1.0
    assert a.decision.verdict == I and a.decision.seeds_needed > 3  # 9 of 9: Wilson low 0.70 < 0.75


def test_claim3_leaves_out_runs_whose_weights_diverged():
    # crossing time rising with η̃, plus a run at η̃ = 150 that blew up within ten steps (the
    # "crossing" is the blow-up): it must count neither as a second phase nor in the slope
    base = eta_rows(lambda eta: 5.0 * eta)
    a0, b0 = verdicts(base)
    blown = df_of([final(experiment="eta", method="gradient_step", eta_tilde=150.0, seed=0, cross_step=10.0,
                         b_peak_step=15, A=13.8, B=7.3, clip_frac_v_phase1=0.19, clip_frac_v_max=0.49,
                         clip_frac_phase1=0.01)])
    a, b = verdicts(pd.concat([base, blown], ignore_index=True))
    assert 13.8 > DIVERGED and b.evidence["regime_counts"]["diverged"] == 1
    assert b.evidence["diverged"]["cross_step"] == [10.0]
    assert a.evidence["phases"]["n"] == a0.evidence["phases"]["n"]
    assert b.evidence["slope_unsaturated"]["effect"] == pytest.approx(b0.evidence["slope_unsaturated"]["effect"])
    assert b.decision.verdict == C


def test_claim3_not_applicable_when_the_assumption_fails():
    df = eta_rows(lambda eta: 3000.0 / eta).assign(assume_violations=VIOLATED)
    assert all(c.decision.verdict == NA for c in _claim_two_phases(df))


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
    assert ok.decision.verdict == R and ok.evidence["probes_compared"] == 8
    bad = _claim_eps_zero(df_of(probe_rows("standard", 0.4, "main") + probe_rows("gradient_step", 0.0, "eps", 1e-3)))
    assert bad.decision.verdict == C and bad.evidence["max_abs_diff"] == pytest.approx(1e-3)
    assert _claim_eps_zero(df_of(probe_rows("gradient_step", 0.0, "eps"))).decision.verdict == NA


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


@pytest.mark.filterwarnings("ignore::robustlab.data.patches.AssumptionWarning")
def test_real_runs_record_clipping_threats_and_the_counter_experiment():
    tiny = dict(P=12, d=8, n_train=16, n_test=16, m=2, steps=12, probe_every=3, eval_every=6, eval_pgd_steps=1)
    adv = [FeatureLearningConfig(seed=s, experiment="main", method="gradient_step", **tiny) for s in (0, 1)]
    out = run_points(adv, "cpu")
    fin = [r for r in out[0] if r["kind"] == "final"][0]
    assert 0.0 <= fin["clip_frac_v_phase1"] <= 1.0 and 0.0 <= fin["threat_linf_all"] <= 1.0
    assert len([r for r in out[0] if r["kind"] == "clip"]) == 5
    sweep = {r["eps_over_alpha"]: r for r in out[0] if r["kind"] == "eps_sweep"}
    assert len(sweep) == 6
    assert sweep[0.4]["every_patch_acc"] == fin["threat_linf_all"]  # the sweep's one threat, at ε = eval_eps
    cnt = [FeatureLearningConfig(seed=s, experiment="counter", method="standard", P=64, eval_eps=0.4, n_test=32)
           for s in (0, 1)]
    row = run_points(cnt, "cpu")[0][0]
    # P = 64 > (α/ε − 1)^3 = 3.4: the every-patch attack breaks the hand-set robust weights
    assert row["bound_ratio"] == pytest.approx(1.5 ** 3 / 64) and row["threat_linf_all"] == 0.0
    assert row["clean_acc"] == 1.0 and row["feature_acc"] == 1.0
    few = [dataclasses.replace(c, P=2, eval_eps=0.1) for c in cnt]  # 9^3 / 2 >> 1: it survives
    assert run_points(few, "cpu")[0][0]["threat_linf_all"] == 1.0


# -- claim 5 -------------------------------------------------------------------------------

def eps_rows(values):
    out = []
    for eps, amb in values:
        for s in range(3):
            out.append(final(experiment="eps" if eps != 0.4 else "main", method="gradient_step", eps=eps, seed=s,
                             A=0.5 + amb + 0.01 * (s - 1), B=0.5))
    return df_of(out)


def test_claim5_increasing_spectrum_reproduced_and_reports_the_sign_change():
    c = _claim_eps_spectrum(eps_rows([(0.0, -2.0), (0.2, -1.0), (0.4, 0.5), (0.5, 0.6), (0.7, 0.4)]))
    assert c.decision.verdict == R
    assert c.evidence["sign_change_eps"] == pytest.approx(0.2 + 0.2 * 1.0 / 1.5, abs=1e-6)
    lo, hi = c.evidence["sign_change_interval"]["interval"]
    assert lo <= c.evidence["sign_change_eps"] <= hi
    assert c.evidence["eps_max"] == 0.5  # 0.7 > alpha/2 is shown but not judged


def test_claim5_contradicted_inconclusive_and_missing():
    assert _claim_eps_spectrum(eps_rows([(0.0, 0.5), (0.2, 0.0), (0.4, -1.0), (0.5, -1.5)])).decision.verdict == C
    flat = [(0.0, 0.0), (0.2, 0.05), (0.4, -0.05), (0.5, 0.0)]
    noisy = eps_rows(flat)
    noisy["A_minus_B"] = noisy["A_minus_B"] + [0.3 * ((i * 7) % 5 - 2) for i in range(len(noisy))]
    assert _claim_eps_spectrum(noisy).decision.verdict == I
    assert _claim_eps_spectrum(eps_rows([(0.0, 0.5), (0.2, 0.5)])).decision.verdict == NA  # too few values


# -- claim 6 -------------------------------------------------------------------------------

def image_rows(std_rob, adv_rob, ilyas=0.35):
    out = []
    for ds in ("digits", "mnist5k"):
        for s in range(3):
            for method, rob in (("standard", std_rob), ("pgd", adv_rob)):
                out.append(rows("image_final", seed=s, experiment="images", dataset=ds, method=method,
                                clean_acc=0.9, robust_acc=rob + (0.02 * (s - 1) if method == "pgd" else 0.0),
                                n_test=300, chance=0.1))
            if ilyas is not None:
                out.append(rows("ilyas", seed=s, experiment="images", dataset=ds, method="standard",
                                ilyas_acc=ilyas, attack_success=0.5, chance=0.1, n_test=300))
    return df_of(out)


def test_claim6_verdicts():
    c = _claim_images(image_rows(0.2, 0.6))
    assert c.decision.verdict == R and c.evidence["digits"]["ilyas"]["interval"][0] > 0.1
    assert _claim_images(image_rows(0.6, 0.2)).decision.verdict == C
    assert _claim_images(image_rows(0.2, 0.6, ilyas=0.05)).decision.verdict == C
    assert _claim_images(image_rows(0.2, 0.6, ilyas=None)).decision.verdict == I
    assert _claim_images(image_rows(0.4, 0.4)).decision.verdict == I


def test_all_claims_on_empty_results_are_not_applicable_not_crash():
    out = claims(df_of([rows("timing", seconds=1.0)]), None)
    assert len(out) == 10 and all(c.decision.verdict == NA for c in out)
    assert all("not measured in this run" in c.decision.reason for c in out)
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
    # blocks at their own seed counts: main (2 methods), the active η̃ range, the images (2 datasets × 2 methods)
    assert len(quick.points) == (46 * 3 + 2 * QUICK_MAIN_SEEDS + len(QUICK_ETA_ACTIVE) * QUICK_ETA_ACTIVE_SEEDS
                                 + 4 * QUICK_IMAGE_SEEDS)
    # the claims about the end state and the crossing share one horizon (A4 pairs eps with main,
    # A5 pools eps with main, A3 pools eta with main)
    assert {p.steps for p in quick.points if p.experiment in ("main", "eps", "eta")} == {QUICK_STEPS}
    assert {p.experiment for p in quick.points} == {"main", "eta", "eps", "activation", "attack", "basis",
                                                    "overlap", "counter", "images"}
    assert len(plan(STUDY, preset="paper").points) > len(quick.points)
    from robustlab.data.patches import assumption_report

    base = FeatureLearningConfig()
    rep = assumption_report(base.patch_spec(), q=base.q, eps=base.eps)
    assert rep["holds"], rep["violations"]
    assert math.isclose(base.eps, base.beta)  # the theory's attack erases v_y exactly


def test_weights_order_the_groups_by_their_work():
    # Study.weight only orders a parallel run's groups; it must be positive and finite on every
    # preset, and rank what costs more above what costs less
    from robustlab.studies.feature_learning.run import _work

    for preset in STUDY.presets:
        assert all(math.isfinite(_work(p)) and _work(p) > 0 for p in plan(STUDY, preset=preset).points), preset
    base = FeatureLearningConfig()
    main_adv, main_std = (dataclasses.replace(base, method=m) for m in ("gradient_step", "standard"))
    assert _work(main_adv) > _work(main_std)
    assert _work(dataclasses.replace(main_adv, steps=400)) > _work(main_adv)
    assert _work(dataclasses.replace(main_adv, experiment="counter")) < _work(main_std)
    img = dataclasses.replace(base, experiment="images", method="standard", dataset="mnist5k")
    assert _work(dataclasses.replace(img, method="pgd")) > _work(img)
    assert _work(dataclasses.replace(img, image_size=14)) < _work(img)
    assert _work(dataclasses.replace(img, dataset="digits")) < _work(img)
    assert _work(dataclasses.replace(img, max_train=800)) < _work(img)

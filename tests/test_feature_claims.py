"""Study A's claims (each fed results where it must pass and where it must fail), its config
validation and its presets."""

import dataclasses
import math

import pandas as pd
import pytest
import torch

from robustlab import claims as cl
from robustlab import stats
from robustlab.attacks.every_patch import every_patch, every_patch_bound
from robustlab.cli import main
from robustlab.config import ConfigError
from robustlab.models.patch_cnn import PatchCNN, smoothed_relu
from robustlab.studies import get_study
from robustlab.studies.base import plan
from robustlab.studies.feature_learning import STUDY, FeatureLearningConfig, run_points
from robustlab.studies.feature_learning.claims import (
    CLAIM_SPECS,
    claim_a1,
    claim_a2a,
    claim_a2a_reading,
    claim_a2b,
    claim_a2c,
    claim_a2d,
    claim_a2f,
    claim_a2g,
    claims,
)
from robustlab.studies.feature_learning.common import DIVERGED, PHASE2
from robustlab.studies.feature_learning.dynamics import (
    claim_eps_limit,
    claim_eps_spectrum,
    claim_phase2_reached,
    claim_two_phases,
)
from robustlab.studies.feature_learning.images import claim_images
from robustlab.studies.feature_learning.presets import (
    QUICK_ETA_ACTIVE,
    QUICK_ETA_ACTIVE_SEEDS,
    QUICK_IMAGE_SEEDS,
    QUICK_MAIN_SEEDS,
    QUICK_STEPS,
)

BASE = FeatureLearningConfig().to_dict()
R, C, I, NA = stats.REPRODUCED, stats.CONTRADICTED, stats.INCONCLUSIVE, stats.NOT_APPLICABLE
VIOLATED = "non-robust not denser: sum beta^gamma / sum alpha^gamma = 0.1 < 2 (gamma = 3)"


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


# -- the claims engine: kinds, controls, premises -------------------------------------------

def test_every_built_in_claim_has_a_control_and_known_premises():
    assert {s.id for s in STUDY.claim_specs} == {c.id for c in claims(df_of([rows("timing")]))}
    for spec in CLAIM_SPECS:
        if spec.kind == cl.CLAIM:
            assert spec.control is not None and spec.control.why, spec.id
        assert all(p in STUDY.premises for p in spec.premises), spec.id
    kinds = {s.id: s.kind for s in CLAIM_SPECS}
    assert kinds["A4-eps-limit-is-standard"] == cl.SELF_CHECK and kinds["A5-eps-spectrum"] == cl.EXPLORATORY


# -- A1 -------------------------------------------------------------------------------------

def radii(span, linf, seed=0):
    """span{v} and ℓ∞ accuracy at ε/2, 3ε/4, ε (the run's radius columns)."""
    return {**{f"span_v_acc_{t}": span + spread(seed) for t in ("r50", "r75", "r100")},
            **{f"linf_acc_{t}": linf for t in ("r50", "r75", "r100")}}


def std_final(seed=0, **kw):
    """A standard-trained model (no perturbation: no loss_adv, no phase 2); B peaks at its final value."""
    B = kw.pop("B", 2.0 + spread(seed, 0.1))
    return final(**{"experiment": "main", "method": "standard", "seed": seed, "A": 0.05, "B": B, "A_init": 0.05,
                    "B_peak": B, "feature_acc": 0.5 + spread(seed), **radii(0.3, 0.0, seed), **kw})


# in phase 2: more than half the v_y coordinates clipped at step 50 while the loss was >= ½ log 2, final
# adversarial loss 0.01 <= 0.1 log 2
PHASE2_COLS = {"phase2_step": 50.0, "loss_adv": 0.01, "clip_frac_v_max": 0.8, "loss_at_clip_max": 0.6}
NO_PHASE2 = {"phase2_step": None, "loss_adv": 0.69, "clip_frac_v_max": 0.2, "loss_at_clip_max": 0.69}


def adv_final(seed=0, **kw):
    """An adversarially trained model that uses u: every A2 part passes; in phase 2; A rose 20×, B fell to 1/3."""
    return final(**{"experiment": "main", "method": "gradient_step", "seed": seed, "A": 1.0 + spread(seed), "B": 0.2, "feature_acc": 0.95 + spread(seed),
                    "pgd_acc": 0.95 + spread(seed), "threat_linf_all": 0.5, "u_neuron_share_i": [0.75, 1.0],
                    "robust_logit_share_i": [0.8 + spread(seed), 0.9], "v_only_acc": 0.5 + spread(seed),
                    "span_v_acc": 0.95 + spread(seed), "span_swap_acc": 0.97, "span_pgd_acc": 0.95,
                    "span_v_acc_i": [0.95, 0.95], "A_minus_B_neuron_mean": 0.5, "A_init": 0.05, "B_peak": 0.6,
                    **radii(0.95, 0.95, seed), **PHASE2_COLS, **kw})


def nonrobust(method, seed, **kw):
    """A model of either method that uses v (fails every A2 part)."""
    base = std_final if method == "standard" else adv_final
    return base(seed, **{"u_neuron_share_i": [0.0, 0.25], "robust_logit_share_i": [0.01, 0.02],
                         "v_only_acc": 1.0, "span_v_acc": 0.05 + spread(seed), "span_swap_acc": 0.05,
                         "span_pgd_acc": 0.05, "span_v_acc_i": [0.0, 0.1], "A_minus_B_neuron_mean": -0.5,
                         "feature_acc": 0.5 + spread(seed), "pgd_acc": 0.0, **kw})


def test_a1_reproduced_with_its_control_contradicted():
    c = claim_a1(df_of([std_final(s) for s in range(3)] + [adv_final(s) for s in range(3)]))
    assert c.decision.verdict == R and c.evidence["B_over_A"] == pytest.approx(40.0)
    assert c.control.verdict.verdict == C and c.to_dict()["control"]["setting"] == "method = gradient_step"


@pytest.mark.parametrize("kw", [{"B": 0.05}, {"clean_acc": 0.95 - 0.2}, {"feature_acc": 0.9}])
def test_a1_contradicted(kw):
    assert claim_a1(df_of([std_final(s, **kw) for s in range(3)])).decision.verdict == C


def test_a1_planted_non_discriminating_control_makes_it_inconclusive():
    # the adversarial models are as non-robust as the standard ones: the rule passes on both
    c = claim_a1(df_of([std_final(s) for s in range(3)] + [std_final(s, method="gradient_step") for s in range(3)]))
    assert c.decision.verdict == I and cl.NOT_DISCRIMINATING in c.decision.reason
    assert c.to_dict()["verdict_before_control"] == R


def test_a1_excludes_points_that_violate_the_assumption_and_is_na_without_results():
    pts = [std_final(s) for s in range(3)] + [std_final(3, assume_violations=VIOLATED, B=0.0)]
    c = claim_a1(df_of(pts + [adv_final(s) for s in range(3)]))  # its control's runs: the one-step models
    assert c.decision.verdict == R and c.to_dict()["excluded"][0]["excluded"] == 1
    bad = claim_a1(df_of([std_final(s, assume_violations=VIOLATED) for s in range(3)]))
    assert bad.decision.verdict == NA and "assumption-2.3: 3 of 3 excluded" in bad.decision.reason
    c = claim_a1(df_of([final(experiment="main", method="gradient_step")]))
    assert c.decision.verdict == NA and "not measured" in c.decision.reason


# -- A2a, robustlab's reading (exploratory): four parts per seed and per class --------------------------------------------------

def test_a2a_reproduced_on_a_robust_feature_model_with_the_standard_control():
    c = claim_a2a_reading(df_of([adv_final(s) for s in range(3)] + [nonrobust("standard", s) for s in range(3)]))
    assert c.decision.verdict == R and c.kind == cl.EXPLORATORY and "robustlab's reading" in c.statement
    assert c.control.verdict.verdict == C and c.to_dict()["control"]["setting"] == "method = standard"
    sv = c.evidence["span_v_accuracy"]
    assert sv["per_seed"] == pytest.approx([0.94, 0.95, 0.96]) and sv["mean"] == pytest.approx(0.95)
    assert set(c.evidence["parts"]) == {"u-neurons", "robust-logit-share", "v-only-accuracy",
                                        "span-v-robust-accuracy"}


@pytest.mark.parametrize("kw", [
    {"u_neuron_share_i": [0.25, 1.0]},  # one class has a single u-neuron of 4: the max over neurons hides it
    {"robust_logit_share_i": [0.9, 0.1]},
    {"v_only_acc": 1.0},
    {"span_v_acc": 0.09},
])
def test_a2a_each_part_can_fail_it_alone(kw):
    # A overtakes B (max over neurons) in every case: that alone decides nothing
    c = claim_a2a_reading(df_of([adv_final(s, **kw) for s in range(3)] + [nonrobust("standard", s) for s in range(3)]))
    assert c.decision.verdict == C
    assert c.evidence["A_minus_B_max_over_neurons"]["effect"] > 0


def test_a2a_planted_non_discriminating_claim_is_inconclusive():
    # the standard models pass the same rule: the test cannot tell the two trainings apart
    c = claim_a2a_reading(df_of([adv_final(s) for s in range(3)] + [adv_final(s, method="standard") for s in range(3)]))
    assert c.decision.verdict == I and cl.NOT_DISCRIMINATING in c.decision.reason


def test_a2a_planted_under_trained_point_is_excluded_not_turning_the_claim():
    pts = [adv_final(s) for s in range(4)] + [nonrobust("standard", s) for s in range(3)]
    pts.append(nonrobust("gradient_step", 9, clean_acc=0.5))  # never trained: every part would fail
    c = claim_a2a_reading(df_of(pts))
    assert c.decision.verdict == R
    exc = {e["premise"]: e for e in c.to_dict()["excluded"]}
    assert exc["trained"]["excluded"] == 1 and exc["trained"]["of"] == 5
    assert 9 not in c.evidence["span_v_accuracy"]["seeds"]
    # with the premise lifted, the same point would have turned the verdict
    everything = claim_a2a_reading(df_of([adv_final(s) for s in range(4)] + [nonrobust("gradient_step", 9)]))
    assert everything.decision.verdict != R


# -- the phase-2 premise (issue 52) --------------------------------------------------------------

def test_phase2_premise_reads_the_issue_thresholds():
    from robustlab.studies.feature_learning.common import PREMISES

    cases = [PHASE2_COLS, NO_PHASE2, {**PHASE2_COLS, "loss_adv": 0.1}, {**PHASE2_COLS, "phase2_step": None}]
    mask = PREMISES[PHASE2].mask(df_of([adv_final(0, **c) for c in cases]))
    assert list(mask) == [True, False, False, False]  # 0.1 > 0.1·log 2 = 0.069: the final loss is too high
    five = df_of([adv_final(0, k=5, loss_adv=0.15, d=64)])  # 0.15 <= 0.1·log 5 = 0.161
    assert list(PREMISES[PHASE2].mask(five)) == [True]


@pytest.mark.parametrize("fn", [claim_a2a, claim_a2a_reading, claim_a2b, claim_a2c, claim_a2g])
def test_claims_on_runs_without_phase_2_are_not_applicable_naming_the_premise(fn):
    # today's runs: the perturbation never saturates; every part would have read reproduced otherwise
    pts = [adv_final(s, **NO_PHASE2) for s in range(3)] + [std_final(s) for s in range(3)]
    c = fn(df_of(pts))
    assert c.decision.verdict == NA and "phase-2: 3 of 3 excluded" in c.decision.reason
    assert c.evidence["phase2"] == {"runs": 3, "met": 0, "clip_frac_v_max_range": [0.2, 0.2],
                                    "loss_at_clip_max_range": [0.69, 0.69], "loss_adv_range": [0.69, 0.69]}
    # the verdict without the premise is reported beside it, never substituted
    (name, variant), = c.variants.items()
    assert PHASE2 in name
    # A2b's variant is still outside its regime (α = σ_n√d here), the others are judged
    assert variant.verdict == NA if fn is claim_a2b else variant.verdict != NA


# -- A2a, the theorem's quantity: max-over-neuron A rises, B falls -------------------------------

def test_a2a_reproduced_when_a_rises_and_b_falls_with_the_standard_control_contradicted():
    c = claim_a2a(df_of([adv_final(s) for s in range(3)] + [std_final(s) for s in range(3)]))
    assert c.decision.verdict == R and c.kind == cl.CLAIM
    assert c.control.verdict.verdict == C and c.to_dict()["control"]["setting"] == "method = standard"
    assert c.evidence["log_A_growth"]["effect"] == pytest.approx(math.log(20.0), abs=0.02)
    assert c.evidence["B_end_over_peak"]["effect"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("kw", [{"A": 0.1}, {"B": 0.5}])  # A only doubles; B ends at 5/6 of its peak
def test_a2a_without_the_effect_is_contradicted(kw):
    c = claim_a2a(df_of([adv_final(s, **kw) for s in range(3)] + [std_final(s) for s in range(3)]))
    assert c.decision.verdict == C


def test_a2a_control_can_pass_when_the_effect_is_planted_in_standard_training():
    # the control's setting with the effect planted: its rule reads reproduced, so the claim is capped
    planted = [std_final(s, A=1.0, B=0.2, B_peak=0.6) for s in range(3)]
    c = claim_a2a(df_of([adv_final(s) for s in range(3)] + planted))
    assert c.control.verdict.verdict == R and c.decision.verdict == I


# -- A2b's dependence on α/(σ_n√d) -------------------------------------------------------------------

def test_a2b_decides_per_alpha_over_noise_and_excludes_values_below_much():
    # the control's runs at both values (a control judged only outside the regime would read not applicable)
    ctrl = [nonrobust("standard", s, **kw) for s in range(3) for kw in ({}, {"alpha": 4.0, "point": f"s4-{s}"})]
    at4 = [adv_final(s, alpha=4.0, beta=1.6, eps=1.6, eval_eps=1.6, point=f"a4-{s}") for s in range(3)]
    c = claim_a2b(df_of([adv_final(s) for s in range(3)] + at4 + ctrl))
    assert c.decision.verdict == R and c.across == {"alpha/(sigma_n sqrt d)": {
        "1.0": "excluded: α/(σ_n√d) = 1 < 2: not α ≫ σ_n√d (the rebuttal's scale)", "4.0": R}}
    bad4 = [adv_final(s, alpha=4.0, beta=1.6, eps=1.6, eval_eps=1.6, feature_acc=0.53 + spread(s), point=f"a4-{s}")
            for s in range(3)]
    assert claim_a2b(df_of([adv_final(s) for s in range(3)] + bad4 + ctrl)).decision.verdict == C
    only1 = claim_a2b(df_of([adv_final(s) for s in range(3)] + ctrl))  # the presets' α = σ_n√d
    assert only1.decision.verdict == NA and "regime" in only1.decision.reason


# -- A2f / A2g: robustness by radius ---------------------------------------------------------------

def zero_eps(seed, **kw):
    """The ε = 0 runs of the ε sweep: standard training bit for bit (A2f's control)."""
    return std_final(seed, experiment="eps", method="gradient_step", eps=0.0, **kw)


def test_a2f_improvement_at_some_radius_with_the_standard_placebo_control():
    base = [std_final(s) for s in range(6)]  # 3 disjoint placebo pairs
    c = claim_a2f(df_of([adv_final(s) for s in range(6)] + base))
    assert c.decision.verdict == R and c.control.verdict.verdict == C, (c.decision, c.control)
    assert c.to_dict()["control"]["setting"].startswith("placebo: standard vs standard")
    assert set(c.across["radius/ε"]) == {"0.5", "0.75", "1.0"}
    # no gain above 0.1 at any radius: contradicted
    none = [adv_final(s, **radii(0.35, 0.0, s)) for s in range(6)]
    assert claim_a2f(df_of(none + base)).decision.verdict == C
    # a gain at ε/2 only is enough (the existential over radii); the issue's 0.86 against 0.46
    half = [adv_final(s, span_v_acc_r50=0.86 + spread(s), span_v_acc_r75=0.3, span_v_acc_r100=0.3)
            for s in range(6)]
    got = claim_a2f(df_of(half + base))
    assert got.decision.verdict == R and got.across["radius/ε"] == {"0.5": R, "0.75": C, "1.0": C}
    # the control's setting with the effect planted (the later seed of each standard pair gains 0.4
    # at every radius): the placebo reads reproduced and the claim is capped
    planted = [std_final(s, **(radii(0.9, 0.9, s) if s % 2 else {})) for s in range(6)]
    capped = claim_a2f(df_of([adv_final(s) for s in range(6)] + planted))
    assert capped.control.verdict.verdict == R and capped.decision.verdict == I


def test_a2g_robust_at_eps_in_span_v_is_robustlabs_reading():
    ctrl = [std_final(s) for s in range(3)]
    c = claim_a2g(df_of([adv_final(s) for s in range(3)] + ctrl))
    assert c.kind == cl.EXPLORATORY and c.decision.verdict == R and c.control.verdict.verdict == C
    low = [adv_final(s, **radii(0.09, 0.0, s)) for s in range(3)]
    assert claim_a2g(df_of(low + ctrl)).decision.verdict == C
    planted = [std_final(s, **radii(0.95, 0.95, s)) for s in range(3)]
    assert claim_a2g(df_of([adv_final(s) for s in range(3)] + planted)).decision.verdict == I


# -- A3c: the regime search ----------------------------------------------------------------------

def test_a3c_reads_whether_the_regime_reaches_phase_2():
    def run(cols):
        return [adv_final(s, experiment="regime", d=d, eta_tilde=eta, **cols, point=f"{d}-{eta}-{s}")
                for d in (64, 256) for eta in (10.0, 100.0) for s in range(2)]
    never = claim_phase2_reached(df_of(run(NO_PHASE2) + [std_final(0, experiment="regime")]))
    assert never.kind == cl.EXPLORATORY and never.decision.verdict == C  # 0 of 8 runs
    assert never.evidence["settings_reaching_phase2"] == [] and len(never.evidence["table"]) == 5
    assert claim_phase2_reached(df_of(run(PHASE2_COLS))).decision.verdict in (R, I)
    assert claim_phase2_reached(df_of([std_final(0)])).decision.verdict == NA


# -- A2b, A2c, A2d ----------------------------------------------------------------------------

@pytest.mark.parametrize("fn, key, good, bad, edge, at", [
    (claim_a2b, "feature_acc", 0.95, 0.6, 0.9, {"alpha": 4.0}),  # A2b is judged where α >= 2σ_n√d only
    (claim_a2c, "pgd_acc", 0.95, 0.0, 0.9, {}),
])
def test_a2b_a2c_reach_each_verdict_and_name_their_control(fn, key, good, bad, edge, at):
    ctrl = [nonrobust("standard", s, **at) for s in range(3)]

    def df(value, **kw):
        return df_of([adv_final(s, **{key: value + spread(s), **at, **kw}) for s in range(3)] + ctrl)
    assert fn(df(good)).decision.verdict == R
    assert fn(df(bad)).decision.verdict == C
    assert fn(df(edge)).decision.verdict == I
    assert fn(df(good, assume_violations=VIOLATED)).decision.verdict == NA
    assert fn(df(good)).control.verdict.verdict == C
    # the control's setting with the effect planted: the standard models pass the same rule, the claim is capped
    planted = df_of([adv_final(s, **{key: good + spread(s), **at}) for s in range(3)]
                    + [nonrobust("standard", s, **{key: good + spread(s), **at}) for s in range(3)])
    c = fn(planted)
    assert c.control.verdict.verdict == R and c.decision.verdict == I


def test_a2c_explains_the_failure_with_the_attribution():
    sweep = [rows("eps_sweep", seed=s, experiment="main", method="gradient_step", eps_over_alpha=r, pgd_acc=0.0,
                  every_patch_acc=1.0 if r < 0.2 else 0.0, v_swap_acc=0.1, uv_every_patch_acc=0.0)
             for s in range(3) for r in (0.15, 0.2, 0.4)]
    c = claim_a2c(df_of([adv_final(s, pgd_acc=0.0) for s in range(3)] + sweep))
    assert c.decision.verdict == C and "erase v_y and plant v_j" in c.decision.reason
    at = {a["eps_over_alpha"]: a for a in c.evidence["attribution"]}
    assert at[0.15]["trained_broken_by"] == ["v_swap", "u_and_v"]
    assert at[0.4]["trained_broken_by"] == ["u_every_patch", "v_swap", "u_and_v"]


def counter_rows(flip=None, seeds=3):
    out = []
    for P in (2, 8, 64):
        for eps in (0.1, 0.4):
            ratio = every_patch_bound(1.0, eps, 3.0, P)
            corrected = ratio / (1 + 3 * (0.125 / eps) ** 2)
            for s in range(seeds):
                acc = 1.0 if corrected > 1 else 0.0
                if flip is not None and flip(P, eps):
                    acc = 1.0 - acc
                out.append(rows("counter", seed=s, experiment="counter", method="standard", P=P, eval_eps=eps,
                                clean_acc=1.0, feature_acc=1.0, pgd_acc=acc, threat_linf_all=acc,
                                threat_nonrobust_subspace=1.0, bound_ratio=ratio, eps_over_alpha=eps,
                                assume_holds=P == 64 and eps >= 0.4, chance=0.5))
    return df_of(out)


def test_a2d_is_exploratory_and_judges_only_points_off_the_noise_corrected_margin():
    few = claim_a2d(counter_rows())
    assert few.kind == cl.EXPLORATORY and few.decision.verdict == I and few.decision.effect == 1.0
    assert claim_a2d(counter_rows(seeds=80)).decision.verdict == R
    assert claim_a2d(counter_rows(flip=lambda P, e: True)).decision.verdict == C
    # P = 2, ε = 0.1: ratio 364.5, noise factor 1 + 3·(0.125/0.1)² = 5.69, corrected 64: judged
    judged = claim_a2d(counter_rows()).evidence["grid_points_judged"]
    assert judged == 5  # (8, 0.1): 91.1 / 5.69 = 16 judged; (64, 0.1): 11.4 / 5.69 = 2.0: at the margin
    assert claim_a2d(df_of([rows("timing")])).decision.verdict == NA


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


# -- A3 ---------------------------------------------------------------------------------------

def eta_rows(law, missing=False, clip=0.8, etas=(5.0, 15.0, 60.0, 500.0), missing_seeds=(0,), unsat_law=None,
             step=200):
    """The η̃ sweep's final rows; a run whose clipped share exceeds ½ is in phase 2. ``unsat_law``: add
    three unsaturated runs per η̃ (seeds 10–12, clipped share 0.2) crossing at that law (A3b's control).
    ``step``: the runs' horizon (the last probe: a run without a crossing is censored there)."""
    out = []
    runs = [(s, law, clip) for s in range(3)] + ([(s, unsat_law, 0.2) for s in (10, 11, 12)] if unsat_law else [])
    for eta in etas:
        for s, lw, cl_ in runs:
            cross = None if (missing and s in missing_seeds) else lw(eta) * (1 + 0.03 * ((s % 10) - 1))
            c = cl_(eta) if callable(cl_) else cl_
            out.append(final(experiment="main" if eta == 15.0 else "eta", method="gradient_step",
                             eta_tilde=eta, seed=s, cross_step=cross, b_peak_step=10, clip_frac_v_phase1=c, step=step,
                             clip_frac_v_before_cross=c, clip_frac_phase1=0.01,
                             saturation_step=5.0 if c > 0.5 else None,
                             **{**(PHASE2_COLS if c > 0.5 else NO_PHASE2), "clip_frac_v_max": c}))
    out += [std_final(s, cross_step=None) for s in range(3)]
    return df_of(out)


def test_a3_reproduced_for_the_inverse_eta_law_on_saturated_runs():
    # the unsaturated runs cross later for larger η̃ (as measured at quick and paper scale)
    a, b = claim_two_phases(eta_rows(lambda eta: 3000.0 / eta, unsat_law=lambda eta: 5.0 * eta))
    assert a.decision.verdict == R and b.decision.verdict == R
    assert a.control.verdict.verdict == C  # standard runs: no second phase
    assert b.control.verdict.verdict == C and b.to_dict()["control"]["setting"] == "unsaturated"
    assert b.evidence["slope_saturated"]["effect"] == pytest.approx(-1.0, abs=0.05)
    # the control population with the law planted: it can read reproduced, and the claim is capped
    capped = claim_two_phases(eta_rows(lambda eta: 3000.0 / eta, unsat_law=lambda eta: 3000.0 / eta))[1]
    assert capped.control.verdict.verdict == R and capped.decision.verdict == I
    # without the law on the saturated runs: contradicted
    assert claim_two_phases(eta_rows(lambda eta: 5.0 * eta, unsat_law=lambda eta: 5.0 * eta))[1].decision.verdict == C


def test_a3a_control_can_pass_when_two_phases_are_planted_in_standard_training():
    # 16 standard runs, as at quick (a Wilson share over 3 runs cannot clear 0.75)
    df = pd.concat([eta_rows(lambda eta: 3000.0 / eta), df_of([std_final(s) for s in range(3, 16)])],
                   ignore_index=True)
    std = df["method"] == "standard"
    df.loc[std, "cross_step"] = 200.0  # standard runs that (impossibly) cross after a phase 1
    a, _ = claim_two_phases(df)
    assert a.control.verdict.verdict == R and a.decision.verdict == I


def test_a3_on_runs_without_phase_2_is_not_applicable_naming_it():
    a, b = claim_two_phases(eta_rows(lambda eta: 3000.0 / eta).assign(phase2_step=None))
    assert a.decision.verdict == NA and "phase-2: 12 of 12 excluded" in a.decision.reason
    assert b.decision.verdict == NA and "phase-2: 12 of 12 excluded" in b.decision.reason
    (_, variant), = a.variants.items()
    assert variant.verdict == R


def test_a3b_needs_saturation_two_decades_and_a_rising_law_is_contradicted():
    _, b = claim_two_phases(eta_rows(lambda eta: 5.0 * eta))
    assert b.decision.verdict == C
    _, b = claim_two_phases(eta_rows(lambda eta: 3000.0 / eta, clip=0.2))  # today's runs: never saturated
    assert b.decision.verdict == NA and "saturated: 12 of 12 excluded" in b.decision.reason
    _, b = claim_two_phases(eta_rows(lambda eta: 3000.0 / eta, etas=(15.0, 30.0, 60.0, 120.0)))
    assert b.decision.verdict == NA and "decades" in b.decision.reason  # 0.9 decades only


def test_a3_evidence_says_where_the_median_move_settles_on_unsaturated_runs():
    # the pinned move of scripts/a3_saturation.py: about β/2 whatever η̃, so only the tail clips
    df = eta_rows(lambda eta: 3000.0 / eta, clip=0.12).assign(move_v_median_late=0.2, beta=0.4, eps=0.4)
    _, b = claim_two_phases(df)
    why = b.evidence["why_unsaturated"]
    assert b.decision.verdict == NA and why["largest_median_move_over_eps"] == pytest.approx(0.5)
    assert {e: v["median_move_over_beta"] for e, v in why["by_eta_tilde"].items()} == {
        e: pytest.approx(0.5) for e in ("5", "15", "60", "500")}
    assert "why_unsaturated" not in claim_two_phases(eta_rows(lambda eta: 3000.0 / eta))[1].evidence  # not recorded


def test_a3a_counts_missing_crossings_and_excludes_inactive_and_diverged_runs():
    a, _ = claim_two_phases(eta_rows(lambda eta: 3000.0 / eta, missing=True, missing_seeds=(0, 1)))
    assert a.decision.verdict == C  # 4 of 12
    df = eta_rows(lambda eta: 3000.0 / eta, clip=lambda eta: 0.0 if eta < 10 else 0.8)
    blown = final(experiment="eta", method="gradient_step", eta_tilde=150.0, seed=0, cross_step=10.0, A=13.8, B=7.3,
                  clip_frac_v_max=0.49, clip_frac_v_before_cross=0.49)
    a, b = claim_two_phases(pd.concat([df, df_of([blown])], ignore_index=True))
    exc = {e["premise"]: e["excluded"] for e in a.to_dict()["excluded"]}
    assert exc == {"assumption-2.3": 0, "active": 3, "small-weights": 1, PHASE2: 4} and 13.8 > DIVERGED
    assert all(c.decision.verdict == NA for c in claim_two_phases(
        eta_rows(lambda eta: 3000.0 / eta).assign(assume_violations=VIOLATED)))


# -- A4 (self-check), A5 (exploratory) ------------------------------------------------------------

def probe_rows(method, eps, diff=0.0):
    return [rows("probe", seed=s, method=method, eps=eps, experiment="limit", step=t,
                 A=0.1 * t + s + (diff if t == 15 else 0.0), B=0.2 * t, loss=1.0 / (t + 1))
            for s in range(2) for t in range(0, 20, 5)]


def test_a4_self_check_at_vanishing_eps():
    std = probe_rows("standard", 0.4)

    def run(*pairs):
        return claim_eps_limit(df_of(std + [r for eps, d in pairs for r in probe_rows("gradient_step", eps, d)]))
    ok = run((1e-4, 3e-5), (1e-2, 1e-3))  # D ∝ ε^0.76, as measured
    assert ok.kind == cl.SELF_CHECK and ok.decision.verdict == R and ok.evidence["order"] == pytest.approx(0.761, abs=1e-3)
    assert run((1e-4, 1e-6), (1e-2, 1e-4)).evidence["order"] == pytest.approx(1.0)
    assert run((1e-4, 0.4), (1e-2, 0.5)).decision.verdict == C  # barely moves: no convergence
    growing = run((1e-4, 5e-3), (1e-2, 1e-3))
    assert growing.decision.verdict == C and "does not shrink" in growing.decision.reason
    assert run((1e-4, 0.0), (1e-2, 1e-3)).decision.verdict == C  # the ε > 0 path did not run
    assert claim_eps_limit(df_of(probe_rows("gradient_step", 1e-4))).decision.verdict == NA


@pytest.mark.filterwarnings("ignore::robustlab.data.patches.AssumptionWarning")
def test_a4_real_runs_take_the_adversarial_path_and_converge():
    tiny = dict(P=12, d=8, n_train=16, n_test=16, m=2, steps=12, probe_every=3, eval_every=6, eval_pgd_steps=1,
                experiment="limit", span_steps=2, span_restarts=1)
    items = []
    for method, eps in (("standard", 0.4), ("gradient_step", 1e-4), ("gradient_step", 1e-2)):
        cfgs = [FeatureLearningConfig(seed=s, method=method, eps=eps, **tiny) for s in (0, 1)]
        for cfg, out in zip(cfgs, run_points(cfgs, "cpu")):
            items += [{**cfg.to_dict(), **r, "point": f"{method}-{eps}-{cfg.seed}"} for r in out]
    c = claim_eps_limit(df_of(items))
    worst = c.evidence["worst_diff_by_eps"]
    assert c.passed and 0.0 < worst["0.0001"] < worst["0.01"]  # the adversarial path ran: not bit for bit


def eps_rows(values):
    out = []
    for eps, amb in values:
        for s in range(3):
            out.append(final(experiment="eps" if eps != 0.4 else "main", method="gradient_step", eps=eps, seed=s,
                             A=0.5 + amb + 0.01 * (s - 1), B=0.5))
    return df_of(out)


def test_a5_exploratory_spectrum():
    c = claim_eps_spectrum(eps_rows([(0.0, -2.0), (0.2, -1.0), (0.4, 0.5), (0.5, 0.6), (0.7, 0.4)]))
    assert c.kind == cl.EXPLORATORY and c.decision.verdict == R
    assert c.evidence["sign_change_eps"] == pytest.approx(0.2 + 0.2 * 1.0 / 1.5, abs=1e-6)
    assert c.evidence["eps_max"] == 0.5
    assert claim_eps_spectrum(eps_rows([(0.0, 0.5), (0.2, 0.0), (0.4, -1.0), (0.5, -1.5)])).decision.verdict == C
    assert claim_eps_spectrum(eps_rows([(0.0, 0.5), (0.2, 0.5)])).decision.verdict == NA


# -- A6 ---------------------------------------------------------------------------------------

def image_rows(std_rob, adv_rob, ilyas=0.35, pgd_clean=0.9, seeds=6):
    """6 seeds (the quick preset's): the placebo control needs disjoint pairs of standard seeds, 3 here."""
    out = []
    for ds in ("digits", "mnist5k"):
        for s in range(seeds):
            for method, rob, clean in (("standard", std_rob, 0.9), ("pgd", adv_rob, pgd_clean)):
                out.append(rows("image_final", seed=s, experiment="images", dataset=ds, method=method,
                                clean_acc=clean, robust_acc=rob + 0.02 * (s - 1) * (method == "pgd")
                                + 0.01 * ((s * 3) % 4 - 1.5) * (method == "standard"), n_test=300, chance=0.1))
            if ilyas is not None:
                out.append(rows("ilyas", seed=s, experiment="images", dataset=ds, method="standard",
                                ilyas_acc=ilyas + 0.01 * s, attack_success=0.5, chance=0.1, n_test=300))
    return df_of(out)


def test_a6_verdicts_seeds_as_units_and_the_placebo_control():
    c = claim_images(image_rows(0.2, 0.6))
    assert c.decision.verdict == R and c.evidence["digits"]["ilyas"]["n_seeds"] == 6
    assert c.control.verdict.verdict != R  # standard vs standard: no gain by construction
    assert claim_images(image_rows(0.6, 0.2)).decision.verdict == C
    assert claim_images(image_rows(0.2, 0.6, ilyas=0.05)).decision.verdict == C
    assert claim_images(image_rows(0.2, 0.6, ilyas=None)).decision.verdict == I
    assert claim_images(image_rows(0.2, 0.2)).decision.verdict == C  # no gain: below 0.1
    # the placebo with a gain planted (odd seeds' standard models more robust than the even ones'): the
    # control can read reproduced, and the claim is capped
    planted = image_rows(0.2, 0.6)
    odd_std = (planted["method"] == "standard") & (planted["seed"] % 2 == 1)
    planted.loc[odd_std, "robust_acc"] += 0.4
    planted.loc[(planted["method"] == "pgd") & (planted["seed"] % 2 == 1), "robust_acc"] += 0.4
    c = claim_images(planted)
    assert c.control.verdict.verdict == R and c.decision.verdict == I
    mirror = [rows("ilyas", seed=s, experiment="images", dataset="digits", method="pgd", ilyas_acc=0.12,
                   attack_success=0.3, chance=0.1, n_test=300) for s in range(6)]
    c = claim_images(pd.concat([image_rows(0.2, 0.6), df_of(mirror)], ignore_index=True))
    assert c.decision.verdict == R and c.evidence["digits"]["mirror_from_pgd_model"]["effect"] == pytest.approx(0.12)
    assert c.evidence["digits"]["ilyas"]["effect"] > 0.3  # the mirror rows do not enter the test itself


def test_a6_excludes_a_pgd_model_that_did_not_train():
    c = claim_images(image_rows(0.2, 0.6, pgd_clean=0.5))
    assert c.decision.verdict == NA
    # one dataset without a pair left: the statement is "on every dataset", so not applicable (the quick preset's mnist5k)
    one = image_rows(0.2, 0.6)
    one.loc[(one["dataset"] == "mnist5k") & (one["method"] == "pgd"), "clean_acc"] = 0.5
    assert claim_images(one).decision.verdict == NA
    assert c.to_dict()["excluded"] == [{"premise": "pgd-clean-comparable", "excluded": 12, "of": 12,
                                        "detail": c.to_dict()["excluded"][0]["detail"]}]


def test_all_claims_on_empty_results_are_not_applicable_not_crash():
    out = claims(df_of([rows("timing", seconds=1.0)]), None)
    assert len(out) == 15 and all(c.decision.verdict == NA for c in out)
    assert all("not measured in this run" in c.decision.reason for c in out)


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
    # (and A2c's attribution on hand-set weights: 3 points × 3 seeds; A4's limit: 4 points × 2 seeds)
    assert len(quick.points) == (45 * 3 + 2 * QUICK_MAIN_SEEDS + len(QUICK_ETA_ACTIVE) * QUICK_ETA_ACTIVE_SEEDS
                                 + 4 * QUICK_IMAGE_SEEDS + 3 * 3 + 4 * 2)
    # the claims about the end state and the crossing share one horizon (A4 pairs eps with main,
    # A5 pools eps with main, A3 pools eta with main)
    assert {p.steps for p in quick.points if p.experiment in ("main", "eps", "eta")} == {QUICK_STEPS}
    assert {p.experiment for p in quick.points} == {"main", "eta", "eps", "activation", "attack", "basis",
                                                    "overlap", "counter", "limit", "images"}
    assert len(plan(STUDY, preset="paper").points) > len(quick.points)
    from robustlab.data.patches import assumption_report

    base = FeatureLearningConfig()
    rep = assumption_report(base.patch_spec(), q=base.q, eps=base.eps)
    assert rep["holds"], rep["violations"]
    assert math.isclose(base.eps, base.beta)  # the theory's attack erases v_y exactly


def test_regime_d1024_is_the_one_chosen_group_of_the_regime_search():
    # notes/fl2.md: one-step, k = 5, η̃ = 100, 1 seed, with every other setting of the regime search at d = 1024
    pts = plan(STUDY, preset="regime-d1024").points
    full = [p for p in plan(STUDY, preset="regime").points
            if p.d == 1024 and p.k == 5 and p.method == "gradient_step" and p.eta_tilde == 100.0 and p.seed == 0]
    assert len(pts) == 1 and pts == full


def test_weights_order_the_groups_by_their_work(tmp_path):
    # Study.weight only orders a parallel run's groups; it must be positive and finite on every
    # preset, and rank what costs more above what costs less
    from robustlab.studies.feature_learning.run import _work

    for preset in STUDY.presets:
        sets = {"data_dir": str(tmp_path)} if preset == "paper-mnist" else None  # the full MNIST needs its file
        (tmp_path / "mnist.pkl.gz").touch()
        assert all(math.isfinite(_work(p)) and _work(p) > 0 for p in plan(STUDY, preset=preset, sets=sets).points), preset
    with pytest.raises(ConfigError, match="data_dir"):
        plan(STUDY, preset="paper-mnist")  # without one: refused before anything runs
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


def test_dry_run_probes_an_image_point_with_its_own_mix_of_work(tmp_path):
    # Study.probe: an image point on fewer images, the test share kept, so that the work of
    # training, evaluation and the Ilyas test grows in step with the images (_work linear in
    # them): the difference of two probes is the point's own mix. Other experiments: not probed.
    from robustlab.studies.feature_learning.run import _work, probe_point

    (tmp_path / "mnist.pkl.gz").touch()
    pts = plan(STUDY, preset="paper-mnist", sets={"data_dir": str(tmp_path)}).points
    for p in pts:
        a, b, c = (probe_point(p, s) for s in (8, 16, 32))
        assert (a.max_train, b.max_train, c.max_train) == (8 * 32, 16 * 32, 32 * 32)
        assert (a.max_test, b.max_test) == (math.ceil(256 / 6), math.ceil(512 / 6))  # 10,000 / 60,000 of them
        assert (a.epochs, a.method, a.ilyas_mirror, a.data_dir) == (p.epochs, p.method, p.ilyas_mirror, p.data_dir)
        assert _work(c) - _work(b) == pytest.approx(2 * (_work(b) - _work(a)), rel=0.01)  # linear in the images
        assert _work(p) > 50 * _work(c)  # 60,000 images against 1,024
    quick_img = [p for p in plan(STUDY, preset="quick").points if p.experiment == "images" and p.dataset == "mnist5k"]
    assert probe_point(quick_img[0], 10_000).max_train == 800  # never more than the point's own images
    assert probe_point(dataclasses.replace(quick_img[0], experiment="main"), 8) is None


def test_a2e_maps_the_region_robust_inside_span_v():
    from robustlab.studies.feature_learning.claims import claim_a2e

    pts = []
    for eps in (0.4, 0.8):
        for s in range(3):
            robust = eps > 0.5
            pts.append(adv_final(s, experiment="mechanism", eps=eps, span_v_acc=0.95 if robust else 0.05 + 0.01 * s))
    c = claim_a2e(df_of(pts))
    assert c.kind == cl.EXPLORATORY and c.decision.verdict == R
    assert c.evidence["best_setting"]["eps"] == 0.8 and len(c.evidence["table"]) == 2
    assert [r["eps"] for r in c.evidence["settings_robust_in_every_seed"]] == [0.8]


@pytest.mark.filterwarnings("ignore::robustlab.data.patches.AssumptionWarning")
def test_real_runs_record_clipping_threats_feature_use_and_the_counter_experiment():
    tiny = dict(P=12, d=8, n_train=16, n_test=16, m=2, steps=12, probe_every=3, eval_every=6, eval_pgd_steps=1,
                span_steps=3, span_restarts=2)
    adv = [FeatureLearningConfig(seed=s, experiment="main", method="gradient_step", **tiny) for s in (0, 1)]
    out = run_points(adv, "cpu")
    fin = [r for r in out[0] if r["kind"] == "final"][0]
    assert 0.0 <= fin["clip_frac_v_phase1"] <= 1.0 and 0.0 <= fin["threat_linf_all"] <= 1.0
    assert len([r for r in out[0] if r["kind"] == "clip"]) == 5
    sweep = {r["eps_over_alpha"]: r for r in out[0] if r["kind"] == "eps_sweep"}
    assert sorted(sweep) == [0.15, 0.2, 0.3, 0.4]
    assert sweep[0.4]["every_patch_acc"] == fin["threat_linf_all"]  # u on every patch, at ε = eval_eps
    assert "v_swap_acc" in sweep[0.4] and "v_swap_acc" not in sweep[0.3]  # attribution budgets only
    assert fin["linf_acc_r100"] == fin["pgd_acc"] and fin["linf_acc_r50"] == sweep[0.2]["pgd_acc"]  # reused
    # A3's premise and A2's parts are recorded per run
    assert 0.0 <= fin["clip_frac_v_before_cross"] <= 1.0 and "saturation_step" in fin
    # the median unclipped move along v_y: the clipped fraction exceeds 1/2 exactly when it reaches ε
    for r in (r for r in out[0] if r["kind"] == "clip"):
        assert r["move_v_median"] >= 0.0
        if r["clip_frac_v"] > 0.5 + 1e-9:
            assert r["move_v_median"] >= adv[0].eps
        elif r["clip_frac_v"] < 0.5 - 1e-9:
            assert r["move_v_median"] <= adv[0].eps
    assert fin["move_v_median_late"] >= 0.0
    # the phase-2 premise's measurements (issue 52): the adversarial loss at every clip probe and at the end
    clips = [r for r in out[0] if r["kind"] == "clip"]
    probes = {r["step"]: r["loss"] for r in out[0] if r["kind"] == "probe"}
    assert all(r["loss_adv"] == pytest.approx(probes[r["step"]]) for r in clips)
    top = max(clips, key=lambda r: r["clip_frac_v"])
    assert fin["clip_frac_v_max"] == pytest.approx(top["clip_frac_v"])
    assert fin["loss_at_clip_max"] == pytest.approx(top["loss_adv"]) and fin["loss_adv"] == pytest.approx(fin["loss"])
    hit = [r["step"] for r in clips if r["clip_frac_v"] > 0.5 and r["loss_adv"] >= 0.5 * math.log(2)]
    assert fin["phase2_step"] == (float(hit[0]) if hit else None)
    assert fin["A_init"] == [r for r in out[0] if r["kind"] == "probe"][0]["A"] and fin["B_peak"] >= fin["B"]
    # robustness by radius: span{v} and ℓ∞ at ε/2, 3ε/4, ε; at ε the span{v} number is A2's
    for t in ("r50", "r75", "r100"):
        assert 0.0 <= fin[f"span_v_acc_{t}"] <= 1.0 and 0.0 <= fin[f"linf_acc_{t}"] <= 1.0
    assert fin["span_v_acc_r100"] == fin["span_v_acc"]
    std = [r for r in run_points([dataclasses.replace(c, method="standard") for c in adv], "cpu")[0]
           if r["kind"] == "final"][0]
    assert std["loss_adv"] is None and "phase2_step" not in std and 0.0 <= std["span_v_acc_r50"] <= 1.0
    zero = [r for r in run_points([dataclasses.replace(c, experiment="eps", eps=0.0) for c in adv], "cpu")[0]
            if r["kind"] == "final"][0]
    # the ε = 0 run is standard training bit for bit, measured the same way (A2f's control)
    assert zero["span_v_acc_r50"] == std["span_v_acc_r50"] and zero["linf_acc_r75"] == std["linf_acc_r75"]
    for key in ("span_swap_acc", "span_pgd_acc", "span_v_acc", "v_only_acc", "robust_logit_share"):
        assert 0.0 <= fin[key] <= 1.0, key
    assert fin["span_v_acc"] <= min(fin["span_swap_acc"], fin["span_pgd_acc"])  # the per-sample worst case
    assert len(fin["u_neuron_share_i"]) == 2 and len(fin["span_v_acc_i"]) == 2
    # a member's span{v} numbers do not depend on the ensemble it ran in (its own generator)
    alone = [r for r in run_points(adv[1:], "cpu")[0] if r["kind"] == "final"][0]
    assert alone["span_pgd_acc"] == [r for r in out[1] if r["kind"] == "final"][0]["span_pgd_acc"]
    cnt = [FeatureLearningConfig(seed=s, experiment="counter", method="standard", P=64, eval_eps=0.4, n_test=32)
           for s in (0, 1)]
    row = run_points(cnt, "cpu")[0][0]
    # P = 64 > (α/ε − 1)^3 = 3.4: the every-patch attack breaks the hand-set robust weights
    assert row["bound_ratio"] == pytest.approx(1.5 ** 3 / 64) and row["threat_linf_all"] == 0.0
    assert row["clean_acc"] == 1.0 and row["feature_acc"] == 1.0 and row["threat_nonrobust_subspace"] == 1.0
    few = [dataclasses.replace(c, P=2, eval_eps=0.1) for c in cnt]  # 9^3 / 2 >> 1: it survives
    assert run_points(few, "cpu")[0][0]["threat_linf_all"] == 1.0

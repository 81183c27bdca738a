"""fl-review: a referee's probes of Study A's claims (issue 52, under the engine of issue 51).

Per claim, on planted results frames (the helpers of test_feature_claims):
1. the effect in the claim's runs (phase 2 met), none in the control's -> reproduced;
2. no effect -> not reproduced;
3. the effect planted in the control's setting -> the control reads reproduced (claim capped);
and the engine's rules: an NA control caps, ``across`` joins with the claim's quantifier, no control
fails by construction. Probes the study's own tests already cover are not repeated here (the table in
/work/notes/fl-review.md says which test covers which). The review's two strict xfails on A3b (its η̃
coverage; runs that never cross dropped) are resolved by the redesign in notes/fl2.md and pinned below.
"""

import numpy as np
import pandas as pd
import pytest
from test_feature_claims import (
    NA,
    NO_PHASE2,
    PHASE2_COLS,
    VIOLATED,
    C,
    I,
    R,
    adv_final,
    df_of,
    eta_rows,
    final,
    nonrobust,
    radii,
    spread,
    std_final,
    zero_eps,
)

from robustlab import claims as cl
from robustlab.studies.feature_learning import images
from robustlab.studies.feature_learning.claims import claim_a2b, claim_a2e, claim_a2f
from robustlab.studies.feature_learning.common import PHASE2
from robustlab.studies.feature_learning.dynamics import (
    SLOPE_BAND,
    claim_phase2_reached,
    claim_two_phases,
    km_median,
)
from robustlab.studies.feature_learning.images import claim_images

# -- A2b: the universal quantifier over α/(σ_n√d), and an NA control -----------------------------


def _at(alpha, s, **kw):
    """A one-step model at α (β = ε = 0.4·α keeps Assumption 2.3's ratios), in phase 2."""
    return adv_final(s, alpha=alpha, beta=0.4 * alpha, eps=0.4 * alpha, eval_eps=0.4 * alpha,
                     point=f"a{alpha}-{s}", **kw)


def _std_at(alpha, s, **kw):
    return nonrobust("standard", s, alpha=alpha, point=f"s{alpha}-{s}", **kw)


def test_a2b_one_contradicted_value_contradicts_it_with_that_values_numbers():
    ctrl = [_std_at(a, s) for a in (4.0, 8.0) for s in range(3)]
    good = [_at(4.0, s) for s in range(3)]
    bad = [_at(8.0, s, feature_acc=0.5 + spread(s)) for s in range(3)]
    c = claim_a2b(df_of(good + bad + ctrl))
    assert c.decision.verdict == C
    assert c.decision.effect == pytest.approx(0.5) and "8.0" in c.decision.reason
    assert c.across["alpha/(sigma_n sqrt d)"] == {"4.0": R, "8.0": C}


def test_a2b_control_only_outside_the_regime_caps_the_claim():
    # the standard models exist only at α = σ_n√d (outside): the control reads not applicable -> no working control
    ctrl = [_std_at(1.0, s) for s in range(3)]
    c = claim_a2b(df_of([_at(4.0, s) for s in range(3)] + ctrl))
    assert c.control.verdict.verdict == NA and c.decision.verdict == I
    assert cl.NO_WORKING_CONTROL in c.decision.reason and c.to_dict()["verdict_before_control"] == R


# -- A2f: robustness by radius, its ε = 0 control ----------------------------------------------------------


def test_a2f_with_too_few_standard_pairs_the_control_is_not_applicable_and_caps_it():
    # 3 standard seeds make 1 placebo pair: too few for the rule (2 pairs at least)
    c = claim_a2f(df_of([adv_final(s) for s in range(3)] + [std_final(s) for s in range(3)]))
    assert c.control.verdict.verdict == NA and c.decision.verdict == I
    assert cl.NO_WORKING_CONTROL in c.decision.reason


def test_a2f_a_gain_at_no_radius_is_not_reproduced_even_at_the_issue_numbers_minus_the_effect():
    # the quick numbers at ε/2 for both methods (0.469): no gain anywhere -> contradicted
    std = [std_final(s, **radii(0.469, 0.0, s)) for s in range(3)]
    adv = [adv_final(s, **radii(0.469, 0.0, s)) for s in range(3)]
    c = claim_a2f(df_of(adv + std + [zero_eps(s, **radii(0.469, 0.0, s)) for s in range(3)]))
    assert c.decision.verdict == C


def _realisable_a2f(std_level, std_sd, seeds=8):
    """Main runs of both methods and the ε = 0 runs as run.py makes them: each ε = 0 run *is* the
    standard run of its seed (test_real_runs_… asserts equality), whatever the standard runs are."""
    rng = np.random.default_rng(0)
    std, zero, adv = [], [], []
    for s in range(seeds):
        acc = {f"span_v_acc_{t}": float(np.clip(std_level + std_sd * rng.standard_normal(), 0, 1))
               for t in ("r50", "r75", "r100")}
        std.append(std_final(s, **acc))
        zero.append(zero_eps(s, **acc))
        adv.append(adv_final(s, **{f"span_v_acc_{t}": float(np.clip(std_level + std_sd * rng.standard_normal(), 0, 1))
                                   for t in ("r50", "r75", "r100")}))
    return df_of(adv + std + zero)


def test_a2f_control_verdict_depends_on_the_runs():
    # fixed after this review: A2f's control is now disjoint pairs of standard seeds (a placebo with
    # real seed-to-seed variation), no longer the ε = 0 runs (0 [0, 0] by construction)
    seen = set()
    for level, sd in ((0.47, 0.05), (0.47, 0.2), (0.5, 0.45)):  # quiet ... very noisy seeds
        ctl = claim_a2f(_realisable_a2f(level, sd)).control.verdict
        seen.add((ctl.verdict, ctl.effect, tuple(ctl.interval or ())))
    assert seen != {(C, 0.0, (0.0, 0.0))}


def test_a2f_seed_noise_alone_is_not_read_as_an_improvement():
    # no effect, noisy seeds (sd 0.2): the one-step models are draws from the standard models' law
    c = claim_a2f(_realisable_a2f(0.47, 0.2))
    assert c.decision.verdict != R


def test_a2f_the_existential_decides_at_the_quick_numbers():
    # the quick seed-0 means by radius (span{v}: one-step 0.916 / 0.423 / 0.090, standard 0.469 / 0 / 0):
    # "some radius" reads reproduced; a universal reading would be decided at ε (gain 0.09 < 0.1). Recorded
    # because the quantifier was chosen after the issue's numbers were read (notes/fl.md says so).
    def jit(s):  # seed-to-seed spread, sd about 0.1 (16 seeds, as at quick)
        return 0.12 * ((s * 7) % 5 - 2) / 2

    adv = [adv_final(s, span_v_acc_r50=0.916 + jit(s) / 3, span_v_acc_r75=0.423 + jit(s),
                     span_v_acc_r100=0.09 + jit(s)) for s in range(16)]
    # the standard seeds vary independently (sd 0.05): the placebo pairs (A2f's control) then read no
    # gain, as on the recorded quick runs (−0.030 and +0.001 over 8 pairs); a deterministic pattern
    # here would plant one, and at sd 0.1 eight pairs leave the placebo undecided (the claim capped)
    noise = np.random.default_rng(0).normal(0, 0.05, 16)
    std = [std_final(s, span_v_acc_r50=0.469 + noise[s], span_v_acc_r75=0.0, span_v_acc_r100=0.0)
           for s in range(16)]
    c = claim_a2f(df_of(adv + std))
    assert c.decision.verdict == R and c.across["radius/ε"]["1.0"] != R


# -- A3a: the control's premises -------------------------------------------------------------


def test_a3a_control_judges_only_standard_runs_where_assumption_2_3_holds():
    # the claim's runs need Assumption 2.3; its control's must too (the A2 controls keep it): standard runs that
    # violate it, with two phases planted, are excluded, not judged
    df = pd.concat([eta_rows(lambda eta: 3000.0 / eta),
                    df_of([std_final(s, assume_violations=VIOLATED) for s in range(3, 16)])], ignore_index=True)
    std = df["method"] == "standard"
    df.loc[std, "assume_violations"] = VIOLATED
    df.loc[std, "cross_step"] = 200.0
    a, _ = claim_two_phases(df)
    assert a.control.verdict.verdict == NA  # no standard run left: not a control that passes


# -- A3b: can it ever read reproduced on the presets' η̃ grids? ---------------------------------------------

PAPER_ETAS = (0.5, 1.5, 5.0, 15.0, 25.0, 50.0, 150.0)  # presets.ETA_GRID with main's 15


# The redesign (notes/fl2.md, issue 52 session 2): A3b's claim and its control each need two decades of η̃,
# and saturation grows with η̃, so one grid needs 4 decades; on a shorter one A3b reads not applicable naming
# eta-coverage (never "inconclusive: no working control" by design).
WIDE_ETAS = (0.5, 1.5, 5.0, 15.0, 50.0, 150.0, 500.0, 1500.0, 5000.0, 15000.0)  # 2 decades each side, disjoint


def _split(threshold):
    def sat(eta):  # saturated from ``threshold`` up (the law's trigger grows with η̃)
        return 0.8 if eta >= threshold else 0.2
    return sat


def test_a3b_on_the_paper_eta_grid_reads_not_applicable_naming_its_coverage():
    df = eta_rows(lambda eta: 3000.0 / eta if eta >= 5.0 else 5.0 * eta, clip=_split(5.0), etas=PAPER_ETAS)
    _, b = claim_two_phases(df)
    assert b.decision.verdict == NA and "eta-coverage" in b.decision.reason and "2.48 decades" in b.decision.reason
    # the same with the saturated runs on the lower side: still the design, not the runs
    df = eta_rows(lambda eta: 3000.0 / eta if eta >= 1.5 else 5.0 * eta, clip=_split(1.5), etas=PAPER_ETAS)
    assert claim_two_phases(df)[1].decision.verdict == NA


def test_a3b_on_the_quick_eta_grid_reads_not_applicable_naming_its_coverage():
    quick = (0.5, 5.0, 15.0, 25.0, 50.0)  # presets.QUICK_ETA_* with main's 15
    _, b = claim_two_phases(eta_rows(lambda eta: 3000.0 / eta, etas=quick))
    assert b.decision.verdict == NA and "eta-coverage" in b.decision.reason
    # and with no run in phase 2 (as measured at quick) the premise counts follow the coverage
    _, b = claim_two_phases(eta_rows(lambda eta: 3000.0 / eta, etas=quick).assign(phase2_step=None))
    assert b.decision.verdict == NA and "eta-coverage" in b.decision.reason and "phase-2" in b.decision.reason


def test_a3b_on_a_four_decade_grid_reproduced_with_the_law_and_a_working_control():
    # the unsaturated runs below 50 cross later for larger η̃ (as measured); the saturated ones from 50 up at 1/η̃
    df = eta_rows(lambda eta: 3e5 / eta if eta >= 150.0 else 5.0 * eta, clip=_split(150.0), etas=WIDE_ETAS,
                  step=10_000)
    _, b = claim_two_phases(df)
    assert b.decision.verdict == R and b.control.verdict.verdict == C
    assert b.decision.effect == pytest.approx(-1.0, abs=0.05)


def test_a3b_on_a_four_decade_grid_contradicted_without_the_law():
    df = eta_rows(lambda eta: 5.0 * eta, clip=_split(150.0), etas=WIDE_ETAS, step=30_000)
    _, b = claim_two_phases(df)
    assert b.decision.verdict == C
    # a flat crossing time (no η̃ dependence at all) is contradicted too
    assert claim_two_phases(eta_rows(lambda eta: 300.0, clip=_split(150.0), etas=WIDE_ETAS, step=1000))[1].decision.verdict == C


def test_a3b_control_with_the_law_planted_reads_reproduced_and_caps_the_claim():
    df = eta_rows(lambda eta: 3e5 / eta, clip=_split(150.0), etas=WIDE_ETAS, step=1e6)  # the law in the unsaturated runs too
    _, b = claim_two_phases(df)
    assert b.control.verdict.verdict == R and b.decision.verdict == I


# -- A6: the threshold above the null ----------------------------------------------------------------


def test_a6_threshold_at_the_null_would_leave_the_placebo_undecidable(monkeypatch):
    # structure, not the measured gains: a placebo with true gain 0 and seed noise reads contradicted against
    # 0.1, but against 0 its interval straddles the threshold (inconclusive), and every claim would be capped
    from test_feature_claims import image_rows

    c = claim_images(image_rows(0.2, 0.6))
    assert c.control.verdict.verdict == C and c.decision.verdict == R
    monkeypatch.setattr(images, "GAIN_MIN", 0.0)
    c0 = claim_images(image_rows(0.2, 0.6))
    assert c0.control.verdict.verdict == I and c0.decision.verdict == I


# -- exploratory claims without a control: probes 1 and 2 ---------------------------------------------------


def test_a2e_contradicted_when_no_setting_is_robust_in_span_v():
    pts = [adv_final(s, experiment="mechanism", eps=eps, span_v_acc=0.05 + 0.01 * s)
           for eps in (0.4, 0.8) for s in range(3)]
    assert claim_a2e(df_of(pts)).decision.verdict == C


def test_a3c_reproduced_when_every_regime_run_reaches_phase_2_and_not_when_half_miss():
    def run(cols_for):
        return [adv_final(s, experiment="regime", d=d, eta_tilde=eta, **cols_for(d), point=f"{d}-{eta}-{s}")
                for d in (64, 256) for eta in (10.0, 100.0) for s in range(2)]
    assert claim_phase2_reached(df_of(run(lambda d: PHASE2_COLS))).decision.verdict == R  # 8/8: Wilson low 0.68
    half = claim_phase2_reached(df_of(run(lambda d: PHASE2_COLS if d == 64 else NO_PHASE2)))
    assert half.decision.verdict != R
    # a run with a saturation step but a final loss above 0.1·log k is not in phase 2
    late = claim_phase2_reached(df_of(run(lambda d: {**PHASE2_COLS, "loss_adv": 0.5})))
    assert late.decision.verdict == C


# -- the phase-2 premise does not hand the standard control a free pass ---------------------------------------------


def test_phase2_is_dropped_only_from_controls_on_standard_training():
    # A2a's control on one-step runs would need phase 2 like the claim; standard rows never carry it
    from robustlab.studies.feature_learning.common import PHASE2, PREMISES

    std = df_of([std_final(s) for s in range(3)])
    assert not PREMISES[PHASE2].mask(std).any()
    one = df_of([final(method="gradient_step", experiment="main", **NO_PHASE2)])
    assert not PREMISES[PHASE2].mask(one).any()


# -- the phase-2 premise's final-loss half: a premise that can remove the failing side (A3a) -------------------


def test_a3a_plateau_runs_leave_through_the_premise_and_the_variant_says_so():
    # 12 runs saturate and cross (phase 2 met); 12 saturate the same way but stay on the log k plateau and never
    # cross: the final-loss half of phase-2 (loss_adv <= 0.1·log k) removes exactly the runs that fail the rule.
    # The verdict reads reproduced on the survivors; the variant without phase-2 carries the contradiction.
    plateau = [final(experiment="eta", method="gradient_step", eta_tilde=eta, seed=20 + s, cross_step=None,
                     b_peak_step=10, clip_frac_v_before_cross=0.8, clip_frac_v_phase1=0.8, saturation_step=5.0,
                     **{**PHASE2_COLS, "loss_adv": 0.69}, point=f"plateau-{eta}-{s}")
               for eta in (5.0, 15.0, 60.0, 500.0) for s in range(3)]
    df = pd.concat([eta_rows(lambda eta: 3000.0 / eta), df_of(plateau)], ignore_index=True)
    a, _ = claim_two_phases(df)
    assert a.decision.verdict == R
    assert {e["premise"]: e["excluded"] for e in a.to_dict()["excluded"]}[PHASE2] == 12
    (_, variant), = a.variants.items()
    assert variant.verdict == C


def test_a3b_runs_that_never_cross_at_the_largest_eta_are_not_dropped():
    etas = (1.5, 5.0, 15.0, 60.0, 150.0, 500.0)  # saturated and unsaturated runs at every η̃ (a working control)
    df = eta_rows(lambda eta: 3000.0 / eta, etas=etas, unsat_law=lambda eta: 5.0 * eta)
    df.loc[(df["eta_tilde"] == 500.0) & (df["clip_frac_v_max"] > 0.5), "cross_step"] = None
    _, b = claim_two_phases(df)
    assert b.control.verdict.verdict == C
    assert b.decision.verdict != R
    assert b.decision.interval[1] is None  # +∞: the censored median above the mean log η̃ opens the upper end
    exc = {e["premise"]: e["excluded"] for e in b.to_dict()["excluded"]}
    assert "two-phases" not in exc  # kept, as censored runs, not dropped


def test_a3b_a_minority_of_censored_runs_leaves_the_median_exact():
    # one of ten saturated runs at the smallest η̃ (the latest crossing) never crosses: the KM median there is
    # exact, and the law still reads reproduced
    etas = (1.5, 5.0, 15.0, 60.0, 150.0, 500.0)
    df = eta_rows(lambda eta: 3000.0 / eta, etas=etas, unsat_law=lambda eta: 5.0 * eta, step=5000)
    extra = df[(df["eta_tilde"] == 1.5) & (df["seed"] == 1)]
    df = pd.concat([df, *[extra.assign(seed=s) for s in range(20, 27)]], ignore_index=True)
    df.loc[(df["eta_tilde"] == 1.5) & (df["seed"] == 2), "cross_step"] = None
    _, b = claim_two_phases(df)
    assert b.decision.verdict == R and b.decision.effect == pytest.approx(-1.0, abs=0.02)
    # six of ten: the median is censored, below the mean log η̃: the lower end opens, not reproduced
    df.loc[(df["eta_tilde"] == 1.5) & df["seed"].isin([0, 1, 20, 21, 22]), "cross_step"] = None
    _, b = claim_two_phases(df)
    assert b.decision.verdict != R and b.decision.interval[0] is None  # −∞ (stored as none)


def test_a3b_censored_lower_bounds_that_already_leave_the_band_contradict():
    # the saturated runs at the two largest η̃ never cross within 200 steps where the law says 6–20: even their
    # lower bounds put the slope far above −0.75
    etas = (1.5, 5.0, 15.0, 60.0, 150.0, 500.0)
    df = eta_rows(lambda eta: 300.0 / eta ** 0.1, etas=etas, unsat_law=lambda eta: 5.0 * eta, step=1000)
    df.loc[(df["eta_tilde"] >= 150.0) & (df["clip_frac_v_max"] > 0.5), "cross_step"] = None
    _, b = claim_two_phases(df)
    assert b.decision.verdict == C and b.decision.interval[0] > SLOPE_BAND[1]


def test_km_median_of_censored_times():
    t = np.array([10.0, 20.0, 30.0, 200.0])
    assert km_median(t, np.array([False] * 4)) == (20.0, False)  # the smallest t with S <= 1/2
    assert km_median(t, np.array([False, False, True, True])) == (20.0, False)
    assert km_median(t, np.array([False, True, True, True])) == (200.0, True)  # only a bound
    # a censoring before an event: the KM step at 30 is 1 − 1/2, S = 3/4 · 1/2 <= 1/2
    assert km_median(t, np.array([False, True, False, True])) == (30.0, False)


def test_a3b_with_interleaved_populations_reads_reproduced_beside_a_working_control():
    # interleaved populations: saturated and unsaturated runs at the same η̃ over >= 2 decades
    etas = (1.5, 5.0, 15.0, 60.0, 150.0, 500.0)
    _, b = claim_two_phases(eta_rows(lambda eta: 3000.0 / eta, etas=etas, unsat_law=lambda eta: 5.0 * eta))
    assert b.decision.verdict == R and b.control.verdict.verdict == C

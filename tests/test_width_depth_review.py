"""An independent review of Study C's claims (width-depth-init, issue #54), on planted results built
with the study's own row schema (``synth`` of test_width_depth_claims), calling the claims directly.

For every claim with a control, the four probes:
(1) the effect planted in the claim's own regime, passing its premises -> reproduced;
(2) planted without the effect -> not reproduced;
(3) the control's setting planted with the effect -> the control can read reproduced (else the
    control is a complement, or NA by construction, and the claim is capped forever);
(4) base seeds 0 and 17 on the real quick preset: run by hand, recorded in notes/wdi-review.md.
Exploratory readings and self-checks get (1) and (2).

A probe that exposes a defect is ``xfail(strict=True)`` naming the defect (notes/wdi-review.md
gives the evidence and the fix proposed)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_width_depth_claims import falling, flat, moving_peak, small_peak, synth

from robustlab import stats
from robustlab.studies import width_depth_init as W
from robustlab.studies.width_depth_init.lazy_claims import peak_part

R, C, I, NA = stats.REPRODUCED, stats.CONTRADICTED, stats.INCONCLUSIVE, stats.NOT_APPLICABLE
GAMMA = 2.0  # the small init's exponent in synth (its variance m^-gamma in every layer)
WIDTHS = [2 ** i for i in range(11)]


_CLAIM = {"width-peak": W.claim_width, "width-peak-location": W.claim_width_location,
          "width-peak-lazy-limit": W.claim_width_lazy_limit, "depth-init-at-init": W.claim_depth_at_init,
          **{f"depth-init-trained-{i}": (lambda df, ctx=None, i=i: W.claim_depth_trained(df, i, ctx))
             for i in ("lecun", "he", "ntk")},
          "depth-lecun-nonlazy": W.claim_lecun_nonlazy, "nonlazy-width-early": W.claim_nonlazy_early,
          "nonlazy-width": W.claim_nonlazy, "kappa": W.claim_kappa, "kappa-width": W.claim_kappa_width,
          "mc-identity": W.claim_mc}
_BASE = synth()


class _One(dict):
    """``by_id`` for the claims a test reads: each claim computed on first access (fast tests)."""

    def __init__(self, df):
        super().__init__()
        self.df = df

    def __missing__(self, cid):
        self[cid] = _CLAIM[cid](self.df, None)
        return self[cid]


def claims_of(df=None) -> _One:
    return _One(_BASE if df is None else df)


def v(c) -> str:
    return c.decision.verdict


def ctl(c) -> str:
    return c.control.verdict.verdict


def small_init_p0(m: float, L: int = 2) -> float:
    """The small init's E_W P at t = 0 in width, as the closed form has it: d k m^(1 - 2 gamma) / 2
    (two layers, both of variance m^-gamma), up to a constant."""
    return m ** (1 - 2 * GAMMA)


def lazy_lecun(L: int) -> float:
    """The lazy ideal for LeCun: training multiplies P by one factor at every depth, so the trained
    networks keep init's exponential fall (ln 1/2 per layer) -- the paper's 'deeper is more robust'."""
    return 3.0 * 0.5 ** L


# ---- width-peak -----------------------------------------------------------------------------

def test_width_peak_probe1_planted_peak_reads_reproduced_with_a_working_control():
    c = claims_of()["width-peak"]
    assert v(c) == R and ctl(c) == C


@pytest.mark.parametrize("curve", [falling, flat], ids=["falling", "flat"])
def test_width_peak_probe2_no_peak_is_not_reproduced(curve):
    assert v(claims_of(synth(width=curve))["width-peak"]) != R


def _flat_sweep(rng: np.random.Generator, sd: float, seeds: int = 5) -> pd.DataFrame:
    return pd.DataFrame([{"width": m, "seed": s, "stability": math.exp(rng.normal(0, sd)), "stability_init": 1.0,
                          "trained": True} for m in WIDTHS for s in range(seeds)])


def test_width_peak_probe2_a_flat_sweep_reads_reproduced_at_about_the_nominal_rate():
    # (defect 1 fixed) union-intersection over the interior candidate widths at a Bonferroni level:
    # the old re-selected-argmax bootstrap read 8/40 flat sweeps (5 networks x 11 widths) reproduced
    rng = np.random.default_rng(54)
    hits = sum(peak_part(_flat_sweep(rng, 0.3), "flat")[0].verdict == R for _ in range(60))
    assert hits <= 3  # 5 % of 60 draws (nominal 2.5 %)


def test_width_peak_probe2_a_planted_peak_in_one_sweep_keeps_its_power():
    rng = np.random.default_rng(1)
    bump = [math.exp(0.8 * math.exp(-(math.log2(m) - 4) ** 2 / 4)) for m in WIDTHS]  # 0.8 nats at width 16
    df = _flat_sweep(rng, 0.3)
    df["stability"] *= df["width"].map(dict(zip(WIDTHS, bump)))
    assert peak_part(df, "peak")[0].verdict == R


def test_width_peak_probe3_control_judges_the_trained_curve_not_the_init_scale():
    # (defect 2 fixed) the control is judged on P_T: a bump riding on the init's falling closed-form scale
    # (small_peak = m^(1 - 2 gamma) x peak) is a falling trained curve, no peak -> the control is contradicted
    c = claims_of(synth(small=small_peak))["width-peak"]
    assert ctl(c) == C and c.verdict_before_control == R and v(c) == R


def test_width_peak_probe3_control_can_pass_with_the_small_inits_real_init_scale():
    c = claims_of(synth(small=moving_peak, small_init=small_init_p0))["width-peak"]
    assert ctl(c) == R  # a trained small-init P with the He-like peak (moving_peak), P_0 as the closed form


def test_width_peak_premise_removing_one_sweeps_rising_side_is_not_a_contradiction():
    df = synth(width=moving_peak)
    assert v(claims_of(df)["width-peak"]) == R
    off = (df["kind"] == "final") & (df["init"] == "lecun") & (df["depth"] == 4) & (df["width"] <= 32)
    df.loc[off & (df["regime"] == "sgd"), "acc_change_last10"] = 0.05
    c = claims_of(df)["width-peak"]
    assert v(c) == R  # (defect 3 fixed) coverage per sweep: lecun_L4 is excluded by name, the others decide
    assert c.across["sweep"]["lecun_L4"].startswith("excluded")


def test_width_peak_premises_removing_every_sweeps_narrow_side_read_undecidable():
    df = synth(width=moving_peak)
    off = (df["kind"] == "final") & (df["regime"] == "sgd") & df["init"].isin(["he", "lecun"]) & (df["width"] <= 2)
    df.loc[off, "acc_change_last10"] = 0.05
    c = claims_of(df)["width-peak"]
    assert v(c) == NA and "undecidable" in c.decision.reason


# ---- width-peak-lazy-limit ------------------------------------------------------------------

def test_lazy_limit_probe1_and_probe2():
    c = claims_of()["width-peak-lazy-limit"]
    assert v(c) == R and ctl(c) == C
    assert v(claims_of(synth(lazy=lambda m: falling(m)))["width-peak-lazy-limit"]) == C
    assert v(claims_of(synth(lazy=lambda m: flat(m)))["width-peak-lazy-limit"]) != R


def test_lazy_limit_probe3_control_judges_the_trained_curve_not_the_init_scale():
    c = claims_of(synth(small=small_peak))["width-peak-lazy-limit"]
    assert ctl(c) == C and v(c) == R


def test_lazy_limit_probe3_control_can_pass_with_the_small_inits_real_init_scale():
    assert ctl(claims_of(synth(small=moving_peak, small_init=small_init_p0))["width-peak-lazy-limit"]) == R


def test_lazy_limit_control_is_not_na_when_the_small_init_is_off_the_plateau():
    df = _BASE.copy()
    off = (df["kind"] == "final") & (df["init"] == "small") & (df["width"] >= 8)
    df.loc[off, ["loss_change_last10", "acc_change_last10", "loss_drop_last10"]] = [0.5, 0.05, 0.5]
    assert ctl(claims_of(df)["width-peak-lazy-limit"]) != NA


def test_lazy_limit_control_keeps_only_non_lazy_small_init_networks():
    # the control's own regime premise: small-init networks that stayed lazy (kappa <= 0.3) are not its population
    df = _BASE.copy()
    lazy = (df["kind"] == "final") & (df["init"] == "small") & (df["width"] >= 8)
    df.loc[lazy, "kappa"] = 0.1
    c = claims_of(df)["width-peak-lazy-limit"]
    assert ctl(c) == NA and {e["premise"] for e in c.evidence["control_excluded"]} >= {"not-lazy"}


# ---- depth-init-trained-* -------------------------------------------------------------------

DEPTH = ("depth-init-trained-lecun", "depth-init-trained-he", "depth-init-trained-ntk")


def test_depth_trained_probe1_planted_trends_reproduced_with_working_controls():
    res = claims_of()
    for cid in DEPTH:
        assert v(res[cid]) == R and ctl(res[cid]) == C, cid


def test_depth_trained_probe2_no_trend_is_not_reproduced():
    # trained P flat in depth (every init): no help, no hurt -> never reproduced (LeCun and He contradicted)
    res = claims_of(synth(depth_trained={"lecun": lambda L: 1.0, "he": lambda L: 1.0, "ntk": lambda L: 1.0}))
    assert [v(res[cid]) for cid in DEPTH] == [C, C, C]


def test_depth_trained_probe3_each_control_can_pass():
    res = claims_of(synth(depth_trained={"he": lambda L: math.exp(-0.3 * L)}))  # He falling: LeCun's rule passes there
    assert ctl(res["depth-init-trained-lecun"]) == R and v(res["depth-init-trained-lecun"]) != R
    res = claims_of(synth(depth_trained={"lecun": lambda L: math.exp(0.3 * L)}))  # LeCun rising: He's / NTK's pass
    for cid in DEPTH[1:]:
        assert ctl(res[cid]) == R and v(res[cid]) != R, cid


def test_depth_trained_lecun_reads_reproduced_in_the_lazy_ideal():
    # was a strict xfail (defect 6): the rule now reads the trained slope against -DEPTH_DELTA
    assert v(claims_of(synth(depth_trained={"lecun": lazy_lecun}))["depth-init-trained-lecun"]) == R


def test_depth_trained_he_and_ntk_controls_work_in_the_lazy_ideal():
    # was a strict xfail (defect 6): LeCun at ln 1/2 per layer is below +DEPTH_DELTA -> He's / NTK's control C
    res = claims_of(synth(depth_trained={"lecun": lazy_lecun}))
    assert [ctl(res[cid]) for cid in DEPTH[1:]] == [C, C]


# ---- nonlazy-width-early (Thm 3) ------------------------------------------------------------

def test_nonlazy_early_probe1_probe2_probe3():
    c = claims_of(synth(gammas=(1.0, 1.5, 2.0)))["nonlazy-width-early"]
    assert v(c) == R and ctl(c) == C
    assert v(claims_of(synth(early=lambda g, m: 1.0))["nonlazy-width-early"]) != R
    c = claims_of(synth(early_he=lambda m: (m / 16) ** -0.5))["nonlazy-width-early"]
    assert ctl(c) == R and v(c) != R


def test_nonlazy_early_steps_probe2_nothing_beyond_the_init_scale_is_not_reproduced():
    c = claims_of(synth(steps=lambda g, m, t: 1.0))["nonlazy-width-early"]  # P(t) = E_W P_init at every step
    assert v(c) != R
    c = claims_of(synth(steps=lambda g, m, t: (m / 16) ** 0.5))["nonlazy-width-early"]  # rising: Thm 3 wrong
    assert v(c) == C


def test_nonlazy_early_control_is_contradicted_where_he_does_what_theory_says():
    assert ctl(claims_of(synth(steps_he=lambda m, t: 1.0))["nonlazy-width-early"]) == C


def test_nonlazy_early_a_negligible_fall_is_not_reproduced():
    # defect 7's margin cuts both ways: a fall of 0.03 per e-fold (< NONLAZY_DELTA = 0.1) is no effect of interest
    c = claims_of(synth(steps=lambda g, m, t: (m / 16) ** -0.03))["nonlazy-width-early"]
    assert c.verdict_before_control == C


def test_nonlazy_early_one_steps_lost_coverage_does_not_hide_the_other_steps_contradiction():
    df = synth(steps=lambda g, m, t: (m / 16) ** 0.5)
    assert v(claims_of(df)["nonlazy-width-early"]) == C
    fitted = (df["kind"] == "final") & (df["output"] == "single") & (df["init"] == "small") & (df["width"] >= 256)
    df.loc[fitted, "train_acc_step20"] = 1.0
    c = claims_of(df)["nonlazy-width-early"]
    assert v(c) == C and c.across["gamma x step"]["step 20"].startswith("excluded")  # named, not joined


def test_nonlazy_early_every_step_lost_reads_not_applicable():
    df = synth(steps=lambda g, m, t: (m / 16) ** 0.5)
    fitted = (df["kind"] == "final") & (df["output"] == "single") & (df["init"] == "small") & (df["width"] >= 256)
    for t in (5, 10, 20):
        df.loc[fitted, f"train_acc_step{t}"] = 1.0
    assert v(claims_of(df)["nonlazy-width-early"]) == NA


# ---- nonlazy-width (Fig. 4b) ----------------------------------------------------------------

def _he_rising_past_its_peak(m, L):
    return (1.0 if m == 8 * 2 ** (L - 2) else 0.5) * (1 if m <= 8 else (m / 16) ** 0.2)


def test_nonlazy_width_probe1_probe2_probe3():
    c = claims_of(synth(width=_he_rising_past_its_peak))["nonlazy-width"]
    assert v(c) == R and ctl(c) == C
    assert v(claims_of(synth(small=lambda m, L: 0.01 * m ** 0.3))["nonlazy-width"]) == C
    c = claims_of(synth(width=lambda m, L: falling(m)))["nonlazy-width"]
    assert ctl(c) == R and v(c) != R


def test_nonlazy_width_control_is_contradicted_where_he_is_constant_in_width():
    c = claims_of()["nonlazy-width"]  # synth's He: a peak at 8, then constant
    assert c.verdict_before_control == R and ctl(c) == C


# ---- kappa ----------------------------------------------------------------------------------

def test_kappa_probe1_probe2_probe3():
    c = claims_of()["kappa"]
    assert v(c) == R and ctl(c) == C
    assert v(claims_of(synth(small_exp=0.5))["kappa"]) == C
    assert v(claims_of(synth(small_exp=-1.0))["kappa"]) == C  # a falling kappa never reads as growth
    c = claims_of(synth(he_exp=1.0))["kappa"]
    assert ctl(c) == R and v(c) != R


def test_kappa_one_window_outside_the_band_contradicts():
    # growth ~ t in the first half of the constant-rate phase, flat in the late half: the whole phase reads
    # about 1 at best, the declared late window 0 -> contradicted (across is universal), never inconclusive
    df = _BASE.copy()
    ep = (df["kind"] == "epoch") & (df["init"] == "small") & (df["epoch"] >= 8)
    df.loc[ep, "kappa"] = df.loc[ep, "kappa"] * 0 + df.loc[ep].groupby(["point", "seed"])["kappa"].transform("min")
    assert v(claims_of(df)["kappa"]) == C


# ---- exploratory readings and self-checks: probes (1) and (2) -------------------------------

def test_location_probe1_probe2():
    assert v(claims_of()["width-peak-location"]) == R
    assert v(claims_of(synth(width=lambda m, L: moving_peak(m, 2)))["width-peak-location"]) != R


def test_kappa_width_probe1_probe2():
    assert v(claims_of()["kappa-width"]) == R
    df = _BASE.copy()
    fin = (df["kind"] == "final") & (df["init"] == "small") & df["kappa"].notna()
    df.loc[fin, "kappa"] = 0.05 * df.loc[fin, "width"] ** 0.5  # small-init kappa rising with width (quick: 23 -> 45)
    assert v(claims_of(df)["kappa-width"]) == C


def test_depth_at_init_probe1_probe2():
    assert v(claims_of()["depth-init-at-init"]) == R
    df = _BASE.copy()  # LeCun no longer halving per layer at t = 0: the closed form's identity broken
    m = (df["kind"] == "final") & (df["init"] == "lecun") & (df["width"] == 96)
    df.loc[m, "stability_init"] = 1.0
    assert v(claims_of(df)["depth-init-at-init"]) != R


def _with_mc(df: pd.DataFrame, bias: float) -> pd.DataFrame:
    df = df.copy()
    m = (df["kind"] == "final") & (df["init"] == "he") & (df["depth"] == 2) & (df["width"] == 128) \
        & (df["regime"] == "sgd") & (df["output"] == "multi") & (df["classes"] == "[]")
    df["mc_stability"], df["mc_stderr"], df["mc_exact"] = np.nan, np.nan, np.nan
    df.loc[m, "mc_exact"] = 1.0
    df.loc[m, "mc_stability"] = 1.0 + bias
    df.loc[m, "mc_stderr"] = 0.01
    df["mc_samples"], df["mc_points"] = 200, 100
    return df


def test_mc_identity_probe1_probe2():
    assert v(claims_of(_with_mc(_BASE, 0.0))["mc-identity"]) == R
    assert v(claims_of(_with_mc(_BASE, 0.10))["mc-identity"]) != R  # a normalisation error of 10 %


def test_lecun_nonlazy_probe1_probe2():
    def with_kappa(df):
        df = df.copy()
        df.loc[(df["kind"] == "final") & (df["init"] == "lecun") & (df["width"] == 96), "kappa_at_target"] = 0.5
        return df
    assert v(claims_of(with_kappa(_BASE))["depth-lecun-nonlazy"]) == R
    rising = synth(depth_trained={"lecun": lambda L: 0.5 ** L * math.exp(0.9 * L)})  # slope +0.2 per layer
    assert v(claims_of(with_kappa(rising))["depth-lecun-nonlazy"]) == C


def test_study_declares_the_claims_reviewed():
    ids = {s.id for s in W.STUDY.claim_specs}
    assert set(DEPTH) | {"width-peak", "width-peak-lazy-limit", "nonlazy-width-early", "nonlazy-width",
                         "kappa"} <= ids


# ---- nonlazy-width at matched training loss (wdi2, 2041b78) ---------------------------------

def test_nonlazy_width_matched_loss_probes():
    c = claims_of(synth(width=_he_rising_past_its_peak))["nonlazy-width"]
    assert v(c) == R and ctl(c) == C and set(c.across["L*"]) == {"0.3", "0.2"}
    df = synth(width=_he_rising_past_its_peak)
    small = (df["kind"] == "final") & (df["init"] == "small")
    for L in ("0.3", "0.2"):
        df.loc[small, f"stability_L{L}"] = 0.01 * df.loc[small, "width"] ** 0.3  # rising at both marks
    assert v(claims_of(df)["nonlazy-width"]) == C
    c = claims_of(synth(width=lambda m, L: falling(m)))["nonlazy-width"]
    assert ctl(c) == R and v(c) != R


def test_nonlazy_width_one_marks_lost_coverage_does_not_hide_the_others_contradiction():
    df = synth(width=_he_rising_past_its_peak)
    small = (df["kind"] == "final") & (df["init"] == "small")
    for L in ("0.3", "0.2"):
        df.loc[small, f"stability_L{L}"] = 0.01 * df.loc[small, "width"] ** 0.3
    df.loc[small & (df["width"] >= 64), "stability_L0.2"] = np.nan  # never reached 0.2 there
    c = claims_of(df)["nonlazy-width"]
    assert v(c) == C and c.across["L*"]["0.2"].startswith("excluded")  # named, not joined
    df.loc[small & (df["width"] >= 64), "stability_L0.3"] = np.nan  # and never reached 0.3 either
    assert v(claims_of(df)["nonlazy-width"]) == NA

"""lazy-adversarial's claims under the claims engine, on synthetic results: each verdict state;
the rich control (small init, C0 = 1000, its own premise gain >= 2; a planted control that passes
too makes the claim inconclusive); the lazy premise per curve (gain <= 1.5); the
"trained" premise per network (a planted under-trained curve or network is excluded and
counted, not a reason for NA); radius-growth (ε½ against R per (m, d), rich control); and the
declarations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from robustlab import claims as cm
from robustlab.stats import CONTRADICTED, INCONCLUSIVE, NOT_APPLICABLE, REPRODUCED
from robustlab.studies.lazy.adversarial import STUDY
from robustlab.studies.lazy.adversarial_claims import (
    claims,
    eps_margin_claim,
    eps_sharp_claim,
    eps_threshold_claim,
    radius_growth_claim,
)
from robustlab.studies.lazy.common import NON_LAZY_C0

EPS = [0.0125, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8]
BASE = {"dataset": "mnist5k", "sphere": True, "bias": True, "R": None, "lr": 0.5, "dim": None}


def _curves(*, threshold, steep=6.0, ds=(25, 100, 196, 400, 784), seed=0, noise=0.05, clean=0.97,
            seeds=3, C0=5.0, moved=1.0, init_scale=None, gain=None):
    """Robust accuracy = clean · logistic drop in log ε around ``threshold(d)``; C0 = 1000 is the
    rich control (init_scale 0.01, gain 20) unless told otherwise, any other C0 lazy (gain 1)."""
    rich = C0 >= NON_LAZY_C0
    init_scale = init_scale if init_scale is not None else (0.01 if rich else 1.0)
    gain = gain if gain is not None else (20.0 if rich else 1.0)
    rng = np.random.default_rng(seed)
    rows = []
    m = 64
    r = C0 / math.sqrt(m)
    for d in ds:
        for s in range(seeds):
            t = threshold(d) * float(np.exp(rng.normal(0, noise)))
            k = (steep(d) if callable(steep) else steep) * float(np.exp(rng.normal(0, noise)))
            for e in EPS:
                rel = 1 / (1 + (e / t) ** k)
                rows.append({**BASE, "size": int(math.isqrt(d)), "d": d, "eps": e, "seed": s, "m": m, "C0": C0,
                             "R_factor": None, "radius": r, "clean_acc": clean, "robust_acc": clean * rel,
                             "offset_ratio": moved if C0 < NON_LAZY_C0 else 40.0 / (r * 8),
                             "lazy_radius": r, "epochs_run": 10.0, "init_scale": init_scale,
                             "grad_gain": gain})
    return rows


def _adv_df(*, control=None, **kw):
    rows = _curves(threshold=kw.pop("threshold", lambda d: 2.3 / math.sqrt(d)), **kw)
    ctl = {"threshold": lambda d: 0.3, "steep": 1.0, **(control or {})}  # robust, no d-dependence
    rows += _curves(C0=NON_LAZY_C0, seed=9, **ctl)
    return pd.DataFrame(rows)


# a rich control whose robust accuracy declines gradually (75 % -> 25 % over a factor 16) at the same ε
# whatever d: both ε rules read contradicted there
GRADUAL = {"threshold": lambda d: 0.1, "steep": 0.8}


def test_eps_claims_reproduced_with_a_control_that_fails():
    for claim in (eps_threshold_claim, eps_sharp_claim):
        c = claim(_adv_df(control=GRADUAL))
        assert c.control.verdict.verdict == CONTRADICTED, (c.id, c.control)
        assert c.decision.verdict == REPRODUCED, (c.id, c.decision, c.evidence)
        assert c.control is not None and c.control.verdict.verdict != REPRODUCED, c.control
    c = eps_threshold_claim(_adv_df())
    assert c.evidence["slope"] == pytest.approx(-0.5, abs=0.08)
    for d, v in c.evidence["per_d_mean_eps_half_times_sqrt_d"].items():
        assert v == pytest.approx(2.3, rel=0.15), d


@pytest.mark.parametrize("claim, kw, state", [
    (eps_threshold_claim, {"threshold": lambda d: 0.2}, CONTRADICTED),  # no dependence on d
    (eps_threshold_claim, {"threshold": lambda d: 20.0 / d}, CONTRADICTED),  # 1/d, too steep
    (eps_threshold_claim, {"threshold": lambda d: 0.7 * d ** -0.3, "noise": 0.4}, INCONCLUSIVE),
    (eps_threshold_claim, {"threshold": lambda d: 5.0}, NOT_APPLICABLE),  # never halves in the grid
    (eps_threshold_claim, {"ds": (100, 196)}, NOT_APPLICABLE),  # too few d to fit a slope
    (eps_threshold_claim, {"clean": 0.7}, NOT_APPLICABLE),  # no network trained: all excluded
    (eps_sharp_claim, {"threshold": lambda d: 0.2}, CONTRADICTED),  # the drop does not move with d
    # the middle moves like d^−½ but the drop widens with d: the 75 % and 25 % points do not collapse
    (eps_sharp_claim, {"steep": lambda d: 20.0 * 25 / d}, CONTRADICTED),
    (eps_sharp_claim, {"threshold": lambda d: 0.7 * d ** -0.3, "noise": 0.4}, INCONCLUSIVE),
])
def test_eps_claims_reach_each_state(claim, kw, state):
    c = claim(_adv_df(**kw))
    assert c.decision.verdict == state, (c.decision, c.evidence)


@pytest.mark.parametrize("claim", [eps_threshold_claim, eps_sharp_claim])
def test_a_planted_control_that_passes_too_makes_the_claim_inconclusive(claim):
    c = claim(_adv_df(control={"threshold": lambda d: 2.0 / math.sqrt(d), "steep": 6.0}))
    assert c.verdict_before_control == REPRODUCED and c.control.verdict.verdict == REPRODUCED
    assert c.decision.verdict == INCONCLUSIVE and cm.NOT_DISCRIMINATING in c.decision.reason


def test_the_rich_control_needs_a_learned_gradient_and_the_lazy_curves_a_kept_one():
    df = _adv_df()
    inherited = (df["C0"] == NON_LAZY_C0) & (df["d"] == 100)  # a small-init network whose gradient did not grow
    df.loc[inherited, "grad_gain"] = 1.2
    hot = (df["C0"] == 5.0) & (df["d"] == 196) & (df["seed"] == 0) & (df["eps"] == EPS[0])
    df.loc[hot, "grad_gain"] = 3.0  # a lazy-ball network whose gradient tripled: the curve is not lazy
    c = eps_threshold_claim(df)
    assert c.decision.verdict == REPRODUCED
    assert next(e for e in c.to_dict()["excluded"] if e["premise"] == "lazy")["excluded"] == 1
    assert c.evidence["control_excluded"][0] == {
        "premise": "rich", "excluded": 3, "of": 15,
        "detail": "input-gradient gain ‖∇ₓf‖/‖∇ₓf₀‖ of the ε curve's network at its smallest ε >= 2"}
    # only the curve's network at its smallest ε decides its regime (adversarial training flattens the
    # larger-ε networks: that is the effect)
    flat = (df["C0"] == 5.0) & (df["eps"] > EPS[0])
    df.loc[flat, "grad_gain"] = 0.1
    assert eps_threshold_claim(df).decision == c.decision


def test_standard_init_c0_1000_is_not_the_control():
    """C0 = 1000 from the standard init stays lazy (C0_used 8-22, issue #53): not the control."""
    df = pd.concat([_adv_df(), pd.DataFrame(_curves(C0=NON_LAZY_C0, init_scale=1.0, gain=1.1, seed=4,
                                                    threshold=lambda d: 2.3 / math.sqrt(d)))])
    c, base = eps_threshold_claim(df), eps_threshold_claim(_adv_df())
    assert c.decision == base.decision and c.control.verdict == base.control.verdict


def test_a_planted_under_trained_curve_is_excluded_not_a_reason_for_na():
    df = _adv_df()
    bad = (df["C0"] == 5.0) & (df["d"] == 196) & (df["seed"] == 1)
    df.loc[bad, "clean_acc"] = 0.5
    df.loc[bad, "robust_acc"] = 0.0  # an untrained network: no robust point at any ε
    c = eps_threshold_claim(df)
    assert c.decision.verdict == REPRODUCED, c.decision
    ex = c.to_dict()["excluded"][0]
    assert (ex["premise"], ex["excluded"], ex["of"]) == ("trained", 1, 2 * 5 * 3)  # lazy and control curves


RF = [1.0, 2.0, 4.0]
R_EPS = [0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6]


def _radius_df(eps_half, *, rich_eps_half=None, seeds=4, noise=0.05, clean=0.97, ms=(64,), d=196):
    """ε curves at R = f·C0/√m: robust/clean = logistic drop in log ε around ``eps_half(f, m)``;
    the rich control (init ×0.01, gain 20) around ``rich_eps_half(f, m)`` (flat at 0.3 unless told)."""
    rich_eps_half = rich_eps_half or (lambda f, m: 0.3)
    rng = np.random.default_rng(0)
    rows = []
    for rich, fn in ((False, eps_half), (True, rich_eps_half)):
        for m in ms:
            lazy_r = 5 / math.sqrt(m)
            for s in range(seeds):
                for f in RF:
                    t = fn(f, m) * float(np.exp(rng.normal(0, noise)))
                    for e in R_EPS:
                        rel = 1 / (1 + (e / t) ** 6)
                        rows.append({**BASE, "size": int(math.isqrt(d)), "d": d, "eps": e, "seed": s, "m": m,
                                     "C0": 5.0, "R_factor": f, "radius": f * lazy_r, "clean_acc": clean,
                                     "robust_acc": clean * rel, "offset_ratio": 1.0, "lazy_radius": lazy_r,
                                     "epochs_run": 10.0, "init_scale": 0.01 if rich else 1.0,
                                     "grad_gain": 20.0 if rich else 1.2})
    return pd.DataFrame(rows)


def _growing(f, m):
    return 0.16 * f  # the theorem's bound: ε½ ∝ R (slope 1)


def test_radius_growth_reproduced_with_a_flat_rich_control():
    c = radius_growth_claim(_radius_df(_growing))
    assert c.id == "radius-growth" and c.kind == cm.CLAIM
    assert c.decision.verdict == REPRODUCED, (c.decision, c.evidence)
    assert c.decision.effect == pytest.approx(1.0, abs=0.1)
    assert c.control.verdict.verdict == CONTRADICTED and c.control.verdict.effect == pytest.approx(0.0, abs=0.1)


@pytest.mark.parametrize("eps_half, state", [
    (lambda f, m: 0.16, CONTRADICTED),                 # ε½ flat in R: no growth
    (lambda f, m: 0.16 * f ** 0.2, CONTRADICTED),      # grows, far below half the bound's rate
    (lambda f, m: 0.16 / f ** 0.5, CONTRADICTED),      # falls
])
def test_radius_growth_without_the_effect_is_not_reproduced(eps_half, state):
    c = radius_growth_claim(_radius_df(eps_half))
    assert c.decision.verdict == state, (c.decision, c.evidence)


def test_radius_growth_with_a_rich_control_that_grows_too_is_inconclusive():
    c = radius_growth_claim(_radius_df(_growing, rich_eps_half=lambda f, m: 0.1 * f))
    assert c.verdict_before_control == REPRODUCED and c.control.verdict.verdict == REPRODUCED
    assert c.decision.verdict == INCONCLUSIVE and cm.NOT_DISCRIMINATING in c.decision.reason


def test_radius_growth_is_decided_per_width_never_pooled():
    """Issue #53: radius claims group by (m, d); one width without the growth contradicts."""
    c = radius_growth_claim(_radius_df(lambda f, m: 0.16 * f if m == 64 else 0.16, ms=(64, 256)))
    assert c.decision.verdict == CONTRADICTED
    assert sorted(fam["m"] for fam in c.evidence["families"]) == [64, 256]


def test_radius_growth_excludes_untrained_curves_and_needs_the_rich_premise():
    df = _radius_df(_growing)
    bad = (df["seed"] == 0) & (df["R_factor"] == 2.0) & (df["init_scale"] == 1.0)
    df.loc[bad, "clean_acc"] = 0.5  # at every ε of the curve: its smallest-ε network is untrained
    c = radius_growth_claim(df)
    assert c.decision.verdict == REPRODUCED
    assert c.to_dict()["excluded"][0]["excluded"] == 1
    lazy_ctrl = _radius_df(_growing).assign(grad_gain=1.2)  # a "rich" control that stayed lazy: excluded
    c = radius_growth_claim(lazy_ctrl)
    assert c.control.verdict.verdict == NOT_APPLICABLE and c.decision.verdict == INCONCLUSIVE


def test_every_builtin_claim_has_a_control_and_declared_premises():
    specs = {s.id: s for s in STUDY.claim_specs}
    df = pd.concat([_adv_df(), _radius_df(_growing)])
    kinds = {}
    for c in claims(df, None):
        assert c.id in specs and c.kind == specs[c.id].kind
        kinds[c.id] = c.kind
        if c.kind == cm.CLAIM:
            assert specs[c.id].control is not None and c.control is not None, c.id
    assert kinds.pop("eps-half-lazy-vs-control") == cm.EXPLORATORY
    # lazy2: radius-low / -high / -transition retired for radius-growth (a claim)
    assert "radius-low" not in kinds and "radius-transition" not in kinds and kinds["radius-growth"] == cm.CLAIM
    assert set(kinds.values()) == {cm.CLAIM}


# the exploratory question: the lazy ε½ over the control's, from the smallest d to the largest

def test_eps_margin_reads_the_lazy_fall_against_a_flat_control():
    c = eps_margin_claim(_adv_df(control={"seeds": 6}))  # lazy 2.3/√d, control flat at 0.3 (3 + 3 placebo halves)
    assert c.kind == cm.EXPLORATORY and c.verdict_before_control == REPRODUCED, (c.decision, c.evidence)
    # its placebo (the control's even seeds against its odd ones, true exponent 0) reads contradicted
    # against the theorem's band [−0.7, −0.3] (lazy2: the old rule "below 0" had the placebo's true
    # effect on its threshold and capped the reading by construction)
    assert c.control is not None and c.control.verdict.verdict == CONTRADICTED, c.control
    assert c.decision.verdict == REPRODUCED
    assert c.decision.effect == pytest.approx(-0.5, abs=0.1)
    ev = c.evidence
    assert ev["ratio_exponent"] == pytest.approx(math.log(ev["ratio_change"]) / math.log(784 / 25), rel=1e-12)
    assert (ev["d_low"], ev["d_high"]) == (25, 784)
    per = {row["d"]: row for row in ev["per_d"]}
    # the change is the quotient of the two ratios of geometric means, exactly
    assert ev["ratio_change"] == pytest.approx(per[784]["ratio"] / per[25]["ratio"], rel=1e-12)
    # and near the planted d^−½ fall against a flat control (ε½ read off a 7-point grid: ~10 % each)
    assert ev["ratio_change"] == pytest.approx(math.sqrt(25 / 784), rel=0.25)
    for d, row in per.items():
        assert row["ratio"] == pytest.approx(2.3 / math.sqrt(d) / 0.3, rel=0.15), row


@pytest.mark.parametrize("control, state", [
    ({"threshold": lambda d: 20.0 / d, "steep": 6.0}, CONTRADICTED),  # the control falls faster than the lazy nets
    ({"threshold": lambda d: 2.0 / math.sqrt(d), "steep": 6.0}, CONTRADICTED),  # both fall alike: exponent 0
])
def test_eps_margin_can_fail(control, state):
    c = eps_margin_claim(_adv_df(control=control))
    assert c.decision.verdict == state, (c.decision, c.evidence)


def test_eps_margin_needs_the_control_at_two_sizes():
    df = _adv_df()
    assert eps_margin_claim(df[df["C0"] < NON_LAZY_C0]).decision.verdict == NOT_APPLICABLE
    only_one = df[(df["C0"] < NON_LAZY_C0) | (df["d"] == 100)]
    c = eps_margin_claim(only_one)
    assert c.decision.verdict == NOT_APPLICABLE and c.evidence["per_d"][1]["control_curves"] == 3


def test_eps_margin_with_a_placebo_that_passes_too_is_inconclusive():
    # a control whose even seeds fall like d^−½ and odd seeds stay flat: the halves part like d^−½
    # (the lazy networks fall like d^−¾, so that they part from the mixed control, ≈ d^−¼, like d^−½)
    ds = (25, 196, 784)
    even = pd.DataFrame(_curves(C0=NON_LAZY_C0, threshold=lambda d: 2.3 / math.sqrt(d), seed=9, seeds=6, ds=ds))
    odd = pd.DataFrame(_curves(C0=NON_LAZY_C0, threshold=lambda d: 0.3, seed=10, seeds=6, ds=ds))
    even["seed"], odd["seed"] = 2 * even["seed"], 2 * odd["seed"] + 1
    df = pd.concat([pd.DataFrame(_curves(threshold=lambda d: 8.0 * d ** -0.75, seeds=8, ds=ds)), even, odd])
    c = eps_margin_claim(df)
    assert c.verdict_before_control == REPRODUCED and c.control.verdict.verdict == REPRODUCED, c.control
    assert c.decision.verdict == INCONCLUSIVE and cm.NOT_DISCRIMINATING in c.decision.reason


def test_networks_stopped_below_the_trained_bound_are_named_with_the_claim_they_would_enter():
    """Issue #53: a stopping rule armed by the burn-in may stop a network below the premise; the
    study says which claim each such network would have entered."""
    df = _radius_df(_growing).assign(stopped=False)
    hit = (df["seed"] == 0) & (df["eps"] == R_EPS[0]) & (df["init_scale"] == 1.0)
    df.loc[hit, ["clean_acc", "stopped"]] = [0.6, True]
    t = radius_growth_claim(df).evidence["training"]
    assert t["stopped_below_bound"] == 3 and t["at_cap_below_bound"] == 0
    assert {n["would_enter"] for n in t["networks"]} == {"radius-growth"}
    eps = _adv_df().assign(stopped=False)
    first = (eps["C0"] == 5.0) & (eps["d"] == 100) & (eps["seed"] == 0) & (eps["eps"] == EPS[0])
    eps.loc[first, ["clean_acc", "stopped"]] = [0.6, True]
    t = eps_threshold_claim(eps).evidence["training"]
    assert t["stopped_below_bound"] == 1 and t["networks"][0]["would_enter"] == "eps-threshold"


def test_the_quick_preset_never_arms_patience_below_the_trained_bound():
    """Issue #53 (lazy2): patience counts only once clean training accuracy reaches the "trained"
    bound — no burn-in — under a hard epoch cap (a network at the cap is recorded stopped = False);
    test_lazy_train checks that such a rule trains an untrained network to the cap."""
    from robustlab.studies.lazy.common import MIN_TRAINED
    base = STUDY.presets["quick"].overrides
    assert base["burn_in"] == 0 and base["patience_from"] == MIN_TRAINED and base["epochs"] == 20

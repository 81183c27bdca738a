"""The verdict module: estimates against closed forms, one test per verdict state, and
seeds_needed behaving as a power estimate should."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as sps

from robustlab import stats
from robustlab.stats import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_APPLICABLE,
    REPRODUCED,
    Condition,
    combine,
    decide,
    difference_estimate,
    mean_estimate,
    proportion_estimate,
    seeds_for,
    seeds_needed,
    slope_estimate,
)
from robustlab.studies.base import Claim


def test_mean_estimate_matches_scipy_t_interval():
    x = np.array([0.3, 0.1, 0.45, 0.2, 0.33])
    est = mean_estimate(x)
    lo, hi = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert est.value == pytest.approx(x.mean(), abs=1e-15)
    assert (est.low, est.high) == pytest.approx((lo, hi), abs=1e-12)
    assert est.n == 5 and est.sd == pytest.approx(x.std(ddof=1))


def test_slope_estimate_matches_linregress_and_recovers_power_law():
    rng = np.random.default_rng(0)
    d = np.repeat([25.0, 64, 144, 400, 784], 3)
    y = 2.0 * d ** -0.5 * np.exp(rng.normal(0, 0.05, d.size))
    est = slope_estimate(d, y, log_x=True, log_y=True)
    ref = sps.linregress(np.log(d), np.log(y))
    half = sps.t.ppf(0.975, d.size - 2) * ref.stderr
    assert est.value == pytest.approx(ref.slope, abs=1e-12)
    assert (est.low, est.high) == pytest.approx((ref.slope - half, ref.slope + half), abs=1e-12)
    assert abs(est.value + 0.5) < 0.05 and est.low < est.value < est.high
    assert est.units_per_seed == 5


def test_welch_difference_matches_scipy():
    a, b = np.array([1.0, 1.2, 0.9, 1.4]), np.array([0.2, 0.5, 0.1, 0.3, 0.35])
    est = difference_estimate(a, b)
    res = sps.ttest_ind(a, b, equal_var=False)
    ci = res.confidence_interval(0.95)
    assert (est.low, est.high) == pytest.approx((ci.low, ci.high), abs=1e-10)


def test_contrast_of_two_groups_is_welchs_difference():
    a, b = np.array([1.0, 1.2, 0.9, 1.4]), np.array([0.2, 0.5, 0.1, 0.3, 0.35])
    est, ref = stats.contrast_estimate([a, b], [1.0, -1.0]), difference_estimate(a, b)
    assert (est.value, est.low, est.high) == pytest.approx((ref.value, ref.low, ref.high), abs=1e-12)


def test_contrast_of_four_groups_closed_form():
    # a difference of differences, by hand in float64: se² = Σ w² s²/n, Welch–Satterthwaite dof
    g = [np.array([0.1, 0.4, 0.2]), np.array([1.0, 1.5, 1.1, 1.3]), np.array([2.0, 2.2]),
         np.array([0.3, 0.1, 0.6, 0.2, 0.4])]
    w = [1.0, -1.0, -1.0, 1.0]
    est = stats.contrast_estimate(g, w)
    value = sum(wi * x.mean() for wi, x in zip(w, g))
    terms = [wi ** 2 * x.var(ddof=1) / x.size for wi, x in zip(w, g)]
    dof = sum(terms) ** 2 / sum(t ** 2 / (x.size - 1) for t, x in zip(terms, g))
    half = sps.t.ppf(0.975, dof) * math.sqrt(sum(terms))
    assert est.value == pytest.approx(value, abs=1e-14)
    assert (est.low, est.high) == pytest.approx((value - half, value + half), abs=1e-12)
    assert est.n == 2 and "2+4+2+5" not in est.method and "3+4+2+5" in est.method


def test_contrast_edge_cases():
    assert math.isnan(stats.contrast_estimate([[1.0, 2.0], []], [1.0, -1.0]).value)
    one = stats.contrast_estimate([[1.0], [0.5, 0.7]], [1.0, -1.0])
    assert one.value == pytest.approx(0.4) and one.low == -math.inf and one.high == math.inf
    left = stats.contrast_estimate([[1.0, 2.0, float("nan")], [0.5, 0.7]], [1.0, -1.0])
    assert "1 non-finite left out" in left.method
    with pytest.raises(ValueError, match="one weight per group"):
        stats.contrast_estimate([[1.0, 2.0]], [1.0, -1.0])


def test_wilson_interval_closed_form():
    est = proportion_estimate(8, 10)
    assert (est.low, est.high) == pytest.approx((0.4902, 0.9433), abs=1e-4)


# one test per verdict state, on synthetic results -------------------------------------

def _draw(effect, sd, n, seed=0):
    return effect + sd * np.random.default_rng(seed).standard_normal(n)


def test_clear_effect_is_reproduced():
    v = decide(mean_estimate(_draw(1.0, 0.2, 8)), threshold=0.0, side="above")
    assert v.verdict == REPRODUCED and v.passed and v.seeds_needed is None


def test_clear_opposite_effect_is_contradicted():
    v = decide(mean_estimate(_draw(-1.0, 0.2, 8)), threshold=0.0, side="above")
    assert v.verdict == CONTRADICTED and not v.passed


def test_noise_around_threshold_is_inconclusive_with_seeds_needed():
    v = decide(mean_estimate(_draw(0.05, 1.0, 5, seed=3)), threshold=0.0, side="above")
    assert v.verdict == INCONCLUSIVE
    assert v.seeds_needed is None or v.seeds_needed > 5


def test_unmet_condition_is_not_applicable_whatever_the_effect():
    cond = [Condition("network trained", False, "train accuracy 0.31 < 0.9")]
    v = decide(mean_estimate(_draw(1.0, 0.2, 8)), threshold=0.0, side="above", conditions=cond)
    assert v.verdict == NOT_APPLICABLE and "network trained" in v.reason
    assert v.effect == pytest.approx(1.0, abs=0.3)  # the measurement is still recorded


def test_band_side():
    inside = decide(mean_estimate(_draw(-0.5, 0.02, 6)), threshold=(-0.7, -0.3), side="inside")
    outside = decide(mean_estimate(_draw(-0.1, 0.02, 6)), threshold=(-0.7, -0.3), side="inside")
    edge = decide(mean_estimate(_draw(-0.3, 0.2, 4, seed=1)), threshold=(-0.7, -0.3), side="inside")
    assert (inside.verdict, outside.verdict, edge.verdict) == (REPRODUCED, CONTRADICTED, INCONCLUSIVE)


def test_below_side_and_bool_legacy_claim():
    assert decide(mean_estimate([-2.0, -2.1, -1.9]), threshold=0.0, side="below").verdict == REPRODUCED
    c = Claim("x", "s", False, {})
    assert c.to_dict()["verdict"] == CONTRADICTED and c.passed is False
    c = Claim("x", "s", decide(mean_estimate([1.0, 1.1, 0.9]), threshold=0.0), {"k": 1}, kind="exploratory")
    d = c.to_dict()
    assert d["verdict"] == REPRODUCED and d["passed"] is True and d["threshold"] == 0.0
    assert d["interval"][0] > 0 and d["evidence"] == {"k": 1}


# seeds_needed as a power estimate ---------------------------------------------------

def test_seeds_needed_closed_form_large_n():
    # z-approximation: n = (1.96 sd / gap)^2 = (1.96 * 1 / 0.1)^2 = 384.2; t adds a little
    n = seeds_for(0.1, 1.0)
    assert 385 <= n <= 392


def test_seeds_needed_decides_at_the_predicted_count():
    """Drawing more seeds from the same distribution (the median over 200 replicate studies): the
    seeds still needed shrink to zero, and the fraction decided rises past 0.5 about where
    the planned count says it should."""
    effect, sd = 0.35, 1.0
    planned = seeds_for(effect, sd)
    assert 30 <= planned <= 36  # (1.96 / 0.35)^2 = 31.4, plus the t correction
    ns = (5, 10, 20, 40, 80, 160)
    more = np.zeros((200, len(ns)))
    decided = np.zeros(len(ns))
    wrong = 0
    for rep in range(200):
        draws = _draw(effect, sd, ns[-1], seed=100 + rep)
        for i, n in enumerate(ns):
            v = decide(mean_estimate(draws[:n]), threshold=0.0, side="above")
            wrong += v.verdict == CONTRADICTED
            decided[i] += v.verdict == REPRODUCED
            more[rep, i] = (v.more_seeds if v.more_seeds is not None else 10**6) if v.verdict == INCONCLUSIVE else 0
    more = np.median(more, axis=0)  # a median: an estimate near the threshold asks for huge counts
    decided /= 200
    assert all(b <= a for a, b in zip(more[1:], more[2:])) and more[0] > more[-1] == 0, more
    assert decided[ns.index(20)] < 0.5 < decided[ns.index(40)], decided  # planned ~ 33
    assert decided[-1] > 0.95 and wrong <= 0.01 * 200 * len(ns)  # a wrong-side interval is rare (< 2.5 %)


def test_seeds_needed_none_on_threshold_and_for_unknown_spread():
    est = mean_estimate([1.0, -1.0, 1.0, -1.0])  # mean exactly 0
    assert seeds_needed(est, 0.0) is None
    assert seeds_needed(proportion_estimate(5, 10), 0.5) is None  # effect on the threshold
    est1 = mean_estimate([0.3])
    assert est1.sd is None and decide(est1, threshold=0.0).verdict == INCONCLUSIVE


def test_slope_seeds_needed_counts_seeds_not_rows():
    rng = np.random.default_rng(5)
    d = np.tile([25.0, 64, 144, 400, 784], 2)
    y = d ** -0.32 * np.exp(rng.normal(0, 0.3, d.size))
    est = slope_estimate(d, y, log_x=True, log_y=True)
    v = decide(est, threshold=(-0.7, -0.3), side="inside")
    assert v.seeds == 2
    if v.verdict == INCONCLUSIVE and v.seeds_needed is not None:
        assert v.seeds_needed > 2


def test_combine_parts():
    rep = decide(mean_estimate([1.0, 1.1, 0.9]), threshold=0.0)
    con = decide(mean_estimate([-1.0, -1.1, -0.9]), threshold=0.0)
    inc = decide(mean_estimate([0.1, -0.1, 0.2]), threshold=0.0)
    na = stats.not_applicable("premise fails")
    assert combine([rep, con, inc]).verdict == CONTRADICTED
    assert combine([rep, inc]).verdict == INCONCLUSIVE
    assert combine([rep, na]).verdict == REPRODUCED
    assert combine([na, na]).verdict == NOT_APPLICABLE
    assert combine([]).verdict == INCONCLUSIVE


def test_bootstrap_is_deterministic_and_covers_the_mean():
    x = list(_draw(2.0, 1.0, 12, seed=4))
    a = stats.bootstrap_estimate(x, np.mean, seed=1)
    b = stats.bootstrap_estimate(x, np.mean, seed=1)
    assert a == b and a.low < np.mean(x) < a.high
    assert math.isfinite(a.sd)


def test_fixed_effects_slope_matches_ols_with_group_dummies():
    """One intercept per group: the same slope and t interval as OLS on [x, one-hot(group)]."""
    rng = np.random.default_rng(7)
    g = np.repeat(["a", "b", "c"], 8)
    x = np.tile(np.linspace(1.0, 4.0, 8), 3)
    offset = {"a": 0.0, "b": 5.0, "c": -3.0}
    y = 0.7 * x + np.array([offset[k] for k in g]) + rng.normal(0, 0.2, x.size)
    est = slope_estimate(x, y, groups=g)
    X = np.column_stack([x] + [(g == k).astype(float) for k in "abc"])
    beta, res, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = x.size - X.shape[1]
    s2 = float(res[0]) / dof
    se = math.sqrt(s2 * np.linalg.inv(X.T @ X)[0, 0])
    half = sps.t.ppf(0.975, dof) * se
    assert est.value == pytest.approx(beta[0], rel=1e-10)
    assert (est.low, est.high) == pytest.approx((beta[0] - half, beta[0] + half), rel=1e-9)
    assert est.dof_loss == 4 and "3 group intercepts" in est.method
    # pooled without groups, the offsets swamp the slope
    assert slope_estimate(x, y).high - slope_estimate(x, y).low > 5 * (est.high - est.low)


def test_fixed_effects_drop_groups_without_variation_in_x():
    est = slope_estimate([1, 2, 3, 5, 5], [1, 2, 3.1, 7, 9], groups=["a", "a", "a", "b", "b"])
    assert est.n == 3 and "2 dropped" in est.method


def test_seeds_for_power():
    """Power 0.5 is the observed-effect count; 0.8 and 0.9 need about (z+z_p)²/z² times more."""
    n50 = stats.seeds_for(0.2, 1.0)
    n80 = stats.seeds_for(0.2, 1.0, power=0.8)
    n90 = stats.seeds_for(0.2, 1.0, power=0.9)
    assert n50 < n80 < n90
    assert n80 / n50 == pytest.approx(((1.96 + 0.8416) / 1.96) ** 2, rel=0.05)
    with pytest.raises(ValueError):
        stats.seeds_for(0.2, 1.0, power=1.0)


def test_seeds_needed_for_a_proportion_follows_its_wilson_interval():
    # all of 15 trials (5 a seed) succeed: the Wilson lower bound n / (n + z²) clears 0.95 first
    # at n = 73 trials, i.e. 15 seeds of 5 (a t-style rule with the Bernoulli spread p(1−p) = 0
    # would say one seed)
    est = dataclasses.replace(stats.proportion_estimate(15, 15), units_per_seed=5.0)
    assert stats.seeds_needed(est, 0.95) == 15
    assert stats.proportion_estimate(73, 73).low > 0.95 > stats.proportion_estimate(72, 72).low
    v = stats.decide(est, threshold=0.95, side="above", seeds=3)
    assert v.verdict == stats.INCONCLUSIVE and v.seeds_needed == 15 and v.more_seeds == 12


def test_non_finite_values_are_left_out_and_named():
    """A NaN or ±inf value (a dead network's log, a diverged run) leaves the estimate, and its
    method says how many did, so no unit is dropped silently; paired, the pair goes together."""
    nan, inf = math.nan, math.inf
    est = mean_estimate([1.0, 2.0, nan, inf, 3.0])
    assert est.n == 3 and est.value == pytest.approx(2.0)
    assert est.method == "mean ± t over 3 seeds (2 non-finite left out)"
    assert mean_estimate([1.0, 2.0, 3.0]).method == "mean ± t over 3 seeds"  # nothing to say
    # paired: seed 1 lacks a, seed 2 lacks b; the pairs that are left stay pairs
    est = difference_estimate([1.0, nan, 3.0, 4.0], [1.0, 2.0, nan, 5.0], paired=True)
    assert est.n == 2 and est.value == pytest.approx(-0.5)
    assert est.method == "paired difference ± t over 2 seeds (2 non-finite left out)"
    with np.errstate(all="raise"):  # inf − inf inside is not a warning either
        assert difference_estimate([inf, 1.0, 2.0], [inf, 0.0, 0.5], paired=True).n == 2
    est = difference_estimate([1.0, 2.0, 3.0, nan], [2.0, 3.0, 4.0])
    assert est.value == pytest.approx(-1.0) and est.method.endswith("(1 non-finite left out)")
    est = stats.log_ratio_estimate([math.e, math.e ** 2, inf], [1.0, 1.0, 1.0])
    assert est.value == pytest.approx(1.5 - 0.0) and "(1 non-finite left out)" in est.method


def test_censored_median_slope_exact_power_law_and_censoring_bounds():
    from robustlab.stats import censored_median, censored_median_slope

    x = [1.0, 2.0, 4.0]
    exact = [([v * 0.9, v, v * 1.1], [0, 0, 0]) for v in (0.1 * xi ** 0.75 for xi in x)]
    est = censored_median_slope(x, exact, n_boot=200)
    assert est.value == pytest.approx(0.75, abs=1e-12)  # medians lie exactly on the power law
    assert est.low <= 0.75 <= est.high and math.isfinite(est.low) and math.isfinite(est.high)
    # a right-censored median at the largest x: the slope is only bounded below
    cens = exact[:2] + [([1.6, 1.6, 0.2], [1, 1, 0])]
    assert censored_median(np.array([1.6, 1.6, 0.2]), np.array([1, 1, 0])) == (1.6, 1)
    est = censored_median_slope(x, cens, n_boot=200)
    assert est.high == math.inf and math.isfinite(est.low)
    # a left-censored median at the largest x: only bounded above
    est = censored_median_slope(x, exact[:2] + [([0.01, 0.01, 0.5], [-1, -1, 0])], n_boot=200)
    assert est.low == -math.inf and math.isfinite(est.high)
    # a minority censored: the median is exact and the interval stays finite
    assert censored_median(np.array([0.3, 0.2, 1.6]), np.array([0, 0, 1])) == (0.3, 0)

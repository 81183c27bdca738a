"""A second independent review of Study C (issue #54) after wdi5 (width-peak's plateau premises
``plateau-acc`` / ``plateau-loss``) and wdi6 (depth-init-trained-{lecun,he,ntk} on the linearised depth
arm, slope of log mean P on depth beyond +-DEPTH_DELTA = 0.15 per layer, the other init's networks as
the control). Report: notes/wdi-review2.md.

Rows are planted with the study's row schema (``_row`` of test_width_depth_claims) by builders here
that take a base seed: the noise generator is seeded by it and the networks' seeds are ``base + i``,
as a base seed does in the study. Only the rows a claim reads are built, so each test is fast.

Per claim, four probes, each run at base seeds 0 and 17 (probe d: the same verdict at both):
(a) the effect planted -> reproduced, the control contradicted (working);
(b) no effect -> not reproduced;
(c) the effect planted in the control's setting -> the control reads reproduced, so the claim reads
    inconclusive "does not discriminate" (the control is not the complement of the rule);
(d) (a)-(c) at base seeds 0 and 17.
A probe that exposes a defect is ``xfail(strict=True)`` with the defect in its docstring."""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest
from test_width_depth_claims import _row, falling, moving_peak, step_peak

from robustlab import claims as cl
from robustlab import stats
from robustlab.studies import width_depth_init as W
from robustlab.studies.width_depth_init.analysis import PLATEAU_ACC, PLATEAU_LOSS, view
from robustlab.studies.width_depth_init.lazy_claims import DEPTH_DELTA, depth_part
from robustlab.studies.width_depth_init.run import MIN_DEPTHS

R, C, I, NA = stats.REPRODUCED, stats.CONTRADICTED, stats.INCONCLUSIVE, stats.NOT_APPLICABLE
BASES = (0, 17)
WIDTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
DEPTHS = (2, 3, 4, 6)
NETS = 5  # networks per point, as quick
NOISE = 0.03  # seed spread of log P per network


def v(c) -> str:
    return c.decision.verdict


def ctl(c) -> str:
    return c.control.verdict.verdict


def raw(c) -> str:
    return c.to_dict().get("verdict_before_control", c.decision.verdict)


# ---- builders ---------------------------------------------------------------------------------

def width_rows(base: int, *, curve=step_peak, small=falling, plateau=None, nets=NETS, noise=NOISE,
               depths=(2, 3, 4), classes="[]") -> pd.DataFrame:
    """width-peak's rows: He and LeCun width sweeps (10 classes, SGD) at ``depths``, the small init's
    depth-2 sweep (the control). ``plateau(init, m, L, rng)`` -> the final row's ``acc_change_last10`` and
    ``loss_drop_last10`` (default: on the plateau, 0 and 0.001)."""
    rng = np.random.default_rng(base)
    rows = []

    def add(init, L, m, p):
        for i in range(nets):
            r = _row(init, L, m, base + i, p * math.exp(rng.normal(0, noise)), 1.0,
                     classes=classes if init != "small" else "[]")
            if plateau is not None:
                r["acc_change_last10"], r["loss_drop_last10"] = plateau(init, m, L, rng)
            rows.append(r)
    for init in ("he", "lecun"):
        for L in depths:
            for m in WIDTHS:
                add(init, L, m, curve(m, L))
    for m in WIDTHS:
        add("small", 2, m, small(m, 2))
    return pd.DataFrame(rows)


DEPTH_INIT = {"lecun": lambda L: 0.5 ** L, "he": lambda L: 1.0, "ntk": lambda L: 1.0}
LAZY_IDEAL = {"lecun": lambda L: 3 * 0.5 ** L,  # the init's ln 1/2 per layer kept after training
              "he": lambda L: L / 2, "ntk": lambda L: L / 2}  # Thm 1's polynomial hurt: slope ~0.27 per layer
FLAT = lambda L: 1.0  # noqa: E731


def depth_rows(base: int, curves: dict, *, depths=DEPTHS, nets=NETS, noise=NOISE, width=96,
               classes="[4, 9]") -> pd.DataFrame:
    """The linearised depth arm (the decision of depth-init-trained-*): LeCun, He, NTK at one width and
    ``depths`` (a dict init -> depths to give one init fewer), trained P = ``curves[init](L)``."""
    rng = np.random.default_rng(base)
    rows = []
    for init in ("lecun", "he", "ntk"):
        for L in (depths[init] if isinstance(depths, dict) else depths):
            for i in range(nets):
                p = curves[init](L) * (math.exp(rng.normal(0, noise)) if noise else 1.0)
                rows.append(_row(init, L, width, base + i, p, DEPTH_INIT[init](L), regime="linearised",
                                 classes=classes, plateau=None))
    return pd.DataFrame(rows)


def depth_claim(df: pd.DataFrame, init: str):
    return W.claim_depth_trained(df, init, None)


def width_claim(df: pd.DataFrame):
    return W.claim_width(df, None)


# ---- depth-init-trained-lecun ---------------------------------------------------------------------

@pytest.mark.parametrize("base", BASES)
def test_lecun_a_lazy_ideal_reads_reproduced_with_a_working_control(base):
    c = depth_claim(depth_rows(base, LAZY_IDEAL), "lecun")
    assert v(c) == R and ctl(c) == C, (c.decision.reason, c.control.verdict.reason)
    assert c.evidence["parts"]["lecun_m96"]["slope_trained"] == pytest.approx(math.log(0.5), abs=0.05)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("lecun", [FLAT, lambda L: math.exp(-0.10 * L), lambda L: math.exp(0.3 * L)],
                         ids=["flat", "inside-margin", "rising"])
def test_lecun_b_no_depth_help_is_not_reproduced(base, lecun):
    c = depth_claim(depth_rows(base, {**LAZY_IDEAL, "lecun": lecun}), "lecun")
    assert v(c) == C


@pytest.mark.parametrize("base", BASES)
def test_lecun_c_control_can_pass_when_he_falls_with_depth(base):
    """He falling by 0.3 per layer: LeCun's rule (slope < -0.15) passes on the He networks, so LeCun's own
    R is capped: inconclusive, the test does not discriminate."""
    c = depth_claim(depth_rows(base, {**LAZY_IDEAL, "he": lambda L: math.exp(-0.3 * L)}), "lecun")
    assert raw(c) == R and ctl(c) == R and v(c) == I
    assert cl.NOT_DISCRIMINATING in c.decision.reason


# ---- depth-init-trained-he / -ntk (the same rule, above +0.15; control = LeCun) ------------------

@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("init", ["he", "ntk"])
def test_he_ntk_a_polynomial_hurt_reads_reproduced_with_a_working_control(base, init):
    c = depth_claim(depth_rows(base, LAZY_IDEAL), init)
    assert v(c) == R and ctl(c) == C, (c.decision.reason, c.control.verdict.reason)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("init", ["he", "ntk"])
@pytest.mark.parametrize("curve", [FLAT, lambda L: math.exp(0.10 * L), lambda L: math.exp(-0.3 * L)],
                         ids=["flat", "inside-margin", "falling"])
def test_he_ntk_b_no_depth_hurt_is_not_reproduced(base, init, curve):
    c = depth_claim(depth_rows(base, {**LAZY_IDEAL, init: curve}), init)
    assert v(c) == C


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("init", ["he", "ntk"])
def test_he_ntk_c_control_can_pass_when_lecun_rises_with_depth(base, init):
    """LeCun rising by 0.3 per layer (what the SGD arm and the paper-size lazy limit show, notes/wdi6.md):
    He's / NTK's rule passes on the LeCun networks: inconclusive, does not discriminate."""
    c = depth_claim(depth_rows(base, {**LAZY_IDEAL, "lecun": lambda L: math.exp(0.3 * L)}), init)
    assert raw(c) == R and ctl(c) == R and v(c) == I


DEPTH_PROBES = {"a": LAZY_IDEAL, "b": {"lecun": FLAT, "he": FLAT, "ntk": FLAT},
                "c-he-falls": {**LAZY_IDEAL, "he": lambda L: math.exp(-0.3 * L)},
                "c-lecun-rises": {**LAZY_IDEAL, "lecun": lambda L: math.exp(0.3 * L)}}
DEPTH_EXPECTED = {  # (raw, control, verdict) for lecun, he, ntk
    "a": [(R, C, R)] * 3, "b": [(C, C, C)] * 3,
    "c-he-falls": [(R, R, I), (C, C, C), (R, C, R)],
    "c-lecun-rises": [(C, C, C), (R, R, I), (R, R, I)]}


@pytest.mark.parametrize("probe", list(DEPTH_PROBES))
def test_depth_d_the_same_verdicts_at_base_seeds_0_and_17(probe):
    got = {base: [(raw(c), ctl(c), v(c)) for c in (depth_claim(depth_rows(base, DEPTH_PROBES[probe]), i)
                                                     for i in ("lecun", "he", "ntk"))] for base in BASES}
    assert got[0] == got[17] == DEPTH_EXPECTED[probe]


# ---- depth: the margin and the NA path --------------------------------------------------------------

def _part(base, init, slope, noise):
    df = depth_rows(base, {**LAZY_IDEAL, init: lambda L: math.exp(slope * L)}, noise=noise)
    sub = view(df[df["init"] == init], "end")
    return depth_part(sub, init, init)[0]


@pytest.mark.parametrize("base", BASES)
def test_depth_margin_exactly_at_the_threshold_is_inconclusive_with_noise(base):
    """A planted slope exactly at the margin (-0.15 LeCun, +0.15 He / NTK) with the seed spread of quick: the
    interval straddles the threshold -> inconclusive for every init, never reproduced."""
    assert _part(base, "lecun", -DEPTH_DELTA, NOISE).verdict == I
    assert _part(base, "he", DEPTH_DELTA, NOISE).verdict == I
    assert _part(base, "ntk", DEPTH_DELTA, NOISE).verdict == I


def test_depth_margin_exactly_at_the_threshold_without_noise_is_not_reproduced():
    """Noise-free, the slope equals the threshold up to rounding: the strict comparison must not read R."""
    for init, slope in (("lecun", -DEPTH_DELTA), ("he", DEPTH_DELTA), ("ntk", DEPTH_DELTA)):
        assert _part(0, init, slope, 0.0).verdict != R, init


@pytest.mark.parametrize("base", BASES)
def test_depth_margin_just_beyond_and_just_inside(base):
    """0.05 per layer past the margin, with quick's spread, decides; 0.05 inside it is contradicted."""
    assert _part(base, "lecun", -DEPTH_DELTA - 0.05, NOISE).verdict == R
    assert _part(base, "lecun", -DEPTH_DELTA + 0.05, NOISE).verdict == C
    assert _part(base, "he", DEPTH_DELTA + 0.05, NOISE).verdict == R
    assert _part(base, "he", DEPTH_DELTA - 0.05, NOISE).verdict == C


@pytest.mark.parametrize("depths", [(2, 3), (2, 4, 6)], ids=["2-depths", "3-depths"])
def test_depth_na_when_the_arm_has_too_few_depths(depths):
    for init in ("lecun", "he", "ntk"):
        c = depth_claim(depth_rows(0, LAZY_IDEAL, depths=depths), init)
        assert v(c) == NA, (init, c.decision.reason)


def test_depth_na_when_too_few_depths_keep_two_networks():
    """Four depths planted, but one network at two of them: depth_part's own minimum (>= 3 depths with >= 2
    networks) makes the sweep NA, and the claim NA."""
    df = depth_rows(0, LAZY_IDEAL)
    one = df["depth"].isin([4, 6]) & (df["seed"] > 0)
    c = depth_claim(df[~one], "lecun")
    assert v(c) == NA


def test_depth_control_with_too_few_depths_is_no_working_control():
    """LeCun swept at 4 depths, its control (He) at 2: LeCun's R stands only beside a working control, so it
    is capped at inconclusive, "no working control" (never R without one)."""
    df = depth_rows(0, LAZY_IDEAL, depths={"lecun": DEPTHS, "he": (2, 3), "ntk": DEPTHS})
    c = depth_claim(df, "lecun")
    assert raw(c) == R and ctl(c) == NA and v(c) == I



def test_depth_three_depth_arm_is_decided_or_its_na_names_the_real_minimum():
    """Defect R2-1 (minor, the NA message): MIN_DEPTHS = 3 is depth_part's minimum and the NA reason says
    "needs linearised depth sweeps (... one width at >= 3 depths ...)", but depth_sweep_rows keeps only runs
    at >= DEPTH_SWEEP = 4 depths, so an arm at 3 depths (e.g. paper-depth's 2, 4, 6 if 8 failed) reads NA
    while its reason says it has what it needs. Either decide it (depth_part can: 3 depths, 5 networks each)
    or name DEPTH_SWEEP in the message."""
    c = depth_claim(depth_rows(0, LAZY_IDEAL, depths=(2, 4, 6)), "lecun")
    assert v(c) != NA or f">= {MIN_DEPTHS} depths" not in c.decision.reason


def test_depth_every_sweep_must_hold():
    """Two class sets (as paper-depth-lazy's k 2 and k 10): He beyond the margin at one only -> C, naming it."""
    df = pd.concat([depth_rows(0, LAZY_IDEAL, classes="[4, 9]"),
                    depth_rows(0, {**LAZY_IDEAL, "he": FLAT}, classes="[0, 1]")], ignore_index=True)
    c = depth_claim(df, "he")
    assert v(c) == C


def test_depth_a_sweep_where_the_control_passes_too_does_not_count():
    """Defect R2-3 (pairing of claim and control per sweep). Two class sets: He rises beyond +0.15 in both; its
    control (LeCun, He's rule) rises beyond +0.15 too in "[0, 1]" (as LeCun does at k 2 in paper-depth-lazy:
    +0.218 [0.202, 0.234], notes/wdi6.md) and falls in "[4, 9]". Per sweep, "[0, 1]" does not discriminate
    (rule R on the networks with and without the mechanism), so "He's P rises beyond the band at every class
    count" is shown at one class count only. The engine judges the control on all its sweeps together
    (across 'all' -> C, since "[4, 9]" fails) and caps only on that aggregate: He reads R beside a "working"
    control. Fix (notes/wdi-review2.md): cap each sweep's part by the control's part in the same sweep (same
    width, class set, n) with cl.with_control before across(), or make the control's across use 'any'."""
    df = pd.concat([depth_rows(0, LAZY_IDEAL, classes="[4, 9]"),
                    depth_rows(0, {**LAZY_IDEAL, "lecun": lambda L: math.exp(0.3 * L)}, classes="[0, 1]")],
                   ignore_index=True)
    c = depth_claim(df, "he")
    assert v(c) != R


# ---- width-peak (with plateau-acc / plateau-loss) -----------------------------------------------------

WIDTH_PROBES = {"a": {}, "a-moving": {"curve": moving_peak}, "b-falling": {"curve": falling},
                "b-flat": {"curve": lambda m, L: 1.0}, "b-rising": {"curve": lambda m, L: 0.1 * m ** 0.2},
                "c": {"small": moving_peak}}


@functools.cache
def width_probe(probe: str, base: int):
    """The claim on one probe's planted rows at one base seed (computed once: probe d compares them)."""
    return width_claim(width_rows(base, **WIDTH_PROBES[probe]))


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("probe", ["a", "a-moving"])
def test_width_a_planted_peak_reads_reproduced_with_a_working_control(base, probe):
    c = width_probe(probe, base)
    assert v(c) == R and ctl(c) == C, (c.decision.reason, c.control.verdict.reason)
    assert not any(e.excluded for e in c.excluded)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("probe", ["b-falling", "b-flat", "b-rising"])
def test_width_b_no_peak_is_not_reproduced(base, probe):
    assert v(width_probe(probe, base)) != R


@pytest.mark.parametrize("base", BASES)
def test_width_c_control_can_pass_when_the_small_init_peaks(base):
    c = width_probe("c", base)
    assert raw(c) == R and ctl(c) == R and v(c) == I
    assert cl.NOT_DISCRIMINATING in c.decision.reason


@pytest.mark.parametrize("probe", list(WIDTH_PROBES))
def test_width_d_the_same_verdicts_at_base_seeds_0_and_17(probe):
    a, b = width_probe(probe, 0), width_probe(probe, 17)
    assert (raw(a), ctl(a), v(a)) == (raw(b), ctl(b), v(b))


# ---- width-peak: does the plateau premise remove the rising side? -----------------------------------

LOG10 = math.log(10)


def slow_narrow(acc_gain: float, loss_drop: float, below: int = 8):
    """Widths below ``below`` (the rising side of a peak at 8) still improving: accuracy +acc_gain and loss
    -loss_drop over the last 10 epochs; the rest on the plateau."""
    def f(init, m, L, rng):
        return (acc_gain, loss_drop) if m < below else (0.0, 0.001)
    return f


def _kept_widths(c, sweep="he_L2"):
    return c.evidence["plateau_by_width"][sweep]


@pytest.mark.parametrize("base", BASES)
def test_plateau_keeps_a_rising_side_that_improves_slowly_within_the_bounds(base):
    """The narrow widths still improving, but by less than the bounds (0.5 point, 0.6 % of log 10 in 10
    epochs): every network kept, the peak decided (R) -- the old relative premise's defect (removing slow
    widths) is not repeated on the rising side."""
    c = width_claim(width_rows(base, plateau=slow_narrow(0.005, 0.006 * LOG10)))
    assert not any(e.excluded for e in c.excluded) and v(c) == R


@pytest.mark.parametrize("base", BASES)
def test_plateau_removes_only_the_widths_still_fitting_and_the_sweep_reads_undecidable(base):
    """Widths 1-4 still fitting (as quick's width 4 at seed 0: +4 points, loss -0.07 over epochs 40 -> 50):
    exactly those 3 x 2 x 3 x 5 networks are excluded; with the narrow end gone the sweep is undecidable
    (NA by coverage), never contradicted."""
    c = width_claim(width_rows(base, plateau=slow_narrow(0.04, 0.07)))
    ex = {e.premise: e.excluded for e in c.excluded}
    assert ex["plateau-acc"] == 3 * 2 * 3 * NETS and ex["plateau-loss"] == 3 * 2 * 3 * NETS
    table = _kept_widths(c)
    assert [m for m, r in table.items() if r["kept"] == 0] == [1, 2, 4]
    assert v(c) == NA and "undecidable" in c.decision.reason


@pytest.mark.parametrize("base", BASES)
def test_plateau_removing_the_rising_side_but_the_narrowest_width_still_decides(base):
    """Widths 2-4 still fitting, width 1 (under-parameterised, stuck near chance, on its plateau) kept: the
    narrow end survives, the peak over both ends is read on 1, 8 ... 1024 and reads R; the premise thins the
    rising side without making it up."""
    f = slow_narrow(0.04, 0.07)
    c = width_claim(width_rows(base, plateau=lambda i, m, L, rng: (0.0, 0.001) if m == 1 else f(i, m, L, rng)))
    assert [m for m, r in _kept_widths(c).items() if r["kept"] == 0] == [2, 4]
    assert v(c) == R


def test_plateau_bounds_are_inclusive():
    """At the bounds (1 point, 1 % of log k) a network is kept."""
    on = width_claim(width_rows(0, plateau=slow_narrow(PLATEAU_ACC, PLATEAU_LOSS * LOG10)))
    assert not any(e.excluded for e in on.excluded)


def test_plateau_just_past_the_bounds_excludes():
    off = width_claim(width_rows(0, plateau=slow_narrow(PLATEAU_ACC + 0.005, PLATEAU_LOSS * LOG10 * 1.1)))
    ex = {e.premise: e.excluded for e in off.excluded}
    assert ex["plateau-acc"] == ex["plateau-loss"] == 3 * 2 * 3 * NETS


def test_plateau_does_not_drop_the_control_by_construction():
    """The small-init sweep, fitted and on its plateau, is judged (C on a falling curve), not NA."""
    assert ctl(width_probe("a", 0)) == C


def _stuck_or_learning(frac_learning: int):
    """At width 1, the networks numbered < ``frac_learning`` (of NETS) still learning (accuracy +3 points over
    the last 10 epochs: off the plateau), the others stuck near chance (on it); every other width on it."""
    count: dict = {}

    def f(init, m, L, rng):
        i = count[(init, m, L)] = count.get((init, m, L), -1) + 1
        return (0.03, 0.05) if m == 1 and i < frac_learning else (0.0, 0.001)
    return f


def test_plateau_selection_at_the_narrow_end_does_not_manufacture_a_peak():
    """Defect R2-2 (selection by an outcome-correlated premise). Quick's own records (wdi5 q0, He L2 10 classes,
    width 2): the 1 network kept by plateau-acc/-loss is stuck at chance (train acc 0.20, P 0.036), the 4 excluded
    are still learning (acc 0.35, P 0.224): 6x apart; LeCun L2 width 2: 0.034 vs 0.227; He L4 width 4: 0.027
    (acc 0.10) vs 1.34. Planted here one width lower, at the sweep's narrow END: a curve falling in width (no
    peak), where at width 1 three of five networks are still learning (P on the curve) and two are stuck near
    chance (P x 0.05, as observed). The premise keeps only the stuck two, the narrow end drops, and
    peak-over-ends reads an interior maximum: R, from a curve with none. Fix (notes/wdi-review2.md): decide a
    width's keep per width, not per network (a width whose networks are partly off the plateau is removed whole
    and coverage names it), or report the verdict with the partly-kept widths removed as a required variant."""
    rng = np.random.default_rng(0)
    df = width_rows(0, curve=falling, plateau=_stuck_or_learning(3))
    stuck = (df["width"] == 1) & (df["init"] != "small") & (df["acc_change_last10"] == 0.0)
    df.loc[stuck, "stability"] = df.loc[stuck, "stability"] * 0.05 * np.exp(rng.normal(0, NOISE, stuck.sum()))
    c = width_claim(df)
    assert v(c) != R and raw(c) != R


def test_plateau_selection_control_without_the_stuck_networks_reads_no_peak():
    """The same falling curve with every width-1 network on the plateau at its curve value: C (no peak), so
    R2-2's R comes from the selection alone."""
    assert v(width_claim(width_rows(0, curve=falling))) == C


FITTED_TAIL = lambda i, m, L, rng: (0.0, 0.01) if 4 <= m <= 16 else (0.0, 0.001)  # noqa: E731


def test_plateau_loss_keeps_a_fitted_tail_at_k10():
    """wdi5's own example of what must be kept: the peak widths (4-16) fitted (accuracy flat), the CE loss
    still falling 0.01 in 10 epochs (<= 0.01 log 10 = 0.023): kept, the peak reads R."""
    c = width_claim(width_rows(0, plateau=FITTED_TAIL, depths=(2,)))
    assert not any(e.excluded for e in c.excluded) and v(c) == R


def test_plateau_loss_removes_the_same_fitted_tail_at_k2():
    """Observation (no stored verdict moves: every 2-class network was kept at quick and in the paper-width
    slice): the fitted CE tail's fall does not scale with log k, the bound does. The same networks at k = 2
    (0.01 > 0.01 log 2 = 0.0069) are removed: at k = 2 the old premise's defect (removing the slow
    near-interpolation widths, the peak itself) is back, and the sweep cannot read R."""
    c = width_claim(width_rows(0, plateau=FITTED_TAIL, depths=(2,), classes="[0, 1]"))
    assert {e.premise: e.excluded for e in c.excluded}["plateau-loss"] == 2 * 3 * NETS
    assert raw(c) != R


def test_a_width_sweep_that_starts_past_k_is_not_a_width_peak_sweep():
    """A sweep from width 16 at 10 classes (paper-nonlazy's He sweep, nonlazy-width's control) has no narrow
    side by design: its falling tail must not read "no peak". Such sweeps are excluded by name; with only
    them the claim is not applicable. The same planted peak from width 1 still reads R."""
    full = width_rows(0)
    late = full[pd.to_numeric(full["width"]) >= 16].reset_index(drop=True)
    c = width_claim(late)
    assert v(c) == NA and "no narrow side" in c.decision.reason
    assert v(width_claim(full)) == R

"""lazy-attack's claims under the claims engine, on planted results: Thm 3.1's mechanism decided
per C0 (‖∇ₓf‖² = a·d + b with a ≈ ½, the one-step ratio ≈ 1, |f| bounded), each with the four
probes (the effect planted: reproduced; planted without it: not; the control's setting with the
effect planted: the control can pass, and the claim is then capped); the lazy premise per network
(a C0 where too few d stay lazy is excluded and named); the rich control's own premise; the
"trained" premise per network; the exploratory exponents (sign-aware); the C0 claim; the
declarations themselves."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from robustlab import claims as cm
from robustlab.stats import CONTRADICTED, INCONCLUSIVE, NOT_APPLICABLE, REPRODUCED, power_exponent
from robustlab.studies.base import Context
from robustlab.studies.lazy.attack import STUDY
from robustlab.studies.lazy.attack_claims import claims, mechanism_table
from robustlab.studies.lazy.common import NON_LAZY_C0, asymptotic_exponent

DS = [25, 64, 144, 324, 784]
MECHANISM = ("grad-scaling", "one-step-ratio", "f-bounded")


def _ctx():
    return Context(out=Path("."), figdir=Path("."), manifest={"base_config": {"C0": 10.0}}, failures=[])


def _rows(*, m, C0, seeds, rng, a=0.5, grad_p=1.0, eta_p=1.0, b_scale=0.005, acc=0.98, noise=0.04, moved=None,
          c0_power=1.0, sphere=True, x_exp=0.0, init_scale=1.0, grad_gain=None, ratio=1.03, f_exp=0.0):
    """One family of planted networks: ‖∇ₓf‖² = a·d^grad_p + b (b = b_scale·C0²), 1/η = (½·d^eta_p + b)/|f|,
    |f| = ½·(C0/10)^c0_power·(d/25)^f_exp·‖x‖, the one-step ratio ``ratio``; the gain is ‖∇ₓf‖/‖∇ₓf₀‖
    with ‖∇ₓf₀‖ = init_scale·√(d/2) unless ``grad_gain`` fixes it."""
    rows = []
    for d in DS:
        for s in range(seeds):
            j = lambda: float(np.exp(rng.normal(0, noise)))  # noqa: E731
            b = b_scale * min(C0, 40) ** 2
            g2 = (a * d ** grad_p + b) * j()
            x_norm = (d / DS[0]) ** x_exp  # raw pixels: ‖x‖ grows with d, |f| and η with it
            f = 0.5 * (min(C0, 40) / 10) ** c0_power * (d / DS[0]) ** f_exp
            inv_eta = (0.5 * d ** eta_p + b) / f * j()
            eta = x_norm / inv_eta
            init_grad = init_scale * math.sqrt(0.5 * d)
            grad = math.sqrt(g2)
            gain = grad / init_grad if grad_gain is None else grad_gain
            delta = eta * grad
            r = C0 / math.sqrt(m)
            off = r * 0.99 if moved is None else moved / math.sqrt(m)
            rows.append({
                "dataset": "mnist5k", "sphere": sphere, "bias": not sphere, "size": int(math.isqrt(d)), "dim": None,
                "m": m, "C0": C0, "R": None, "R_factor": None, "lr": 1.0, "epochs": 40, "seed": s, "d": d,
                "test_acc": acc, "init_test_acc": 0.5, "offset_ratio": min(off / r, 0.9999), "max_offset": off,
                "left_ball": True, "grad": grad, "grad_std": 0.0, "eta": eta, "delta": delta,
                "delta_rel": delta / x_norm, "x_norm": x_norm, "abs_f": f * x_norm, "step_ratio": ratio * j(),
                "grad_gain": gain, "weight_change": 0.05,
                "init_scale": init_scale, "init_grad": init_grad, "init_eta": 2 / d, "init_delta": 2 / d * math.sqrt(0.5 * d),
                "init_delta_rel": 2 / d * math.sqrt(0.5 * d)})
    return rows


# the rich control: small init, a learned input gradient that does not grow with d, a long step
RICH = {"a": 0.0, "b_scale": 0.004, "eta_p": 0.2, "moved": 15.0, "init_scale": 0.01, "ratio": 1.6}


def _df(seeds=4, control=None, seed=0, raw=None, **kw):
    rng = np.random.default_rng(seed)
    rows = []
    for m, c0s in ((64, (10.0, 20.0, 40.0)), (256, (10.0,))):
        for c0 in c0s:
            rows += _rows(m=m, C0=c0, seeds=seeds, rng=rng, **kw)
    rows += _rows(m=64, C0=NON_LAZY_C0, seeds=seeds, rng=rng, **{**RICH, **(control or {})})
    if raw is not None:  # raw pixels at C0 = 10 (the authors' setting): |f| grows with ‖x‖ ∝ d^0.63
        rows += _rows(m=64, C0=10.0, seeds=seeds, rng=rng, sphere=False, **{"x_exp": 0.63, **raw})
        rows += _rows(m=64, C0=NON_LAZY_C0, seeds=seeds, rng=rng, sphere=False, **{**RICH, "x_exp": 0.63})
    return pd.DataFrame(rows)


def _by_id(df):
    return {c.id: c for c in claims(df, _ctx())}


# --- the four probes of each mechanism claim (the fourth, seeds 0 and 17, is the quick run: notes) ---

def test_the_mechanism_planted_reads_reproduced_and_its_control_fails():
    got = _by_id(_df(raw={}))
    for cid in (*MECHANISM, "lazy-generalise", "raw-grad-scaling"):
        c = got[cid]
        assert c.decision.verdict == REPRODUCED, (cid, c.decision, c.evidence)
        assert c.control is not None and c.control.verdict.verdict != REPRODUCED, (cid, c.control)
    for cid in (*MECHANISM, "raw-grad-scaling"):
        assert got[cid].control.verdict.verdict == CONTRADICTED, (cid, got[cid].control)
    g = got["grad-scaling"]
    assert g.decision.effect == pytest.approx(0.5, abs=0.05)
    assert g.across == {"C0": {"10": REPRODUCED, "20": REPRODUCED, "40": REPRODUCED}}
    assert g.control.verdict.effect == pytest.approx(0.0, abs=0.02)
    assert got["f-bounded"].control.verdict.effect == pytest.approx(0.63, abs=0.05)  # raw pixels
    assert got["one-step-ratio"].decision.effect == pytest.approx(1.03, abs=0.05)


@pytest.mark.parametrize("cid, kw", [
    ("grad-scaling", {"a": 0.25}),            # ‖∇ₓf‖² grows at half the theorem's rate
    ("grad-scaling", {"a": 1.0}),             # ... or twice it
    ("one-step-ratio", {"ratio": 1.6}),       # one linear step is not enough
    ("f-bounded", {"f_exp": 0.6}),            # |f| grows with d
])
def test_the_mechanism_planted_without_the_effect_does_not_read_reproduced(cid, kw):
    c = _by_id(_df(**kw))[cid]
    assert c.decision.verdict == CONTRADICTED, (cid, c.decision)


@pytest.mark.parametrize("cid, control", [
    ("grad-scaling", {"a": 0.5}),
    ("one-step-ratio", {"ratio": 1.0}),
])
def test_the_rich_control_with_the_effect_planted_can_pass(cid, control):
    """The control is the claim's own rule on the rich networks: planted with the effect, it reads
    reproduced — and the claim, whose control no longer fails, is capped."""
    c = _by_id(_df(control=control))[cid]
    assert c.control.verdict.verdict == REPRODUCED, c.control
    assert c.verdict_before_control == REPRODUCED and c.decision.verdict == INCONCLUSIVE
    assert cm.NOT_DISCRIMINATING in c.decision.reason


def test_f_bounded_control_with_the_effect_planted_can_pass():
    c = _by_id(_df(raw={"x_exp": 0.0}))["f-bounded"]  # "raw" pixels whose norm does not grow
    assert c.control.verdict.verdict == REPRODUCED
    assert c.decision.verdict == INCONCLUSIVE


# --- the lazy regime, per network and per C0 ---

def test_a_c0_with_too_few_lazy_d_is_excluded_and_named():
    df = _df()
    hot = (df["C0"] == 40.0) & (df["d"] <= 144)
    df.loc[hot, "grad_gain"] = 2.7  # the gradient grew 2.7× during training at small d (issue #53)
    c = _by_id(df)["grad-scaling"]
    assert c.decision.verdict == REPRODUCED
    assert c.across["C0"]["40"].startswith("excluded") and c.across["C0"]["10"] == REPRODUCED
    assert "2 of 5 values of d" in c.evidence["outside"]["40"]
    lazy = next(e for e in c.to_dict()["excluded"] if e["premise"] == "lazy")
    assert lazy["excluded"] == 4 * 5  # every network of C0 = 40


def test_single_non_lazy_networks_are_excluded_and_counted():
    df = _df()
    one = (df["C0"] == 20.0) & (df["d"] == 144) & (df["seed"] == 1)
    df.loc[one, "grad_gain"] = 3.0
    df.loc[one, "grad"] = 100.0  # a non-lazy network's gradient would bend the fit
    c = _by_id(df)["grad-scaling"]
    assert c.decision.verdict == REPRODUCED and c.across["C0"]["20"] == REPRODUCED
    assert next(e for e in c.to_dict()["excluded"] if e["premise"] == "lazy")["excluded"] == 1


def test_one_contradicted_c0_contradicts_the_universal_claim_with_its_numbers():
    df = _df()
    at40 = df["C0"] == 40.0
    df.loc[at40, "grad"] = np.sqrt(0.25 * df.loc[at40, "d"] + 8)
    c = _by_id(df)["grad-scaling"]
    assert c.across["C0"]["40"] == CONTRADICTED and c.across["C0"]["10"] == REPRODUCED
    assert c.decision.verdict == CONTRADICTED
    assert c.decision.effect == pytest.approx(0.25, abs=0.04)  # C0 = 40's coefficient, not C0 = 10's


def test_a_control_whose_gradient_is_still_the_initial_one_is_excluded_not_counted():
    """A small-init network whose input gradient is under twice its initial one is not rich."""
    got = _by_id(_df(control={"a": 0.5, "grad_gain": 1.5}))
    c = got["grad-scaling"]
    assert c.control.verdict.verdict == NOT_APPLICABLE
    assert c.evidence["control_excluded"][0]["premise"] == "rich"
    assert c.evidence["control_excluded"][0]["excluded"] == 4 * 5


def test_standard_init_c0_1000_is_neither_lazy_nor_the_control():
    df = _df()
    std = pd.DataFrame(_rows(m=64, C0=NON_LAZY_C0, seeds=4, rng=np.random.default_rng(5), grad_p=0.2))
    got = _by_id(pd.concat([df, std]))
    base = _by_id(df)
    for cid in ("grad-scaling", "eta-scaling", "c0-more-robust", "lazy-generalise"):
        assert got[cid].decision == base[cid].decision, cid
    assert got["grad-scaling"].control.verdict == base["grad-scaling"].control.verdict


def test_a_planted_under_trained_network_is_excluded_not_a_reason_for_na():
    df = _df()
    bad = (df["C0"] == 20.0) & (df["d"] == 144) & (df["seed"] == 1)
    df.loc[bad, "test_acc"] = 0.5
    df.loc[bad, "grad"] = 100.0  # what an untrained network's numbers would do to the fit
    df.loc[bad, "delta"] = df.loc[bad, "delta"] * 10
    got = _by_id(df)
    for cid in ("grad-scaling",):
        c = got[cid]
        assert c.decision.verdict == REPRODUCED, (cid, c.decision)
        assert c.to_dict()["excluded"][0]["excluded"] == 1
    assert got["lazy-generalise"].decision.verdict in (INCONCLUSIVE, CONTRADICTED)


def test_the_per_c0_table_has_every_family_and_the_control():
    table = mechanism_table(_df())
    assert [(r["C0"], r["m"]) for r in table] == [(10.0, 64), (10.0, 256), (20.0, 64), (40.0, 64), (NON_LAZY_C0, 64)]
    for r in table[:-1]:
        assert r["a"] == pytest.approx(0.5, abs=0.05) and r["lazy_premise"] == "20/20"
        assert set(r["ratio_by_d"]) == set(DS) and set(r["abs_f_by_d"]) == set(DS)
    assert table[-1]["a"] == pytest.approx(0.0, abs=0.02) and table[-1]["rich_premise"] == "20/20"


# --- exploratory exponents, sign-aware ---

def test_exploratory_exponents_read_the_theorem_and_see_the_sign():
    got = _by_id(_df())
    assert got["eta-scaling"].kind == cm.EXPLORATORY and got["delta-scaling"].kind == cm.EXPLORATORY
    # the log–log slope of η on d: −1 bent towards 0 by the offset b of ‖∇ₓf‖² (largest at C0 = 40)
    assert -1.1 < got["eta-scaling"].decision.effect < -0.8
    assert got["eta-scaling"].verdict_before_control == REPRODUCED
    # the rich control's η ∝ d^−0.2 is read with a bounded interval: contradicted, so the control works
    for cid in ("eta-scaling", "delta-scaling"):
        ctl = got[cid].control.verdict
        assert ctl.verdict == CONTRADICTED and all(math.isfinite(x) for x in ctl.interval), (cid, ctl)
        assert got[cid].decision.verdict == REPRODUCED, (cid, got[cid].decision)
    rng = np.random.default_rng(2)
    d = np.repeat(np.array(DS, float), 5)
    falling = (500 - 0.5 * d) * np.exp(rng.normal(0, 0.01, d.size))  # issue #51's planted falling ‖∇f‖²
    assert power_exponent(d, falling).value < 0


def test_the_asymptotic_exponent_is_not_bent_by_the_offset():
    """The old all-d power law read ‖∇f‖ ∝ d^0.27 on ‖∇f‖² = 0.497·d + 54; the estimator reads ½."""
    rng = np.random.default_rng(1)
    d = np.repeat(np.array(DS, float), 5)
    q = (0.497 * d + 54) * np.exp(rng.normal(0, 0.03, d.size))
    est = asymptotic_exponent(d, q)
    assert est.low < 1.0 < est.high and abs(est.value - 1) < 0.06


C0_PLANT = {"b_scale": 0.009, "noise": 0.01}  # ‖∇ₓf‖² − d/2 grows like C0², every network lazy (gain <= 1.5)


def _c0_noisy(seeds=6, **kw):
    """C0_PLANT with a per-network spread like the real runs': 5 % on ‖δ‖, 0.5 % on ‖∇ₓf‖ (a mean over
    every test point of a gradient that is ∇ₓf₀'s plus a small learned part)."""
    df = _df(seeds=seeds, **{**C0_PLANT, **kw})
    rng = np.random.default_rng(3)
    for col, sd in (("delta", 0.05), ("grad", 0.005)):
        df[col] = df[col] * np.exp(rng.normal(0, sd, len(df)))
    return df


def test_c0_claim_is_decided_per_d_on_the_lazy_networks():
    got = _by_id(_c0_noisy())
    c = got["c0-more-robust"]
    # probe 1: ‖δ‖ ∝ C0 (slope ≈ 1 > 0.2) -> reproduced; its control, the within-C0 placebo (seed-rank
    # labels on the same networks: true slope 0 < 0.2), reads contradicted: a working control
    assert c.verdict_before_control == REPRODUCED and c.decision.verdict == REPRODUCED, (c.decision, c.control)
    assert c.control.verdict.verdict == CONTRADICTED and c.control.working
    assert abs(c.evidence["control"]["delta"]["slope"]) < 0.15
    assert set(c.across["d"]) == {str(d) for d in DS}


def test_c0_placebo_relabels_within_each_true_c0():
    from robustlab.studies.lazy.attack_claims import c0_placebo
    rows = _df(seeds=6, **C0_PLANT)
    rows = rows[(rows["d"] == 25) & rows["sphere"] & (rows["C0"] < NON_LAZY_C0)]
    p = c0_placebo(rows, [10.0, 20.0, 40.0])
    assert (p["_true_C0"] == rows["C0"]).all() and set(p["C0"]) == {10.0, 20.0, 40.0}
    # every (width, true C0) family holds each label twice (6 seeds, 3 labels)
    counts = p.groupby(["m", "_true_C0", "C0"]).size()
    assert set(counts) == {2}


def test_c0_placebo_with_the_effect_planted_passes_and_caps_the_claim():
    """Probe 3: ‖δ‖ planted growing with the placebo's seed-rank label -> the control reproduces,
    and the claim reads inconclusive (the test does not discriminate)."""
    df = _c0_noisy()
    label = np.array([10.0, 20.0, 40.0])[df["seed"].to_numpy() % 3]  # the placebo's label (rank = seed)
    df["delta"] = df["delta"] * (label / 10.0) ** 0.8
    df["grad"] = df["grad"] * (label / 10.0) ** 0.2
    c = _by_id(df)["c0-more-robust"]
    assert c.control.verdict.verdict == REPRODUCED, c.control
    # the label planted per seed also widens the true-C0 fit, so the claim may be undecided already;
    # either way it can never read reproduced beside a control that passes
    assert c.decision.verdict == INCONCLUSIVE
    assert c.verdict_before_control != REPRODUCED or cm.NOT_DISCRIMINATING in c.decision.reason


def test_c0_claim_a_delta_growing_below_the_smallest_effect_is_contradicted():
    """Probe 2: ‖δ‖ flat in C0 (|f| ∝ C0^0.1, ‖∇ₓf‖ growing a little) -> slope < 0.2 -> contradicted."""
    c = _by_id(_c0_noisy(c0_power=0.1))["c0-more-robust"]
    assert c.verdict_before_control == CONTRADICTED, c.decision
    got = _by_id(_df(c0_power=-0.5, **C0_PLANT))  # |f| falls with C0: ‖δ‖ and η fall
    c = got["c0-more-robust"]
    assert c.decision.verdict == CONTRADICTED
    assert c.evidence["per_d_slopes"]["784"]["grad"]["verdict"] == REPRODUCED
    assert c.evidence["per_d_slopes"]["784"]["delta"]["verdict"] == CONTRADICTED


def test_c0_claim_excludes_a_d_where_the_larger_c0_are_not_lazy():
    df = _df(c0_power=-0.5, **C0_PLANT)
    small = (df["d"] == 25) & (df["C0"] > 10)
    df.loc[small, "grad_gain"] = 2.7  # at d = 25 the larger balls are not lazy: that d is outside
    base = _by_id(_df(c0_power=-0.5, **C0_PLANT))["c0-more-robust"]
    c = _by_id(df)["c0-more-robust"]
    assert c.across["d"]["25"].startswith("excluded") and base.across["d"]["25"] == CONTRADICTED
    assert c.decision.verdict == CONTRADICTED  # the other d still contradict it


def test_c0_eta_reads_the_small_d_fall_with_its_mechanism():
    df = _df()
    small = (df["d"] == 25) & (df["C0"] > 10) & (df["sphere"])
    df.loc[small, "eta"] = df.loc[small, "eta"] / (df.loc[small, "C0"] / 10) ** 1.5  # η falls with C0 at d = 25
    c = _by_id(df)["c0-eta"]
    assert c.kind == cm.EXPLORATORY and c.decision.verdict == CONTRADICTED
    assert c.across["d"]["25"] == CONTRADICTED and c.across["d"]["784"] == REPRODUCED
    row = next(r for r in c.evidence["per_d"] if r["d"] == 25 and r["m"] == 64)
    assert row["slope_eta"] < 0 and set(row["grad2_minus_half_d"]) == {"10", "20", "40"}


def test_every_builtin_claim_has_a_control_and_declared_premises():
    specs = {s.id: s for s in STUDY.claim_specs}
    got = claims(_df(raw={}), _ctx())
    assert {c.id for c in got} == set(specs)
    for c in got:
        assert c.id in specs and specs[c.id].kind == c.kind
        if c.kind == cm.CLAIM:
            assert specs[c.id].control is not None and c.control is not None, c.id
    for cid in MECHANISM:
        assert specs[cid].premises == ("trained", "lazy")
    assert specs["lazy-ball"].kind == cm.SELF_CHECK


def test_raw_pixel_claims_use_the_raw_runs():
    # ‖x‖ ∝ d^0.63 as MNIST's pixels over sizes 5…28, |f| ∝ ‖x‖: the theorem's η ∝ ‖x‖/d, a ≈ ½
    got = _by_id(_df(raw={"b_scale": 0.05}))
    raw = got["raw-eta-scaling"]
    assert raw.decision.effect == pytest.approx(-1.0, abs=0.1)  # judged on η/‖x‖
    assert raw.verdict_before_control == REPRODUCED
    assert got["raw-grad-scaling"].decision.effect == pytest.approx(0.5, abs=0.05)
    rows = raw.evidence["eta_itself"]
    assert rows and all(r["x_norm_exponent"] == pytest.approx(0.63, abs=0.01) for r in rows)
    assert all(r["eta_exponent_implied"] == pytest.approx(0.63 + r["eta_rel_exponent"]) for r in rows)


def test_rescaled_inputs_are_not_raw_runs():
    from robustlab.studies.lazy.attack_claims import raw_runs

    plain = raw_runs(_df(raw={}))
    df = pd.concat([plain, plain.assign(input_scale="unit-mean")])
    assert len(raw_runs(df)) == len(plain) and len(plain) > 0


def test_raw_eta_can_fail():
    # η/‖x‖ ∝ d^-0.4 (a step that shrinks too slowly for a lazy network): contradicted
    raw = _by_id(_df(raw={"eta_p": 0.4, "b_scale": 0.0}))["raw-eta-scaling"]
    assert raw.decision.verdict == CONTRADICTED
    assert all(-0.55 < r["eta_rel_exponent"] < -0.25 for r in raw.evidence["eta_itself"])

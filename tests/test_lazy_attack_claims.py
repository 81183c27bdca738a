"""lazy-attack's claims under the claims engine, on synthetic results: the asymptotic exponent
(an offset b in Q = a·d^p + b no longer bends the verdict), a verdict at every C0, the
non-lazy control (a planted control that passes too makes the claim inconclusive; a control
that never left the lazy ball is excluded), the "trained" premise per network (a planted
under-trained network is excluded and counted, not a reason for NA), the C0 claim on all
three quantities, and the declarations themselves."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from robustlab import claims as cm
from robustlab.stats import CONTRADICTED, INCONCLUSIVE, NOT_APPLICABLE, REPRODUCED
from robustlab.studies.base import Context
from robustlab.studies.lazy.attack import STUDY
from robustlab.studies.lazy.attack_claims import claims
from robustlab.studies.lazy.common import NON_LAZY_C0, asymptotic_exponent

DS = [25, 64, 144, 324, 784]


def _ctx():
    return Context(out=Path("."), figdir=Path("."), manifest={"base_config": {"C0": 10.0}}, failures=[])


def _rows(*, m, C0, seeds, rng, grad_p=1.0, eta_p=1.0, b_scale=0.02, acc=0.98, noise=0.04, moved=None,
          c0_power=1.0, sphere=True, x_exp=0.0, init_scale=1.0, grad_gain=None):
    rows = []
    for d in DS:
        for s in range(seeds):
            j = lambda: float(np.exp(rng.normal(0, noise)))  # noqa: E731
            b = b_scale * min(C0, 40) ** 2
            g2 = (0.5 * d ** grad_p + b) * j()
            f = 0.5 * (min(C0, 40) / 10) ** c0_power  # |f| grows with C0
            inv_eta = (0.5 * d ** eta_p + b) / f * j()
            x_norm = (d / DS[0]) ** x_exp  # raw pixels: ‖x‖ grows with d, |f| and η with it
            eta = x_norm / inv_eta
            init_grad = init_scale * math.sqrt(0.5 * d)
            grad = math.sqrt(g2) if grad_gain is None else grad_gain * init_grad
            delta = eta * grad
            r = C0 / math.sqrt(m)
            off = r * 0.99 if moved is None else moved / math.sqrt(m)
            rows.append({
                "dataset": "mnist5k", "sphere": sphere, "bias": not sphere, "size": int(math.isqrt(d)), "dim": None,
                "m": m, "C0": C0, "R": None, "R_factor": None, "lr": 1.0, "epochs": 40, "seed": s, "d": d,
                "test_acc": acc, "init_test_acc": 0.5, "offset_ratio": min(off / r, 0.9999), "max_offset": off,
                "left_ball": True, "grad": grad, "eta": eta, "delta": delta, "delta_rel": delta / x_norm,
                "x_norm": x_norm, "abs_f": f * x_norm,
                "init_scale": init_scale, "init_grad": init_grad, "init_eta": 2 / d, "init_delta": 2 / d * math.sqrt(0.5 * d),
                "init_delta_rel": 2 / d * math.sqrt(0.5 * d)})
    return rows


def _df(seeds=4, control=None, seed=0, **kw):
    rng = np.random.default_rng(seed)
    rows = []
    for m, c0s in ((64, (10.0, 20.0, 40.0)), (256, (10.0,))):
        for c0 in c0s:
            rows += _rows(m=m, C0=c0, seeds=seeds, rng=rng, **kw)
    # the rich-regime control: small init, a learned input gradient with another d-dependence
    ctl = {"grad_p": 0.2, "eta_p": 0.2, "moved": 15.0, "init_scale": 0.01, **(control or {})}
    rows += _rows(m=64, C0=NON_LAZY_C0, seeds=seeds, rng=rng, **ctl)
    return pd.DataFrame(rows)


def _by_id(df):
    return {c.id: c for c in claims(df, _ctx())}


def test_claims_reproduced_with_an_offset_and_a_control_that_fails():
    got = _by_id(_df())
    assert got["lazy-ball"].kind == cm.SELF_CHECK
    for cid in ("grad-scaling", "eta-scaling", "delta-scaling", "c0-more-robust", "lazy-generalise"):
        c = got[cid]
        assert c.decision.verdict == REPRODUCED, (cid, c.decision, c.evidence)
        assert c.control is not None and c.control.verdict.verdict != REPRODUCED, (cid, c.control)
    g = got["grad-scaling"]
    assert g.decision.effect == pytest.approx(0.5, abs=0.05)
    assert g.across == {"C0": {"10": REPRODUCED, "20": REPRODUCED, "40": REPRODUCED}}
    assert g.to_dict()["excluded"] == [{"premise": "trained", "excluded": 0, "of": 20 * 5,
                                        "detail": "clean test accuracy of the network >= 0.9"}]


def test_the_asymptotic_exponent_is_not_bent_by_the_offset():
    """The old all-d power law read ‖∇f‖ ∝ d^0.27 on ‖∇f‖² = 0.497·d + 54; the estimator reads ½."""
    rng = np.random.default_rng(1)
    d = np.repeat(np.array(DS, float), 5)
    q = (0.497 * d + 54) * np.exp(rng.normal(0, 0.03, d.size))
    est = asymptotic_exponent(d, q)
    assert est.low < 1.0 < est.high and abs(est.value - 1) < 0.06
    q2 = (0.5 * d ** 0.6 + 5) * np.exp(rng.normal(0, 0.03, d.size))
    assert asymptotic_exponent(d, q2).high < 0.8


def test_a_planted_control_that_passes_too_makes_the_claim_inconclusive():
    got = _by_id(_df(control={"grad_p": 1.0, "eta_p": 1.0}))
    for cid in ("grad-scaling", "eta-scaling"):
        c = got[cid]
        assert c.verdict_before_control == REPRODUCED and c.control.verdict.verdict == REPRODUCED
        assert c.decision.verdict == INCONCLUSIVE and cm.NOT_DISCRIMINATING in c.decision.reason


def test_a_control_whose_gradient_is_still_the_initial_one_is_excluded_not_counted():
    """A small-init network whose input gradient is under twice its initial one removes no premise
    (its gradient is inherited, not learned): its networks are excluded."""
    got = _by_id(_df(control={"grad_p": 1.0, "eta_p": 1.0, "grad_gain": 1.5}))
    c = got["grad-scaling"]
    assert c.control.verdict.verdict == NOT_APPLICABLE
    assert c.evidence["control_excluded"][0]["premise"] == "non-lazy"
    assert c.evidence["control_excluded"][0]["excluded"] == 4 * 5
    assert c.evidence["control_grad_gain"] == [pytest.approx(1.5), pytest.approx(1.5)]


def test_standard_init_c0_1000_is_neither_lazy_nor_the_control():
    """SGD from the standard init with C0 = 1000 stays near its init (C0_used ~ 10-40): it is
    not the rich-regime control, and not one of the lazy grid's C0 either."""
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
    for cid in ("grad-scaling", "c0-more-robust"):
        c = got[cid]
        assert c.decision.verdict == REPRODUCED, (cid, c.decision)
        assert c.to_dict()["excluded"][0]["excluded"] == 1
    # the generalisation claim judges every point: that point's mean falls, the claim does not pass
    assert got["lazy-generalise"].decision.verdict in (INCONCLUSIVE, CONTRADICTED)


def test_a_verdict_that_depends_on_c0_is_inconclusive():
    df = _df()
    at40 = df["C0"] == 40.0
    df.loc[at40, "grad"] = (0.5 * df.loc[at40, "d"] ** 1.8) ** 0.5
    c = _by_id(df)["grad-scaling"]
    assert c.across["C0"]["40"] == CONTRADICTED and c.across["C0"]["10"] == REPRODUCED
    assert c.decision.verdict == INCONCLUSIVE and "depends on C0" in c.decision.reason


def test_c0_claim_needs_all_three_quantities_and_shows_the_eta_mechanism():
    got = _by_id(_df(c0_power=-0.5))  # |f| falls with C0: ‖δ‖ and η fall
    c = got["c0-more-robust"]
    assert c.decision.verdict == CONTRADICTED
    assert c.evidence["grad"]["verdict"] == REPRODUCED and c.evidence["eta"]["verdict"] == CONTRADICTED
    assert {r["d"] for r in c.evidence["per_d"]} == set(DS)


def test_every_builtin_claim_has_a_control_and_declared_premises():
    specs = {s.id: s for s in STUDY.claim_specs}
    got = claims(_df(), _ctx())
    for c in got:
        assert c.id in specs and specs[c.id].kind == c.kind
        if c.kind == cm.CLAIM:
            assert specs[c.id].control is not None and c.control is not None, c.id
    assert specs["lazy-ball"].kind == cm.SELF_CHECK


def test_raw_pixel_claims_use_the_raw_runs():
    # ‖x‖ ∝ d^0.63 as MNIST's pixels over sizes 5…28, |f| ∝ ‖x‖, ‖∇ₓf‖² = d/2 + b: the theorem's η ∝ ‖x‖/d
    df = pd.concat([_df(), _df(sphere=False, x_exp=0.63, b_scale=0.2)])  # b ~ d/2 at small d, as measured
    got = _by_id(df)
    raw = got["raw-eta-scaling"]
    assert raw.decision.effect == pytest.approx(-1.0, abs=0.1)  # judged on η/‖x‖
    assert raw.decision.verdict == REPRODUCED
    assert got["eta-scaling"].decision.effect == pytest.approx(-1.0, abs=0.08)
    rows = raw.evidence["eta_itself"]
    assert rows and all(r["x_norm_exponent"] == pytest.approx(0.63, abs=0.01) for r in rows)
    assert all(r["eta_exponent_implied"] == pytest.approx(0.63 + r["eta_rel_exponent"]) for r in rows)
    # the superseded fit of 1/η = a·d^p + b is misspecified once |f| grows with d: it misses −0.37
    assert all(abs(r["superseded_inv_eta_fit"]["exponent"] - (0.63 - 1.0)) > 0.2 for r in rows)


def test_rescaled_inputs_are_not_raw_runs():
    from robustlab.studies.lazy.attack_claims import raw_runs

    plain = raw_runs(_df(sphere=False))  # a frame from before the field: no input_scale column
    assert len(plain) > 0 and "input_scale" not in plain.columns
    df = pd.concat([_df(sphere=False), _df(sphere=False).assign(input_scale="unit-mean")])
    assert len(raw_runs(df)) == len(plain)


def test_raw_eta_can_fail():
    # η/‖x‖ ∝ d^-0.4 (a step that shrinks too slowly for a lazy network): contradicted
    df = pd.concat([_df(), _df(sphere=False, x_exp=0.63, eta_p=0.4, b_scale=0.0)])
    raw = _by_id(df)["raw-eta-scaling"]
    assert raw.decision.verdict == CONTRADICTED
    assert all(-0.55 < r["eta_rel_exponent"] < -0.25 for r in raw.evidence["eta_itself"])

"""The width-depth-init claims on synthetic result tables: each passes on results that show
it and fails on results that do not (studies/width_depth_init.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from robustlab.studies import width_depth_init as W

N_TRAIN = 100
SEED_NOISE = [-1.5, -0.5, 0.5, 1.5]  # multiplicative noise of ±3 % per unit, one per seed


def base_width(m: float) -> float:
    """A curve with an interior maximum at m = 8 that levels off at 0.1."""
    return 0.5 * m / (1 + (m / 8) ** 2) + 0.1


DEPTH = {"lecun": lambda L: math.exp(-0.5 * (L - 2)), "he": lambda L: L / 2, "ntk": lambda L: L / 2}


def synth(*, width_curve=base_width, depth=None, small=None, trained=None, kappa_he=None, kappa_small=None,
          he_exp=0.1, small_exp=1.0, seeds=4, mc_offset=0.0, small_lrs=(0.3,), end_scale=1.0):
    """A results table shaped like the study's: final rows per (init, depth, width, seed),
    epoch rows with κ(t) for the depth-2 He and non-lazy points."""
    depth = {**DEPTH, **(depth or {})}
    small = small or (lambda m: 0.05 * (m / 16) ** -0.3)
    trained = trained or (lambda init, L, m: m >= 8 or init == "small")
    kappa_he = kappa_he or (lambda m: 2 * m**-0.5)
    kappa_small = kappa_small or (lambda m: 50 * (m / 16) ** 0.2)
    points = []
    for init in ("he", "lecun"):
        for L in (2, 3):
            for m in (1, 2, 4, 8, 16, 64, 128, 256, 1024):
                points.append((init, L, m, 0.1, width_curve(m) * depth[init](L)))
    for init in ("lecun", "he", "ntk"):
        for L in (4, 6) if init != "ntk" else (2, 3, 4, 6):
            points.append((init, L, 128, 0.1, width_curve(128) * depth[init](L)))
    for lr in small_lrs:
        for m in (16, 64, 128, 256, 1024):
            points.append(("small", 2, m, lr, small(m)))
    rows = []
    T, decay = 20, 16
    for init, L, m, lr, s in points:
        point = f"{init}|{L}|{m}|{lr}"
        for seed in range(seeds):
            v = s * (1 + 0.03 * SEED_NOISE[seed % 4])
            ok = trained(init, L, m)
            kap = kappa_small(m) if init == "small" else kappa_he(m)
            common = {"init": init, "depth": L, "width": m, "lr": lr, "gamma": 2.0, "seed": seed, "point": point,
                      "decay_start": decay, "target_loss": 0.2}
            row = {**common, "kind": "final", "epoch": T, "n_train": N_TRAIN,
                   "stability": v * end_scale, "stability_init": 1e-3 * depth.get(init, lambda L: 1.0)(L),
                   "train_acc": 0.97 if ok else 0.5, "test_acc": 0.9 if ok else 0.45, "train_loss": 0.05,
                   "stability_at_target": v, "train_acc_at_target": 0.95 if ok else 0.5,
                   "test_acc_at_target": 0.88 if ok else 0.45, "train_loss_at_target": 0.2 if ok else 1.0,
                   "reached_target": ok, "kappa": kap}
            if (init, L, m) == ("he", 2, 128):
                row.update(mc_stability=v * (1 + mc_offset), mc_stderr=0.01 * v, mc_exact=v, mc_samples=200,
                           mc_points=100)
            rows.append(row)
            if L == 2 and init in ("he", "small"):
                b = small_exp if init == "small" else he_exp
                for t in range(1, T + 1):
                    rows.append({**common, "kind": "epoch", "epoch": t, "loss": 0.5, "kappa": kap * (t / T) ** b})
    return pd.DataFrame(rows)


def by_id(df: pd.DataFrame) -> dict:
    return {c.id: c for c in W.claims(df, None)}


def test_all_claims_pass_on_results_that_show_them():
    res = by_id(synth())
    assert {k: c.passed for k, c in res.items()} == dict.fromkeys(
        ["width-peak", "depth-init", "nonlazy-width", "kappa", "mc-identity"], True)
    ev = res["width-peak"].evidence
    assert ev["judged_on"] == W.PROTOCOLS["target"] and ev["target"]["he_L2"]["peak_width"] == 8
    assert ev["target"]["he_L2"]["fall_fit"]["slope"] < 0 < ev["target"]["he_L2"]["rise_fit"]["slope"]
    dep = res["depth-init"].evidence["target"]
    assert dep["lecun_m128"]["fit"]["slope"] == pytest.approx(-0.5, abs=0.02)  # log P = c − 0.5 L
    assert dep["he_m128"]["fit"]["slope"] == pytest.approx(1.0, abs=0.05)  # P ∝ L
    kap = res["kappa"].evidence
    assert kap["he_vs_width"]["fit"]["slope"] == pytest.approx(-0.5, abs=1e-6)
    assert kap["he_in_time"]["per_width"][1024]["exponent"] == pytest.approx(0.1, abs=1e-3)
    assert kap["small_in_time"]["per_width"][1024]["exponent"] == pytest.approx(1.0, abs=1e-3)


# -- claim 1: interior maximum in width --------------------------------------------------------

def test_width_fails_when_stability_keeps_rising():
    c = by_id(synth(width_curve=lambda m: 0.1 * m**0.3))["width-peak"]
    assert not c.passed
    assert "end of the width grid" in c.evidence["target"]["he_L2"]["reason"]


def test_width_fails_on_a_bump_within_noise():
    c = by_id(synth(width_curve=lambda m: 1.0 + 0.05 * (m == 8)))["width-peak"]
    assert not c.passed
    assert "need >= 1.2" in c.evidence["target"]["lecun_L3"]["reason"]


def test_width_fails_when_the_fall_comes_from_untrained_networks():
    c = by_id(synth(trained=lambda init, L, m: 8 <= m < 1024))["width-peak"]
    assert not c.passed
    assert "[1024] past the peak did not all train" in c.evidence["target"]["he_L2"]["reason"]


def test_width_needs_noise_estimate_and_deeper_depth():
    c = by_id(synth(seeds=1))["width-peak"]
    assert not c.passed  # one seed: no standard error, no claim
    df = synth()
    c = by_id(df[~((df["depth"] == 3) & (df["init"] == "he"))])["width-peak"]
    assert not c.passed and "deeper" in c.evidence["target"]["he"]


def test_width_reports_the_end_of_schedule_protocol_beside():
    c = by_id(synth(end_scale=1.0))["width-peak"]
    assert c.evidence["end"]["passed"] and c.evidence["target"]["passed"]
    df = synth()
    df = df.drop(columns=[k for k in df.columns if k.endswith("_at_target")] + ["reached_target"])
    c = by_id(df)["width-peak"]
    assert c.passed and list(c.evidence) == ["definition", "judged_on", "end"]


# -- claim 2: depth -----------------------------------------------------------------------------

def test_depth_fails_when_lecun_rises():
    c = by_id(synth(depth={"lecun": lambda L: L / 2}))["depth-init"]
    assert not c.passed
    assert not c.evidence["target"]["lecun_m128"]["passed"]
    assert c.evidence["target"]["he_m128"]["passed"]


def test_depth_fails_when_he_falls():
    c = by_id(synth(depth={"he": lambda L: 2 / L}))["depth-init"]
    assert not c.passed and not c.evidence["target"]["he_m128"]["passed"]


def test_depth_is_not_judged_on_untrained_deep_networks():
    """The pitfall of SPEC §C: deep LeCun networks that did not train look 'stable'."""
    c = by_id(synth(trained=lambda init, L, m: m >= 8 and not (init == "lecun" and L == 6)))["depth-init"]
    assert not c.passed
    assert c.evidence["target"]["lecun_m128"]["comparable"] is False
    assert "no width" in c.evidence["target"]["lecun"]


# -- claim 3: non-lazy two-layer networks ------------------------------------------------------

def test_nonlazy_fails_above_lazy():
    c = by_id(synth(small=lambda m: 5.0 * (m / 16) ** -0.3))["nonlazy-width"]
    assert not c.passed
    ev = c.evidence["target"]["small_vs_he"]
    assert ev["monotone"] and not ev["below_he_everywhere"]


def test_nonlazy_fails_when_not_monotone():
    c = by_id(synth(small=lambda m: 0.05 * (m / 16) ** -0.3 * (1.5 if m == 256 else 1.0)))["nonlazy-width"]
    assert not c.passed and not c.evidence["target"]["small_vs_he"]["monotone"]


def test_nonlazy_fails_when_untrained():
    c = by_id(synth(trained=lambda init, L, m: (m >= 8 and init != "small") or (init == "small" and m < 1024)))
    assert not c["nonlazy-width"].passed
    assert not c["nonlazy-width"].evidence["target"]["small_vs_he"]["all_trained"]


def test_nonlazy_judges_every_series():
    df = synth(small_lrs=(0.1, 0.3))
    bad = (df["init"] == "small") & (df["lr"] == 0.1) & (df["kind"] == "final")
    df.loc[bad, "stability_at_target"] *= 100  # the lr = 0.1 series lies above He
    c = by_id(df)["nonlazy-width"]
    assert not c.passed
    assert c.evidence["target"]["small[lr=0.3]_vs_he"]["passed"]
    assert not c.evidence["target"]["small[lr=0.1]_vs_he"]["passed"]


# -- claim 4: κ ---------------------------------------------------------------------------------

def test_kappa_fails_when_he_grows_linearly():
    c = by_id(synth(he_exp=1.0))["kappa"]
    assert not c.passed and not c.evidence["he_in_time"]["passed"]


def test_kappa_fails_when_nonlazy_is_flat():
    c = by_id(synth(small_exp=0.1))["kappa"]
    assert not c.passed and not c.evidence["small_in_time"]["passed"]


def test_kappa_fails_when_not_far_larger():
    c = by_id(synth(kappa_small=lambda m: 3 * 2 * m**-0.5))["kappa"]
    assert not c.passed and not c.evidence["small_vs_he_far_larger"]["passed"]


def test_kappa_fails_when_he_rises_with_width():
    c = by_id(synth(kappa_he=lambda m: 0.01 * m**0.5, kappa_small=lambda m: 10 * m))["kappa"]
    assert not c.passed and not c.evidence["he_vs_width"]["passed"]


def test_kappa_judges_only_overparameterised_widths():
    # narrow He widths (< N_TRAIN) growing fast do not decide "nearly flat"
    df = synth()
    narrow = (df["kind"] == "epoch") & (df["init"] == "he") & (df["width"] < N_TRAIN)
    df.loc[narrow, "kappa"] = df.loc[narrow, "epoch"].astype(float)
    c = by_id(df)["kappa"]
    assert c.passed
    per = c.evidence["he_in_time"]["per_width"]
    assert per[16]["judged"] is False and per[16]["passed"] is False and per[128]["judged"] is True


def test_growth_exponent_window():
    tr = pd.DataFrame({"epoch": np.arange(1, 41), "kappa": np.arange(1, 41) ** 0.7})
    g = W.growth_exponent(tr, decay_start=30)
    assert g["window"] == [15, 30] and g["exponent"] == pytest.approx(0.7, abs=1e-3)
    assert W.growth_exponent(tr, decay_start=0)["window"] == [20, 40]


# -- the Monte Carlo check ----------------------------------------------------------------------

def test_mc_identity_passes_and_fails():
    assert by_id(synth(mc_offset=0.02))["mc-identity"].passed  # 2 standard errors
    c = by_id(synth(mc_offset=0.2))["mc-identity"]  # 20 standard errors
    assert not c.passed and c.evidence["per_seed"][0]["z"] == pytest.approx(20, rel=0.01)
    df = synth().drop(columns=["mc_stability", "mc_stderr", "mc_exact", "mc_samples", "mc_points"])
    assert not by_id(df)["mc-identity"].passed


def test_claims_on_empty_results_fail_cleanly():
    res = by_id(pd.DataFrame({"kind": ["epoch"], "init": ["he"], "depth": [2], "width": [4], "point": ["p"]}))
    assert not any(c.passed for c in res.values())


def test_width_peak_definition_numbers():
    c = pd.DataFrame({"mean": [1.0, 3.0, 2.0], "sem": [0.1, 0.1, 0.1], "n": [3] * 3, "train_acc": [1.0] * 3,
                      "test_acc": [1.0] * 3, "train_loss": [0.1] * 3, "trained": [1.0] * 3},
                     index=pd.Index([4, 16, 64], name="width"))
    assert not W.width_peak(c)["passed"]  # fewer than MIN_WIDTHS widths
    c = pd.concat([c, c.iloc[[2]].set_axis([256])])
    res = W.width_peak(c)
    assert res["passed"] and res["peak_width"] == 16 and res["ratio_to_narrowest"] == pytest.approx(3.0)
    assert res["z_to_widest"] == pytest.approx(1.0 / math.sqrt(0.02), rel=1e-3)

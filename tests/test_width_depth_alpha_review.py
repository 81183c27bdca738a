"""Referee probes (ref5) of width-peak-lazy-limit's alpha-scaled arm (issue 54, branch wdi8).

Planted final-row tables as paper-alpha makes them (regime=alpha, He depth 2, widths 1-1024, 5 seeds,
k = 10 and k = 2 at n_train = 100, P by finite differences, per-layer spectral change), fed to
``claim_width_lazy_limit``: the effect planted must read reproduced, its absence must not; the spectral
premise must never manufacture "no peak" by removing a side of the peak (the real paper-alpha run's
pattern, embedded below); the finite-difference P is Def. 3's P on a linear map (float64); the arm and
its twins share their draws; the arm's heavy-ball steps at lr / alpha^2 are the closed-form twin's.
Report: /work/notes/ref5.md.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pandas as pd
import pytest
import torch

from robustlab.studies.width_depth_init.lazy_claims import width_peak_rule

# the modules (the package's ``claims`` name is its study's function)
C = importlib.import_module("robustlab.studies.width_depth_init.claims")
R = importlib.import_module("robustlab.studies.width_depth_init.run")

WIDTHS = tuple(2**i for i in range(11))  # paper-alpha's 1 .. 1024
SEEDS = 5
SWEEPS = (("[]", 10, 1000), ("[0, 1]", 2, 200))  # classes, outputs, n_test (paper-alpha's two sweeps)
PEAK_AT = {10: 16, 2: 4}  # the lazy limit's peak (notes/wdi8.md: k = 10 at 16, k = 2 at 4)
ALPHA = "alpha-scaled GD, alpha = {:g}:"


def peak(m: float, k: int) -> float:
    """An interior maximum at the lazy limit's peak width, ~1 in log P above both ends."""
    c = PEAK_AT[k]
    return 0.01 * (m / c) / (1 + (m / c) ** 2) + 0.002


def falling(m: float, k: int) -> float:
    return 0.01 * m**-0.4


def rising(m: float, k: int) -> float:
    return 0.001 * m**0.3


def flat(m: float, k: int) -> float:
    return 0.004


def _base(m, seed, classes, k, n_test, regime, **kw) -> dict:
    point = f"he|2|{m}|{classes}|{regime}|" + "|".join(f"{a}={b}" for a, b in sorted(kw.items()))
    return {"kind": "final", "init": "he", "depth": 2, "width": m, "seed": seed, "point": point, "output": "multi",
            "outputs": k, "classes": classes, "n_train": 100, "n_test": n_test, "d": 784, "eps": 0.1, "arch": "fcn",
            "regime": regime, "target_acc": 0.0, "train_acc": 1.0, "test_acc": 0.8, "train_loss": 0.01,
            "fd_ratio": 1.0, **kw}


def control_rows(curve) -> list[dict]:
    """The claim's control: the small init's depth-2 SGD width sweep (non-lazy), P = ``curve``."""
    return [_base(m, s, classes, k, n_test, "sgd", init="small", point=f"small|{m}|{classes}",
                  stability=curve(m, k) * (1 + 0.02 * s), stability_init=flat(m, k), kappa=5.0, fd_ratio=1.0,
                  lin_steps=0, fd_draws=0, alpha=1.0)
            for classes, k, n_test in SWEEPS for m in WIDTHS for s in range(SEEDS)]


def table(curve, spectral=lambda m, k, a: 0.01, alphas=(10.0, 30.0, 100.0), init=flat, seeds=SEEDS,
          lin=peak, noise=0.1, control=falling) -> pd.DataFrame:
    """Final rows: the min-norm linearised twins (P = ``lin``, the claim's verdict) and the alpha arm per
    alpha (P_fd = ``curve``, P_fd at init = ``init``, largest per-layer spectral change ``spectral``), each
    seed's P a fixed log-normal factor (sd ``noise``) off the curve; with the claim's control sweep (P =
    ``control``; falling by default: a working control) unless ``control`` is None."""
    rng = np.random.default_rng(0)
    rows = control_rows(control) if control is not None else []
    for classes, k, n_test in SWEEPS:
        for m in WIDTHS:
            for s in range(seeds):
                p = lin(m, k) * math.exp(noise * rng.standard_normal())
                rows.append(_base(m, s, classes, k, n_test, "linearised", lin_steps=0, fd_draws=4, alpha=1.0,
                                  stability=p, stability_init=flat(m, k), stability_fd=p, stability_fd_init=flat(m, k)))
                for a in alphas:
                    p = curve(m, k) * math.exp(noise * rng.standard_normal())
                    p0 = init(m, k) * math.exp(noise * rng.standard_normal())
                    rows.append(_base(m, s, classes, k, n_test, "alpha", alpha=a, fd_draws=4, lin_steps=0,
                                      stability=10 * p, stability_init=p0, stability_fd=p, stability_fd_init=p0,
                                      spectral_change_max=spectral(m, k, a)))
    return pd.DataFrame(rows)


def variants(df: pd.DataFrame) -> dict:
    c = C.claim_width_lazy_limit(df)
    return {a: next(v for n, v in c.variants.items() if n.startswith(ALPHA.format(a))) for a in (10.0, 30.0, 100.0)
            if any(n.startswith(ALPHA.format(a)) for n in c.variants)}


# ---------------------------------------------------------------------------------------
# probe 1: the effect planted, every layer lazy

def test_planted_peak_with_every_layer_lazy_reads_reproduced_at_every_alpha():
    got = variants(table(peak))
    assert set(got) == {10.0, 30.0, 100.0}
    planted = min(math.log(peak(PEAK_AT[k], k) / max(peak(1, k), peak(1024, k))) for k in (10, 2))
    for a, v in got.items():
        assert v.verdict == "reproduced", (a, v.reason)
        assert v.interval[0] > 0 and v.effect == pytest.approx(planted, abs=0.25)


# ---------------------------------------------------------------------------------------
# probe 2: no effect planted

@pytest.mark.parametrize("curve,expect", [(falling, "contradicted"), (rising, "contradicted"), (flat, None)])
def test_monotone_or_flat_alpha_arm_never_reads_reproduced(curve, expect):
    for a, v in variants(table(curve)).items():
        assert v.verdict != "reproduced", (a, curve.__name__)
        if expect:
            assert v.verdict == expect, (a, curve.__name__, v.reason)


# ---------------------------------------------------------------------------------------
# probe 3: the control

def test_the_claim_verdict_control_can_pass_when_the_effect_is_planted_in_its_setting():
    """width-peak-lazy-limit's own control (the small init's SGD sweep, non-lazy): with a peak planted in
    it the control reads reproduced and the claim does not discriminate -- the control can pass."""
    df = table(peak, control=None)
    rows = control_rows(peak)
    c = C.claim_width_lazy_limit(pd.concat([df, pd.DataFrame(rows)], ignore_index=True))
    assert c.control is not None and c.control.verdict.verdict == "reproduced"
    assert c.decision.verdict == "inconclusive" and "does not discriminate" in c.decision.reason
    # the same with a falling control: the control works, the planted lazy-limit peak reads reproduced
    for r in rows:
        r["stability"] = falling(r["width"], r["outputs"])
    c = C.claim_width_lazy_limit(pd.concat([df, pd.DataFrame(rows)], ignore_index=True))
    assert c.control.verdict.verdict == "contradicted" and c.decision.verdict == "reproduced"


def test_alpha_networks_at_initialisation_cannot_be_a_working_control():
    """The natural at-init control (the same networks' stability_fd_init) is flat in width for He (closed form),
    so the peak rule reads it inconclusive, never contradicted: under cl.with_control (a control must read
    contradicted) it would cap every alpha variant to "no working control". Measured on the real paper-alpha
    run: +0.38 [-0.29, 0.91] at alpha = 30 and 100 (notes/ref5.md). Not the control to add."""
    df = table(peak)
    a = df[(df["regime"] == "alpha") & (df["alpha"] == 100.0)]
    v = C.view(a, "end").assign(stability=a["stability_fd_init"], stability_init=a["stability_fd_init"])
    assert C._alpha_rule(v, v).verdict == "inconclusive"


def test_alpha_variant_is_not_reproduced_where_the_claims_control_is_missing():
    """ref5 defect 3: each alpha variant is capped by the claim's own control (with_control): the same planted
    peak reads reproduced beside a working control (probe 1) and "no working control" without one."""
    c = C.claim_width_lazy_limit(table(peak, control=None))
    assert "no working control" in c.decision.reason
    assert all(v.verdict != "reproduced" for n, v in c.variants.items() if n.startswith("alpha-scaled"))


# ---------------------------------------------------------------------------------------
# the spectral premise must not manufacture "no peak" (the real paper-alpha run, /tmp/s4/paper-alpha,
# 583eae5, integrator 15:41 UTC): per width, mean P_fd over 5 seeds and the largest per-layer spectral
# change over the seeds, 2-class sweep (k = 2, n_test 200)

REAL_K2 = {  # width: {alpha: (mean stability_fd, max spectral_change_max)}
    1: {30.0: (0.005901, 0.533), 100.0: (0.009611, 0.134)},
    2: {30.0: (0.011864, 0.194), 100.0: (0.025955, 0.080)},
    4: {30.0: (0.010987, 0.257), 100.0: (0.023315, 0.066)},
    8: {30.0: (0.006435, 0.132), 100.0: (0.015395, 0.049)},
    16: {30.0: (0.002503, 0.059), 100.0: (0.003467, 0.024)},
    32: {30.0: (0.001891, 0.060), 100.0: (0.002784, 0.018)},
    64: {30.0: (0.001583, 0.046), 100.0: (0.002119, 0.013)},
    128: {30.0: (0.000953, 0.035), 100.0: (0.001208, 0.011)},
    256: {30.0: (0.000629, 0.030), 100.0: (0.000763, 0.009)},
    512: {30.0: (0.000410, 0.034), 100.0: (0.000461, 0.010)},
    1024: {30.0: (0.000236, 0.033), 100.0: (0.000255, 0.010)},
}


def _real_k2(seeds: int) -> pd.DataFrame:
    """The 2-class sweep at alpha = 30 and 100 with the run's means and premise pattern (seed spread 10 %),
    the 10-class sweep a clear lazy peak (every layer lazy)."""
    df = table(peak, alphas=(30.0, 100.0), seeds=seeds,
               spectral=lambda m, k, a: REAL_K2[m][a][1] if k == 2 else 0.01)
    k2 = (df["regime"] == "alpha") & (df["outputs"] == 2)
    df.loc[k2, "stability_fd"] = [REAL_K2[m][a][0] * (1 + 0.1 * (s - seeds // 2) / seeds)
                                  for m, a, s in zip(df.loc[k2, "width"], df.loc[k2, "alpha"], df.loc[k2, "seed"])]
    return df


def test_premise_removing_the_rising_side_is_excluded_by_name_not_read_as_no_peak():
    """ref5 defect 1 (fixed): at alpha = 30 the premise removes widths 1-8 of the 2-class sweep (its whole
    rising side: the peak is at 2-4), at alpha = 100 width 1. The rule on what remains (a falling tail)
    reads "no peak" -- contradicted with 10 seeds -- from a population that lost its peak side."""
    df = _real_k2(10)
    # the rule as wdi8 applied it (no coverage): the 2-class tail reads contradicted at alpha = 30
    v = C.view(df[(df["regime"] == "alpha") & (df["alpha"] == 30.0)], "end")
    v = v.assign(stability=v["stability_fd"], stability_init=v["stability_fd_init"])
    kept = C.kept(v, C.ALPHA_PREMISES)[0]
    assert width_peak_rule(kept, init_term=C.TRAINED_CURVE).verdict == "contradicted"
    # with width-peak's coverage: the sweep is excluded by name, the 10-class sweep decides
    got = variants(df)
    for a in (30.0, 100.0):
        assert got[a].verdict == "reproduced", (a, got[a].reason)
        assert "spectral-lazy" in got[a].reason and "classes=[0, 1]" in got[a].reason
    assert "removes width < 16" in got[30.0].reason and "removes width < 2" in got[100.0].reason


def test_premise_removing_every_sweeps_side_reads_not_applicable_naming_it():
    got = variants(table(falling, spectral=lambda m, k, a: 0.3 if m <= 4 else 0.01))
    for a, v in got.items():
        assert v.verdict == "not applicable" and "spectral-lazy" in v.reason, (a, v.reason)
    # alpha = 10 on the real run: 105 of 110 networks removed -> not applicable, never contradicted
    got = variants(table(falling, spectral=lambda m, k, a: 0.3 if m != 256 else 0.05))
    assert all(v.verdict == "not applicable" for v in got.values())


def test_premise_removing_only_the_peak_widths_never_reads_contradicted():
    def dip_then_peak(m, k):  # a dip at width 2, the peak at 16: the remainder 1, 2, 128 .. 1024 falls
        return {1: 0.004, 2: 0.0035, 4: 0.006, 8: 0.01, 16: 0.012, 32: 0.008, 64: 0.005}.get(m, 0.003 * (128 / m) ** 0.2)
    """ref5 defect 2: a sweep that lost interior widths may read reproduced but not contradicted (_gap_capped)."""
    got = variants(table(dip_then_peak, spectral=lambda m, k, a: 0.2 if 4 <= m <= 64 else 0.01))
    assert all(v.verdict == "inconclusive" for v in got.values())
    assert any("removed interior widths 4, 8, 16, 32, 64" in v.reason for v in got.values())
    # the rule without the cap reads the falling remainder contradicted: the cap is what changes it
    a = table(dip_then_peak, spectral=lambda m, k, a: 0.2 if 4 <= m <= 64 else 0.01, control=None)
    v = C.view(a[(a["regime"] == "alpha") & (a["alpha"] == 100.0)], "end")
    v = v.assign(stability=v["stability_fd"], stability_init=v["stability_fd_init"])
    assert width_peak_rule(C.kept(v, C.ALPHA_PREMISES)[0], init_term=C.TRAINED_CURVE).verdict == "contradicted"
    # gaps do not stop a peak in what is left from reading reproduced (widths 4-8 removed, the peak at 16 kept)
    got = variants(table(peak, spectral=lambda m, k, a: 0.2 if 2 < m < 16 and k == 10 else 0.01))
    assert all(v.verdict == "reproduced" for v in got.values())


# ---------------------------------------------------------------------------------------
# the estimator: finite-difference P against Def. 3's identity (float64), and shared draws

def test_finite_difference_p_is_def3_p_on_a_linear_map_in_float64():
    """E_delta ||A delta||^2 = eps^2 ||A||_F^2 / (d + 2) for delta ~ U(B(0, eps)) in R^d: the identity; and
    on a smooth map, the finite difference meets eps^2 E||J_x f||^2 / (d + 2) as eps -> 0."""
    g = torch.Generator().manual_seed(0)
    d, k, n, eps = 12, 3, 400, 0.3
    A = torch.randn(2, d, k, generator=g, dtype=torch.float64)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    gens = [torch.Generator().manual_seed(s) for s in (1, 2)]
    got = R._fd_stability(lambda xe: torch.bmm(xe, A), x, eps, gens, draws=25)
    want = eps**2 * A.pow(2).sum((1, 2)) / (d + 2)
    assert torch.allclose(got, want, rtol=0.02)
    # the radius law: E||delta||^2 = eps^2 d / (d + 2)
    de = R._ball_draws(x, eps, [torch.Generator().manual_seed(3)])
    assert float(de.pow(2).sum(-1).mean()) == pytest.approx(eps**2 * d / (d + 2), rel=0.02)
    assert float(de.norm(dim=-1).max()) <= eps * (1 + 1e-12)
    # a smooth map: tanh(x W) V, J_x f = W diag(1 - tanh^2) V
    W = torch.randn(d, 8, generator=g, dtype=torch.float64) / math.sqrt(d)
    V = torch.randn(8, k, generator=g, dtype=torch.float64)
    def f(xe):
        return torch.tanh(xe @ W) @ V
    s = 1 - torch.tanh(x @ W).pow(2)
    jac = torch.einsum("ij,nj,jk->nik", W, s, V).pow(2).sum((1, 2)).mean()
    for e in (0.3, 0.03):
        p = R._fd_stability(lambda xe: f(xe), x, e, [torch.Generator().manual_seed(4)], draws=25)[0]
        ident = e**2 * jac / (d + 2)
        assert abs(float(p / ident) - 1) < (0.05 if e == 0.03 else 0.2)


def test_alpha_arm_and_its_twins_draw_the_same_deltas_per_seed():
    """The arm measures E seeds at once (one generator per copy); a twin one seed alone: copy e's draws are the
    single seed's, at init and at the end, draw after draw."""
    from robustlab.studies.width_depth_init import WidthDepthInitConfig as Cfg

    x = torch.zeros(5, 7)
    arm = [Cfg(regime="alpha", alpha=30.0, fd_draws=2, seed=s) for s in (0, 3, 17)]
    for when in ("init", "end"):
        ga = R._fd_p_gens(arm, when)
        draws_arm = [R._ball_draws(x, 0.1, ga) for _ in range(2)]
        for e, s in enumerate((0, 3, 17)):
            gt = R._fd_p_gens([Cfg(regime="linearised", lin_steps=5, fd_draws=2, seed=s)], when)
            for j in range(2):
                assert torch.equal(R._ball_draws(x, 0.1, gt)[0], draws_arm[j][e])


@pytest.mark.parametrize("momentum", [0.9])
def test_alpha_arm_with_heavy_ball_meets_its_finite_step_twin_at_large_alpha(momentum):
    """paper-alpha trains with momentum 0.9 (wdi8's end-to-end test: momentum 0): θ stepped by torch's heavy
    ball at lr / alpha^2 is, in u = alpha (θ - θ0), the twin's closed form (β <- μβ + e, e <- e - lr λ/n β). At
    alpha = 1000 the two P_fd agree to 1 %; the twin without momentum is far away (the check can fail)."""
    from robustlab.studies import width_depth_init as W

    tiny = {"dataset": "digits", "n_train": 30, "n_test": 20, "epochs": 20, "batch_size": 30, "momentum": momentum,
            "decay_start": 0, "mc_samples": 0, "target_acc": 0.0, "early_epoch": 0, "fd_points": 10, "width": 16,
            "lr": 0.2, "fd_draws": 2}
    arm = W.run_points([W.WidthDepthInitConfig(**tiny, regime="alpha", alpha=1000.0, seed=s) for s in range(2)])
    twin = W.run_points([W.WidthDepthInitConfig(**tiny, regime="linearised", lin_steps=20, seed=s) for s in range(2)])
    plain = W.run_points([W.WidthDepthInitConfig(**{**tiny, "momentum": 0.0}, regime="linearised", lin_steps=20, seed=s)
                          for s in range(2)])
    for e in range(2):
        a, t, p = arm[e][-1], twin[e][-1], plain[e][-1]
        assert abs(a["stability_fd"] / t["stability_fd"] - 1) < 0.01
        assert abs(a["train_loss"] - t["train_loss"] / 2) < 0.01 * t["train_loss"]
        assert abs(t["train_loss"] / p["train_loss"] - 1) > 0.1  # momentum matters at 20 steps


# ---------------------------------------------------------------------------------------
# probe 4: base seeds 0 and 17, a small real alpha run (paper-alpha's setting: mnist5k 28x28, n 100, classes
# (0, 1), He depth 2, alpha = 100, lr 0.25 / alpha^2, momentum 0.9, 2000 full-batch steps, fd_draws 4; widths
# 1, 4, 16, 64, 256; /tmp/ref5/seed_probe.py, 33-34 CPU-s each). Per width, per seed: (P_fd, largest
# per-layer spectral change). Seed 0's width 1 matches the full paper-alpha run to the last digit.

REAL_SEEDS = {
    0: {1: [(0.011539, 0.134), (0.003857, 0.0146), (0.006685, 0.0326), (0.01455, 0.044), (0.011422, 0.0214)],
        4: [(0.021949, 0.0643), (0.028838, 0.0467), (0.01975, 0.0662), (0.04195, 0.0622), (0.004085, 0.0579)],
        16: [(0.00214, 0.0236), (0.003818, 0.017), (0.00397, 0.0178), (0.004769, 0.0164), (0.00264, 0.0171)],
        64: [(0.001729, 0.0119), (0.002355, 0.0125), (0.00179, 0.0133), (0.002379, 0.0129), (0.00234, 0.0122)],
        256: [(0.000721, 0.0087), (0.000691, 0.0086), (0.000826, 0.0078), (0.000755, 0.0077), (0.000819, 0.0089)]},
    17: {1: [(0.002417, 0.0646), (0.004541, 0.016), (0.001044, 0.0234), (0.001615, 0.0135), (0.003597, 0.0206)],
         4: [(0.011854, 0.0471), (0.003588, 0.0371), (0.007469, 0.0755), (0.021222, 0.0964), (0.021195, 0.0515)],
         16: [(0.008019, 0.0231), (0.002442, 0.021), (0.005601, 0.0332), (0.00343, 0.0144), (0.008234, 0.0288)],
         64: [(0.001419, 0.0121), (0.002409, 0.0114), (0.002658, 0.0144), (0.001712, 0.0124), (0.001173, 0.0118)],
         256: [(0.000722, 0.009), (0.000854, 0.0085), (0.000866, 0.0079), (0.00073, 0.0086), (0.00054, 0.0081)]},
}


def _real_seed_rows(base: int) -> pd.DataFrame:
    rows = []
    for m, per in REAL_SEEDS[base].items():
        for s, (p, sc) in enumerate(per):
            rows.append(_base(m, base + s, "[0, 1]", 2, 200, "linearised", lin_steps=0, fd_draws=4, alpha=1.0,
                              stability=peak(m, 2), stability_init=5e-5, stability_fd=peak(m, 2), stability_fd_init=5e-5))
            rows.append(_base(m, base + s, "[0, 1]", 2, 200, "alpha", alpha=100.0, fd_draws=4, lin_steps=0,
                              stability=10 * p, stability_init=5e-5, stability_fd=p, stability_fd_init=5e-5,
                              spectral_change_max=sc))
    return pd.DataFrame(rows + control_rows(falling))  # with a working control (the variants are capped by it)


def test_real_seeds_0_and_17_never_read_no_peak_from_a_premise_that_removed_the_narrow_end():
    """Seed 0: one of five width-1 networks moved 0.134 (median 0.033), the width goes whole, and wdi8's rule read
    the falling remainder 4..256 contradicted (-1.91 [-2.43, -1.15]) where seed 17 (every width kept) reads
    reproduced (+1.60 [0.68, 2.39]). With the coverage: seed 0 not applicable naming the premise, seed 17 the same
    reproduced."""
    got = {b: variants(_real_seed_rows(b))[100.0] for b in (0, 17)}
    assert got[0].verdict == "not applicable" and "'spectral-lazy' removes width < 4" in got[0].reason
    assert got[17].verdict == "reproduced" and got[17].effect == pytest.approx(1.598, abs=0.01)
    a = _real_seed_rows(0)
    v = C.view(a[a["regime"] == "alpha"], "end")
    v = v.assign(stability=v["stability_fd"], stability_init=v["stability_fd_init"])
    assert width_peak_rule(C.kept(v, C.ALPHA_PREMISES)[0], init_term=C.TRAINED_CURVE).verdict == "contradicted"

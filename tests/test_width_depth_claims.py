"""The width-depth-init claims on synthetic result tables, through the claims engine: premises
per network (excluded and counted, never turning a claim NA or C), controls that turn a claim
whose rule also passes where the effect is absent into inconclusive, the end of the schedule as
its own variant (studies/width_depth_init/)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from robustlab import claims as cl
from robustlab import stats
from robustlab.studies import width_depth_init as W

N_TRAIN = 100
R, C, I, NA = stats.REPRODUCED, stats.CONTRADICTED, stats.INCONCLUSIVE, stats.NOT_APPLICABLE
WIDTHS = (16, 32, 64, 128, 256, 1024)


def base_width(m: float) -> float:
    """A curve with an interior maximum at m = 64 that levels off."""
    return 0.5 * m / (1 + (m / 64) ** 2) + 2.0


DEPTH_TRAINED = {"lecun": lambda L: math.exp(-0.5 * (L - 2)), "he": lambda L: L / 2, "ntk": lambda L: L / 2}
DEPTH_INIT = {"lecun": lambda L: 0.5 ** L, "he": lambda L: 1.0, "ntk": lambda L: 1.0}


def synth(*, width_curve=base_width, width_init=lambda m: 1.0, depth_trained=None, small=None, small_init=None,
          kappa_at=lambda init, L, m: 0.1, he_exp=0.05, small_exp=1.0, seeds=6, noise=0.03, n_train=N_TRAIN,
          early=lambda g, m: (m / 16) ** -0.5, early_he=lambda m: 1.0, gammas=(2.0,)):
    """A results table shaped like the study's: one final row per network (init, depth, width,
    seed), with its measurements at equal fit, at the end, at init and early; κ(t) epoch rows for
    the depth-2 He and non-lazy networks. Every network meets every premise unless a test changes it."""
    depth_trained = {**DEPTH_TRAINED, **(depth_trained or {})}
    small = small or (lambda m: 0.05 * (m / 16) ** -0.3)
    small_init = small_init or (lambda m: 1.0)
    points = []
    for init in ("he", "lecun"):
        for L in (2, 3):
            for m in WIDTHS:
                points.append((init, L, m, width_curve(m) * depth_trained[init](L), width_init(m) * DEPTH_INIT[init](L),
                               "multi", 2.0))
    for init in ("lecun", "he", "ntk"):
        for L in (4, 6) if init != "ntk" else (2, 3, 4, 6):
            points.append((init, L, 128, width_curve(128) * depth_trained[init](L), DEPTH_INIT[init](L), "multi", 2.0))
    for m in (128, 256, 512, 1024):
        points.append(("small", 2, m, small(m), small_init(m), "multi", 2.0))
    rng = np.random.default_rng(0)
    rows = []
    T, decay = 20, 16
    for init, L, m, s, s0, out, g in points:
        for seed in range(seeds):
            rows.append(_row(init, L, m, seed, s * math.exp(rng.normal(0, noise)), s0 * math.exp(rng.normal(0, noise)),
                             out, g, kappa_at(init, L, m), n_train, T, decay))
            if L == 2 and init in ("he", "small") and out == "multi":
                b = small_exp if init == "small" else he_exp
                kap = 50 * m ** -0.2 if init == "small" else 0.5 * m ** -0.5
                rows[-1]["kappa"] = kap  # the final kappa is the trace's last value
                for t in range(1, T + 1):
                    rows.append({"kind": "epoch", "init": init, "depth": L, "width": m, "seed": seed,
                                 "point": rows[-1]["point"] if t > 1 else _pt(init, L, m, out, g), "epoch": t,
                                 "decay_start": decay, "kappa": kap * (t / T) ** b * math.exp(rng.normal(0, 0.01)),
                                 "output": out})
    for g in gammas:
        for m in (16, 64, 256, 1024):
            for seed in range(seeds):
                r = _row("small", 2, m, seed, 1.0, 1.0, "single", g, 0.5, n_train, 5, 0)
                r.update(stability_init=m ** (1 - 2 * g), stability_early=m ** (1 - 2 * g) * early(g, m)
                         * math.exp(rng.normal(0, noise)), train_acc_early=0.6, fd_ratio_early=1.0, early_epoch=1)
                rows.append(r)
    for m in (16, 64, 256, 1024):
        for seed in range(seeds):
            r = _row("he", 2, m, seed, 1.0, 1.0, "single", 2.0, 0.01, n_train, 5, 0)
            r.update(stability_early=early_he(m) * math.exp(rng.normal(0, noise)), train_acc_early=0.7,
                     fd_ratio_early=1.0, early_epoch=1)
            rows.append(r)
    return pd.DataFrame(rows)


def _pt(init, L, m, out, g):
    return f"{init}|{L}|{m}|{out}|{g}"


def _row(init, L, m, seed, s, s0, out, g, kappa, n_train, T, decay):
    return {"kind": "final", "init": init, "depth": L, "width": m, "seed": seed, "point": _pt(init, L, m, out, g),
            "output": out, "outputs": 10 if out == "multi" else 1, "gamma": g, "n_train": n_train,
            "target_acc": 0.99, "decay_start": decay, "epoch": T, "d": 196, "eps": 0.1, "arch": "fcn",
            "stability": s * 1.1, "stability_init": s0, "stability_at_target": s, "train_acc": 1.0, "test_acc": 0.9,
            "train_loss": 0.01, "train_acc_at_target": 0.99, "test_acc_at_target": 0.88, "train_loss_at_target": 0.05,
            "reached_target": True, "kappa_at_target": kappa, "kappa": kappa * 1.2, "fd_ratio": 1.0,
            "fd_ratio_at_target": 1.0, "fd_ratio_init": 1.0}


def by_id(df: pd.DataFrame) -> dict:
    return {c.id: c for c in W.claims(df, None)}


def test_every_claim_has_a_control_and_its_declared_premises():
    specs = {s.id: s for s in W.STUDY.claim_specs}
    for s in specs.values():
        if s.kind == cl.CLAIM:
            assert s.control is not None and s.control.why, s.id
        assert all(p in W.STUDY.premises for p in s.premises), s.id
    assert specs["mc-identity"].kind == cl.SELF_CHECK and specs["depth-lecun-nonlazy"].kind == cl.EXPLORATORY
    assert {"lazy", "width>=classes", "equal-fit", "fd-linear"} <= set(specs["width-peak"].premises)
    assert "lazy" in specs["depth-init-trained"].premises


def test_claims_reproduced_on_results_that_show_them_with_failing_controls():
    res = by_id(synth())
    got = {k: c.decision.verdict for k, c in res.items()}
    assert got == {"width-peak": R, "width-peak-n-train": NA, "depth-init-at-init": R, "depth-init-trained": R,
                   "depth-lecun-nonlazy": NA, "nonlazy-width-early": R, "nonlazy-width": R, "kappa": R,
                   "mc-identity": I}, {k: (c.decision.verdict, c.decision.reason) for k, c in res.items()}
    for k, c in res.items():
        if c.kind == cl.CLAIM and c.decision.verdict == R:
            assert c.control is not None and c.control.verdict.verdict != R, k
    d = res["width-peak"].to_dict()
    assert d["kind"] == "claim" and d["control"]["setting"] == "the same networks at initialisation"
    assert d["variants"]["end of schedule"]["verdict"] == R  # reported beside, its own protocol
    assert res["width-peak"].evidence["parts"]["he_L2"]["peak_width"] == 64


def test_a_non_discriminating_width_peak_is_inconclusive():
    """The same peak at initialisation (where E P is flat in width by the closed form): the rule
    passes on the control too, so it does not tell a trained peak from whatever made this one."""
    c = by_id(synth(width_init=base_width))["width-peak"]
    assert c.decision.verdict == I and cl.NOT_DISCRIMINATING in c.decision.reason
    assert c.to_dict()["verdict_before_control"] == R


def test_an_under_trained_point_is_excluded_counted_and_does_not_turn_the_claim():
    df = synth()
    # one He network past the peak never reached the target: at the end it would sit far above
    # the peak (no at-target value), and a narrow one stayed non-lazy
    bad = (df["kind"] == "final") & (df["init"] == "he") & (df["depth"] == 2) & (df["width"] == 1024) & (df["seed"] == 0)
    df.loc[bad, ["reached_target", "stability_at_target", "kappa_at_target"]] = [False, np.nan, np.nan]
    df.loc[bad, "stability"] = 1e3
    c = by_id(df)["width-peak"]
    assert c.decision.verdict == R
    ex = {e.premise: e for e in c.excluded}
    assert ex["equal-fit"].excluded == 1 and ex["equal-fit"].of == 2 * 2 * len(WIDTHS) * 6 + 2 * 2 * 6
    # at the end of the schedule the same network fails the fit premise too only if it did not fit there;
    # here it fitted (train_acc 1.0) and, with P = 1000 at width 1024, the end variant is not reproduced
    assert c.variants["end of schedule"].verdict != R


def test_width_below_the_class_count_is_excluded_so_a_bottleneck_peak_does_not_count():
    """A 'peak' made by widths below the 10 classes: excluded by width>=classes, the rest rises."""
    def rising_with_bottleneck(m):
        return 5.0 if m == 4 else 0.1 * m ** 0.5
    df = synth(width_curve=rising_with_bottleneck)
    extra = []
    for init in ("he", "lecun"):
        for L in (2, 3):
            for seed in range(6):
                extra.append({**df[(df["kind"] == "final") & (df["init"] == init) & (df["depth"] == L)
                                   & (df["width"] == 16) & (df["seed"] == seed)].iloc[0].to_dict(),
                              "width": 4, "point": f"{init}|{L}|4", "stability_at_target": 5.0})
    df = pd.concat([df, pd.DataFrame(extra)], ignore_index=True)
    c = by_id(df)["width-peak"]
    assert c.decision.verdict == C
    assert {e.premise: e.excluded for e in c.excluded}["width>=classes"] == 24


def test_depth_trained_excludes_non_lazy_networks_and_the_exploratory_claim_takes_them():
    df = synth(kappa_at=lambda init, L, m: 0.6 if init == "lecun" else 0.1)
    res = by_id(df)
    c = res["depth-init-trained"]
    ex = {e.premise: e for e in c.excluded}
    assert ex["lazy"].excluded > 0
    assert c.decision.verdict == R  # He and NTK decide; LeCun's parts have no lazy network left
    assert not any(k.startswith("lecun") and v["verdict"] != NA for k, v in c.evidence["parts"].items())
    e = res["depth-lecun-nonlazy"]
    assert e.kind == cl.EXPLORATORY and e.decision.verdict == R
    assert "log10_P_trained_over_init" in e.evidence["parts"]["lecun_m128"]


def test_depth_trained_contradicted_when_lecun_rises_and_the_fd_premise_excludes():
    df = synth(depth_trained={"lecun": lambda L: L / 2})
    assert by_id(df)["depth-init-trained"].decision.verdict == C
    df = synth()
    df.loc[(df["kind"] == "final") & (df["depth"] == 6), "fd_ratio_at_target"] = 0.7  # eps too large there
    c = by_id(df)["depth-init-trained"]
    assert {e.premise: e.excluded for e in c.excluded}["fd-linear"] == 3 * 6


def test_depth_at_init_keeps_dead_networks_in_the_mean():
    """Def. 1 is the plain mean over networks: P = 0 networks pull it down, they are not dropped."""
    df = synth()
    f = df["kind"] == "final"
    dead = f & (df["init"] == "he") & (df["width"] == 128) & (df["depth"] == 6) & (df["seed"] < 3)
    df.loc[dead, "stability_init"] = 0.0
    c = by_id(df)["depth-init-at-init"]
    part = c.evidence["parts"]["he_m128"]
    assert part["networks_per_depth"][-1] == 6  # all six kept, three of them at P = 0
    assert part["effect"] < -0.1  # log of a mean halved by the dead half


def test_nonlazy_early_is_decided_across_gamma_and_against_he():
    res = by_id(synth(gammas=(1.0, 1.5, 2.0)))
    c = res["nonlazy-width-early"]
    assert c.decision.verdict == R and c.across == {"gamma": {"1.0": R, "1.5": R, "2.0": R}}
    assert c.control.verdict.verdict != R
    # only the init's own m^(1 - 2 gamma): the first epoch changes nothing -> not reproduced
    c = by_id(synth(early=lambda g, m: 1.0))["nonlazy-width-early"]
    assert c.decision.verdict != R
    # the verdict depends on gamma -> inconclusive, naming it
    c = by_id(synth(gammas=(1.0, 2.0), early=lambda g, m: (m / 16) ** (-0.5 if g > 1.5 else 0.5)))["nonlazy-width-early"]
    assert c.decision.verdict == I and "depends on gamma" in c.decision.reason


def test_nonlazy_width_inconclusive_when_the_init_already_shows_it():
    c = by_id(synth(small_init=lambda m: 0.01 * (m / 16) ** -1.0))["nonlazy-width"]
    assert c.decision.verdict == I and cl.NOT_DISCRIMINATING in c.decision.reason


def test_kappa_bands_and_their_swapped_control():
    assert by_id(synth(he_exp=0.6))["kappa"].decision.verdict == C  # He's kappa grows: outside its band
    c = by_id(synth())["kappa"]
    assert c.control.verdict.verdict == C
    assert {e.premise: (e.excluded, e.of) for e in c.excluded}["over-parameterised"] == (18, 60)


def test_width_peak_waits_on_its_move_with_n():
    a = synth(n_train=100)
    b = synth(n_train=400, width_curve=lambda m: base_width(m / 16))  # peak at 1024: moved up
    b["point"] = b["point"] + "|n400"
    res = by_id(pd.concat([a, b], ignore_index=True))
    assert res["width-peak-n-train"].decision.verdict in (R, I)
    # the peak moving the other way: width-peak cannot be the paper's mechanism -> inconclusive
    b2 = synth(n_train=400, width_curve=lambda m: base_width(m * 2))
    b2["point"] = b2["point"] + "|n400"
    res = by_id(pd.concat([a, b2], ignore_index=True))
    assert res["width-peak-n-train"].decision.verdict == C
    assert res["width-peak"].decision.verdict == I and "does not move" in res["width-peak"].decision.reason


def test_claims_on_empty_results_fail_cleanly():
    res = by_id(pd.DataFrame({"kind": [], "init": []}))
    assert all(c.decision.verdict in (I, NA) for c in res.values())


@pytest.mark.parametrize("protocol", ["target", "end", "init", "early"])
def test_view_takes_no_substitute(protocol):
    df = synth()
    f = W.finals(df).head(3).copy()
    f.loc[f.index[0], ["reached_target", "stability_at_target"]] = [False, np.nan]
    v = W.view(f, protocol)
    if protocol == "target":
        assert not v["fit"].iloc[0] and np.isnan(v["stability"].iloc[0])
    assert {"stability", "fd", "kappa_m", "fit"} <= set(v.columns)


def test_a_claim_whose_experiment_the_grid_lacks_reads_not_measured_not_excluded():
    """A slice's grid without depth sweeps or small-init networks: those claims say "not measured
    in this run" (the README's table then ignores the slice for them), not a premise failure."""
    df = synth()
    only = df[(df["depth"] == 2) & (df["init"] == "he")]
    res = by_id(only)
    for cid in ("depth-init-at-init", "depth-init-trained", "nonlazy-width", "kappa"):
        d = res[cid].decision
        assert d.verdict == NA and d.reason.startswith("not measured in this run"), (cid, d.reason)

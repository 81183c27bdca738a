"""The width-depth-init claims on planted result tables (issue 54, on the engine of issue 51).

For every claim with a control, four probes: the effect planted (reads reproduced, its control
contradicted), no effect (does not read reproduced), the effect planted in the control's own
setting (the control can read reproduced, so the claim cannot), and — run by hand, recorded in
the study's doc — the quick preset at base seeds 0 and 17. Controls are the claim's own rule on
other runs; premises are counted per network."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from robustlab import claims as cl
from robustlab import stats
from robustlab.metrics import expected_stability_at_init
from robustlab.studies import width_depth_init as W

N_TRAIN = 100
R, C, I, NA = stats.REPRODUCED, stats.CONTRADICTED, stats.INCONCLUSIVE, stats.NOT_APPLICABLE
WIDTHS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
KAPPA_WIDTHS = (128, 256, 512, 1024)


def moving_peak(m: float, L: int) -> float:
    """An interior maximum at width 8 * 2^(L - 2) (it moves right with depth), levelling off."""
    c = 8 * 2 ** (L - 2)
    return (m / c) / (1 + (m / c) ** 2) + 0.05


def step_peak(m: float, L: int) -> float:
    """A peak at width 8 * 2^(L - 2) over a constant: it moves right with depth, and past it the curve is
    flat (Thm 1: lazy stability tends to a constant in width)."""
    return 1.0 if m == 8 * 2 ** (L - 2) else 0.5


def flat(m: float, L: int = 2) -> float:
    return 1.0


def falling(m: float, L: int = 2) -> float:
    return 0.5 * m ** -0.3


DEPTH_TRAINED = {"lecun": lambda L: 0.5 ** L * math.exp(-0.3 * L), "he": lambda L: L / 2, "ntk": lambda L: L / 2}
DEPTH_INIT = {"lecun": lambda L: 0.5 ** L, "he": lambda L: 1.0, "ntk": lambda L: 1.0}


def synth(*, width=step_peak, width_init=flat, small=falling, small_init=flat, lazy=lambda m: moving_peak(m, 2),
          depth_trained=None, depth_lazy=None, he_exp=0.05, small_exp=1.0, seeds=6, noise=0.03,
          early=lambda g, m: (m / 16) ** -0.5, early_he=lambda m: (m / 16) ** 0.2, gammas=(2.0,), plateau=0.01,
          steps=None, steps_he=None):
    """A results table shaped like the study's: one final row per network with its values at the end,
    at equal fit, at init and early; κ(t) epoch rows for the over-parameterised depth-2 He and small
    networks. Every network meets every premise unless a test changes it."""
    depth_trained = {**DEPTH_TRAINED, **(depth_trained or {})}
    # the linearised depth arm (depth-init-trained's decision, review defect 6): the SGD arm's curves unless
    # planted apart
    depth_lazy = {**depth_trained, **(depth_lazy or {})}
    rng = np.random.default_rng(0)
    rows = []

    def add(init, L, m, s, s0, **kw):
        kw.setdefault("plateau", plateau)
        for seed in range(seeds):
            rows.append(_row(init, L, m, seed, s * math.exp(rng.normal(0, noise)),
                             s0 * math.exp(rng.normal(0, noise)), **kw))
    for init in ("he", "lecun"):
        for L in (2, 3, 4):
            for m in WIDTHS:
                add(init, L, m, width(m, L), width_init(m, L))
    for m in WIDTHS:
        add("small", 2, m, small(m, 2), small_init(m, 2))
    for init in ("lecun", "he", "ntk"):
        for L in (2, 3, 4, 6):
            add(init, L, 96, depth_trained[init](L), DEPTH_INIT[init](L), lr=0.03)
            # classes 4 vs 9: a series apart from the lazy limit's sweeps (their depth-2 widths)
            add(init, L, 96, depth_lazy[init](L), DEPTH_INIT[init](L), regime="linearised", classes="[4, 9]",
                plateau=None)
    for classes in ("[]", "[0, 1]"):
        for m in WIDTHS:
            add("he", 2, m, lazy(m), 1.0, regime="linearised", classes=classes, plateau=None)
    T, decay = 20, 16
    for init, b in (("he", he_exp), ("small", small_exp)):
        for m in KAPPA_WIDTHS:
            for r in [r for r in rows if r["init"] == init and r["depth"] == 2 and r["width"] == m
                      and r["regime"] == "sgd"]:
                kap = 50 * m ** -0.2 if init == "small" else 0.5 * m ** -0.5
                r["kappa"] = kap
                rows += [{"kind": "epoch", "init": init, "depth": 2, "width": m, "seed": r["seed"], "point": r["point"],
                          "epoch": t, "decay_start": decay, "output": "multi", "regime": "sgd",
                          "kappa": kap * (t / T) ** b * math.exp(rng.normal(0, 0.01))} for t in range(1, T + 1)]
    # Thm 3's rows: P after steps 5, 10, 20 = the init's closed-form scale x the planted factor
    # (steps(g, m, t); default: the epoch-1 factor at every step), and the epoch-1 ratio
    steps = steps or (lambda g, m, t: early(g, m))
    steps_he = steps_he or (lambda m, t: early_he(m))
    for g in gammas:
        for m in (16, 64, 256, 1024):
            for seed in range(seeds):
                r = _row("small", 2, m, seed, 1.0, 1.0, output="single", gamma=g)
                r.update(stability_init=m ** (1 - 2 * g), stability_early=m ** (1 - 2 * g) * early(g, m)
                         * math.exp(rng.normal(0, noise)), train_acc_early=0.6, fd_ratio_early=1.0, early_epoch=1)
                r.update(_steps_cols(lambda t, m=m, g=g: init_scale("small", m, g) * steps(g, m, t)
                                     * math.exp(rng.normal(0, noise)), acc=0.6))
                rows.append(r)
    for m in (16, 64, 256, 1024):
        for seed in range(seeds):
            r = _row("he", 2, m, seed, 1.0, 1.0, output="single")
            r.update(stability_early=early_he(m) * math.exp(rng.normal(0, noise)), train_acc_early=0.7,
                     fd_ratio_early=1.0, early_epoch=1)
            r.update(_steps_cols(lambda t, m=m: init_scale("he", m) * steps_he(m, t) * math.exp(rng.normal(0, noise)),
                                 acc=0.7))
            rows.append(r)
    return pd.DataFrame(rows)


STEPS = (5, 10, 20)


def init_scale(init: str, m: int, gamma: float | None = None, *, L: int = 2, k: int = 1) -> float:
    """The closed-form E_W P at initialisation of a synth network (d 196, eps 0.1)."""
    return expected_stability_at_init(init, d=196, width=m, depth=L, k=k, eps=0.1,
                                      gamma=gamma if init == "small" else None)


def _steps_cols(p, acc: float) -> dict:
    out = {}
    for t in STEPS:
        out.update({f"stability_step{t}": p(t), f"train_acc_step{t}": acc, f"train_loss_step{t}": 0.4,
                    f"fd_ratio_step{t}": 1.0})
    return out


def _row(init, L, m, seed, s, s0, *, output="multi", gamma=2.0, regime="sgd", classes="[]", plateau=0.01, lr=0.1):
    point = f"{init}|{L}|{m}|{output}|{gamma}|{regime}|{classes}|{lr}"
    return {"kind": "final", "init": init, "depth": L, "width": m, "seed": seed, "point": point, "output": output,
            "outputs": 10 if output == "multi" and classes == "[]" else (2 if output == "multi" else 1),
            "gamma": gamma, "regime": regime, "lr": lr, "classes": classes, "n_train": N_TRAIN, "target_acc": 0.99,
            "decay_start": 16, "epoch": 20, "d": 196, "eps": 0.1, "arch": "fcn", "stability": s, "stability_init": s0,
            "stability_at_target": s, "train_acc": 1.0, "test_acc": 0.9, "train_loss": 0.01,
            "train_acc_at_target": 0.99, "test_acc_at_target": 0.88, "train_loss_at_target": 0.05,
            "reached_target": True, "kappa_at_target": 0.1, "kappa": 5.0 if init == "small" else 0.12, "fd_ratio": 1.0,
            "fd_ratio_at_target": 1.0, "fd_ratio_init": 1.0, "loss_change_last10": plateau,
            # the plateau premises (App. E.2): loss and accuracy unchanged over the last 10 epochs, P too
            "acc_change_last10": None if plateau is None else 0.0,
            "loss_drop_last10": None if plateau is None else 0.001,
            "stability_head": s, "stability_head_last10": None if plateau is None else s,
            # matched training loss (nonlazy-width): by default P there is P at the end
            **{f"{k}_L{L:g}": v for L in (0.3, 0.2) for k, v in (("stability", s), ("fd_ratio", 1.0),
                                                                  ("train_loss", L - 0.01), ("train_acc", 0.95))}}


def by_id(df: pd.DataFrame) -> dict:
    return {c.id: c for c in W.claims(df, None)}


def raw(c) -> str:
    """The claim's own verdict, before the engine's control rule."""
    return c.to_dict().get("verdict_before_control", c.decision.verdict)


CLAIMS_WITH_CONTROL = ("width-peak", "width-peak-lazy-limit", "depth-init-trained-lecun",
                       "depth-init-trained-he", "depth-init-trained-ntk", "nonlazy-width-early", "nonlazy-width",
                       "kappa")


def test_declarations_controls_name_runs_not_rules():
    specs = {s.id: s for s in W.STUDY.claim_specs}
    assert {s.id for s in W.STUDY.claim_specs if s.kind == cl.CLAIM} == set(CLAIMS_WITH_CONTROL)
    for cid in CLAIMS_WITH_CONTROL:
        ctl = specs[cid].control
        assert ctl is not None and ctl.why, cid
        # a grid setting, or a population the study declares: never "swapped" rules
        assert not isinstance(ctl.setting, str) or ctl.setting in W.POPULATIONS, cid
        assert "swapped" not in ctl.label()
    assert specs["depth-init-at-init"].kind == cl.SELF_CHECK and specs["mc-identity"].kind == cl.SELF_CHECK
    assert specs["width-peak-n-train"].kind == cl.EXPLORATORY and specs["width-peak-n-train"].control is None
    assert {"plateau-acc", "plateau-loss", "fd-linear"} == set(specs["width-peak"].premises)  # no κ, no width >= classes


def test_every_claim_reproduced_where_planted_and_its_control_fails():
    res = by_id(synth())
    for cid in set(CLAIMS_WITH_CONTROL) - {"nonlazy-width"}:  # nonlazy-width: see its own test
        c = res[cid]
        assert c.decision.verdict == R, (cid, c.decision.reason)
        assert c.control.verdict.verdict in (C, I), (cid, c.control.verdict.verdict, c.control.verdict.reason)
    assert res["width-peak"].evidence["parts"]["he_L2"]["peak_width"] == 8
    assert res["width-peak-location"].evidence["parts"]["he"]["peak_width_per_depth"] == {2: 8, 3: 16, 4: 32}
    assert res["depth-init-at-init"].decision.verdict == R and res["depth-init-at-init"].control is None
    assert res["width-peak-n-train"].decision.verdict == NA  # one training-set size


# ---- width-peak ------------------------------------------------------------------------

def test_width_peak_without_a_peak_is_not_reproduced():
    c = by_id(synth(width=falling))["width-peak"]
    assert c.decision.verdict == C


def small_peak(m: float, L: int = 2) -> float:
    """A peak in the small init's D(m): the trained P over the init's closed-form scale peaks."""
    return init_scale("small", m, 2.0, k=10) * moving_peak(m, L)


def test_width_peak_control_can_pass_when_the_small_init_peaks_too():
    # review defect 2: the control judges the trained curve P_T, so a trained small-init peak passes it
    c = by_id(synth(small=moving_peak))["width-peak"]
    assert c.control.verdict.verdict == R and raw(c) == R and c.decision.verdict != R
    # a bump riding on the init's falling scale (P_T ~ m^(1-2 gamma) x peak) is no peak in P_T
    assert by_id(synth(small=small_peak))["width-peak"].control.verdict.verdict == C


def test_width_peak_removes_the_init_scale_by_its_closed_form():
    """Issue 54, second round: D(m) = log mean P(m) - log E_W P_init(m), the closed form in place of the
    5 networks' sampled P_init. A sampled P_init that is noise at the narrow end (orders of magnitude
    between seeds, as at widths 1-2) does not move the verdict; the old paired reading is a variant."""
    rng = np.random.default_rng(1)
    noisy = lambda m, L: float(np.exp(rng.normal(0, 3))) if m <= 4 else 1.0  # noqa: E731
    c = by_id(synth(width_init=noisy))["width-peak"]
    assert c.decision.verdict == R
    assert c.evidence["parts"]["he_L2"]["init_term"] == "none (the trained curve alone)"
    assert any("sampled P_init" in k for k in c.variants)
    assert any("closed-form E_W P_init" in k and x.verdict == R for k, x in c.variants.items())
    # the trained P at the init's own scale at every width (flat): no peak, not reproduced
    assert by_id(synth(width=lambda m, L: 1.0))["width-peak"].decision.verdict != R
    # the small init's P falling as its init scale does (no peak in D): the control is not reproduced
    c = by_id(synth(small=lambda m, L: init_scale("small", m, 2.0, k=10)))["width-peak"]
    assert c.control.verdict.verdict != R


def test_width_peak_every_sweep_must_hold():
    # one sweep without a peak (LeCun at depth 4): the universal claim is contradicted, saying where
    c = by_id(synth(width=lambda m, L: falling(m) if L == 4 else moving_peak(m, L)))["width-peak"]
    assert c.decision.verdict == C and "L4" in c.decision.reason


def test_width_peak_plateau_premise_counts_and_coverage_names_the_lost_side():
    df = synth()
    off = (df["kind"] == "final") & (df["regime"] == "sgd") & (df["width"] <= 4)
    df.loc[off, "acc_change_last10"] = 0.05  # the narrow networks still fitting: not at a plateau
    c = by_id(df)["width-peak"]
    ex = {e.premise: e for e in c.excluded}
    assert ex["plateau-acc"].excluded == 2 * 3 * 2 * 6 and ex["plateau-loss"].excluded == 0
    assert c.decision.verdict == NA and "undecidable" in c.decision.reason


def test_the_equal_fit_reading_is_a_variant():
    c = by_id(synth())["width-peak"]
    assert c.variants["equal fit (first epoch at target_acc)"].verdict == R


# ---- width-peak-location ---------------------------------------------------------------

def test_location_moving_and_fixed_peak():
    c = by_id(synth())["width-peak-location"]
    assert c.kind == cl.EXPLORATORY and c.decision.verdict == R and c.control is None
    assert by_id(synth(width=lambda m, L: moving_peak(m, 2)))["width-peak-location"].decision.verdict != R


# ---- width-peak-lazy-limit -------------------------------------------------------------

def test_lazy_limit_without_a_peak_and_with_a_peaking_control():
    assert by_id(synth(lazy=lambda m: falling(m)))["width-peak-lazy-limit"].decision.verdict == C
    c = by_id(synth(small=moving_peak))["width-peak-lazy-limit"]  # a trained small-init peak
    assert c.control.verdict.verdict == R and c.decision.verdict != R
    assert set(c.evidence["table"]) == {"he_L2[classes=[0, 1]]", "he_L2[classes=[]]"}


def test_lazy_limit_not_measured_without_linearised_points():
    df = synth()
    c = by_id(df[df["regime"] != "linearised"])["width-peak-lazy-limit"]
    assert c.decision.verdict == NA and c.decision.reason.startswith("not measured")


# ---- depth-init-trained-* --------------------------------------------------------------

def test_depth_trained_lecun_rising_is_contradicted_and_he_control_can_pass():
    # trained LeCun rising with depth (0.3 per layer, beyond the margin): LeCun contradicted, and it is He's and
    # NTK's control: it passes, so they cannot read reproduced
    res = by_id(synth(depth_trained={"lecun": lambda L: math.exp(0.3 * L)}))
    assert res["depth-init-trained-lecun"].decision.verdict == C
    for cid in ("depth-init-trained-he", "depth-init-trained-ntk"):
        assert res[cid].control.verdict.verdict == R and res[cid].decision.verdict != R, cid


def test_depth_trained_he_flat_is_not_reproduced_and_lecun_control_can_pass():
    # He trained flat in depth (its init's closed form): no hurt -> contradicted (inside the flatness band)
    assert by_id(synth(depth_trained={"he": lambda L: 1.0}))["depth-init-trained-he"].decision.verdict == C
    # He falling after training is LeCun's control passing
    c = by_id(synth(depth_trained={"he": lambda L: math.exp(-0.3 * L)}))["depth-init-trained-lecun"]
    assert c.control.verdict.verdict == R and c.decision.verdict != R


def test_depth_trained_is_the_trained_slope_not_the_change_from_init():
    # the lazy ideal (review defect 6): training multiplies P by one factor at every depth, so LeCun keeps its
    # init's ln 1/2 per layer: reproduced, and the paired slope (the rule before) reads nothing
    res = by_id(synth(depth_trained={"lecun": lambda L: 3.0 * 0.5 ** L}))
    c = res["depth-init-trained-lecun"]
    assert c.decision.verdict == R and c.control.verdict.verdict == C
    assert abs(c.evidence["parts"]["lecun_m96"]["effect"] - math.log(0.5)) < 0.05
    assert [res[i].control.verdict.verdict for i in ("depth-init-trained-he", "depth-init-trained-ntk")] == [C, C]
    assert any(k.startswith("linearised, trained minus init") and v.verdict != R for k, v in c.variants.items())


@pytest.mark.parametrize("init, slope, want", [("lecun", -0.10, C), ("lecun", -0.30, R), ("he", 0.10, C),
                                               ("he", 0.30, R), ("ntk", 0.10, C), ("ntk", 0.0, C)])
def test_depth_trained_margin_is_respected(init, slope, want):
    # DEPTH_DELTA = 0.15 per layer: a trend inside the flatness band is no help / no hurt
    assert W.lazy_claims.DEPTH_DELTA == 0.15
    res = by_id(synth(depth_trained={init: lambda L: math.exp(slope * L)}))
    assert raw(res[f"depth-init-trained-{init}"]) == want


def test_depth_trained_is_decided_on_the_linearised_arm_and_reports_sgd():
    # SGD networks (outside the lazy regime) with LeCun rising do not decide; they are a variant
    df = synth(depth_trained={"lecun": lambda L: math.exp(0.3 * L)}, depth_lazy={"lecun": lambda L: 0.5 ** L})
    c = by_id(df)["depth-init-trained-lecun"]
    assert c.decision.verdict == R
    sgd = [v for k, v in c.variants.items() if k.startswith("SGD lr 0.03")]  # beside its control (He: C)
    assert len(sgd) == 1 and sgd[0].verdict == C
    assert c.evidence["sgd_parts"]["lecun_m96"]["effect"] > 0.25
    # no linearised depth sweep: not applicable, said so
    c = by_id(df[df["regime"] != "linearised"])["depth-init-trained-lecun"]
    assert c.decision.verdict == NA and c.decision.reason.startswith("not measured")


def test_depth_trained_fd_premise_excludes_and_width_sweeps_are_not_depth_sweeps():
    df = synth()
    df.loc[(df["kind"] == "final") & (df["depth"] == 6) & (df["regime"] == "sgd"), "fd_ratio_at_target"] = 0.7
    c = by_id(df)["depth-init-trained-he"]
    assert {e["premise"]: e["excluded"] for e in c.evidence["sgd_excluded"]}["fd-linear"] == 3 * 6
    assert list(c.evidence["parts"]) == ["he_m96"]  # the width sweeps' depths 2-4 are not a depth sweep
    assert list(c.evidence["sgd_parts"]) == ["he_m96"]


def test_depth_at_init_keeps_dead_networks_in_the_mean():
    df = synth()
    dead = (df["kind"] == "final") & (df["init"] == "he") & (df["width"] == 96) & (df["depth"] == 6) & (df["seed"] < 3)
    df.loc[dead, "stability_init"] = 0.0
    part = by_id(df)["depth-init-at-init"].evidence["parts"]["he_m96"]
    assert part["networks_per_depth"][-1] == 6 and part["effect"] < -0.1


# ---- Thm 3, Fig. 4(b), kappa -----------------------------------------------------------

def test_nonlazy_early_steps_reproduced_where_planted_and_he_control_fails():
    """Thm 3 on its own quantity: P after 5/10/20 steps over the init's closed-form scale falls with
    width at every gamma and step; He (rising over its flat init scale) is the control."""
    c = by_id(synth(gammas=(1.0, 1.5, 2.0)))["nonlazy-width-early"]
    assert c.decision.verdict == R, c.decision.reason
    assert c.control.verdict.verdict == C
    assert set(c.across["gamma x step"]) == {f"gamma={g}, step {t}" for g in (1.0, 1.5, 2.0) for t in STEPS}
    part = c.evidence["parts"]["gamma=1.5, step 10"]
    assert part["slope_log_init_scale"] == pytest.approx(1 - 2 * 1.5, abs=1e-6)
    assert part["effect"] == pytest.approx(-0.5, abs=0.05)


def test_nonlazy_early_without_the_effect_is_not_reproduced():
    # P(t) at the init's scale: the raw slope is 1 - 2 gamma (falls steeply) but nothing is left once removed
    c = by_id(synth(steps=lambda g, m, t: 1.0))["nonlazy-width-early"]
    assert c.decision.verdict != R and raw(c) != R
    # the effect at steps 5 and 10 only, gone by step 20: the claim is for the whole window
    c = by_id(synth(steps=lambda g, m, t: (m / 16) ** (-0.5 if t < 20 else 0.3)))["nonlazy-width-early"]
    assert c.decision.verdict == C and "step 20" in c.decision.reason


def test_nonlazy_early_control_can_pass_when_he_falls():
    c = by_id(synth(steps_he=lambda m, t: (m / 16) ** -0.5))["nonlazy-width-early"]
    assert c.control.verdict.verdict == R and raw(c) == R and c.decision.verdict != R


def test_nonlazy_early_window_premise_per_step_and_the_ratio_variant():
    df = synth()
    late = (df["kind"] == "final") & (df["output"] == "single") & (df["width"] == 1024)
    df.loc[late, "train_acc_step20"] = 1.0  # fitted by step 20: out of Thm 3's window there only
    c = by_id(df)["nonlazy-width-early"]
    ex = {e.premise: e for e in c.excluded}
    assert ex["early-window"].excluded == 2 * 6  # small and He at width 1024, step 20
    assert c.decision.verdict == R
    assert any(k.startswith("exploratory: the per-network ratio") for k in c.variants)


def test_nonlazy_early_not_measured_without_steps():
    df = synth().drop(columns=[f"{k}_step{t}" for t in STEPS for k in ("stability", "train_acc", "train_loss",
                                                                        "fd_ratio")])
    d = by_id(df)["nonlazy-width-early"].decision
    assert d.verdict == NA and d.reason.startswith("not measured")


def test_nonlazy_width_rising_small_init_and_a_falling_he_control():
    assert by_id(synth(small=lambda m, L: 0.01 * m ** 0.3))["nonlazy-width"].decision.verdict == C
    c = by_id(synth(width=lambda m, L: falling(m)))["nonlazy-width"]
    assert c.control.verdict.verdict == R and c.decision.verdict != R


def test_nonlazy_width_at_matched_loss_every_mark_and_the_premise():
    """Issue 54: nonlazy-width is judged at matched training loss, L* 0.3 and 0.2 through across; a network
    that never reached L* is excluded there (not measured elsewhere in its place)."""
    df = synth(width=lambda m, L: step_peak(m, L) * (1 if m <= 8 else (m / 16) ** 0.2))
    c = by_id(df)["nonlazy-width"]
    assert c.decision.verdict == R and c.control.verdict.verdict == C
    assert set(c.across["L*"]) == {"0.3", "0.2"}
    # falling at 0.3 only, rising at 0.2: a claim for every L* is contradicted, naming 0.2
    small = (df["kind"] == "final") & (df["init"] == "small")
    df.loc[small, "stability_L0.2"] = 0.01 * df.loc[small, "width"] ** 0.3
    c = by_id(df)["nonlazy-width"]
    assert c.decision.verdict == C and "0.2" in c.decision.reason
    # the small init never reaching 0.2 at widths >= 256: excluded, counted
    df = synth(width=lambda m, L: step_peak(m, L) * (1 if m <= 8 else (m / 16) ** 0.2))
    off = (df["kind"] == "final") & (df["init"] == "small") & (df["width"] >= 256)
    df.loc[off, "stability_L0.2"] = np.nan
    c = by_id(df)["nonlazy-width"]
    assert {e.premise: e.excluded for e in c.excluded}["at-loss"] == 3 * 6
    assert any("end of the schedule" in k for k in c.variants)


def test_nonlazy_width_he_constant_past_its_peak_is_a_working_control():
    """The theory has He tend to a constant past its peak (slope 0); against the declared smallest fall
    of interest (NONLAZY_DELTA, review defect 7) that reads contradicted, a working control; a He curve
    that rises past the peak works too."""
    c = by_id(synth())["nonlazy-width"]
    assert c.control.verdict.verdict == C and c.decision.verdict == R
    c = by_id(synth(width=lambda m, L: step_peak(m, L) * (1 if m <= 8 else (m / 16) ** 0.2)))["nonlazy-width"]
    assert c.control.verdict.verdict == C and c.decision.verdict == R


def test_kappa_band_window_across_and_its_he_control_can_pass():
    c = by_id(synth())["kappa"]
    assert c.control.verdict.verdict == C
    assert {e.premise: (e.excluded, e.of) for e in c.excluded}["over-parameterised"] == (2 * 6 * 6, 2 * 6 * 10)
    assert by_id(synth(small_exp=0.5))["kappa"].decision.verdict == C
    c = by_id(synth(he_exp=1.0))["kappa"]
    assert c.control.verdict.verdict == R and c.decision.verdict != R


def test_kappa_width_is_exploratory_over_both_inits():
    c = by_id(synth())["kappa-width"]
    assert c.kind == cl.EXPLORATORY and c.decision.verdict == R and c.control is None


# ---- plumbing --------------------------------------------------------------------------

def test_claims_on_empty_results_fail_cleanly():
    res = by_id(pd.DataFrame({"kind": [], "init": []}))
    assert all(c.decision.verdict in (I, NA) for c in res.values())


@pytest.mark.parametrize("protocol", ["target", "end", "init", "early", "step10"])
def test_view_takes_no_substitute(protocol):
    f = W.finals(synth()).head(3).copy()
    f.loc[f.index[0], ["reached_target", "stability_at_target"]] = [False, np.nan]
    v = W.view(f, protocol)
    if protocol == "target":
        assert not v["fit"].iloc[0] and np.isnan(v["stability"].iloc[0])
    assert {"stability", "fd", "kappa_m", "fit"} <= set(v.columns)


def test_the_plateau_quantity_comes_from_the_epoch_trace_for_old_runs():
    rows = [{"kind": "epoch", "point": "p", "seed": 0, "epoch": t, "loss": 1.0 / t} for t in range(1, 21)]
    rows.append({"kind": "final", "point": "p", "seed": 0, "init": "he"})
    f = W.finals(pd.DataFrame(rows))
    assert f["loss_change_last10"].iloc[0] == pytest.approx(abs(1 / 20 - 1 / 10) / (1 / 10))


def test_a_claim_whose_experiment_the_grid_lacks_reads_not_measured():
    df = synth()
    only = df[(df["depth"] == 2) & (df["init"] == "he") & (df["regime"] == "sgd")]
    res = by_id(only)
    for cid in ("depth-init-trained-he", "nonlazy-width", "kappa"):
        d = res[cid].decision
        assert d.verdict == NA and d.reason.startswith("not measured in this run"), (cid, d.reason)


# ---- the plateau premises (App. E.2: "loss and accuracy almost unchanged"; wdi5) --------------------------

def _plateau_rows(loss, acc, *, outputs=10, T=50):
    """One network's final row and its epoch trace: running training loss ``loss(t)`` and accuracy ``acc(t)``."""
    ep = [{"kind": "epoch", "point": "p", "seed": 0, "epoch": t, "loss": loss(t), "train_acc_running": acc(t)}
          for t in range(1, T + 1)]
    return pd.DataFrame(ep + [{"kind": "final", "point": "p", "seed": 0, "init": "he", "outputs": outputs}])


def _on_plateau(df) -> dict[str, bool]:
    f = W.finals(df)
    return {n: bool(W.PREMISES[n].test(f).iloc[0]) for n in ("plateau-acc", "plateau-loss", "plateau-relative")}


def test_plateau_keeps_a_fitted_network_whose_ce_loss_still_falls_in_relative_terms():
    # a slow near-interpolation width: fitted (accuracy flat at 1), its CE loss halving 0.02 -> 0.01 over the last
    # 10 epochs (-50 %: the old relative premise removed it), 0.01 < 1 % of log 10 = 0.023
    df = _plateau_rows(lambda t: 0.02 if t <= 40 else 0.02 - 0.001 * (t - 40), lambda t: 1.0)
    assert _on_plateau(df) == {"plateau-acc": True, "plateau-loss": True, "plateau-relative": False}


def test_plateau_excludes_a_network_whose_accuracy_still_climbs():
    df = _plateau_rows(lambda t: 0.05, lambda t: 0.95 + 0.004 * max(0, t - 40))  # 0.95 -> 0.99, loss flat
    assert _on_plateau(df)["plateau-acc"] is False and _on_plateau(df)["plateau-loss"] is True
    assert _on_plateau(_plateau_rows(lambda t: 0.05, lambda t: 0.99 - 0.002 * max(0, t - 40)))["plateau-acc"] is False


def test_plateau_loss_bound_is_one_percent_of_the_chance_loss():
    drop = lambda d: (lambda t: 0.3 if t <= 40 else 0.3 - d * (t - 40) / 10)  # noqa: E731
    assert _on_plateau(_plateau_rows(drop(0.05), lambda t: 1.0))["plateau-loss"] is False  # 0.05 > 0.023
    assert _on_plateau(_plateau_rows(drop(0.02), lambda t: 1.0))["plateau-loss"] is True  # 0.02 <= 0.023 (k 10)
    assert _on_plateau(_plateau_rows(drop(0.02), lambda t: 1.0, outputs=2))["plateau-loss"] is False  # > 0.0069
    assert _on_plateau(_plateau_rows(drop(0.006), lambda t: 1.0, outputs=2))["plateau-loss"] is True
    assert _on_plateau(_plateau_rows(drop(0.004), lambda t: 1.0, outputs=1))["plateau-loss"] is True  # mse: 1/2


def test_plateau_needs_a_window():
    df = _plateau_rows(lambda t: 0.01, lambda t: 1.0, T=10)  # trained 10 epochs: no epoch T - 10
    assert not any(_on_plateau(df).values())


def test_width_peak_keeps_the_slow_peak_widths_whose_loss_still_falls():
    """The peak widths with a CE loss still halving (relative change 0.5) but loss and accuracy flat in absolute
    terms: kept, the peak reads R; under the old relative premise (a variant) they are removed."""
    df = synth(width=moving_peak)
    slow = (df["kind"] == "final") & (df["regime"] == "sgd") & df["init"].isin(["he", "lecun"]) \
        & (df["width"] >= 4) & (df["width"] <= 64)
    df.loc[slow, ["loss_change_last10", "loss_drop_last10"]] = [0.5, 0.01]
    c = by_id(df)["width-peak"]
    assert c.decision.verdict == R and not any(e.excluded for e in c.excluded if e.premise.startswith("plateau"))
    old = c.variants["relative loss change <= 10 % over the last 10 epochs (the premise before wdi5)"]
    assert old.verdict != R


def test_width_peak_excludes_the_peak_widths_still_fitting():
    df = synth(width=moving_peak)
    climbing = (df["kind"] == "final") & (df["regime"] == "sgd") & df["init"].isin(["he", "lecun"]) \
        & (df["width"] >= 4) & (df["width"] <= 64)
    df.loc[climbing, "acc_change_last10"] = 0.03
    c = by_id(df)["width-peak"]
    ex = {e.premise: e for e in c.excluded}
    assert ex["plateau-acc"].excluded == 2 * 3 * 5 * 6  # He, LeCun x depths 2-4 x widths 4-64 x 6 seeds
    assert c.decision.verdict != R  # the peak's widths are gone: no peak left to read

"""Referee probes (ref6) of width-peak-lazy-limit's alpha arm after ref5's fixes (issue 54).

Two defects, both fixed: a network whose finite-difference P is NaN (a recorded numerical failure) counted as
kept, so a width's mean P was NaN and the peak rule read a curve with holes (defect 1: premise
``fd-measured``, decided per width like ``spectral-lazy``); with several undecided sweeps the join reported the
first sweep's reason and lost the interior-gap cap's (defect 2: gap-capped sweeps are joined first). Plus the
robustness probes: row order and seed labels do not move a verdict.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from test_width_depth_alpha_review import ALPHA, PEAK_AT, falling, flat, peak, table, variants

C = importlib.import_module("robustlab.studies.width_depth_init.claims")


def dip_then_peak(m, k):  # a dip at width 2, the peak at 16; without widths 4-64 the remainder falls
    return {1: 0.004, 2: 0.0035, 4: 0.006, 8: 0.01, 16: 0.012, 32: 0.008, 64: 0.005}.get(m, 0.003 * (128 / m) ** 0.2)


def _nan_fd(df, where):
    df = df.copy()
    hit = (df["regime"] == "alpha") & where(df)
    df.loc[hit, "stability_fd"] = np.nan
    return df


def test_nan_p_at_interior_widths_is_a_gap_not_a_falling_curve():
    """Defect 1: P not measured (NaN) at widths 4-64 of a dip-then-peak curve. Before the fix those networks
    were kept; the remainder read contradicted. Now fd-measured removes the widths, the cap names them."""
    df = _nan_fd(table(dip_then_peak), lambda d: (d["width"] >= 4) & (d["width"] <= 64))
    got = variants(df)
    assert got, "no alpha variant"
    for a, v in got.items():
        assert v.verdict == "inconclusive", (a, v.verdict, v.reason)
        assert "fd-measured" in v.reason and "removed interior widths 4, 8, 16, 32, 64" in v.reason, v.reason


def test_one_nan_network_removes_its_width_whole_and_is_named():
    df = _nan_fd(table(peak), lambda d: (d["width"] == 1) & (d["seed"] == 0) & (d["outputs"] == 2))
    c = C.claim_width_lazy_limit(df)
    for a in (10.0, 30.0, 100.0):
        name = next(n for n in c.variants if n.startswith(ALPHA.format(a)))
        v = c.variants[name]
        # the 2-class sweep lost its narrow end to fd-measured: excluded by name, the 10-class sweep decides
        assert v.verdict == "reproduced", (a, v.reason)
        assert "fd-measured" in v.reason and "classes=[0, 1]" in v.reason, v.reason
        ex = c.evidence["alpha_arm"][f"alpha={a:g}"]["excluded"]
        assert any(e["premise"] == "fd-measured" and e["excluded"] == 5 for e in ex), ex


def test_gap_cap_reason_survives_the_join_when_another_sweep_is_undecided():
    """Defect 2: the 10-class sweep flat (undecided) and listed first; the 2-class sweep gap-capped. The joined
    reason must carry the cap's reason."""
    def curve(m, k):
        return flat(m, k) if k == 10 else dip_then_peak(m, k)
    df = table(curve, spectral=lambda m, k, a: 0.2 if k == 2 and 4 <= m <= 64 else 0.01)
    for a, v in variants(df).items():
        assert v.verdict == "inconclusive", (a, v.reason)
        assert "removed interior widths 4, 8, 16, 32, 64" in v.reason, v.reason


@pytest.mark.parametrize("curve", [peak, falling])
def test_row_order_and_seed_labels_do_not_move_the_verdict(curve):
    df = table(curve)
    base = {a: v.verdict for a, v in variants(df).items()}
    shuffled = df.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert {a: v.verdict for a, v in variants(shuffled).items()} == base
    relabelled = df.assign(seed=df["seed"] + 17)
    assert {a: v.verdict for a, v in variants(relabelled).items()} == base
    assert set(base.values()) == ({"reproduced"} if curve is peak else {"contradicted"})


def test_planted_peak_still_reads_reproduced_with_the_new_premise():
    for a, v in variants(table(peak)).items():
        assert v.verdict == "reproduced", (a, v.reason)
        assert v.effect == pytest.approx(min(np.log(peak(PEAK_AT[k], k) / max(peak(1, k), peak(1024, k)))
                                             for k in (10, 2)), abs=0.25)


def test_lazy_premises_are_per_layer_where_the_moment_records_layers():
    """Issue 54: the premises per network use per-layer quantities, not the pooled kappa (dominated by the
    d x m input layer). At the end of the schedule, where every layer's spectral change is recorded, a network
    whose pooled kappa is small (0.15) but one layer moved 1.2 is not lazy; one whose kappa is 0.5 with every
    layer within 0.05 is. Where no layer is recorded (the target moment) kappa decides, as before."""
    import pandas as pd

    A = importlib.import_module("robustlab.studies.width_depth_init.analysis")
    f = pd.DataFrame({"kappa": [0.15, 0.5, 0.15], "spectral_change_max": [1.2, 0.05, np.nan],
                      "kappa_at_target": [0.15, 0.5, 0.15], "fd_ratio": 1.0, "train_acc": 1.0, "target_acc": 0.99,
                      "width": 16, "stability": 0.1})
    end = C.view(f, "end")
    assert list(A.PREMISES["not-lazy"].test(end)) == [True, False, False]
    assert list(A.PREMISES["lazy"].test(end)) == [False, True, True]
    tgt = C.view(f.assign(reached_target=True, stability_at_target=0.1), "target")
    assert list(A.PREMISES["lazy"].test(tgt)) == [True, False, True]
    assert list(C.view(f, "init")["layer_m"]) == [0.0] * 3

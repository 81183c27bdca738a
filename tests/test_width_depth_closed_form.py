"""Depth at initialisation against its closed form (width-depth-init, depth-init-at-init):
the exact expectation per depth, its log-slope, the measured/closed-form ratio and the
network-by-network identity P_He = 2^L P_LeCun for networks drawn from the same seed."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from robustlab.metrics import expected_stability_at_init, perturbation_stability
from robustlab.models import DeepMLP, Flat
from robustlab.studies import width_depth_init as W


def _rows(arch: str = "fcn") -> pd.DataFrame:
    """Final rows at initialisation of real float64 networks: LeCun, He and NTK from the same
    three seeds, depths 2-5, width 32, 6 inputs, 3 outputs."""
    d, m, k, eps = 6, 32, 3, 0.1
    x = torch.randn(40, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x = x / x.norm(dim=1, keepdim=True)
    rows = []
    for init in ("lecun", "he", "ntk"):
        for L in (2, 3, 4, 5):
            gens = [torch.Generator().manual_seed(s) for s in range(3)]
            net = DeepMLP(d, m, L, k, init=init, generators=gens, dtype=torch.float64)
            for s in range(3):
                p = perturbation_stability(Flat(net.member(s), 1), x, eps)
                rows.append({"kind": "final", "init": init, "depth": L, "width": m, "seed": s, "d": d, "eps": eps,
                             "outputs": k, "arch": arch, "gamma": 2.0, "stability_init": p, "stability": p,
                             "trained": True, "train_acc": 0.1, "test_acc": 0.1, "train_loss": 2.3,
                             "fd_ratio_init": 1.0, "point": f"{init}|{L}", "output": "multi"})
    return pd.DataFrame(rows)


def test_closed_form_evidence_per_init():
    df = _rows()
    ev = {}
    for init in ("lecun", "he", "ntk"):
        ev[init] = W._closed_form_at_init(df[df["init"] == init])
    assert ev["lecun"]["closed_form_slope"] == pytest.approx(math.log(0.5), abs=1e-3)
    assert ev["he"]["closed_form_slope"] == pytest.approx(0.0, abs=1e-3)
    assert ev["ntk"]["closed_form_slope"] == pytest.approx(0.0, abs=1e-3)
    want = expected_stability_at_init("he", d=6, width=32, depth=3, k=3, eps=0.1)
    assert ev["he"]["closed_form"]["3"] == pytest.approx(want, rel=1e-3)
    # three seeds of a width-32 network: within a factor 2 of the expectation, and the same ratio
    # for every init (the inits differ by a constant per layer)
    for L in ("2", "3", "4", "5"):
        r = ev["lecun"]["measured_over_closed_form"][L]
        assert 0.5 < r < 2.0
        assert ev["he"]["measured_over_closed_form"][L] == pytest.approx(r, rel=1e-3)
        assert ev["ntk"]["measured_over_closed_form"][L] == pytest.approx(r, rel=1e-3)


def test_he_is_two_to_the_depth_times_lecun_network_by_network():
    same = W._he_vs_lecun_same_seed(_rows())
    assert same["pairs"] == 12
    assert same["max_abs_log_ratio_minus_L_ln2"] < 1e-9


def test_no_closed_form_for_convolutional_networks():
    df = _rows(arch="cnn")
    assert W._closed_form_at_init(df[df["init"] == "he"]) == {}


def test_depth_claim_carries_the_mechanism():
    claim = W.claim_depth_at_init(_rows())
    assert "Closed form" in claim.evidence["mechanism"]
    assert claim.evidence["he_vs_lecun_same_seed"]["pairs"] == 12
    parts = [v for k, v in claim.evidence["parts"].items() if k.startswith("he_m")]
    assert parts and all("closed_form" in p for p in parts)


def test_series_splits_on_a_list_valued_field():
    """A grid that gives one init two class subsets (lists) splits it instead of crashing."""
    v = pd.DataFrame({"init": ["he"] * 4, "classes": [[], [], [0, 1], [0, 1]], "width": [1, 2, 1, 2],
                      "seed": [0, 0, 0, 0]})
    labels = [label for label, _ in W.series(v, "he")]
    assert labels == ["[classes=[0, 1]]", "[classes=[]]"]


def test_flat_closed_form_is_decided_inside_its_band_and_the_swapped_band_fails():
    """He at initialisation measured around its flat expectation (±10 %) with 8 networks per
    depth: its slope of log E P lies inside 0 ± 0.15 (the self-check holds; it has no control)."""
    rows = []
    for L in (2, 3, 4, 5):
        for s in range(8):
            want = expected_stability_at_init("he", d=6, width=32, depth=L, k=3, eps=0.1)
            p = want * (1 + 0.1 * (-1) ** (s + L))
            rows.append({"kind": "final", "init": "he", "depth": L, "width": 32, "seed": s, "d": 6, "eps": 0.1,
                         "outputs": 3, "arch": "fcn", "gamma": 2.0, "stability_init": p, "stability": p,
                         "fd_ratio_init": 1.0, "point": f"he|{L}", "output": "multi"})
    c = W.claim_depth_at_init(pd.DataFrame(rows))
    part = c.evidence["parts"]["he_m32"]
    assert part["verdict"] == "reproduced" and part["closed_form_slope"] == pytest.approx(0.0, abs=1e-9)
    assert c.decision.verdict == "reproduced" and c.control is None and c.kind == "self-check"

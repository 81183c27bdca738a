"""The lazy-adversarial claims reach each verdict state on synthetic results: reproduced on
results that show the paper's effect, contradicted on results that show the opposite,
inconclusive when the effect is too noisy for the seeds, not applicable when a premise (lazy
regime, trained networks) fails; configs refuse bad input; a tiny study runs end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from robustlab.cli import main
from robustlab.config import ConfigError
from robustlab.stats import CONTRADICTED, INCONCLUSIVE, NOT_APPLICABLE, REPRODUCED
from robustlab.studies._lazy_common import crossing, log_interp_crossing
from robustlab.studies.base import load
from robustlab.studies.lazy_adversarial import (
    LazyAdversarialConfig,
    eps_sharp_claim,
    eps_threshold_claim,
    radius_high_claim,
    radius_low_claim,
    radius_transition_claim,
)
from robustlab.studies.lazy_attack import LazyAttackConfig

# ---------------------------------------------------------------------------------------
# lazy-adversarial

EPS = [0.0125, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8]


def _adv_df(*, threshold=lambda d: 2.3 / math.sqrt(d), steep=6.0, ds=(100, 196, 400, 784), seed=0,
            noise=0.05, clean=0.97, offset=1.0, seeds=3):
    """Robust accuracy = clean · logistic drop in log ε around ``threshold(d)``."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in ds:
        for s in range(seeds):
            t = threshold(d) * float(np.exp(rng.normal(0, noise)))
            k = steep * float(np.exp(rng.normal(0, noise)))
            for e in EPS:
                rel = 1 / (1 + (e / t) ** k)
                rows.append({"d": d, "eps": e, "seed": s, "R": None, "m": 64, "clean_acc": clean,
                             "robust_acc": clean * rel, "offset_ratio": offset, "lazy_radius": 0.625})
    return pd.DataFrame(rows)


def test_eps_claims_reproduced_on_a_sharp_d_half_threshold():
    c = eps_threshold_claim(_adv_df())
    assert c.decision.verdict == REPRODUCED, c.evidence
    assert c.evidence["slope"] == pytest.approx(-0.5, abs=0.08)
    lo, hi = c.evidence["slope_ci"]
    assert lo < c.evidence["slope"] < hi
    for d, v in c.evidence["per_d_mean_eps_half_times_sqrt_d"].items():
        assert v == pytest.approx(2.3, rel=0.15), d
    s = eps_sharp_claim(_adv_df())
    assert s.decision.verdict == REPRODUCED, s.evidence
    assert all(p["verdict"] == REPRODUCED for p in s.evidence["per_d"])


@pytest.mark.parametrize("claim, kw, state", [
    (eps_threshold_claim, {"threshold": lambda d: 0.2}, CONTRADICTED),  # no dependence on d
    (eps_threshold_claim, {"threshold": lambda d: 20.0 / d}, CONTRADICTED),  # 1/d, too steep
    (eps_threshold_claim, {"threshold": lambda d: 0.7 * d ** -0.3, "noise": 0.4}, INCONCLUSIVE),
    (eps_threshold_claim, {"threshold": lambda d: 5.0}, INCONCLUSIVE),  # never halves in the grid
    (eps_threshold_claim, {"ds": (100, 196)}, INCONCLUSIVE),  # too few d to fit a slope
    (eps_threshold_claim, {"clean": 0.7}, NOT_APPLICABLE),  # networks not trained
    (eps_threshold_claim, {"offset": 1.5}, NOT_APPLICABLE),  # outside the lazy ball
    (eps_sharp_claim, {"steep": 0.8}, CONTRADICTED),  # a gradual decline, not a sharp drop
    (eps_sharp_claim, {"steep": 1.65, "noise": 0.5}, INCONCLUSIVE),  # width ≈ 4 and noisy
    (eps_sharp_claim, {"offset": 1.5}, NOT_APPLICABLE),
])
def test_eps_claims_reach_each_state(claim, kw, state):
    c = claim(_adv_df(**kw))
    assert c.decision.verdict == state, (c.decision, c.evidence)


RS = [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0]


def _radius_df(curve, *, noise=0.0, offset=1.0, seeds=3):
    rng = np.random.default_rng(0)
    rows = []
    for m in (64, 256):
        for s in range(seeds):
            shift = float(np.exp(rng.normal(0, noise)))
            for r in RS:
                acc = float(np.clip(curve(r * shift, m) + 0.01 * rng.normal(), 0, 1))
                rows.append({"d": 196, "eps": 0.2, "seed": s, "m": m, "R": r, "clean_acc": 0.98,
                             "robust_acc": acc, "offset_ratio": offset, "lazy_radius": 5 / math.sqrt(m)})
    return pd.DataFrame(rows)


def _transition(r, m):
    return 0.9 / (1 + (0.8 / math.sqrt(m / 64) / r) ** 6)


RADIUS = {"radius-low": radius_low_claim, "radius-high": radius_high_claim,
          "radius-transition": radius_transition_claim}


def test_radius_claims_reproduced_on_a_phase_transition():
    for cid, claim in RADIUS.items():
        c = claim(_radius_df(_transition))
        assert c.id == cid and c.decision.verdict == REPRODUCED, (cid, c.decision, c.evidence)
    c = radius_transition_claim(_radius_df(_transition))
    halves = {p["m"]: p["R_half"] for p in c.evidence["per_width"]}
    assert halves[64] == pytest.approx(0.8, rel=0.1) and halves[256] == pytest.approx(0.4, rel=0.1)
    assert c.evidence["R_half_vs_m_slope"] == pytest.approx(-0.5, abs=0.05)
    # evidence of how far the neurons went at the largest R, in lazy radii (offset = R there)
    moved = {p["m"]: p["max_offset_over_lazy_radius_at_R_large"] for p in c.evidence["per_width"]}
    assert moved[64] == pytest.approx(4.0 / (5 / 8)) and moved[256] == pytest.approx(4.0 / (5 / 16))
    assert "lazy ball" not in c.decision.reason
    # neurons that stayed inside the lazy ball at every R: said in the reason, verdict untouched
    df = _radius_df(lambda r, m: 0.05)
    df["offset_ratio"] = (0.1 / df["R"]).clip(upper=1.0)  # offsets up to 0.1, under both lazy radii
    c = radius_high_claim(df)
    assert c.decision.verdict == CONTRADICTED
    assert "m=256, m=64 never left the lazy ball" in c.decision.reason, c.decision.reason


@pytest.mark.parametrize("curve, kw, cid, state", [
    (lambda r, m: 0.9, {}, "radius-low", CONTRADICTED),  # robust at every radius: no low phase
    (lambda r, m: 0.05, {}, "radius-high", CONTRADICTED),  # never robust
    (lambda r, m: min(0.9, 0.05 + 0.12 * math.log2(r / 0.0625)), {}, "radius-transition",
     CONTRADICTED),  # a slow rise over 6 octaves
    (lambda r, m: 0.9 / (1 + (0.5 / r) ** 6) if m == 64 else 0.1, {}, "radius-high",
     CONTRADICTED),  # one width never rises
    (lambda r, m: 0.26 if r < 0.07 else _transition(r, m), {}, "radius-low", INCONCLUSIVE),
    (_transition, {"offset": 1.2}, "radius-high", NOT_APPLICABLE),
])
def test_radius_claims_reach_each_state(curve, kw, cid, state):
    c = RADIUS[cid](_radius_df(curve, **kw))
    assert c.decision.verdict == state, (c.decision, c.evidence)


def test_crossings_interpolate_in_log_x():
    xs = np.array([0.1, 0.2, 0.4])
    assert log_interp_crossing(xs, np.array([1.0, 0.8, 0.2]), 0.5) == pytest.approx(0.1 * 2 ** 1.5)
    assert math.isnan(log_interp_crossing(xs, np.array([1.0, 0.9, 0.8]), 0.5))
    assert log_interp_crossing(xs, np.array([0.3, 0.2, 0.1]), 0.5) == pytest.approx(0.1)
    assert crossing(xs, [0.0, 0.5, 1.0], 0.75, rising=True) == pytest.approx(0.2 * 2 ** 0.5)


# ---------------------------------------------------------------------------------------
# bad input

@pytest.mark.parametrize("cls", [LazyAttackConfig, LazyAdversarialConfig])
@pytest.mark.parametrize("kw, field", [
    ({"classes": (0, 1, 2)}, "classes"),
    ({"classes": (3, 3)}, "classes"),
    ({"classes": (0, 12)}, "classes"),
    ({"size": 1}, "size"),
    ({"size": 29}, "size"),
    ({"dataset": "digits", "size": 9}, "size"),
    ({"C0": 0.0}, "C0"),
    ({"C0": -1.0}, "C0"),
    ({"m": 0}, "m"),
    ({"dataset": "mnist"}, "data_dir"),
    ({"dataset": "mnist", "data_dir": "/no/such/dir"}, "data_dir"),
])
def test_configs_refuse_bad_input(cls, kw, field):
    with pytest.raises(ConfigError) as err:
        cls(**kw)
    assert err.value.field == field


def test_config_accepts_upsampling_and_sphere_dimensions():
    assert LazyAttackConfig(size=40, allow_upsample=True).d == 1600
    assert LazyAttackConfig(dataset="sphere", dim=50).d == 50
    assert LazyAttackConfig(dataset="sphere", size=9).d == 81


@pytest.mark.parametrize("study", ["lazy-attack", "lazy-adversarial"])
@pytest.mark.parametrize("arg", ["classes=0,1,2", "classes=0,11", "size=1", "size=30", "C0=0", "m=0"])
def test_cli_bad_input_exits_2_without_a_run_dir(tmp_path, capsys, study, arg):
    out = tmp_path / "run"
    assert main(["run", study, "--set", arg, "--out", str(out), "--quiet"]) == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("robustlab: error:")


def test_cli_size_above_source_in_a_grid_exits_2(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "lazy-attack", "--grid", "size=8,40", "--out", str(out), "--quiet"]) == 2
    assert not out.exists()


# ---------------------------------------------------------------------------------------
# end to end, tiny

def test_tiny_lazy_attack_run_end_to_end(tmp_path):
    """The whole pipeline on the embedded digits in seconds (claims are computed, not judged)."""
    out = tmp_path / "run"
    rc = main(["run", "lazy-attack", "--out", str(out), "--quiet", "--seeds", "2",
               "--set", "dataset=digits", "--set", "epochs=3", "--set", "sphere=true",
               "--grid", "size=4,6,8", "--grid", "m=16", "--grid", "C0=10,20",
               "--grid", "lr=1.0"])
    assert rc == 0
    res = load(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(res) == manifest["n_points"] and set(res["size"]) == {4, 6, 8}
    assert (res["offset_ratio"] <= 1 + 1e-4).all()
    assert {"delta", "grad", "eta", "delta_rel", "test_acc"} <= set(res.columns)
    assert (out / "figures" / "vs_d.png").exists() and (out / "figures" / "vs_C0.png").exists()
    claims = json.loads((out / "claims.json").read_text())
    assert {c["id"] for c in claims} >= {"lazy-ball", "lazy-generalise", "grad-scaling", "eta-scaling",
                                         "delta-scaling", "c0-more-robust"}
    assert all(c["verdict"] in ("reproduced", "contradicted", "inconclusive", "not applicable") for c in claims)


# a 2-epoch, 16-neuron model can output positive scores in [0, 1] for every point, which the
# attacks' sanity check takes for probabilities; that is expected here
@pytest.mark.filterwarnings("ignore::robustlab.attacks.EvaluationWarning")
def test_tiny_lazy_adversarial_run_end_to_end(tmp_path):
    out = tmp_path / "run"
    rc = main(["run", "lazy-adversarial", "--out", str(out), "--quiet", "--seeds", "1",
               "--set", "dataset=digits", "--set", "epochs=2", "--set", "attack_steps=2",
               "--set", "test_attack_steps=2", "--set", "max_train=64", "--set", "m=16",
               "--grid", "size=4,8", "--grid", "eps=0.1,0.4", "--grid", "R=none,1.0"])
    assert rc == 0
    res = load(out)
    assert (res["offset_ratio"] <= 1 + 1e-4).all()
    assert (res["robust_acc"] <= res["clean_acc"]).all()
    assert (out / "figures" / "robust_vs_eps.png").exists()
    ids = {c["id"] for c in json.loads((out / "claims.json").read_text())}
    assert ids == {"eps-sharp-drop", "eps-threshold", "radius-low", "radius-high", "radius-transition"}


@pytest.mark.vision
def test_lazy_attack_reads_torchvision_mnist_from_data_dir(tmp_path):
    """dataset=mnist reads the standard MNIST files under data_dir (written here, tiny)."""
    pytest.importorskip("torchvision")
    import struct

    from robustlab.studies.lazy_attack import run_points

    rng = np.random.default_rng(0)
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, n in (("train", 60), ("t10k", 20)):
        x = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        y = (np.arange(n) % 10).astype(np.uint8)
        for name, arr, magic in (("images-idx3", x, 0x803), ("labels-idx1", y, 0x801)):
            with open(raw / f"{prefix}-{name}-ubyte", "wb") as fh:
                fh.write(struct.pack(">I", magic))
                for dim in arr.shape:
                    fh.write(struct.pack(">I", dim))
                fh.write(arr.tobytes())
    cfg = LazyAttackConfig(dataset="mnist", data_dir=str(tmp_path), size=6, m=8, epochs=2, classes=(3, 7))
    (rows,) = run_points([cfg], "cpu")
    assert rows[0]["d"] == 36 and rows[0]["offset_ratio"] <= 1 + 1e-4
    assert rows[0]["x_norm"] == pytest.approx(1.0, abs=1e-5)  # sphere normalisation (default)

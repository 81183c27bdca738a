"""The lazy studies' shared helpers; configs refuse bad input; a tiny run of each study end to
end (the claims are tested in test_lazy_attack_claims.py and test_lazy_adversarial_claims.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from robustlab.cli import main
from robustlab.config import ConfigError
from robustlab.studies.base import load
from robustlab.studies.lazy.adversarial import LazyAdversarialConfig
from robustlab.studies.lazy.attack import LazyAttackConfig
from robustlab.studies.lazy.common import crossing, log_interp_crossing


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
               "--grid", "size=4,8", "--grid", "eps=0.1,0.4", "--grid", "R_factor=none,1.0"])
    assert rc == 0
    res = load(out)
    assert (res["offset_ratio"] <= 1 + 1e-4).all()
    assert (res["robust_acc"] <= res["clean_acc"]).all()
    assert (out / "figures" / "robust_vs_eps.png").exists()
    got = json.loads((out / "claims.json").read_text())
    assert {c["id"] for c in got} == {"eps-sharp-drop", "eps-threshold", "radius-growth", "eps-half-lazy-vs-control"}
    assert all(c["kind"] == ("exploratory" if c["id"] == "eps-half-lazy-vs-control" else "claim")
               and "excluded" in c for c in got)


@pytest.mark.vision
def test_lazy_attack_reads_torchvision_mnist_from_data_dir(tmp_path):
    """dataset=mnist reads the standard MNIST files under data_dir (written here, tiny)."""
    pytest.importorskip("torchvision")
    import struct

    from robustlab.studies.lazy.attack import run_points

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


def test_the_rich_regime_control_starts_with_a_small_input_gradient_and_learns_one():
    """init_scale reaches the network run_points trains: ‖∇ₓf₀‖ scales by it exactly (bias-free),
    and training makes the input gradient far larger than the initial one (the control's premise)."""
    from robustlab.studies.lazy.attack import run_points

    base = dict(dataset="digits", size=6, m=16, epochs=5, lr=1.0, bias=False, C0=1000.0, seed=0)
    std, rich = (run_points([LazyAttackConfig(**base, init_scale=s)], "cpu")[0][0] for s in (1.0, 0.01))
    assert rich["init_grad"] == pytest.approx(0.01 * std["init_grad"], rel=1e-4)
    assert rich["grad"] >= 2 * rich["init_grad"]


# ---------------------------------------------------------------------------------------
# input_scale: raw pixels divided by their mean norm at each size

def test_unit_mean_inputs_have_mean_norm_one_and_keep_the_spread():
    from robustlab.studies.lazy.common import input_bounds, load_data

    raw = load_data(LazyAttackConfig(dataset="digits", size=8, sphere=False))
    cfg = LazyAttackConfig(dataset="digits", size=8, sphere=False, input_scale="unit-mean")
    scaled = load_data(cfg)
    c = raw.x_train.norm(dim=1).mean()
    assert float(c) > 3  # raw 8x8 digits are far from unit norm
    assert float(scaled.x_train.norm(dim=1).mean()) == pytest.approx(1.0, rel=1e-5)
    # one constant for the training and the test inputs: the ratios between points are kept
    assert np.allclose(scaled.x_train.numpy() * float(c), raw.x_train.numpy(), rtol=1e-5, atol=1e-6)
    assert np.allclose(scaled.x_test.numpy() * float(c), raw.x_test.numpy(), rtol=1e-5, atol=1e-6)
    assert input_bounds(cfg) == (0.0, math.inf)


@pytest.mark.parametrize("kw", [{"sphere": True}, {"dataset": "sphere", "sphere": False}])
def test_input_scale_is_refused_on_the_sphere(kw):
    with pytest.raises(ConfigError) as err:
        LazyAttackConfig(input_scale="unit-mean", **kw)
    assert err.value.field == "input_scale"
    with pytest.raises(ConfigError):
        LazyAttackConfig(input_scale="unit", sphere=False)

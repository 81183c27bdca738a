"""The same code on a GPU: CUDA runs give the CPU's numbers up to float32 rounding.

Skipped where torch sees no CUDA device (CI has none). On a GPU machine:
``pytest -p no:cacheprovider tests/test_cuda.py`` (about a minute). Every random draw in
robustlab comes from an explicit CPU generator and is moved to the device, so a run on CUDA
trains the same networks on the same data from the same initialisation as on the CPU; only
the kernels' summation order differs. The checks below therefore ask for agreement to
rounding on one-shot quantities and, for whole trained runs, for the typical (median)
relative difference to be at rounding level: a device bug (a draw made on the GPU, data
left on the CPU, a missed ``.to(device)``) moves every number, not a few.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from test_feature_slow import TINY as FL_TINY
from test_width_depth_study import TINY as WDI_TINY
from torch import nn

from robustlab.cli import main
from robustlab.studies.base import load

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CUDA = torch.device("cuda")


@pytest.fixture(autouse=True)
def _full_float32():
    """As every study does (through resolve_device): cuDNN's float32 convolutions in float32, not TF32."""
    from robustlab.utils import resolve_device

    resolve_device("cuda")
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32


def test_auto_device_and_generators_on_cuda():
    from robustlab.utils import make_generator, matmul_rate, resolve_device

    assert resolve_device("auto").type == "cuda" and resolve_device("cuda").type == "cuda"
    a = torch.randn(5, generator=make_generator(3, "x", device="cuda"), device="cuda")
    b = torch.randn(5, generator=make_generator(3, "x", device="cuda"), device="cuda")
    assert a.device.type == "cuda" and torch.equal(a, b)
    # the GPU's float32 rate (the --dry-run floor with device=cuda) is measured there, and
    # any data-centre GPU of the last decade is above a teraflop
    assert matmul_rate(n=2048, device="cuda") > 1e12


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).eval()


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(32 * 4 * 4, 10)).eval()


@pytest.mark.parametrize("make", [_mlp, _cnn])
def test_closed_form_pullback_on_cuda_equals_autograd_and_the_cpu(make):
    from robustlab.attacks.base import _autograd_forward_and_grad, gradient_fn
    from robustlab.attacks.losses import cross_entropy

    model = make()
    g = torch.Generator().manual_seed(1)
    x, y = torch.rand(256, 64, generator=g), torch.randint(0, 10, (256,), generator=g)
    z, loss, grad, ok = gradient_fn(model, cross_entropy)(x, y, check=True)
    gpu = model.to(CUDA)
    zc, lossc, gradc, okc = gradient_fn(gpu, cross_entropy)(x.to(CUDA), y.to(CUDA), check=True)
    za, lossa, grada, _ = _autograd_forward_and_grad(gpu, x.to(CUDA), y.to(CUDA), cross_entropy, check=True)
    assert zc.device.type == "cuda" and gradc.device.type == "cuda"
    for c, a in ((zc, za), (lossc, lossa), (gradc, grada)):  # the two routes on the GPU
        torch.testing.assert_close(c, a, rtol=1e-5, atol=1e-6)
    for cpu, c in ((z, zc), (loss, lossc), (grad, gradc)):  # the GPU against the CPU
        torch.testing.assert_close(c.cpu(), cpu, rtol=1e-4, atol=1e-5)
    assert torch.equal(okc.cpu(), ok)


def test_pgd_on_cuda_finds_the_cpu_points():
    from robustlab.attacks import PGD, Linf

    model = _mlp()
    g = torch.Generator().manual_seed(2)
    x, y = torch.rand(512, 64, generator=g), torch.randint(0, 10, (512,), generator=g)
    attack = PGD(Linf(0.1), steps=20, step_size=0.025, random_start=True)
    a = attack(model, x, y, bounds=(0.0, 1.0), generator=torch.Generator().manual_seed(0))
    b = attack(model.to(CUDA), x.to(CUDA), y.to(CUDA), bounds=(0.0, 1.0),
               generator=torch.Generator().manual_seed(0))
    assert b.device.type == "cuda"
    # sign steps flip only where a gradient coordinate is ~0: a few coordinates at most
    assert ((a - b.cpu()).abs() > 1e-4).float().mean() < 0.01
    assert (b - x.to(CUDA)).abs().max() <= 0.1 + 1e-6 and b.min() >= 0 and b.max() <= 1


# One tiny run of each study, on the CPU and on CUDA (two workers: the CUDA path through the
# process pool), compared record by record.
def _sets(fields: dict) -> list[str]:
    return [a for k, v in fields.items() for a in ("--set", f"{k}={v}")]


TINY_RUNS = {  # the tiny settings of each study's own end-to-end tests
    "width-depth-init": ["--seeds", "2", *_sets({**WDI_TINY, "size": 8}), "--grid", "width=8,64",
                         "--grid", "depth=2,3", "--grid", "init=he,lecun"],
    "lazy-attack": ["--seeds", "2", "--set", "dataset=digits", "--set", "epochs=3", "--set", "sphere=true",
                    "--grid", "size=4,8", "--grid", "m=16", "--grid", "C0=10,20", "--grid", "lr=1.0"],
    "lazy-adversarial": ["--seeds", "1", "--set", "dataset=digits", "--set", "epochs=2",
                         "--set", "attack_steps=2", "--set", "test_attack_steps=2", "--set", "max_train=64",
                         "--set", "m=16", "--grid", "size=4,8", "--grid", "eps=0.1,0.4", "--grid", "R=none,1.0"],
    "feature-learning": ["--seeds", "2", *_sets(FL_TINY)],
}


def _numbers(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if pd.api.types.is_float_dtype(df[c])
            and not any(t in c for t in ("seconds", "gflop", "time"))]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("study", list(TINY_RUNS))
def test_tiny_study_run_on_cuda_gives_the_cpu_records(tmp_path, study):
    runs = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device
        rc = main(["run", study, "--out", str(out), "--quiet", "--workers", "2", "--device", device,
                   *TINY_RUNS[study]])
        assert rc == 0
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["device"] == device and manifest["sweep"]["failed_now"] == 0
        runs[device] = load(out)
    a, b = runs["cpu"], runs["cuda"]
    assert len(a) == len(b) > 0 and list(a.columns) == list(b.columns)
    keys = [c for c in ("point", "kind", "epoch", "step") if c in a.columns]
    a, b = a.sort_values(keys, kind="stable").reset_index(drop=True), b.sort_values(keys, kind="stable").reset_index(drop=True)
    assert a["point"].equals(b["point"]) and a["seed"].equals(b["seed"])
    rel = []
    for c in _numbers(a):
        x, y = a[c].to_numpy(float), b[c].to_numpy(float)
        assert np.array_equal(np.isnan(x), np.isnan(y)), c
        m = np.isfinite(x) & np.isfinite(y)
        rel.append(np.abs(x[m] - y[m]) / np.maximum(np.abs(x[m]), 1e-6))
    rel = np.concatenate(rel)
    assert rel.size > 50
    assert np.median(rel) < 1e-4, f"median relative difference CPU vs CUDA {np.median(rel):.2e}"
    assert np.quantile(rel, 0.9) < 1e-2

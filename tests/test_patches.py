"""The patch distribution of the feature-learning paper (ICLR 2025): roles, features, determinism, Assumption 2.3 report."""

import math
import warnings

import pytest
import torch

from robustlab.config import ConfigError
from robustlab.data.patches import (
    MUCH,
    AssumptionWarning,
    PatchSpec,
    assumption_report,
    check_assumptions,
    sample_ensemble,
    sample_features,
    sample_patches,
)
from robustlab.utils import make_generator


def gen(seed=0, salt="t"):
    return make_generator(seed, salt)


def test_onehot_layout_and_roles():
    spec = PatchSpec(k=3, P=10, d=8, n_robust=2, alpha=1.0, beta=0.3, sigma_n=0.0)
    f = sample_features(spec, gen())
    assert torch.equal(f.u, torch.eye(8)[:3]) and torch.equal(f.v, torch.eye(8)[3:6])
    data = sample_patches(spec, f, 50, gen())
    assert data.x.shape == (50, 10, 8) and data.y.shape == (50,) and data.robust.shape == (50, 10)
    assert (data.robust.sum(1) == 2).all()
    # without noise each patch is exactly alpha u_y (robust) or beta v_y (non-robust)
    uy, vy = f.u[data.y], f.v[data.y]
    expect = torch.where(data.robust[..., None], 1.0 * uy[:, None], 0.3 * vy[:, None])
    assert torch.allclose(data.x, expect)
    assert torch.equal(data.alpha > 0, data.robust) and torch.equal(data.beta > 0, ~data.robust)


def test_rotated_basis_is_orthonormal_float64():
    spec = PatchSpec(k=4, P=5, d=12, basis="rotated")
    f = sample_features(spec, gen(), dtype=torch.float64)
    B = f.all  # (2k, d)
    assert torch.allclose(B @ B.T, torch.eye(8, dtype=torch.float64), atol=1e-12)
    assert not torch.allclose(B.abs(), torch.eye(12, dtype=torch.float64)[:8])  # not one-hot


def test_noise_scale_defaults_to_inverse_sqrt_d():
    spec = PatchSpec(k=2, P=200, d=16, alpha=0.0, beta=0.0)
    data = sample_patches(spec, sample_features(spec, gen()), 200, gen())
    assert spec.noise_std == pytest.approx(0.25)
    assert data.x.std().item() == pytest.approx(0.25, rel=0.02)


def test_ranges_and_overlap():
    spec = PatchSpec(k=2, P=20, d=8, alpha=1.0, alpha_max=2.0, beta=0.1, beta_max=0.3, overlap=True)
    data = sample_patches(spec, sample_features(spec, gen()), 300, gen())
    a = data.alpha[data.robust]
    assert a.min() >= 1.0 and a.max() <= 2.0 and a.std() > 0.1
    assert data.beta.min() >= 0.1 and data.beta.max() <= 0.3
    assert (data.beta[data.robust] > 0).all()  # overlap: robust patches carry v_y too


def test_feature_noise_weights_other_features_only():
    base = dict(k=2, P=20, d=8, alpha=1.0, beta=0.3, basis="rotated")
    spec0, spec1 = PatchSpec(**base), PatchSpec(**base, feature_noise=2.0)
    f = sample_features(spec0, gen(), dtype=torch.float64)
    # gamma is drawn last, so the same generator gives the same signal and noise
    x0 = sample_patches(spec0, f, 300, gen(), dtype=torch.float64)
    x1 = sample_patches(spec1, f, 300, gen(), dtype=torch.float64)
    diff = x1.x - x0.x
    gamma = diff @ f.all.T  # (N, P, 2k)
    assert torch.allclose(gamma @ f.all, diff, atol=1e-12)  # lies in the feature span
    idx = torch.arange(300)
    assert gamma[idx, :, x0.y].abs().max() < 1e-12 and gamma[idx, :, 2 + x0.y].abs().max() < 1e-12
    cap = 2.0 * spec1.noise_std / math.sqrt(8)
    assert gamma.min() > -1e-12 and gamma.max() <= cap + 1e-12 and gamma.max() > 0.5 * cap


def test_same_seed_same_bits_and_members_independent():
    spec = PatchSpec(k=2, P=6, d=8, basis="rotated")
    f1, tr1, te1 = sample_ensemble(spec, [3, 4], 10, 5, make_generator)
    f2, tr2, _ = sample_ensemble(spec, [3, 4], 10, 5, make_generator)
    f3, tr3, _ = sample_ensemble(spec, [9, 4], 10, 5, make_generator)
    assert torch.equal(tr1.x, tr2.x) and torch.equal(f1.u, f2.u)
    assert tr1.x.shape == (2, 10, 6, 8) and te1.x.shape == (2, 5, 6, 8) and f1.u.shape == (2, 2, 8)
    assert torch.equal(tr1.x[1], tr3.x[1])  # member 1 does not depend on member 0's seed
    assert not torch.equal(tr1.x[0], tr3.x[0])
    assert not torch.equal(tr1.x[0, :5], te1.x[0])  # train and test are different draws


@pytest.mark.parametrize("kw, field", [
    ({"k": 1}, "k"),
    ({"k": 3, "d": 5}, "d"),  # one-hot needs d >= 2k
    ({"n_robust": 0}, "n_robust"),
    ({"P": 2, "n_robust": 3}, "P"),
    ({"alpha": -1.0}, "alpha"),
    ({"beta": 0.5, "beta_max": 0.2}, "beta_max"),
    ({"sigma_n": -0.1}, "sigma_n"),
    ({"basis": "hex"}, "basis"),
])
def test_bad_specs_raise_config_error(kw, field):
    with pytest.raises(ConfigError) as e:
        PatchSpec(**kw)
    assert e.value.field == field


def test_assumption_report_closed_form():
    spec = PatchSpec(k=2, P=48, d=64, n_robust=1, alpha=1.0, beta=0.4)
    rep = assumption_report(spec, q=3.0, eps=0.4)
    assert rep["alpha_over_beta"] == pytest.approx(2.5)
    assert rep["sum_alpha_q"] == pytest.approx(1.0)
    assert rep["sum_beta_q"] == pytest.approx(47 * 0.064)
    assert rep["eps_over_beta"] == pytest.approx(1.0) and rep["eps_over_alpha"] == pytest.approx(0.4)
    assert rep["holds"] and rep["violations"] == []
    # uniform range: E[b^q] = (hi^{q+1} - lo^{q+1}) / ((q+1)(hi-lo))
    spec_r = PatchSpec(k=2, P=11, d=8, alpha=2.0, beta=0.2, beta_max=0.4)
    rep_r = assumption_report(spec_r, q=3.0, eps=0.5)
    assert rep_r["sum_beta_q"] == pytest.approx(10 * (0.4 ** 4 - 0.2 ** 4) / (4 * 0.2))
    assert rep_r["alpha_over_beta"] == pytest.approx(2.0 / 0.4)


@pytest.mark.parametrize("kw, eps, needle", [
    ({"alpha": 1.0, "beta": 0.8}, 0.8, "robust not stronger"),
    ({"P": 4, "alpha": 1.0, "beta": 0.4}, 0.4, "non-robust not denser"),
    ({"alpha": 1.0, "beta": 0.4}, 0.2, "eps below beta"),
    ({"alpha": 1.0, "beta": 0.4}, 0.7, "eps not much below alpha"),
])
def test_violations_warn(kw, eps, needle):
    spec = PatchSpec(k=2, P=kw.pop("P", 64), d=8, **kw)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        rep = check_assumptions(spec, q=3.0, eps=eps)
    assert not rep["holds"]
    msgs = [str(w.message) for w in rec if issubclass(w.category, AssumptionWarning)]
    assert any(needle in m for m in msgs), msgs
    assert MUCH == 2.0

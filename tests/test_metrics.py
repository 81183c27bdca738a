"""Metrics: accuracy conventions, perturbation stability (exact identity and Monte Carlo,
float64), lazy ratio and neuron distance, gradient norms and margins."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from robustlab.attacks import EvaluationWarning, FeatureDirection, reset_warnings
from robustlab.metrics import (
    MonteCarlo,
    accuracy,
    accuracy_vs_eps,
    input_grad_norm,
    jacobian_fro_sq,
    lazy_ratio,
    margins,
    neuron_distance,
    perturbation_stability,
    robust_accuracy,
)
from robustlab.models import Flat


def mlp(d=6, k=3, seed=0, act=nn.Tanh):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, 16), act(), nn.Linear(16, k)).double().eval()


def test_accuracy_binary_and_multiclass():
    lin = nn.Sequential(nn.Linear(2, 1), nn.Flatten(0)).double()
    with torch.no_grad():
        lin[0].weight.copy_(torch.tensor([[1.0, 0.0]]))
        lin[0].bias.zero_()
    x = torch.tensor([[1.0, 0], [-1, 0], [2, 0], [0, 0]], dtype=torch.float64)
    y = torch.tensor([1.0, 1.0, 1.0, -1.0], dtype=torch.float64)
    # f = 0 counts as wrong (sign 0 matches no label)
    assert accuracy(lin.eval(), x, y) == 0.5
    torch.testing.assert_close(margins(lin, x, y), torch.tensor([1.0, -1, 2, 0], dtype=torch.float64))
    m = mlp()
    x = torch.randn(30, 6, dtype=torch.float64)
    y = m(x).argmax(1)
    assert accuracy(m, x, y) == 1.0
    assert bool((margins(m, x, y) > 0).all())
    assert accuracy(m, x, y, batch_size=7) == 1.0


def test_train_mode_warns_once_and_is_restored():
    reset_warnings()
    m = mlp().train()
    x, y = torch.randn(5, 6, dtype=torch.float64), torch.zeros(5, dtype=torch.long)
    with pytest.warns(EvaluationWarning, match="train mode"):
        accuracy(m, x, y)
    assert m.training
    reset_warnings()


def test_robust_accuracy_feature_direction_with_mask():
    """The feature-learning paper's attack as a metric: a linear patch model that reads only v_y collapses
    under δ_p = −ε v_y with ε larger than the feature's weight, but not when the mask
    spares every non-robust patch."""
    k, P, d = 2, 4, 4
    V = torch.eye(d)[k:]
    W = torch.zeros(k, P * d)
    for j in range(k):
        W[j] = V[j].repeat(P)  # sums <x_p, v_j> over patches
    model = nn.Sequential(nn.Flatten(), nn.Linear(P * d, k, bias=False)).eval()
    with torch.no_grad():
        model[1].weight.copy_(W)
    y = torch.tensor([0, 1, 0, 1])
    x = 0.4 * V[y][:, None, :].repeat(1, P, 1)  # β = 0.4 on every patch
    assert accuracy(model, x, y) == 1.0
    attack = FeatureDirection(0.5, V)
    assert robust_accuracy(model, x, y, attack, bounds=None) == 0.0
    none = torch.zeros(4, P, dtype=torch.bool)
    assert robust_accuracy(model, x, y, attack, bounds=None, mask=none) == 1.0
    assert robust_accuracy(model, x, y, attack, bounds=None, mask=none, batch_size=3) == 1.0


def test_accuracy_vs_eps_callable_and_cumulative():
    from robustlab.attacks import FGSM, Linf

    m = mlp()
    x = torch.rand(40, 6, dtype=torch.float64)
    y = m(x).argmax(1)
    eps = [0.0, 0.1, 0.3, 1.0]
    a = accuracy_vs_eps(m, x, y, lambda e: FGSM(Linf(e)), eps)
    b = accuracy_vs_eps(m, x, y, FGSM(Linf(1.0)), eps)
    assert a == b and a[0] == 1.0 and all(q <= p for p, q in zip(a, a[1:]))
    with pytest.raises(ValueError, match="ascending"):
        accuracy_vs_eps(m, x, y, FGSM(Linf(1.0)), [0.3, 0.1])


def test_input_grad_norm_linear():
    lin = nn.Sequential(nn.Linear(5, 1), nn.Flatten(0)).double()
    w = lin[0].weight.detach()[0]
    x = torch.randn(4, 5, dtype=torch.float64)
    torch.testing.assert_close(input_grad_norm(lin, x), w.norm().expand(4))
    torch.testing.assert_close(input_grad_norm(lin, x, p=math.inf), w.abs().max().expand(4))


# --- perturbation stability --------------------------------------------------------


def test_stability_exact_linear_closed_form():
    """f = W x: J = W for every x, so P = ε² ‖W‖_F² / (d + 2)."""
    d, k, eps = 9, 4, 0.7
    lin = nn.Linear(d, k).double()
    x = torch.randn(11, d, dtype=torch.float64)
    W = lin.weight.detach()
    expected = eps**2 * float(W.pow(2).sum()) / (d + 2)
    assert perturbation_stability(lin, x, eps) == pytest.approx(expected, rel=1e-12)
    torch.testing.assert_close(jacobian_fro_sq(lin, x), W.pow(2).sum().expand(11))
    # binary scalar output and patch-shaped inputs (d = P·d_patch)
    b = nn.Sequential(nn.Flatten(), nn.Linear(12, 1), nn.Flatten(0)).double()
    xp = torch.randn(3, 3, 4, dtype=torch.float64)
    wb = b[1].weight.detach()
    assert perturbation_stability(b, xp, eps) == pytest.approx(eps**2 * float(wb.pow(2).sum()) / 14, rel=1e-12)


def test_jacobian_matches_autograd_jacobian():
    m = mlp(d=5, k=3, seed=1)
    x = torch.randn(4, 5, dtype=torch.float64)
    J = torch.autograd.functional.jacobian(m, x)  # (N, k, N, d)
    per = torch.stack([J[n, :, n].pow(2).sum() for n in range(4)])
    torch.testing.assert_close(jacobian_fro_sq(m, x), per)


@pytest.mark.parametrize("k", [1, 3])
def test_stability_monte_carlo_within_3_stderr(k):
    m = mlp(d=6, k=k, seed=2)
    x = torch.randn(16, 6, dtype=torch.float64)
    exact = perturbation_stability(m, x, 0.5)
    mc = perturbation_stability(m, x, 0.5, samples=4000, generator=torch.Generator().manual_seed(0))
    assert isinstance(mc, MonteCarlo) and mc.stderr > 0
    assert abs(mc.mean - exact) < 3 * mc.stderr, (mc, exact)
    assert mc.stderr < 0.05 * exact  # the estimate is informative
    # per sample, and deterministic given the generator
    ps = perturbation_stability(m, x, 0.5, samples=4000, generator=torch.Generator().manual_seed(0), per_sample=True)
    torch.testing.assert_close(ps.mean.mean(), torch.tensor(mc.mean, dtype=torch.float64))
    ex = perturbation_stability(m, x, 0.5, per_sample=True)
    z = (ps.mean - ex) / ps.stderr
    assert float(z.abs().max()) < 4.5


def test_stability_ensemble_is_mean_over_models_and_flat():
    ms = [mlp(seed=s) for s in range(3)]
    x = torch.randn(8, 6, dtype=torch.float64)
    each = [perturbation_stability(m, x, 0.3) for m in ms]
    assert perturbation_stability(ms, x, 0.3) == pytest.approx(sum(each) / 3, rel=1e-12)

    class Stacked(nn.Module):  # an (E, N, d) -> (E, N, k) ensemble of the three MLPs
        def forward(self, xe):
            return torch.stack([m(xe[e]) for e, m in enumerate(ms)])

    flat = Flat(Stacked(), 3)
    per = perturbation_stability(flat, x.repeat(3, 1), 0.3, per_sample=True).view(3, 8)
    torch.testing.assert_close(per.mean(1), torch.tensor(each, dtype=torch.float64))


def test_stability_scales_with_eps_squared_and_validates():
    m = mlp()
    x = torch.randn(5, 6, dtype=torch.float64)
    assert perturbation_stability(m, x, 1.0) == pytest.approx(4 * perturbation_stability(m, x, 0.5), rel=1e-12)
    with pytest.raises(ValueError):
        perturbation_stability(m, x, -1.0)
    with pytest.raises(ValueError):
        perturbation_stability(m, x, 1.0, samples=1)


# --- lazy ratio / neuron distance -----------------------------------------------------


def test_lazy_ratio_whole_and_per_layer():
    m0 = mlp()
    m = copy.deepcopy(m0)
    with torch.no_grad():
        m[0].weight.mul_(1.1)
    theta0 = torch.cat([p.detach().flatten() for p in m0.parameters()])
    expected = 0.1 * float(m0[0].weight.detach().norm()) / float(theta0.norm())
    assert lazy_ratio(m, m0) == pytest.approx(expected, rel=1e-12)
    per = lazy_ratio(m, m0, per_layer=True)
    assert per["0.weight"] == pytest.approx(0.1, rel=1e-12) and per["2.bias"] == 0.0
    assert lazy_ratio(m0, m0) == 0.0
    # a fixed (non-trainable) layer does not dilute κ
    m[2].weight.requires_grad_(False)
    m[2].bias.requires_grad_(False)
    m0_trainable = float(torch.cat([m0[0].weight.flatten(), m0[0].bias]).detach().norm())
    assert lazy_ratio(m, m0) == pytest.approx(0.1 * float(m0[0].weight.detach().norm()) / m0_trainable, rel=1e-12)
    assert lazy_ratio(m, m0, trainable_only=False) == pytest.approx(expected, rel=1e-12)


def test_lazy_ratio_ensemble_and_neuron_distance():
    g = torch.Generator().manual_seed(0)
    W0 = torch.randn(4, 5, 3, generator=g, dtype=torch.float64)  # (E, m, d)
    a0 = torch.randn(4, 5, generator=g, dtype=torch.float64)
    step = torch.zeros_like(W0)
    step[2, 1] = torch.tensor([3.0, 4.0, 0.0])
    now, init = {"W": W0 + step, "a": a0}, {"W": W0, "a": a0}
    r = lazy_ratio(now, init, ensemble=True)
    assert r.shape == (4,)
    norm0 = (W0.pow(2).sum((1, 2)) + a0.pow(2).sum(1)).sqrt()
    torch.testing.assert_close(r.double(), torch.tensor([0, 0, 5, 0], dtype=torch.float64) / norm0, rtol=1e-6, atol=0)
    per = lazy_ratio(now, init, ensemble=True, per_layer=True)
    assert per["W"].shape == (4,) and float(per["a"].abs().max()) == 0.0
    nd = neuron_distance(W0 + step, W0)
    torch.testing.assert_close(nd, torch.tensor([0, 0, 5.0, 0], dtype=torch.float64))
    assert neuron_distance(W0[2] + step[2], W0[2]) == pytest.approx(5.0)
    assert neuron_distance(W0[2] + step[2], W0[2], per_neuron=True).shape == (5,)
    with pytest.raises(ValueError):
        neuron_distance(W0, W0[0])


class _Stack(nn.Module):
    """An (E, N, ...) -> (E, N, k) ensemble built from separate members (test helper)."""

    def __init__(self, members):
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, xe):
        return torch.stack([m(xe[e]) for e, m in enumerate(self.members)])


def test_monte_carlo_and_attacks_respect_flat_ensembles():
    """Tiled batches (Monte Carlo draws, PGD restarts, min-flip grids) must keep each row
    with its own copy of a models.Flat ensemble: results equal the per-member ones."""
    from robustlab.attacks import PGD, Linf, min_flip_along_gradient

    ms = [mlp(seed=s) for s in range(3)]
    x = torch.rand(5, 6, dtype=torch.float64)
    flat = Flat(_Stack(ms), 3).eval()
    xf = x.repeat(3, 1)  # copy e sees rows e·5 … e·5+4
    mc = perturbation_stability(flat, xf, 0.3, samples=400, generator=torch.Generator().manual_seed(0), per_sample=True)
    ex = perturbation_stability(flat, xf, 0.3, per_sample=True)
    assert float(((mc.mean - ex) / mc.stderr).abs().max()) < 4.5
    # PGD restarts: a spy checks that every row each copy receives lies in the ball of one
    # of that copy's own points (the points differ by far more than ε across copies)
    xs = torch.rand(15, 6, dtype=torch.float64)
    y = torch.cat([m(xs[5 * e : 5 * e + 5]).argmax(1) for e, m in enumerate(ms)])
    seen = []

    class Spy(_Stack):
        def forward(self, xe):
            seen.append(xe.detach().clone())
            return super().forward(xe)

    pgd = PGD(Linf(0.01), steps=3, step_size=0.005, random_start=True, restarts=3)
    pgd(Flat(Spy(ms), 3), xs, y, generator=torch.Generator().manual_seed(0))
    assert seen
    for xe in seen:  # (E, rows, d)
        for e in range(3):
            dist = (xe[e][:, None, :] - xs[None, 5 * e : 5 * e + 5, :]).abs().amax(-1).amin(1)
            assert float(dist.max()) <= 0.01 + 1e-12
    binary = [nn.Sequential(mlp(seed=s, k=1), nn.Flatten(0)) for s in range(3)]
    fb = Flat(_Stack(binary), 3)
    r = min_flip_along_gradient(fb, xf, grid=4, batch_size=7)  # tiny chunks on purpose
    for e, m in enumerate(binary):
        torch.testing.assert_close(r.delta_norm[5 * e : 5 * e + 5], min_flip_along_gradient(m, x).delta_norm, atol=2e-4, rtol=0)
    with pytest.raises(ValueError, match="Flat"):
        accuracy(flat.eval(), xs, y, batch_size=4)


@pytest.mark.parametrize("restarts", [1, 3])
def test_early_stop_on_a_flat_ensemble_drops_samples_in_all_copies_together(restarts):
    """A sample leaves a Flat ensemble's batch only once every copy misclassifies it, so each
    copy keeps its own rows: the per-sample outcome equals the full attack's exactly. (The
    copies share their points, as an ensemble's test set does, so that they break alike; each
    copy has its own labels, so a row handed to the wrong copy would change the outcome.)"""
    from robustlab.attacks import PGD, Linf

    E, n = 4, 40
    ms = [mlp(seed=s) for s in (0, 1, 3, 4)]  # (seed 2's net resists ε = 0.3 on every point)
    x = torch.rand(n, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    xs = x.repeat(E, 1)
    y = torch.cat([m(x).argmax(1) for m in ms])
    assert len({tuple(y[n * e: n * e + n].tolist()) for e in range(E)}) == E
    sizes = []

    class Spy(_Stack):
        def forward(self, xe):
            sizes.append(xe.shape[1])
            return super().forward(xe)

    flat = Flat(Spy(ms), E).eval()
    pgd = PGD(Linf(0.3), steps=12, step_size=0.06, random_start=True, restarts=restarts)
    g = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    full = robust_accuracy(flat, xs, y, pgd, generator=g(), per_sample=True)
    sizes.clear()
    fast = robust_accuracy(flat, xs, y, pgd, generator=g(), per_sample=True, early_stop=True)
    assert 0.1 < float(full.double().mean()) < 0.9  # some samples break, some do not
    assert torch.equal(full, fast)
    assert min(sizes) < n * restarts  # samples did leave the batch


@pytest.mark.parametrize("init,depth", [("lecun", 2), ("lecun", 4), ("he", 3), ("ntk", 4), ("small", 3)])
def test_expected_stability_at_init_matches_random_networks(init, depth):
    """The closed form E_W P(f, ε) at initialisation against 4,000 random float64 networks
    (width-depth-init, NeurIPS 2022, Table 1 inits): within 4 standard errors, for LeCun's halving per layer and
    He/NTK's depth-independent value alike."""
    from robustlab.metrics import expected_stability_at_init
    from robustlab.models import DeepMLP

    d, m, k, eps, E = 7, 12, 3, 0.3, 4000
    gens = [torch.Generator().manual_seed(1000 + e) for e in range(E)]
    net = DeepMLP(d, m, depth, k, init=init, gamma=1.5, generators=gens, dtype=torch.float64)
    x = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    x = (x / x.norm()).expand(E, 1, d).clone().requires_grad_(True)
    out = net(x)  # (E, 1, k)
    j2 = torch.zeros(E, dtype=torch.float64)
    for j in range(k):
        (g,) = torch.autograd.grad(out[..., j].sum(), x, retain_graph=True)
        j2 += g.pow(2).sum((1, 2))
    p = eps**2 * j2 / (d + 2)  # (E,): Def. 3 per network
    want = expected_stability_at_init(init, d=d, width=m, depth=depth, k=k, eps=eps, gamma=1.5)
    se = float(p.std()) / math.sqrt(E)
    assert abs(float(p.mean()) - want) < 4 * se, (float(p.mean()), want, se)


def test_expected_stability_at_init_depth_laws():
    """LeCun halves per layer; He and NTK do not move with depth (exact, float64)."""
    from robustlab.metrics import expected_stability_at_init

    def f(init, L):
        return expected_stability_at_init(init, d=784, width=256, depth=L, k=10, eps=0.1)

    for L in range(2, 8):
        assert f("lecun", L + 1) / f("lecun", L) == pytest.approx(0.5, rel=1e-12)
        assert f("he", L + 1) == pytest.approx(f("he", L), rel=1e-12)
        assert f("ntk", L + 1) == pytest.approx(f("ntk", L), rel=1e-12)
    assert f("he", 2) == pytest.approx(0.1**2 * 2 * 10 / 786, rel=1e-12)
    assert f("ntk", 5) == pytest.approx(0.1**2 * 784 * 10 / 786, rel=1e-12)
    assert f("lecun", 4) == pytest.approx(0.1**2 * 10 * 2.0**-3 / 786, rel=1e-12)
    from robustlab.config import ConfigError

    with pytest.raises(ConfigError):
        expected_stability_at_init("xavier", d=4, width=4, depth=2, k=1, eps=0.1)

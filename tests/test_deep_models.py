"""Deep ReLU networks and the initialisation table of the width-depth-init paper (models/deep.py).

Closed forms checked in float64: the entry variances of Table 1, and the expected squared
Frobenius norm of the input Jacobian at initialisation, E‖J‖_F² = k·β_L·∏(½·fan·β) — for
unit inputs 2k (He, any depth), k·2^{1−L} (LeCun: exponentially smaller with depth, the
mechanism behind the width-depth-init paper's LeCun claim) and k·d (NTK, two layers).
"""

from __future__ import annotations

import math

import pytest
import torch

from robustlab.config import ConfigError
from robustlab.metrics import jacobian_fro_sq
from robustlab.models import Flat
from robustlab.models.deep import INITS, ConvNet, DeepMLP, ResNet, VmapEnsemble, init_variance
from robustlab.utils import make_generator


def gens(n: int, salt: str = "t") -> list[torch.Generator]:
    return [make_generator(s, salt) for s in range(n)]


@pytest.mark.parametrize("init,expected", [
    ("lecun", [1 / 30, 1 / 64, 1 / 64]),
    ("he", [2 / 30, 2 / 64, 2 / 64]),
    ("ntk", [2 / 64, 2 / 64, 1.0]),
    ("small", [64**-1.5] * 3),
])
def test_init_variance_table(init, expected):
    d, m, k = 30, 64, 5
    dims = [d, m, m, k]
    got = [init_variance(init, layer=l + 1, n_layers=3, fan_in=dims[l], fan_out=dims[l + 1], width=m, gamma=1.5)
           for l in range(3)]
    assert got == pytest.approx(expected, rel=1e-12)
    model = DeepMLP(d, m, 3, k, init=init, gamma=1.5, generators=gens(1))
    assert model.variances == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("init", INITS)
def test_sampled_variances_match_table(init):
    model = DeepMLP(40, 300, 3, 7, init=init, gamma=1.2, generators=gens(4), dtype=torch.float64)
    for W, var in zip(model.weights, model.variances):
        W = W.detach()
        n = W.numel()
        emp = float(W.pow(2).mean())  # zero-mean entries: E w² = β
        assert abs(emp / var - 1) < 5 * math.sqrt(2 / n), (init, W.shape, emp, var)
        assert abs(float(W.mean())) < 5 * math.sqrt(var / n)


def test_ensemble_member_equals_network_built_alone():
    g_all = gens(3)
    ens = DeepMLP(12, 16, 4, 3, init="he", generators=g_all, dtype=torch.float64)
    alone = DeepMLP(12, 16, 4, 3, init="he", generators=[make_generator(2, "t")], dtype=torch.float64)
    x = torch.randn(3, 5, 12, dtype=torch.float64)
    out = ens(x)
    assert out.shape == (3, 5, 3)
    torch.testing.assert_close(out[2:3], alone(x[2:3]), rtol=0, atol=0)
    torch.testing.assert_close(ens.member(1)(x[1:2]), out[1:2], rtol=0, atol=0)
    sub = ens.eval().members([2, 0])  # a sub-ensemble in the order asked, detached, same mode
    torch.testing.assert_close(sub(x[[2, 0]]), out[[2, 0]], rtol=0, atol=0)
    assert sub.E == 2 and not sub.training and all(not W.requires_grad or W.grad_fn is None for W in sub.weights)
    with torch.no_grad():
        sub.weights[0].zero_()
    torch.testing.assert_close(ens(x), out, rtol=0, atol=0)  # a copy: the ensemble is untouched
    # each copy sees only its own inputs
    x2 = x.clone()
    x2[0] += 1.0
    torch.testing.assert_close(ens(x2)[1:], out[1:], rtol=0, atol=0)


def test_forward_is_the_paper_formula():
    model = DeepMLP(6, 5, 3, 2, init="lecun", generators=gens(1), dtype=torch.float64)
    x = torch.randn(1, 4, 6, dtype=torch.float64)
    W1, W2, W3 = (W[0] for W in model.weights)
    ref = torch.relu(torch.relu(x[0] @ W1) @ W2) @ W3  # f(x) = W3 σ(W2 σ(W1 x)), no biases
    torch.testing.assert_close(model(x)[0], ref)
    assert model.n_params() == 6 * 5 + 5 * 5 + 5 * 2


@pytest.mark.parametrize("kw,field", [
    ({"depth": 1}, "depth"), ({"width": 0}, "width"), ({"init": "xavier"}, "init"),
    ({"init": "small", "gamma": 0.0}, "gamma"), ({"init": "small", "gamma": -1.0}, "gamma"),
    ({"init": "small", "gamma": None}, "gamma"),
])
def test_bad_architecture_is_a_config_error(kw, field):
    args = {"width": 8, "depth": 2, "init": "he", "gamma": 2.0, **kw}
    with pytest.raises(ConfigError) as info:
        DeepMLP(4, args["width"], args["depth"], 2, init=args["init"], gamma=args["gamma"])
    assert info.value.field == field
    with pytest.raises(ConfigError):
        ConvNet(1, args["width"], args["depth"], 2, init=args["init"], gamma=args["gamma"])


def test_wrong_input_shape_is_refused():
    model = DeepMLP(4, 8, 2, 2, generators=gens(2))
    with pytest.raises(ValueError, match="expected input"):
        model(torch.randn(3, 5, 4))
    with pytest.raises(ValueError, match="expected input"):
        model(torch.randn(2, 5, 3))


@pytest.mark.parametrize("init,depth,expected", [
    ("he", 2, lambda k, d: 2 * k),
    ("he", 4, lambda k, d: 2 * k),
    ("lecun", 2, lambda k, d: k / 2),
    ("lecun", 4, lambda k, d: k / 8),
    ("ntk", 2, lambda k, d: k * d),
])
def test_jacobian_norm_at_init_closed_form(init, depth, expected):
    """E_W ‖J_x f‖_F² for a unit input: each ReLU layer halves E‖·‖² (a sign flip of a row
    flips its unit), each weight layer multiplies it by fan·β."""
    d, m, k, E = 16, 256, 3, 48
    model = DeepMLP(d, m, depth, k, init=init, generators=gens(E, init), dtype=torch.float64)
    x = torch.randn(8, d, generator=make_generator(7, "x"), dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    j2 = jacobian_fro_sq(Flat(model, E), x.repeat(E, 1))  # (E·N,)
    want = expected(k, d)
    # per-copy values fluctuate by O(1/√m) and O(1/√k); the mean over E·N is within a few %
    assert float(j2.mean()) == pytest.approx(want, rel=0.08)


@pytest.mark.parametrize("depth,k", [(2, 3), (2, 1), (3, 10), (5, 4)])
def test_closed_form_jacobian_equals_autograd(depth, k):
    """DeepMLP.jacobian_fro_sq (k columns carried back by matmuls) equals autograd's
    batched backward in float64, for a trained-looking (not just initial) network, with
    some units exactly at 0 (both take ReLU's derivative there as 0)."""
    d, m, E, N = 12, 32, 3, 20
    model = DeepMLP(d, m, depth, k, init="he", generators=gens(E, "he"), dtype=torch.float64)
    with torch.no_grad():
        for W in model.weights:
            W.add_(0.3 * torch.randn(W.shape, generator=make_generator(1, "shift"), dtype=torch.float64))
    x = torch.randn(E, N, d, generator=make_generator(2, "x"), dtype=torch.float64)
    x[:, 0] = 0.0  # every unit at exactly 0 for this point
    got = model.jacobian_fro_sq(x)  # (E, N)
    want = jacobian_fro_sq(Flat(model, E), x.reshape(E * N, d)).reshape(E, N)
    assert got.shape == (E, N)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert float(got[:, 0].abs().max()) == 0.0 and float(got[:, 1:].min()) > 0.0


@pytest.mark.parametrize("m,N", [(4, 50), (32, 20)])  # the quadratic form taken, and not
def test_depth2_quadratic_form_equals_autograd(m, N):
    """At depth 2 the Jacobian norm as Dᵀ(W₁ᵀW₁ ∘ W₂W₂ᵀ)D equals autograd's, float64, both
    when jacobian_fro_sq picks it (narrow network, many points) and called directly."""
    from robustlab.models.deep import _depth2_quadratic

    d, k, E = 30, 10, 2
    model = DeepMLP(d, m, 2, k, init="he", generators=gens(E, "he"), dtype=torch.float64)
    x = torch.randn(E, N, d, generator=make_generator(3, "x"), dtype=torch.float64)
    want = jacobian_fro_sq(Flat(model, E), x.reshape(E * N, d)).reshape(E, N)
    torch.testing.assert_close(model.jacobian_fro_sq(x), want, rtol=1e-12, atol=1e-12)
    D = (torch.relu(torch.bmm(x, model.weights[0])) > 0).double()
    torch.testing.assert_close(_depth2_quadratic(model.weights[0], model.weights[1], D), want,
                               rtol=1e-12, atol=1e-12)


def test_lecun_stability_at_init_falls_exponentially_with_depth():
    d, m, k, E = 16, 256, 3, 32
    x = torch.randn(8, d, generator=make_generator(3, "x"), dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    vals = []
    for L in (2, 3, 4, 5):
        model = DeepMLP(d, m, L, k, init="lecun", generators=gens(E, f"L{L}"), dtype=torch.float64)
        vals.append(float(jacobian_fro_sq(Flat(model, E), x.repeat(E, 1)).mean()))
    ratios = [b / a for a, b in zip(vals, vals[1:])]
    assert all(r == pytest.approx(0.5, rel=0.12) for r in ratios), ratios


@pytest.mark.parametrize("cls", [ConvNet, ResNet])
@pytest.mark.parametrize("init", INITS)
def test_conv_and_residual_variants(cls, init):
    nets = [cls(1, 6, 4, 5, init=init, gamma=1.5, generator=make_generator(s, "c")) for s in range(2)]
    x = torch.randn(2, 3, 1, 8, 8)
    for net in nets:
        assert net(x[0]).shape == (3, 5)
    ens = VmapEnsemble(nets)
    out = ens(x)
    assert out.shape == (2, 3, 5)
    torch.testing.assert_close(out[1], nets[1](x[1]), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ens.member(0)(x[:1])[0], nets[0](x[0]), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ens.members([1, 0])(x[[1, 0]]), out[[1, 0]], rtol=1e-6, atol=1e-7)
    assert ens.n_params() == sum(p.numel() for p in nets[0].parameters())
    assert all(w.shape[0] == 2 for w in ens.weights)


def test_conv_variances_follow_the_fan_rule():
    net = ConvNet(3, 64, 3, 10, init="he", generator=make_generator(0, "v"))
    w1 = net.convs[0].weight.detach()
    assert float(w1.pow(2).mean()) == pytest.approx(2 / (3 * 9), rel=0.15)  # He: 2 / (C_in · 3 · 3)
    w2 = net.convs[1].weight.detach()
    assert float(w2.pow(2).mean()) == pytest.approx(2 / (64 * 9), rel=0.05)
    ntk = ConvNet(3, 64, 3, 10, init="ntk", generator=make_generator(0, "v"))
    assert float(ntk.head.weight.detach().pow(2).mean()) == pytest.approx(1.0, rel=0.2)  # output layer: 1


def test_same_seed_same_bits_in_any_dtype():
    a = DeepMLP(5, 7, 3, 2, generators=[make_generator(4, "s")], dtype=torch.float64)
    b = DeepMLP(5, 7, 3, 2, generators=[make_generator(4, "s")], dtype=torch.float32)
    for Wa, Wb in zip(a.weights, b.weights):
        torch.testing.assert_close(Wa.float(), Wb, rtol=0, atol=0)

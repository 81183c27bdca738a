"""The patch CNN and the small CNN: closed forms in float64, ensemble independence, bad input."""

import pytest
import torch

from robustlab.config import ConfigError
from robustlab.models import Flat
from robustlab.models.patch_cnn import PatchCNN, smoothed_relu, smoothed_relu_grad
from robustlab.models.small_cnn import SmallCNN
from robustlab.utils import make_generator

f64 = torch.float64


def test_smoothed_relu_closed_form_and_continuity():
    q, rho = 3.0, 0.7
    z = torch.tensor([-1.0, 0.0, 0.2, rho, 1.5], dtype=f64)
    expect = torch.tensor([0.0, 0.0, 0.2 ** 3 / (3 * rho ** 2), rho / 3, 1.5 - (2 / 3) * rho], dtype=f64)
    assert torch.allclose(smoothed_relu(z, q, rho), expect, atol=1e-15)
    # value and slope continuous at rho
    eps = 1e-7
    left, right = torch.tensor([rho - eps], dtype=f64), torch.tensor([rho + eps], dtype=f64)
    assert abs(float(smoothed_relu(right, q, rho) - smoothed_relu(left, q, rho))) < 3e-7
    assert abs(float(smoothed_relu_grad(left, q, rho)) - 1.0) < 1e-6


def test_smoothed_relu_backward_against_finite_differences():
    # points away from the kinks at 0 and rho (the derivative is continuous there, the second is not)
    z = torch.tensor([-0.7, 0.05, 0.3, 0.49, 0.51, 0.9, 1.7], dtype=f64, requires_grad=True)
    for q, rho in ((3.0, 1.0), (4.0, 0.5), (1.5, 0.2)):
        assert torch.autograd.gradcheck(lambda t, q=q, rho=rho: smoothed_relu(t, q, rho), (z,))
        (g,) = torch.autograd.grad(smoothed_relu(z, q, rho).sum(), z)
        assert torch.allclose(g, smoothed_relu_grad(z.detach(), q, rho), atol=1e-12)
    with torch.no_grad():  # the plain path gives the same values
        assert torch.equal(smoothed_relu(z, 3.0, 1.0), smoothed_relu(z.detach(), 3.0, 1.0))


@pytest.mark.parametrize("act, q, rho", [("smooth_relu", 3.0, 1.0), ("smooth_relu", 2.5, 0.3),
                                         ("smooth_relu", 1.0, 0.5), ("relu", 3.0, 1.0), ("gelu", 3.0, 1.0)])
def test_act_and_grad_in_one_pass_matches_the_closed_forms(act, q, rho):
    model = PatchCNN(1, 2, 3, 4, activation=act, q=q, rho=rho, dtype=f64, generators=[make_generator(0, "w")])
    z = torch.linspace(-2.0, 2.0, 401, dtype=f64)  # includes 0 and (for rho = 1, 0.5) rho exactly
    val, grad, work = z.clone(), torch.empty_like(z), torch.empty_like(z)
    model.act_and_grad_(val, grad, work)
    zg = z.clone().requires_grad_(True)
    (ref_grad,) = torch.autograd.grad(model.act(zg).sum(), zg)
    assert torch.allclose(val, model.act(z), atol=1e-14)
    assert torch.allclose(grad, ref_grad, atol=1e-14)
    if act == "smooth_relu":
        assert torch.allclose(grad, smoothed_relu_grad(z, q, rho), atol=1e-14)


def test_patch_cnn_matches_the_double_sum():
    E, k, m, d, N, P = 2, 3, 4, 5, 6, 7
    model = PatchCNN(E, k, m, d, sigma0=0.5, q=3.0, rho=0.8, dtype=f64,
                     generators=[make_generator(s, "w") for s in range(E)])
    x = torch.randn(E, N, P, d, dtype=f64, generator=make_generator(0, "x"))
    out = model(x)
    assert out.shape == (E, N, k)
    W = model.W.detach()
    ref = torch.zeros(E, N, k, dtype=f64)
    for e in range(E):
        for n in range(N):
            for i in range(k):
                ref[e, n, i] = sum(smoothed_relu(W[e, i, r] @ x[e, n, p], 3.0, 0.8)
                                   for r in range(m) for p in range(P))
    assert torch.allclose(out, ref, atol=1e-12)


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_other_activations(act):
    model = PatchCNN(1, 2, 3, 4, activation=act, sigma0=1.0, dtype=f64,
                     generators=[make_generator(0, "w")])
    x = torch.randn(1, 5, 6, 4, dtype=f64, generator=make_generator(1, "x"))
    pre = torch.einsum("enpd,ekmd->enkmp", x, model.W.detach())
    fn = torch.relu if act == "relu" else torch.nn.functional.gelu
    assert torch.allclose(model(x), fn(pre).sum((-1, -2)), atol=1e-12)
    assert torch.allclose(model.preactivations(x), pre.permute(0, 1, 4, 2, 3), atol=1e-12)


def test_ensemble_members_are_independent_and_flat_adapter():
    gens = lambda seeds: [make_generator(s, "w") for s in seeds]  # noqa: E731
    a = PatchCNN(2, 2, 3, 4, sigma0=0.3, generators=gens([0, 1]))
    b = PatchCNN(2, 2, 3, 4, sigma0=0.3, generators=gens([5, 1]))
    assert torch.equal(a.W[1], b.W[1]) and not torch.equal(a.W[0], b.W[0])
    x = torch.randn(2, 3, 6, 4)
    out = a(x)
    x2 = x.clone()
    x2[0] += 1.0  # changing member 0's input leaves member 1's output alone
    assert torch.equal(a(x2)[1], out[1])
    flat = Flat(a, 2)
    assert torch.allclose(flat(x.reshape(6, 6, 4)).reshape(2, 3, 2), out)
    align = a.feature_alignment(torch.eye(4)[:2].expand(2, 2, 4))  # <w_{i,r}, e_i>
    assert torch.allclose(align, torch.stack([a.W[:, 0, :, 0], a.W[:, 1, :, 1]], 1))


def test_init_scale_and_shape_check():
    model = PatchCNN(3, 2, 50, 40, sigma0=0.05, generators=[make_generator(s, "w") for s in range(3)])
    assert model.W.std().item() == pytest.approx(0.05, rel=0.05)
    with pytest.raises(ValueError):
        model(torch.zeros(2, 1, 3, 40))  # wrong E


@pytest.mark.parametrize("kw, field", [({"q": 0.5}, "q"), ({"rho": 0.0}, "rho"), ({"sigma0": -1.0}, "sigma0"),
                                       ({"activation": "tanh"}, "activation")])
def test_bad_model_arguments(kw, field):
    with pytest.raises(ConfigError) as e:
        PatchCNN(1, 2, 2, 4, **kw)
    assert e.value.field == field


def test_small_cnn_ensemble_equals_separate_models():
    E, N = 3, 4
    gens = [make_generator(s, "cnn") for s in range(E)]
    model = SmallCNN(E, 1, 10, width=4, generators=gens)
    x = torch.rand(E, N, 1, 8, 8, generator=make_generator(0, "img"))
    out = model(x)
    assert out.shape == (E, N, 10)
    for e in range(E):  # a one-member model holding copy e's weights gives copy e's outputs
        single = SmallCNN(1, 1, 10, width=4, generators=[make_generator(e, "cnn")])
        assert torch.allclose(single(x[e:e + 1])[0], out[e], atol=1e-5)
    out28 = SmallCNN(2, 1, 5, width=4)(torch.rand(2, 3, 1, 28, 28))
    assert out28.shape == (2, 3, 5)


@pytest.mark.parametrize("act", ["smooth_relu", "relu", "gelu"])
@pytest.mark.parametrize("loss", ["ce", "margin"])
def test_closed_form_pull_back_equals_autograd_in_attacks(act, loss):
    """PatchCNN.output_and_vjp (through Flat, as attacks see the ensemble) gives the logits and
    the loss's input gradient that autograd gives, in float64, with pre-activations on both
    sides of ρ and exactly at 0."""
    from robustlab.attacks.base import forward_and_grad

    E, N, P, d, k, m = 2, 5, 6, 4, 3, 7
    model = PatchCNN(E, k, m, d, activation=act, q=3.0, rho=0.5, sigma0=0.6, dtype=f64,
                     generators=[make_generator(s, "w") for s in range(E)])
    x = torch.randn(E * N, P, d, generator=make_generator(1, "x"), dtype=f64)
    x[0, 0] = 0.0  # every pre-activation of this patch at exactly 0
    y = torch.randint(0, k, (E * N,), generator=make_generator(2, "y"))
    flat = Flat(model, E)
    from robustlab.attacks.losses import get_loss

    loss = get_loss(loss)
    out, loss_v, g, ok = forward_and_grad(flat, x, y, loss, check=True)

    class NoHook(torch.nn.Module):  # the same model without the hook: the autograd path
        def forward(self, xx):
            return flat(xx)

    out_a, loss_a, g_a, ok_a = forward_and_grad(NoHook(), x, y, loss, check=True)
    torch.testing.assert_close(out, out_a, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(loss_v, loss_a, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g, g_a, rtol=1e-10, atol=1e-12)
    assert torch.equal(ok, ok_a) and g.shape == x.shape and float(g.abs().sum()) > 0

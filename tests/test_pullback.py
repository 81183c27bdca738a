"""The closed-form pull-back of plain nn.Sequential stacks and of forwards that torch.fx traces
to such a chain (models/pullback.py), in float64 against autograd, and the models it must
refuse (autograd then runs instead)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrizations

from robustlab.attacks import FGSM, PGD, Linf
from robustlab.attacks.base import _autograd_forward_and_grad, gradient_fn
from robustlab.attacks.losses import cross_entropy, margin_loss
from robustlab.models.pullback import sequential_pullback, traced_layers


def sequential_output_and_vjp(model, x):
    """The pull-back applied to ``x`` under no_grad, as gradient_fn runs it (None where it is None)."""
    fn = sequential_pullback(model)
    if fn is None:
        return None
    with torch.no_grad():
        pulled = fn(x)
    return None if pulled is None else (pulled[0], torch.no_grad()(pulled[1]))


def _mlp():
    return nn.Sequential(nn.Linear(6, 9), nn.ReLU(), nn.Sequential(nn.Linear(9, 7, bias=False), nn.ReLU(inplace=True)),
                         nn.Dropout(0.5), nn.Identity(), nn.Linear(7, 4))


def _cnn():
    return nn.Sequential(nn.Unflatten(1, (2, 7, 7)), nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(4, 6, 3, stride=2, padding=(1, 0), dilation=(1, 2), bias=False), nn.ReLU(),
                         nn.Conv2d(6, 6, 1, groups=3), nn.Flatten(), nn.Linear(6 * 4 * 2, 5))


def _relu_first():  # the first layer acts on the caller's x: it must not be written
    return nn.Sequential(nn.ReLU(), nn.Flatten(), nn.Linear(8, 3))


def _matches_autograd(model, x):
    """The pull-back's outputs and input gradient against autograd's (float64, to 1e-12);
    returns the vjp, the logit gradient it was checked with and autograd's answer."""
    pulled = sequential_output_and_vjp(model, x)
    assert pulled is not None
    z, vjp = pulled
    dz = torch.randn_like(z)
    xr = x.clone().requires_grad_(True)
    out = model(xr)
    (g_ref,) = torch.autograd.grad(out, xr, dz)
    torch.testing.assert_close(z, out.detach(), rtol=0, atol=1e-12)
    torch.testing.assert_close(vjp(dz), g_ref, rtol=0, atol=1e-12)
    return vjp, dz, g_ref


@pytest.mark.parametrize("make, shape", [(_mlp, (11, 6)), (_cnn, (11, 98)), (_relu_first, (11, 2, 4))])
def test_pullback_matches_autograd_float64(make, shape):
    torch.manual_seed(0)
    model = make().double().eval()
    x = torch.randn(*shape, dtype=torch.float64)
    x0 = x.clone()
    vjp, dz, g_ref = _matches_autograd(model, x)
    assert torch.equal(x, x0)
    # a transposed (non-contiguous) logit gradient, as the closed-form cross-entropy gives it
    torch.testing.assert_close(vjp(dz.t().contiguous().t()), g_ref, rtol=0, atol=1e-12)


def test_pullback_relu_at_exactly_zero_matches_autograd():
    """Pre-activations exactly 0: autograd's ReLU passes no gradient there, and so must we."""
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[1.0, -1.0], [0.0, 0.0], [2.0, 0.0]]))
        model[0].bias.zero_()
    x = torch.tensor([[1.0, 1.0], [0.0, 3.0]], dtype=torch.float64)  # unit 0 at exactly 0 for row 0
    z, vjp = sequential_output_and_vjp(model, x)
    dz = torch.ones_like(z)
    xr = x.clone().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(model(xr), xr, dz)
    assert torch.equal(vjp(dz), g_ref)


class _MyLinear(nn.Linear):
    pass


def _hooked():
    m = nn.Sequential(nn.Linear(4, 3))
    m[0].register_forward_hook(lambda mod, inp, out: out * 2)
    return m


@pytest.mark.parametrize("make", [
    lambda: nn.Linear(4, 3),  # not a Sequential
    lambda: nn.Sequential(nn.Linear(4, 3), nn.Tanh()),  # a layer it does not model
    lambda: nn.Sequential(_MyLinear(4, 3)),  # a subclass may override forward
    _hooked,
    lambda: nn.Sequential(parametrizations.weight_norm(nn.Linear(4, 3))),
    lambda: nn.Sequential(nn.Linear(4, 3), nn.Dropout(0.5)).train(),  # dropout in training mode
    lambda: nn.Sequential(nn.Unflatten(1, (1, 2, 2)), nn.Conv2d(1, 2, 3, padding="same")),
    lambda: nn.Sequential(nn.Unflatten(1, (1, 2, 2)), nn.Conv2d(1, 2, 3, padding=1, padding_mode="reflect")),
    lambda: nn.Sequential(),
])
def test_pullback_refuses_what_it_does_not_model(make):
    assert sequential_pullback(make()) is None


def test_pullback_refuses_global_hooks_and_unbatched_convolutions():
    handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, inp, out: None)
    try:
        assert sequential_pullback(nn.Sequential(nn.Linear(4, 3))) is None
    finally:
        handle.remove()
    assert sequential_pullback(nn.Sequential(nn.Linear(4, 3))) is not None
    conv = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Flatten(0), nn.Unflatten(0, (1, 32)))
    assert sequential_pullback(conv)(torch.randn(1, 4, 4)) is None  # (C, H, W): autograd instead


@pytest.mark.parametrize("loss_fn", [cross_entropy, margin_loss])
@pytest.mark.parametrize("make, shape", [(_mlp, (13, 6)), (_cnn, (13, 98))])
def test_gradient_fn_closed_form_route_equals_autograd_route(loss_fn, make, shape):
    torch.manual_seed(1)
    model = make().double().eval()
    x = torch.rand(*shape, dtype=torch.float64)
    y = torch.randint(0, 5 if make is _cnn else 4, (shape[0],))
    z, loss, g, ok = gradient_fn(model, loss_fn)(x, y, check=True)
    z2, loss2, g2, ok2 = _autograd_forward_and_grad(model, x, y, loss_fn, check=True)
    for a, b in ((z, z2), (loss, loss2), (g, g2)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert torch.equal(ok, ok2)


class _Wrapped(nn.Module):
    """The same network behind a custom forward that torch.fx cannot trace (a branch on the
    input): attacks take the autograd route."""

    def __init__(self, seq: nn.Module):
        super().__init__()
        self.seq = seq

    def forward(self, x):
        if x.dim() < 2:
            raise ValueError("a batch, please")
        return self.seq(x)


@pytest.mark.parametrize("attack", [
    PGD(Linf(0.1), steps=7, step_size=0.03, random_start=False),
    PGD(Linf(0.1), steps=5, step_size=0.03, random_start=True, restarts=3),
    PGD(Linf(0.1), steps=5, step_size=0.03, loss="margin", early_stop=True, random_start=False),
    FGSM(Linf(0.1)),
])
def test_attacks_give_the_same_points_by_either_route(attack):
    torch.manual_seed(2)
    seq = _cnn().double().eval()
    x = torch.rand(17, 98, dtype=torch.float64)
    y = torch.randint(0, 5, (17,))
    a = attack(seq, x, y, generator=torch.Generator().manual_seed(0))
    b = attack(_Wrapped(seq), x, y, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_class_major_logits_predict_like_argmax():
    """The closed-form losses read a class-major (k, N) tensor seen as (N, k) with ``max`` along
    the contiguous axis; it must pick the same class as ``argmax`` on ties, infinities and NaN."""
    from robustlab.attacks.losses import _predicted

    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        k = int(torch.randint(2, 7, (1,), generator=g))
        z = torch.randint(-2, 3, (50, k), generator=g).double()  # many ties
        z[torch.rand(50, k, generator=g) < 0.05] = float("nan")
        z[torch.rand(50, k, generator=g) < 0.05] = float("inf")
        want = z.argmax(1)
        assert torch.equal(_predicted(z), want)
        assert torch.equal(_predicted(z.t().contiguous().t()), want)


def test_last_linear_layer_gives_class_major_logits():
    model = _mlp().double().eval()
    z, _ = sequential_output_and_vjp(model, torch.randn(5, 6, dtype=torch.float64))
    assert z.shape == (5, 4) and z.t().is_contiguous()


def test_binary_sequential_falls_back_to_autograd_once(monkeypatch):
    """A binary model's scores have no closed-form loss gradient here: the first call finds
    that out and the later ones go straight to autograd (no forward pass thrown away)."""
    import robustlab.attacks.base as base

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).double()
    x = torch.randn(6, 4, dtype=torch.float64)
    y = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0], dtype=torch.float64)
    calls = []
    real = base.sequential_pullback(model)
    monkeypatch.setattr(base, "sequential_pullback", lambda m: (lambda xx: calls.append(1) or real(xx)))
    fn = base.gradient_fn(model, cross_entropy)
    for _ in range(3):
        z, loss, g, ok = fn(x, y)
    assert len(calls) == 1
    z2, loss2, g2, ok2 = _autograd_forward_and_grad(model, x, y, cross_entropy, False)
    torch.testing.assert_close(g, g2, rtol=0, atol=1e-12)


# --- custom forwards that torch.fx traces to a chain ---------------------------------------

class _Net(nn.Module):
    """Layers as attributes, with the functional spellings of ReLU and flatten in forward."""

    def __init__(self, style: int):
        super().__init__()
        self.style = style
        self.conv1, self.conv2 = nn.Conv2d(2, 4, 3, padding=1), nn.Conv2d(4, 6, 3, stride=2, padding=1)
        self.head = nn.Sequential(nn.Linear(6 * 4 * 4, 9), nn.ReLU(), nn.Linear(9, 5))
        self.unflat = nn.Unflatten(1, (2, 7, 7))

    def forward(self, x):
        h = self.conv1(self.unflat(x))
        if self.style == 0:
            h = self.conv2(F.relu(h)).relu()
            h = torch.flatten(h, 1)
        else:
            h = torch.relu(self.conv2(F.relu(h, inplace=True)))
            h = h.flatten(start_dim=1)
        return self.head(h)


class _Seq(nn.Module):  # a forward that only calls a Sequential (a common wrapper)
    def __init__(self, seq):
        super().__init__()
        self.seq = seq

    def forward(self, x):
        return self.seq(x)


@pytest.mark.parametrize("make", [lambda: _Net(0), lambda: _Net(1), lambda: _Seq(_cnn()), lambda: _Seq(_mlp())])
def test_traced_forward_pulls_back_like_autograd_float64(make):
    torch.manual_seed(3)
    model = make().double().eval()
    d = 6 if isinstance(model, _Seq) and isinstance(model.seq[0], nn.Linear) else 98
    x = torch.randn(9, d, dtype=torch.float64)
    assert traced_layers(model) is not None
    _matches_autograd(model, x)
    # the whole gradient route, against autograd's
    y = torch.randint(0, 4, (9,))
    for loss_fn in (cross_entropy, margin_loss):
        got = gradient_fn(model, loss_fn)(x, y, check=True)
        want = _autograd_forward_and_grad(model, x, y, loss_fn, check=True)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


class _Fwd(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 3)
        self.register_buffer("w", torch.ones(4, 3))
        self.fn = fn

    def forward(self, x):
        return self.fn(self, x)


@pytest.mark.parametrize("fn", [
    lambda s, x: s.b(torch.tanh(s.a(x))),  # a function it does not model
    lambda s, x: s.b(s.a(x) + x),  # a residual: x used twice
    lambda s, x: s.b(s.a(x)) * 2,  # a scale after the chain
    lambda s, x: s.b(s.a(x) if x.sum() > 0 else x),  # a branch on the input
    lambda s, x: s.a(x) @ s.w,  # a buffer
    lambda s, x: (s.b(s.a(x)), x),  # more than one output
    lambda s, x: s.b(F.relu(s.a(x))).log_softmax(1),  # a method it does not model
    lambda s, x: s.b(s.a(x).flatten(1, x.dim() - 1)),  # a flatten over an input-dependent axis
])
def test_traced_forward_refuses_what_it_does_not_model(fn):
    model = _Fwd(fn).eval()
    assert traced_layers(model) is None and sequential_pullback(model) is None
    x, y = torch.rand(5, 4), torch.tensor([0, 1, 2, 0, 1])
    if isinstance(model(x), torch.Tensor):  # autograd attacks it, as before
        a = PGD(Linf(0.1), steps=3, step_size=0.05, random_start=False)(model, x, y)
        assert a.shape == x.shape


def test_traced_forward_follows_the_module_as_it_changes():
    """The trace is cached per module, but its layers are read at every call: a replaced
    submodule is seen, and a forward set on the instance is refused."""
    model = _Fwd(lambda s, x: s.b(F.relu(s.a(x)))).eval()
    assert [type(m) for m in traced_layers(model)] == [nn.Linear, nn.ReLU, nn.Linear]
    model.a = nn.Sequential(nn.Linear(4, 4), nn.ReLU())  # a Sequential is flattened
    assert [type(m) for m in traced_layers(model)] == [nn.Linear, nn.ReLU, nn.ReLU, nn.Linear]
    model.b = nn.Tanh()
    assert traced_layers(model) is None
    model.b = nn.Linear(4, 3)
    model.b.register_forward_hook(lambda mod, inp, out: out * 2)  # a hook: not a plain layer
    assert traced_layers(model) is None
    model.b = nn.Linear(4, 3)
    assert traced_layers(model) is not None
    model.forward = lambda x: model.b(F.relu(model.a(x)))  # set on the instance: fx would trace
    assert traced_layers(model) is None  # the class's forward instead, so it is refused


def test_gradient_fn_checks_a_traced_chain_against_the_model():
    """A forward whose Python state changed after it was traced (the cached chain no longer
    describes it) is caught by the first call's comparison, and autograd runs instead."""
    torch.manual_seed(4)

    def fwd(s, x):
        out = s.b(F.relu(s.a(x)))
        return out * 3.0 if s.scaled else out  # a branch on the module's state, not on x

    model = _Fwd(fwd).double().eval()
    model.scaled = False
    assert traced_layers(model) is not None  # traced (and cached) while scaled is False
    model.scaled = True
    assert traced_layers(model) is not None  # the cache does not see the flag...
    x, y = torch.randn(7, 4, dtype=torch.float64), torch.randint(0, 3, (7,))
    got = gradient_fn(model, cross_entropy)(x, y)  # ...the first call's comparison does
    want = _autograd_forward_and_grad(model, x, y, cross_entropy, False)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    # an attack on it equals one on the same function written so that it never traces
    twin = _Fwd(lambda s, t: s.b(F.relu(s.a(t))) * 3.0).double().eval()
    twin.load_state_dict(model.state_dict())
    assert traced_layers(twin) is None
    a = PGD(Linf(0.2), steps=5, step_size=0.05, random_start=False)(model, x, y, bounds=None)
    b = PGD(Linf(0.2), steps=5, step_size=0.05, random_start=False)(twin, x, y, bounds=None)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)

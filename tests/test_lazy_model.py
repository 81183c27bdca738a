"""The two-layer lazy model, its ball helpers and the sphere-teacher data (lazy training, NeurIPS 2022)."""

from __future__ import annotations

import math

import pytest
import torch

from robustlab.attacks import min_flip_along_gradient
from robustlab.data import sphere_teacher
from robustlab.models import Flat, TwoLayerReLU, fold, neuron_offsets, outside_ball, project_to_ball
from robustlab.utils import make_generator


def _model(E=2, m=7, d=5, bias=True, dtype=torch.float64, seed=0):
    gens = [make_generator(seed + e, "t") for e in range(E)]
    return TwoLayerReLU.init(gens, m=m, d=d, bias=bias, dtype=dtype)


@pytest.mark.parametrize("bias", [True, False])
def test_forward_matches_the_formula(bias):
    model = _model(bias=bias)
    x = torch.randn(2, 4, 5, dtype=torch.float64, generator=make_generator(1))
    out = model(x).detach()
    assert out.shape == (2, 4)
    for e in range(2):
        for n in range(4):
            s = 0.0
            for j in range(model.m):
                pre = float(model.weight[e, j].detach() @ x[e, n]) + (float(model.bias[e, j].detach()) if bias else 0.0)
                s += float(model.top[e, j]) * max(pre, 0.0)
            s = s / math.sqrt(model.m) + float(model.top_bias[e])
            assert out[e, n].item() == pytest.approx(s, rel=1e-12, abs=1e-12)
    if not bias:
        assert torch.all(model.top_bias == 0)
    else:
        assert torch.allclose(model.top_bias.abs(), torch.full((2,), 1 / math.sqrt(model.m), dtype=torch.float64))
    assert set(model.top.unique().tolist()) <= {-1.0, 1.0}


def test_closed_form_input_gradient_matches_autograd():
    model = _model(E=3, m=11, d=6)
    x = torch.randn(3, 9, 6, dtype=torch.float64, generator=make_generator(2)).requires_grad_(True)
    (g,) = torch.autograd.grad(model(x).sum(), x)
    assert torch.allclose(model.input_grad(x.detach()), g, atol=1e-12)


def test_each_copy_depends_only_on_its_own_seed():
    a = TwoLayerReLU.init([make_generator(5, "t"), make_generator(9, "t")], m=4, d=3)
    b = TwoLayerReLU.init([make_generator(9, "t")], m=4, d=3)
    assert torch.equal(a.weight[1], b.weight[0]) and torch.equal(a.top[1], b.top[0])
    assert torch.equal(a.bias[1], b.bias[0]) and torch.equal(a.top_bias[1], b.top_bias[0])
    assert not torch.equal(a.weight[0], a.weight[1])


def test_init_scale_multiplies_the_trained_layer_and_draws_the_same_numbers():
    """The rich-regime control: w_s and b_s scaled (their ball anchors too), a_s and c untouched,
    so ‖∇ₓf₀‖ scales by the same factor on bias-free inputs."""
    g = lambda: [make_generator(7, "t")]  # noqa: E731
    a = TwoLayerReLU.init(g(), m=6, d=5, dtype=torch.float64)
    b = TwoLayerReLU.init(g(), m=6, d=5, scale=0.01, dtype=torch.float64)
    assert torch.allclose(b.weight, 0.01 * a.weight) and torch.allclose(b.bias, 0.01 * a.bias)
    assert torch.equal(b.weight0, b.weight.detach()) and torch.allclose(b.bias0, 0.01 * a.bias0)
    assert torch.equal(a.top, b.top) and torch.equal(a.top_bias, b.top_bias)
    c = TwoLayerReLU.init(g(), m=6, d=5, bias=False, dtype=torch.float64)
    e = TwoLayerReLU.init(g(), m=6, d=5, bias=False, scale=0.01, dtype=torch.float64)
    x = torch.randn(1, 3, 5, dtype=torch.float64, generator=make_generator(1))
    assert torch.allclose(e.input_grad(x), 0.01 * c.input_grad(x))
    with pytest.raises(ValueError):
        TwoLayerReLU.init(g(), m=6, d=5, scale=0.0)


def test_wrong_input_shape_is_refused():
    model = _model(E=2, d=5)
    with pytest.raises(ValueError):
        model(torch.zeros(3, 4, 5, dtype=torch.float64))
    with pytest.raises(ValueError):
        model(torch.zeros(2, 4, 6, dtype=torch.float64))


def test_gradient_norm_at_init_is_sqrt_half_d_on_the_sphere():
    """lazy training, NeurIPS 2022, §3: at init on the unit sphere, E‖∇ₓf‖² = d/2 (no bias; half the neurons on)."""
    d, m = 40, 20000
    model = TwoLayerReLU.init([make_generator(3)], m=m, d=d, bias=False, dtype=torch.float64)
    x = torch.randn(1, 64, d, dtype=torch.float64, generator=make_generator(4))
    x = x / x.norm(dim=-1, keepdim=True)
    sq = model.input_grad(x).pow(2).sum(-1)  # (1, 64)
    # per point: (1/m) Σ_s 1_s ‖w_s‖² + cross terms of mean 0 -> d/2 within a few percent
    assert sq.mean().item() == pytest.approx(d / 2, rel=0.05)


def test_projection_onto_the_ball():
    model = _model(E=2, m=6, d=4)
    with torch.no_grad():
        model.weight.add_(torch.randn(model.weight.shape, dtype=torch.float64, generator=make_generator(7)))
        model.bias.add_(torch.randn(model.bias.shape, dtype=torch.float64, generator=make_generator(8)))
    before = neuron_offsets(model).clone()
    w_before = model.weight.detach().clone()
    r = torch.tensor([0.5, 100.0], dtype=torch.float64)  # one radius per copy
    assert outside_ball(model, r).tolist() == [True, False]
    project_to_ball(model, r)
    after = neuron_offsets(model)
    assert torch.all(after[0] <= 0.5 + 1e-12)
    assert torch.allclose(after[0], before[0].clamp(max=0.5))
    assert torch.equal(model.weight[1], w_before[1])  # inside: untouched
    # the projection keeps the direction of the offset
    dw = model.weight[0] - model.weight0[0]
    dw0 = w_before[0] - model.weight0[0]
    cos = torch.nn.functional.cosine_similarity(dw, dw0, dim=-1)
    assert torch.allclose(cos, torch.ones_like(cos))
    assert not outside_ball(model, r).any()


@pytest.mark.parametrize("bias", [False, True])
def test_projection_bits_equal_the_formula_on_the_training_layout(bias):
    """Training holds the weight transposed in memory; the projection must give, bit for
    bit, ``θ(0) + (θ − θ(0)) · min(1, r / ‖θ − θ(0)‖)`` with the offsets of neuron_offsets."""
    E, m, d = 3, 16, 40
    g = make_generator(11)
    w0 = torch.randn(E, m, d, generator=g)
    w = (w0 + 0.3 * torch.randn(E, m, d, generator=g)).transpose(1, 2).contiguous().transpose(1, 2)
    b0 = torch.randn(E, m, generator=g) if bias else None
    model = TwoLayerReLU(w0, torch.ones(E, m), bias=b0)
    with torch.no_grad():
        model.weight.set_(w)  # the transposed layout, as the training loops hold it
        if bias:
            model.bias.add_(0.2 * torch.randn(E, m, generator=g))
    r = torch.tensor([0.5, 1.0, 50.0])
    dist = neuron_offsets(model)
    scale = (r[:, None] / dist.clamp_min(torch.finfo(dist.dtype).tiny)).clamp(max=1.0)
    want_w = model.weight0 + (model.weight.detach() - model.weight0) * scale[..., None]
    want_b = model.bias0 + (model.bias.detach() - model.bias0) * scale if bias else None
    assert not model.weight.is_contiguous()
    project_to_ball(model, r)
    assert torch.equal(model.weight, want_w)
    if bias:
        assert torch.equal(model.bias, want_b)


@pytest.mark.parametrize("bias", [True, False])
def test_scores_along_is_the_forward_on_the_line(bias):
    """``scores_along`` (also through Flat) gives ``f(x + t u)`` for every point and step, in
    passes small enough for its budget."""
    import robustlab.models.two_layer as tl

    model = _model(E=3, m=9, d=6, bias=bias)
    x = torch.randn(3, 5, 6, dtype=torch.float64, generator=make_generator(2))
    u = torch.randn(3, 5, 6, dtype=torch.float64, generator=make_generator(3))
    t = torch.rand(3, 5, 4, dtype=torch.float64, generator=make_generator(4)) * 3
    with torch.no_grad():
        want = torch.stack([model(x + t[:, :, j, None] * u) for j in range(4)], 2)
        budget = tl.LINE_BUDGET
        try:
            for tl.LINE_BUDGET in (budget, 3 * 5 * 9):  # all steps in one pass; one step per pass
                assert torch.allclose(model.scores_along(x, u)(t), want, rtol=0, atol=1e-12)
        finally:
            tl.LINE_BUDGET = budget
        flat = Flat(model, 3).scores_along(fold(x), fold(u))(fold(t))
    assert torch.allclose(flat, fold(want), rtol=0, atol=1e-12)


def test_scores_along_steps_aside_for_an_override_or_a_hook():
    class Shifted(TwoLayerReLU):
        def forward(self, x):
            return super().forward(x) + 1.0

    model = _model()
    x = torch.zeros(2, 3, 5, dtype=torch.float64)
    assert Shifted(model.weight.detach(), model.top, model.bias.detach(), model.top_bias).scores_along(x, x) is None
    model.register_forward_hook(lambda mod, inp, out: out * 2)
    assert model.scores_along(x, x) is None
    assert Flat(_model(), 2).scores_along(fold(x), fold(x)) is not None
    handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, inp, out: out)
    try:  # a global hook may change any module's outputs
        assert Flat(_model(), 2).scores_along(fold(x), fold(x)) is None
    finally:
        handle.remove()
    hooked = Flat(_model(), 2)
    hooked.register_forward_pre_hook(lambda mod, inp: inp)
    assert hooked.scores_along(fold(x), fold(x)) is None


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_min_flip_on_the_line_agrees_with_the_forward_passes(dtype):
    """The line search in closed form finds the crossings the model's own forward passes find:
    the same points flip, each ‖δ‖ within the search's tolerance (both land within it of the
    first crossing; the first bracket sits on the linear guess, where f is 0 up to rounding
    whenever no ReLU switches on the way, so the two may take different cells)."""
    import robustlab.attacks.min_flip as mf

    E, N, tol = 3, 40, 1e-4
    model = _model(E=E, m=48, d=16, dtype=dtype).eval()
    x = torch.nn.functional.normalize(torch.randn(E * N, 16, dtype=dtype, generator=make_generator(5)), dim=1)
    flat = Flat(model, E)
    with torch.no_grad():
        y = torch.sign(flat(x))
    y[::4] *= -1  # some misclassified points (NaN in both)
    fast = min_flip_along_gradient(flat, x, y, tol=tol)
    assert mf._line(flat, x, x, flat(x).detach()) is not None  # the closed form was taken
    line = mf._line
    try:
        mf._line = lambda *args: None
        slow = min_flip_along_gradient(flat, x, y, tol=tol)
    finally:
        mf._line = line
    assert torch.equal(fast.flipped, slow.flipped) and torch.equal(fast.correct, slow.correct)
    assert torch.equal(fast.delta_norm.isnan(), slow.delta_norm.isnan())
    ok = ~fast.delta_norm.isnan()
    assert int(ok.sum()) > E * N // 2
    assert ((fast.delta_norm - slow.delta_norm)[ok].abs() <= tol).all()
    assert torch.equal(fast.grad_norm.isnan(), slow.grad_norm.isnan())


def test_min_flip_takes_the_forward_passes_when_the_line_disagrees():
    """A closed form that disagrees with the model at t = 0 is not used."""
    import robustlab.attacks.min_flip as mf

    model = _model(E=1, m=20, d=6).eval()
    x = torch.nn.functional.normalize(torch.randn(8, 6, dtype=torch.float64, generator=make_generator(6)), dim=1)
    flat = Flat(model, 1)
    f = flat(x).detach()
    assert mf._line(flat, x, x, f) is not None
    assert mf._line(flat, x, x, f + 0.5) is None


def test_flat_adapter_gives_exact_per_copy_min_flips():
    """Attacks see the ensemble through Flat: results equal those of each copy alone."""
    model = _model(E=2, m=30, d=8, bias=False)
    x = torch.rand(10, 8, dtype=torch.float64, generator=make_generator(11))
    with torch.no_grad():
        y = torch.sign(model(x.expand(2, -1, -1))[0])
    res = min_flip_along_gradient(Flat(model, 2), fold(x.expand(2, -1, -1)), y.repeat(2), tol=1e-8)
    single = TwoLayerReLU(model.weight[1:].detach(), model.top[1:], None, None)
    res1 = min_flip_along_gradient(Flat(single, 1), x, y, tol=1e-8)
    # copy 0 is correct everywhere (labels are its own signs)
    assert torch.isfinite(res.delta_norm[:10]).all()
    a, b = res.delta_norm[10:], res1.delta_norm
    assert torch.equal(torch.isnan(a), torch.isnan(b))
    assert torch.allclose(a[~torch.isnan(a)], b[~torch.isnan(b)], atol=1e-7)
    # copy 0: f has flipped at the reported ‖δ‖ along −sign(f)∇f/‖∇f‖, not 1e-6 before it
    with torch.no_grad():
        f = model(x.expand(2, -1, -1))[0]
        g = model.input_grad(x.expand(2, -1, -1))[0]
        u = -torch.sign(f)[:, None] * g / g.norm(dim=-1, keepdim=True)
        t = res.delta_norm[:10, None]
        after = model((x + t * u).expand(2, -1, -1))[0]
        before = model((x + (t - 1e-6) * u).expand(2, -1, -1))[0]
    assert torch.all(after * f <= 0) and torch.all(before * f > 0)
    assert torch.allclose(res.eta[:10], res.delta_norm[:10] / g.norm(dim=-1))


# ---------------------------------------------------------------------------------------
# sphere-teacher data

def test_sphere_teacher_points_and_labels():
    s = sphere_teacher(30, n_train=400, n_test=200, seed=1)
    assert s.x_train.shape == (400, 30) and s.x_test.shape == (200, 30)
    assert torch.allclose(s.x_train.norm(dim=1), torch.ones(400), atol=1e-6)
    assert set(s.y_train.unique().tolist()) == {-1.0, 1.0}
    assert abs(s.y_train.mean().item()) < 0.2  # balanced in expectation
    again = sphere_teacher(30, n_train=400, n_test=200, seed=1)
    assert torch.equal(s.x_train, again.x_train) and torch.equal(s.y_test, again.y_test)
    other = sphere_teacher(30, n_train=400, n_test=200, seed=2)
    assert not torch.equal(s.x_train, other.x_train)


def test_sphere_teacher_margin_separates_classes():
    """With a margin, no point lies within margin·std of the teacher's decision boundary."""
    from robustlab.data.sphere import _unit

    plain = sphere_teacher(10, n_train=300, n_test=10, teacher_width=2, seed=3, dtype=torch.float64)
    wide = sphere_teacher(10, n_train=300, n_test=10, teacher_width=2, margin=0.5, seed=3, dtype=torch.float64)
    g = make_generator(3, "sphere-teacher", 10, 2)
    u = _unit(2, 10, g)
    a = torch.tensor([1.0, -1.0], dtype=torch.float64)

    def teacher(x):
        return torch.relu(x @ u.T) @ a

    scale = teacher(_unit(4096, 10, g)).std()
    assert teacher(wide.x_train).abs().min() >= 0.5 * scale
    assert teacher(plain.x_train).abs().min() < 0.5 * scale
    assert torch.equal(torch.sign(teacher(wide.x_train)), wide.y_train)


def test_sphere_teacher_rejects_bad_arguments():
    with pytest.raises(ValueError):
        sphere_teacher(1)
    with pytest.raises(ValueError):
        sphere_teacher(5, teacher_width=0)
    with pytest.raises(ValueError):
        sphere_teacher(5, margin=-1)

"""Invariants of every attack (property-based), closed forms in float64, and the mechanics
the base class promises (eval mode, frozen parameters, no mutation, bounds, warnings)."""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from robustlab.attacks import (
    FGSM,
    L2,
    PGD,
    Attack,
    EvaluationWarning,
    FeatureDirection,
    GradientStep,
    Linf,
    correct,
    get_loss,
    min_flip_along_gradient,
    per_sample_norm,
    reset_warnings,
    uniform_ball_l2,
)
from robustlab.config import ConfigError

KINDS = ["fgsm", "step", "pgd", "pgd_restarts", "pgd_early"]


def make_attack(kind: str, threat) -> Attack:
    eps = threat.eps
    if kind == "fgsm":
        return FGSM(threat)
    if kind == "step":
        return GradientStep(threat, step=3.0)
    if kind == "pgd":
        return PGD(threat, steps=4, step_size=max(eps, 1e-3) / 3, random_start=False)
    if kind == "pgd_early":
        return PGD(threat, steps=4, step_size=max(eps, 1e-3) / 3, early_stop=True, random_start=False)
    return PGD(threat, steps=3, step_size=max(eps, 1e-3) / 3, random_start=True, restarts=3)


def small_model(seed: int, d: int, k: int) -> nn.Module:
    """A random smooth MLP in float64; ``k = 1`` gives a binary scalar model."""
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(d, 7), nn.Tanh(), nn.Linear(7, k)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
    if k == 1:
        return nn.Sequential(model, nn.Flatten(0))  # (N, 1) -> (N,)
    return model


def make_labels(g: torch.Generator, n: int, k: int) -> torch.Tensor:
    if k == 1:
        return torch.randint(0, 2, (n,), generator=g).double() * 2 - 1
    return torch.randint(0, k, (n,), generator=g)


case = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(KINDS),
        "norm": st.sampled_from(["linf", "l2"]),
        "box": st.booleans(),
        "eps": st.one_of(st.just(0.0), st.floats(1e-3, 2.0)),
        "n": st.integers(1, 5),
        "d": st.integers(1, 6),
        "k": st.sampled_from([1, 2, 4]),
        "seed": st.integers(0, 2**31 - 1),
        "patch": st.booleans(),
    }
)


def build(c):
    g = torch.Generator().manual_seed(c["seed"])
    shape = (c["n"], 2, c["d"]) if c["patch"] else (c["n"], c["d"])
    body = small_model(c["seed"], math.prod(shape[1:]), c["k"])
    model = nn.Sequential(nn.Flatten(), body) if c["patch"] else body
    x = torch.rand(shape, generator=g, dtype=torch.float64)
    if not c["box"]:
        x = 3 * (x - 0.5)
    y = make_labels(g, c["n"], c["k"])
    threat = (Linf if c["norm"] == "linf" else L2)(c["eps"])
    bounds = (0.0, 1.0) if c["box"] else None
    return model, x, y, threat, bounds


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case)
def test_attack_invariants(c):
    model, x, y, threat, bounds = build(c)
    attack = make_attack(c["kind"], threat)
    x0, y0 = x.clone(), y.clone()
    params0 = [p.detach().clone() for p in model.parameters()]
    model.train()
    gen = torch.Generator().manual_seed(1)
    x_adv = attack(model, x, y, bounds=bounds, generator=gen)

    assert x_adv.shape == x.shape and x_adv.dtype == x.dtype
    # inside the ball (to 1e-6 relative) and the box
    assert bool((threat.norm(x_adv - x) <= threat.eps * (1 + 1e-6) + 1e-12).all())
    if bounds is not None:
        assert bool(((x_adv >= 0) & (x_adv <= 1)).all())
    if threat.eps == 0:
        assert torch.equal(x_adv, x)
    # nothing mutated; mode and requires_grad restored; no parameter gradients
    assert torch.equal(x, x0) and torch.equal(y, y0)
    assert model.training
    for p, p0 in zip(model.parameters(), params0):
        assert torch.equal(p, p0) and p.requires_grad and p.grad is None
    # same seed, same output
    again = attack(model, x, y, bounds=bounds, generator=torch.Generator().manual_seed(1))
    assert torch.equal(again, x_adv)
    # a batch equals its samples attacked one by one (deterministic attacks)
    if c["kind"] != "pgd_restarts":
        ones = torch.cat([attack(model, x[i : i + 1], y[i : i + 1], bounds=bounds) for i in range(len(x))])
        torch.testing.assert_close(ones, x_adv, rtol=0, atol=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case)
def test_attack_invariants_float32(c):
    """In float32 the ball holds up to the rounding of x + δ: ε·1e-6 plus one ulp of |x|."""
    model, x, y, threat, bounds = build(c)
    model, x = model.float(), x.float()
    y = y.float() if y.is_floating_point() else y
    x_adv = make_attack(c["kind"], threat)(model, x, y, bounds=bounds, generator=torch.Generator().manual_seed(0))
    assert x_adv.dtype == torch.float32
    ulp = torch.finfo(torch.float32).eps * float(x.abs().max())
    assert bool((threat.norm(x_adv - x) <= threat.eps * (1 + 1e-6) + 2 * ulp * (1 if threat.p == math.inf else x[0].numel() ** 0.5)).all())
    if bounds is not None:
        assert bool(((x_adv >= 0) & (x_adv <= 1)).all())
    if threat.eps == 0:
        assert torch.equal(x_adv, x)


def test_restarts_never_weaker_than_first_restart():
    """With random starts a batch and single points draw different noise, so instead: the
    per-sample worst case over R restarts is never weaker than restart 1 alone (on CPU the
    uniform draws of restart 1 are a prefix of the larger draw)."""
    model, x, y, _, _ = build(dict(n=6, d=5, k=3, seed=3, box=True, patch=False, eps=0.3, norm="linf", kind="pgd"))
    one = PGD(Linf(0.3), steps=5, step_size=0.1, random_start=True, restarts=1)
    many = PGD(Linf(0.3), steps=5, step_size=0.1, random_start=True, restarts=4)
    for s in range(5):
        a1 = one(model, x, y, generator=torch.Generator().manual_seed(s))
        aR = many(model, x, y, generator=torch.Generator().manual_seed(s))
        assert bool((_key(model, aR, y) >= _key(model, a1, y) - 1e-12).all())


def _key(model, x_adv, y):
    with torch.no_grad():
        out = model(x_adv)
        return (~correct(out, y)).double() * 1e6 + get_loss("ce")(out, y)


@pytest.mark.parametrize("threat", [Linf(0.2), L2(0.5)])
def test_pgd_keeps_worst_iterate(threat):
    """Iterates of a longer run extend a shorter run; the kept worst case never gets better
    for the model with more steps, even with an oscillating (too large) step size."""
    model, x, y, _, _ = build(dict(n=8, d=6, k=4, seed=11, box=True, patch=False, eps=0.2, norm="linf", kind="pgd"))
    prev = None
    for steps in (1, 2, 5, 10):
        x_adv = PGD(threat, steps=steps, step_size=threat.eps * 1.5, random_start=False)(model, x, y)
        k = _key(model, x_adv, y)
        if prev is not None:
            assert bool((k >= prev - 1e-12).all())
        prev = k


# --- closed forms (float64) ---------------------------------------------------------


def linear_binary(d: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lin = nn.Linear(d, 1).double()
    with torch.no_grad():
        lin.weight.copy_(torch.randn(1, d, generator=g, dtype=torch.float64))
        lin.bias.fill_(0.3)
    x = torch.randn(20, d, generator=g, dtype=torch.float64)
    model = nn.Sequential(lin, nn.Flatten(0))
    y = torch.sign(model(x)).detach()
    return model, lin.weight.detach()[0], x, y


@pytest.mark.parametrize("loss", ["ce", "logistic", "margin"])
@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_fgsm_linear_margin_drop(norm, loss):
    model, w, x, y = linear_binary(10)
    eps = 0.37
    threat = Linf(eps) if norm == "linf" else L2(eps)
    x_adv = FGSM(threat, loss=loss)(model, x, y, bounds=None)
    with torch.no_grad():
        drop = y * model(x) - y * model(x_adv)
    expected = eps * (w.abs().sum() if norm == "linf" else w.norm())
    torch.testing.assert_close(drop, expected.expand_as(drop), rtol=1e-12, atol=1e-12)


def test_fgsm_linear_multiclass_margin_drop():
    """k = 2 logits z = W x: the margin z_y - z_other falls by ε‖w_y − w_other‖₁."""
    g = torch.Generator().manual_seed(5)
    lin = nn.Linear(6, 2, bias=False).double()
    with torch.no_grad():
        lin.weight.copy_(torch.randn(2, 6, generator=g, dtype=torch.float64))
    x = torch.randn(15, 6, generator=g, dtype=torch.float64)
    y = lin(x).argmax(1).detach()
    x_adv = FGSM(Linf(0.1))(lin, x, y, bounds=None)
    W = lin.weight.detach()
    diff = (W[y] - W[1 - y]).abs().sum(1)
    with torch.no_grad():
        m0 = (lin(x).gather(1, y[:, None]) - lin(x).gather(1, 1 - y[:, None])).squeeze(1)
        m1 = (lin(x_adv).gather(1, y[:, None]) - lin(x_adv).gather(1, 1 - y[:, None])).squeeze(1)
    torch.testing.assert_close(m0 - m1, 0.1 * diff, rtol=1e-12, atol=1e-12)


def test_gradient_step_is_clipped_ascent():
    """The feature-learning paper's step: x + clip(η̃ ∇ₓL) with the clip elementwise to ±ε."""
    model, w, x, y = linear_binary(8)
    eps, step = 0.05, 2.0
    x_adv = GradientStep(Linf(eps), step=step, loss="logistic")(model, x, y, bounds=None)
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(get_loss("logistic")(model(xg), y).sum(), xg)
    torch.testing.assert_close(x_adv, x + (step * g).clamp(-eps, eps), rtol=0, atol=1e-15)


def test_min_flip_linear_closed_form():
    model, w, x, y = linear_binary(12, seed=2)
    with torch.no_grad():
        f = model(x)
    r = min_flip_along_gradient(model, x, y)
    exact = f.abs() / w.norm()
    assert bool(r.flipped.all()) and bool(r.correct.all())
    assert bool((r.delta_norm >= exact - 1e-12).all()) and bool((r.delta_norm <= exact + 1e-4).all())
    torch.testing.assert_close(r.grad_norm, w.norm().expand(len(x)))
    torch.testing.assert_close(r.eta, r.delta_norm / w.norm())


def test_min_flip_flags_misclassified_and_capped():
    model, w, x, y = linear_binary(12, seed=2)
    y_bad = y.clone()
    y_bad[:5] = -y_bad[:5]
    r = min_flip_along_gradient(model, x, y_bad)
    assert bool(r.delta_norm[:5].isnan().all()) and bool(r.eta[:5].isnan().all())
    assert bool(r.grad_norm[:5].isnan().all()) and not bool(r.correct[:5].any())
    assert not bool(r.delta_norm[5:].isnan().any())
    with torch.no_grad():
        exact = model(x).abs() / w.norm()
    srt = exact.sort().values
    cap = float(srt[9] + srt[10]) / 2  # away from any point's exact value
    r = min_flip_along_gradient(model, x, cap=cap)
    assert bool((r.flipped == (exact <= cap)).all())
    assert bool(r.delta_norm[exact > cap].isnan().all())


def test_min_flip_finds_first_crossing():
    """f(x) = cos(10 (x₀ + 0.1)) + 0.5 − 0.1 x₁: negative on t ∈ [0.109, 0.319] along the
    gradient, positive again after; the first crossing is wanted."""

    class Wave(nn.Module):
        def forward(self, x):
            return torch.cos(10 * (x[:, 0] + 0.1)) + 0.5 - 0.1 * x[:, 1]

    x = torch.zeros(3, 2, dtype=torch.float64)
    r = min_flip_along_gradient(Wave(), x)
    # along u = g/|g| direction (mostly +x0); solve exactly by a fine scan in float64
    xg = x[:1].clone().requires_grad_(True)
    (g,) = torch.autograd.grad(Wave()(xg).sum(), xg)
    u = g / g.norm()
    u = -u  # f > 0, move against the gradient
    ts = torch.arange(0, 1, 1e-6, dtype=torch.float64)
    first = ts[(Wave()(x[:1] + ts[:, None] * u) <= 0).nonzero()[0, 0]]
    assert abs(float(r.delta_norm[0]) - float(first)) < 1e-4


def test_min_flip_matches_reference_scan_on_mlp():
    """The authors' scan (0.001 steps, one point at a time) and the bisection agree to 1e-3."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1), nn.Flatten(0)).double()
    x = torch.nn.functional.normalize(torch.randn(12, 10, dtype=torch.float64), dim=1)
    r = min_flip_along_gradient(model, x)
    for i in range(len(x)):
        xi = x[i : i + 1].clone().requires_grad_(True)
        f = model(xi)
        (g,) = torch.autograd.grad(f.sum(), xi)
        u = -torch.sign(f.detach()) * g / g.norm()
        t, s0 = 0.0, torch.sign(f.detach())
        with torch.no_grad():
            while t < 2.0 and torch.sign(model(x[i : i + 1] + t * u)) == s0:
                t += 1e-3
        if t < 2.0:
            assert abs(float(r.delta_norm[i]) - t) <= 1e-3 + 1e-9
        else:
            assert not bool(r.flipped[i])


def test_min_flip_rejects_multiclass():
    with pytest.raises(ValueError, match="binary"):
        min_flip_along_gradient(nn.Linear(3, 4), torch.rand(2, 3))


# --- feature-direction attack ---------------------------------------------------------


def test_feature_direction_patches_and_flat():
    k, P, d = 3, 5, 8
    V = torch.eye(d)[k : 2 * k]  # v_j = e_{k+j}
    x = torch.randn(4, P, d)
    y = torch.tensor([0, 1, 2, 1])
    mask = torch.zeros(4, P, dtype=torch.bool)
    mask[:, 1:] = True  # patch 0 is the robust one
    model = nn.Sequential(nn.Flatten(), nn.Linear(P * d, k))
    x_adv = FeatureDirection(0.5, V)(model, x, y, bounds=None, mask=mask)
    expected = x.clone()
    for n in range(4):
        expected[n, 1:] -= 0.5 * V[y[n]]
    torch.testing.assert_close(x_adv, expected)
    x_all = FeatureDirection(0.5, V)(model, x, y, bounds=None)
    torch.testing.assert_close(x_all, x - 0.5 * V[y][:, None, :])
    xf = torch.randn(4, d)
    torch.testing.assert_close(FeatureDirection(0.2, V)(nn.Linear(d, k), xf, y, bounds=None), xf - 0.2 * V[y])
    # binary ±1 labels pick row 1 for +1 and row 0 for -1
    yb = torch.tensor([1.0, -1.0, 1.0, -1.0])
    out = FeatureDirection(0.2, V[:2])(nn.Linear(d, 1), xf, yb, bounds=None)
    torch.testing.assert_close(out, xf - 0.2 * V[:2][(yb > 0).long()])
    # the bits of the materialised form x + mask·(−ε v_y), with directions that round
    W = torch.randn(k, d, generator=torch.Generator().manual_seed(1))
    ident = nn.Identity()
    for m in (mask, None):
        step = -0.3 * W[y][:, None, :].expand_as(x)
        ref = x + (step if m is None else step * m.float()[..., None])
        assert torch.equal(FeatureDirection(0.3, W).run(ident, x, y, bounds=None, mask=m), ref)


# --- mechanics --------------------------------------------------------------------


def test_parameter_grads_and_submodule_modes_untouched():
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.ReLU(), nn.Linear(8, 3))
    model.train()
    model[1].eval()  # a mixed state must come back exactly
    frozen = model[0].bias
    frozen.requires_grad_(False)
    sentinel = torch.full_like(model[3].weight, 7.0)
    model[3].weight.grad = sentinel.clone()
    x, y = torch.rand(5, 4), torch.randint(0, 3, (5,))
    PGD(Linf(0.1), steps=3, step_size=0.05, random_start=False)(model, x, y)
    assert model.training and not model[1].training and model[3].training
    assert torch.equal(model[3].weight.grad, sentinel) and model[0].weight.grad is None
    assert not frozen.requires_grad and model[0].weight.requires_grad


def test_bounds_are_checked_and_validation():
    model = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="outside bounds"):
        FGSM(Linf(0.1))(model, torch.randn(4, 3) * 5, torch.zeros(4, dtype=torch.long))
    with pytest.raises(ConfigError):
        Linf(-1.0)
    with pytest.raises(ConfigError):
        L2(float("nan"))
    with pytest.raises(ConfigError):
        PGD(Linf(0.1), steps=5, step_size=0.0, random_start=False)
    with pytest.raises(ConfigError):
        PGD(Linf(0.1), steps=5, step_size=0.1, restarts=3, random_start=False)  # restarts need random starts
    with pytest.raises(ConfigError):
        FGSM(Linf(0.1), loss="hinge")
    with pytest.raises(ConfigError):
        GradientStep(Linf(0.1), step=-1.0)


def test_with_eps_scales_pgd_step():
    a = PGD(L2(0.5), steps=10, step_size=0.1, random_start=False).with_eps(1.0)
    assert a.threat == L2(1.0) and a.step_size == pytest.approx(0.2)
    assert FGSM(Linf(0.1)).with_eps(0.3).threat == Linf(0.3)


def test_pgd_defaults_are_usable_as_is_and_documented():
    """``PGD(Linf(eps))`` runs with no other argument: 10 steps of 2.5·eps/steps = eps/4 from a
    uniform random start, one restart, cross-entropy; the class docstring says exactly that,
    and the defaults are torchattacks' (eps=8/255: alpha=2/255, 10 steps, random start)."""
    eps = 8 / 255
    a = PGD(Linf(eps))
    assert (a.steps, a.step_size, a.random_start, a.restarts, a.loss, a.early_stop) == (10, None, True, 1, "ce", False)
    assert a.alpha == pytest.approx(eps / 4) == pytest.approx(2.5 * eps / a.steps)
    doc = " ".join(PGD.__doc__.replace("``", "").split())
    for text in ("steps=10", "step_size=2.5·eps/steps", "(eps/4)", "uniform random start", "one restart",
                 "cross-entropy", "random_start=False"):
        assert text in doc, text
    # the default step follows the number of steps and the budget; an explicit one is kept
    assert PGD(Linf(0.1), steps=20).alpha == pytest.approx(0.0125)
    assert PGD(Linf(0.1)).with_eps(0.2).alpha == pytest.approx(0.05)
    assert PGD(Linf(0.1), step_size=0.03).alpha == 0.03 and PGD(Linf(0.1), steps=0).alpha == 0.0
    with pytest.raises(ConfigError):
        PGD(Linf(0.1), step_size=float("nan"))
    # it attacks: inside the ball and the box, the same bits from the same generator, and it
    # breaks a model that a budget this large must break
    model = nn.Linear(6, 2).double()  # logits ±(Σx − 3): a margin the ball crosses for most x
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0] * 6, [-1.0] * 6]))
        model.bias.copy_(torch.tensor([-3.0, 3.0]))
    g = torch.Generator().manual_seed(0)
    x = torch.rand(32, 6, generator=g, dtype=torch.float64)
    y = model(x).argmax(1)
    x_adv = PGD(Linf(0.5))(model, x, y, generator=torch.Generator().manual_seed(1))
    assert float((x_adv - x).abs().max()) <= 0.5 + 1e-12 and float(x_adv.min()) >= 0 and float(x_adv.max()) <= 1
    assert torch.equal(x_adv, PGD(Linf(0.5))(model, x, y, generator=torch.Generator().manual_seed(1)))
    assert float(correct(model(x_adv), y).double().mean()) < 0.5
    assert FGSM(Linf(eps)).loss == "ce"  # FGSM: one step of full size eps, cross-entropy


def test_pgd_defaults_match_torchattacks():
    """torchattacks.PGD(model, eps=8/255) and PGD(Linf(8/255)) take the same steps; without
    the random start (each draws its own) they return the same points."""
    ta = pytest.importorskip("torchattacks")
    import inspect

    theirs = {k: v.default for k, v in inspect.signature(ta.PGD.__init__).parameters.items()}
    ours = PGD(Linf(theirs["eps"]))
    assert ours.steps == theirs["steps"] and ours.random_start == theirs["random_start"]
    assert ours.alpha == pytest.approx(theirs["alpha"])
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    torch.manual_seed(0)
    x, y = torch.rand(16, 6), torch.randint(0, 3, (16,))
    a = ta.PGD(model, eps=theirs["eps"], random_start=False)(x, y)
    b = PGD(Linf(theirs["eps"]), random_start=False, early_stop=False)(model, x, y)
    # ours keeps the worst iterate, theirs the last: equal wherever the last is the worst
    last_is_worst = correct(model(a), y) == correct(model(b), y)
    assert bool(last_is_worst.any())


def test_warnings_fire_once():
    reset_warnings()
    probs = nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=1))
    x, y = torch.rand(6, 4), torch.randint(0, 3, (6,))
    with pytest.warns(EvaluationWarning, match="probabilities"):
        FGSM(Linf(0.1))(probs, x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FGSM(Linf(0.1))(probs, x, y)  # second time: silent

    class Detached(nn.Module):
        def forward(self, x):
            return torch.zeros(x.shape[0], 3) + x.sum() * 0

    with pytest.warns(EvaluationWarning, match="zero"):
        FGSM(Linf(0.1))(Detached(), x, y)
    reset_warnings()


def test_uniform_ball_draws():
    g = torch.Generator().manual_seed(0)
    like = torch.zeros(1, dtype=torch.float64)
    d = 7
    v = uniform_ball_l2((20000, d), 2.0, like, g)
    r = per_sample_norm(v, 2)
    assert float(r.max()) <= 2.0 + 1e-12
    # radius CDF of the uniform ball: P(r <= s) = (s/ε)^d; E r² = ε² d/(d+2)
    assert abs(float((r**2).mean()) - 4.0 * d / (d + 2)) < 0.03
    assert abs(float((r <= 1.8).double().mean()) - 0.9**d) < 0.015


# --- the worst-case ranking inside PGD ----------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.sampled_from(["ce", "margin", "custom"]), st.integers(0, 2**31 - 1))
def test_rank_key_orders_misclassified_first_then_loss(k, loss, seed):
    """PGD folds (misclassified, loss) into one float per row; the fold must preserve the
    lexicographic order exactly."""
    from robustlab.attacks.pgd import _ranked_loss_and_grad

    g = torch.Generator().manual_seed(seed)
    n = 40
    if k == 1:
        model, y = nn.Flatten(0), torch.randint(0, 2, (n,), generator=g).double() * 2 - 1
        x = torch.randn(n, 1, generator=g, dtype=torch.float64) * 3
    else:
        model, y = nn.Identity(), torch.randint(0, k, (n,), generator=g)
        x = torch.randn(n, k, generator=g, dtype=torch.float64) * 3
    lossarg = (lambda out, yy: get_loss("margin")(out, yy) ** 3) if loss == "custom" else loss
    key, _, ok, value = _ranked_loss_and_grad(model, x, y, lossarg, grad=False, check=False)
    wrong = ~ok
    for i in range(n):
        for j in range(n):
            lex = (wrong[i] > wrong[j]) or (wrong[i] == wrong[j] and value[i] > value[j])
            if loss == "custom" and wrong[i] == wrong[j] and abs(float(value[i] - value[j])) < 1e-6:
                continue  # atan may merge near-equal custom losses (documented)
            assert bool(key[i] > key[j]) == bool(lex)


def test_pgd_with_custom_loss_and_patch_inputs():
    model, x, y, _, _ = build(dict(n=5, d=4, k=3, seed=7, box=False, patch=True, eps=0.3, norm="l2", kind="pgd"))

    def neg_true_logit(out, yy):
        return -out.gather(1, yy[:, None]).squeeze(1)

    x_adv = PGD(L2(0.3), steps=5, step_size=0.1, loss=neg_true_logit, random_start=False)(model, x, y, bounds=None)
    assert bool((L2(0.3).norm(x_adv - x) <= 0.3 * (1 + 1e-9)).all())
    with torch.no_grad():
        assert bool((neg_true_logit(model(x_adv), y) >= neg_true_logit(model(x), y)).all())


def test_labels_must_fit_the_outputs():
    binary = nn.Sequential(nn.Linear(3, 1), nn.Flatten(0))
    x = torch.rand(4, 3)
    with pytest.raises(ValueError, match="-1, \\+1"):
        FGSM(Linf(0.1))(binary, x, torch.tensor([0.0, 1.0, 1.0, 0.0]))
    with pytest.raises(ValueError, match="-1, \\+1"):
        min_flip_along_gradient(binary, x, torch.tensor([0.0, 1.0, 1.0, 0.0]))
    with pytest.raises(ValueError, match="0..2"):
        PGD(Linf(0.1), steps=2, step_size=0.05, random_start=False)(nn.Linear(3, 3), x, torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="integer"):
        FGSM(L2(0.1))(nn.Linear(3, 3), x, torch.tensor([0.0, 1.0, 2.0, 1.0]))


def test_sigmoid_outputs_warn():
    reset_warnings()
    model = nn.Sequential(nn.Linear(3, 1), nn.Sigmoid(), nn.Flatten(0))
    y = torch.tensor([1.0, -1.0] * 10)
    with pytest.warns(EvaluationWarning, match="sigmoid"):
        FGSM(Linf(0.1))(model, torch.rand(20, 3), y)
    reset_warnings()


# --- closed-form logit gradients ------------------------------------------------------


@pytest.mark.parametrize("loss", ["ce", "margin"])
def test_closed_form_logit_gradient_matches_autograd(loss):
    """Attacks pull back ``dL/dz`` in closed form; in float64 it equals autograd of the loss,
    ties included (margin: tied maximisers share the gradient, as autograd's amax does)."""
    from robustlab.attacks.losses import loss_grad_correct

    g = torch.Generator().manual_seed(0)
    z = torch.randn(200, 5, generator=g, dtype=torch.float64) * 4
    z[:30] = z[:30].round()  # ties between classes
    z[30:35] = 0.0  # all classes tied
    y = torch.randint(0, 5, (200,), generator=g)
    fn = get_loss(loss)
    value, dz, ok = loss_grad_correct(fn, z, y)
    zz = z.clone().requires_grad_(True)
    ref = fn(zz, y)
    (ref_dz,) = torch.autograd.grad(ref.sum(), zz)
    torch.testing.assert_close(value, ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dz, ref_dz, rtol=1e-12, atol=1e-12)
    assert torch.equal(ok, correct(z, y))
    assert loss_grad_correct(fn, z, y, grad=False)[1] is None
    # binary scores and custom losses go through autograd
    assert loss_grad_correct(fn, z[:, :1], y) is None
    assert loss_grad_correct(lambda out, yy: fn(out, yy) ** 3, z, y) is None


@pytest.mark.parametrize("loss", ["ce", "margin"])
def test_direction_is_the_logit_gradient_up_to_a_positive_factor_per_sample(loss):
    """``direction=True``: cross-entropy's ``softmax − onehot`` divided by ``1 − p_y`` (float64
    against the plain closed form), ``−1`` at the label; the margin's gradient as it was."""
    from robustlab.attacks.losses import loss_grad_correct

    g = torch.Generator().manual_seed(1)
    z = torch.randn(300, 6, generator=g, dtype=torch.float64) * 3
    y = torch.randint(0, 6, (300,), generator=g)
    fn = get_loss(loss)
    value, dz, ok = loss_grad_correct(fn, z, y)
    value_d, dz_d, ok_d = loss_grad_correct(fn, z, y, direction=True)
    assert torch.equal(value, value_d) and torch.equal(ok, ok_d)
    if loss == "margin":
        assert torch.equal(dz, dz_d)
        return
    p_y = torch.softmax(z, 1).gather(1, y[:, None])
    torch.testing.assert_close(dz_d, dz / (1 - p_y), rtol=1e-10, atol=1e-12)
    assert torch.equal(dz_d.gather(1, y[:, None]), torch.full((300, 1), -1.0, dtype=torch.float64))


def test_saturation_safe_attacks_move_where_the_softmax_saturates():
    """A linear 3-class model with margins above 120 logits: in float32 every ``p_j``, j ≠ y,
    underflows and ``p_y`` rounds to 1, so cross-entropy's input gradient is exactly 0 on every
    point and plain FGSM and PGD return x unchanged (and warn); ``saturation_safe`` steps along
    the sign of the exact gradient on every coordinate."""
    g = torch.Generator().manual_seed(2)
    lin = nn.Linear(8, 3, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(3, 8, generator=g))
    x = torch.randn(40, 8, generator=g)
    top = lin(x).detach().sort(1).values
    x = x * (130.0 / (top[:, -1] - top[:, -2]))[:, None]  # margins far past float32's softmax
    y = lin(x).argmax(1).detach()
    top = lin(x).detach().sort(1).values
    assert float((top[:, -1] - top[:, -2]).min()) > 120
    # the exact direction, Σ_{j≠y} p_j (w_j − w_y) / (1 − p_y), in float64 (whose own softmax
    # rounds p_y to 1 here as well): a softmax over the other classes
    W, z = lin.weight.detach().double(), lin(x).detach().double()
    q = torch.softmax(z.scatter(1, y[:, None], float("-inf")), 1)  # (N, k), 0 at y
    g64 = q @ W - W[y]
    reset_warnings()
    for attack in (FGSM(Linf(0.3)), PGD(Linf(0.3), steps=1, step_size=0.3, random_start=False)):
        with pytest.warns(EvaluationWarning, match="exactly zero"):
            assert torch.equal(attack(lin, x, y, bounds=None), x)
        reset_warnings()
        safe = dataclasses.replace(attack, saturation_safe=True)
        moved = safe(lin, x, y, bounds=None) - x
        assert torch.equal(moved.sign(), g64.sign().float())  # x is large: its rounding moves the size
        assert float((moved.abs() - 0.3).abs().max()) < 1e-3
    with pytest.raises(ConfigError, match="saturation_safe"):
        PGD(Linf(0.1), saturation_safe="yes")
    with pytest.raises(ConfigError, match="saturation_safe"):
        FGSM(Linf(0.1), saturation_safe=1)


def test_saturation_safe_ranks_iterates_as_the_cross_entropy_does():
    """PGD's ``saturation_safe`` rank key, the log-odds ``log(1/p_y − 1)`` offset for correct
    rows, orders rows exactly as the cross-entropy key does (float64, margins where it has not
    saturated), and still orders rows whose cross-entropy rounds to 0 in float32."""
    from robustlab.attacks.pgd import _ranked_loss_and_grad

    g = torch.Generator().manual_seed(3)
    model = nn.Linear(5, 4).double()
    x = torch.randn(400, 5, generator=g, dtype=torch.float64) * 3
    y = torch.randint(0, 4, (400,), generator=g)
    plain = _ranked_loss_and_grad(model, x, y, "ce", grad=False, check=False)[0]
    safe = _ranked_loss_and_grad(model, x, y, "ce", grad=False, check=False, saturation_safe=True)[0]
    assert torch.equal(plain.argsort(), safe.argsort())
    model32 = nn.Linear(5, 4)
    with torch.no_grad():
        model32.weight.copy_(model.weight * 40)
        model32.bias.zero_()
    x32 = x.float()
    y32 = model32(x32).argmax(1)
    top = model32(x32).detach().sort(1).values
    far = (top[:, -1] - top[:, -2]) > 20
    plain = _ranked_loss_and_grad(model32, x32, y32, "ce", grad=False, check=False)[0]
    safe = _ranked_loss_and_grad(model32, x32, y32, "ce", grad=False, check=False, saturation_safe=True)[0]
    assert int(far.sum()) > 10 and plain[far].unique().numel() == 1  # the cross-entropy rounds to 0
    assert safe[far].unique().numel() == int(far.sum())


def test_autograd_route_pulls_back_the_closed_form_logit_gradient_exactly():
    """A model autograd must differentiate (a custom forward) gets the input gradient of
    Σ out·dz: bit for bit grad(out, x, dz), and without the sympy import a tensor
    grad_outputs costs torch's first backward (0.34 CPU-s in every worker that attacks)."""
    import subprocess
    import sys

    from robustlab.attacks.base import _autograd_forward_and_grad
    from robustlab.attacks.losses import loss_grad_correct

    class Custom(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(6, 9), torch.nn.Linear(9, 4)

        def forward(self, x):
            return self.b(torch.tanh(self.a(x)))

    torch.manual_seed(0)
    model, x, y = Custom(), torch.randn(32, 6), torch.randint(0, 4, (32,))
    for loss in ("ce", "margin"):
        z, _, g, _ = _autograd_forward_and_grad(model, x, y, get_loss(loss), check=True)
        _, dz, _ = loss_grad_correct(get_loss(loss), z, y)
        xg = x.clone().requires_grad_(True)
        (ref,) = torch.autograd.grad(model(xg), xg, dz)
        assert torch.equal(g, ref), loss
    code = ("import sys, torch; from robustlab.attacks import PGD, Linf\n"
            "class M(torch.nn.Module):\n"
            "    def __init__(s): super().__init__(); s.l = torch.nn.Linear(4, 3)\n"
            "    def forward(s, x): return torch.tanh(s.l(x))\n"  # autograd
            "class T(M):\n"
            "    def forward(s, x): return s.l(x).relu()\n"  # traced to a chain (torch.fx), closed form
            "for m in (M(), T()):\n"
            "    PGD(Linf(0.1), steps=2, step_size=0.05, random_start=False)(m.eval(), torch.rand(5, 4), torch.tensor([0, 1, 2, 0, 1]))\n"
            "print('sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_pgd_nan_gradients_leave_a_finite_point():
    """sign(nan) = 0: a model with NaN input gradients stalls PGD but never returns NaN."""

    class NanGrad(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):  # same outputs; d/dx sqrt(|x - x|) at 0 is inf, times 0: NaN
            return self.lin(x) + 0 * torch.sqrt((x - x.detach()).abs()).sum(1, keepdim=True)

    x, y = torch.rand(6, 4), torch.randint(0, 3, (6,))
    for threat in (Linf(0.1), L2(0.3)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EvaluationWarning)
            x_adv = PGD(threat, steps=3, step_size=0.05, random_start=True)(
                NanGrad(), x, y, generator=torch.Generator().manual_seed(0))
        assert bool(x_adv.isfinite().all())
        assert bool((threat.norm(x_adv - x) <= threat.eps * (1 + 1e-6)).all())


def test_projection_and_random_start_are_fresh_tensors_with_the_formulas_bits():
    """The threats compute in their own memory (in place there): the inputs are left as they
    were, the result is never one of them, and the bits are those of the textbook formulas."""
    from robustlab.attacks.threat import _bcast

    g = torch.Generator().manual_seed(3)
    x = torch.rand(64, 3, 5, 7, generator=g)
    z = x + 0.3 * torch.randn(x.shape, generator=g)
    x0, z0 = x.clone(), z.clone()
    for eps in (0.05, 0.3):
        lin = Linf(eps).project(x, z)
        assert torch.equal(lin, x + (z - x).clamp(-eps, eps))
        l2 = L2(eps).project(x, z)
        delta = z - x
        scale = (eps / per_sample_norm(delta, 2).clamp_min(torch.finfo(x.dtype).tiny)).clamp(max=1.0)
        assert torch.equal(l2, x + delta * _bcast(scale, delta))
        for out in (lin, l2):
            assert out.data_ptr() not in (x.data_ptr(), z.data_ptr())
        ri = Linf(eps).random_init(x, torch.Generator().manual_seed(5))
        u = torch.rand(x.shape, generator=torch.Generator().manual_seed(5))
        assert torch.equal(ri, x + (2 * u - 1) * eps)
        r2 = L2(eps).random_init(x, torch.Generator().manual_seed(5))
        assert r2.data_ptr() != x.data_ptr()
        assert float(per_sample_norm(r2 - x, 2).max()) <= eps * (1 + 1e-5) and math.isfinite(float(r2.sum()))
    assert torch.equal(x, x0) and torch.equal(z, z0)

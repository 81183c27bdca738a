"""Training inside the lazy ball: SGD that stops on leaving it, and projected adversarial
training (lazy training, NeurIPS 2022, §5 and Alg. 1)."""

from __future__ import annotations

import math

import pytest
import torch

from robustlab.attacks import L2, PGD
from robustlab.data import sphere_teacher
from robustlab.errors import NumericalError
from robustlab.models import TwoLayerReLU, neuron_offsets
from robustlab.models.ensemble import Flat, fold, unfold
from robustlab.train.lazy import (
    _logistic_step,
    _trainable,
    adversarial_examples,
    logistic_loss,
    train_lazy_adversarial,
    train_lazy_sgd,
)
from robustlab.utils import make_generator


@pytest.fixture(scope="module")
def data():
    return sphere_teacher(12, n_train=200, n_test=100, teacher_width=2, margin=0.3, seed=0)


def _model(seeds, m=32, d=12, bias=True):
    return TwoLayerReLU.init([make_generator(s, "init") for s in seeds], m=m, d=d, bias=bias)


def _gens(seeds):
    return [make_generator(s, "order") for s in seeds]


@pytest.mark.parametrize("check", ["epoch", "step"])
def test_sgd_stops_inside_the_ball(data, check):
    model = _model([0, 1])
    r = 2.0 / math.sqrt(32)
    log = train_lazy_sgd(model, data.x_train, data.y_train, radius=r, generators=_gens([0, 1]),
                         lr=2.0, batch_size=32, max_epochs=50, check=check)
    assert log.stopped.all()  # a small ball is left well before 50 epochs
    assert (log.epochs < 50).all()
    assert (neuron_offsets(model) <= r * (1 + 1e-5)).all()
    if check == "step":  # the last step inside is kept: some neuron is close to the boundary
        assert (neuron_offsets(model).amax(1) > 0.5 * r).all()


def test_sgd_with_a_large_ball_runs_every_epoch_and_learns(data):
    model = _model([3])
    log = train_lazy_sgd(model, data.x_train, data.y_train, radius=1e6, generators=_gens([3]),
                         lr=1.0, batch_size=32, max_epochs=15)
    assert not log.stopped.any() and log.epochs.tolist() == [15.0]
    losses = [h["train_loss"].item() for h in log.history]
    assert losses[-1] < 0.7 * losses[0]
    with torch.no_grad():
        acc = ((model(data.x_test[None]) * data.y_test) > 0).float().mean().item()
    assert acc > 0.8


def test_ensemble_training_equals_training_each_seed_alone(data):
    """Copies are independent: E=2 in one pass gives each seed's E=1 result."""
    both = _model([4, 5])
    log2 = train_lazy_sgd(both, data.x_train, data.y_train, radius=3.0 / math.sqrt(32),
                          generators=_gens([4, 5]), lr=1.0, batch_size=32, max_epochs=8)
    for e, s in enumerate([4, 5]):
        one = _model([s])
        log1 = train_lazy_sgd(one, data.x_train, data.y_train, radius=3.0 / math.sqrt(32),
                              generators=_gens([s]), lr=1.0, batch_size=32, max_epochs=8)
        assert log1.epochs[0] == log2.epochs[e]
        assert torch.allclose(one.weight[0], both.weight[e], atol=1e-5)
        assert torch.allclose(one.bias[0], both.bias[e], atol=1e-5)


def test_divergence_raises_numerical_error(data):
    model = _model([0])
    with pytest.raises(NumericalError):
        train_lazy_sgd(model, data.x_train * 1e30, data.y_train, radius=1e40, generators=_gens([0]),
                       lr=1e30, max_epochs=3)


def test_bad_arguments(data):
    with pytest.raises(ValueError):
        train_lazy_sgd(_model([0]), data.x_train, data.y_train, radius=1.0, generators=_gens([0]),
                       check="never")
    with pytest.raises(ValueError):
        train_lazy_sgd(_model([0, 1]), data.x_train, data.y_train, radius=1.0, generators=_gens([0]))


def test_adversarial_training_stays_in_the_ball_and_stops_on_no_gain(data):
    model = _model([0, 1])
    r = 1.0 / math.sqrt(32)
    log = train_lazy_adversarial(model, data.x_train, data.y_train, radius=r, eps=0.1,
                                 generators=_gens([0, 1]), attack_steps=5, attack_step_size=0.05,
                                 bounds=(-1.0, 1.0), lr=0.5, patience=2, max_epochs=40)
    assert (neuron_offsets(model) <= r * (1 + 1e-5)).all()
    assert log.stopped.all() and (log.epochs < 40).all()
    accs = torch.stack([h["robust_train_acc"] for h in log.history])  # (epochs, E)
    for e in range(2):
        n = int(log.epochs[e])
        best_before = accs[: n - 2, e].max()
        assert accs[n - 2: n, e].max() <= best_before + 1e-4  # two epochs without a gain


def test_patience_armed_by_training_cannot_stop_an_untrained_network(data):
    """Inside a tiny ball the network stays near chance: the authors' rule (armed from the
    start) stops it within a few epochs; armed at clean accuracy 0.9 (never reached) it trains to
    the burn-in plus the patience, and armed with no burn-in to the epoch cap."""
    r = 0.2 / math.sqrt(32)
    kw = dict(radius=r, eps=0.1, generators=_gens([0, 1]), attack_steps=3, attack_step_size=0.05,
              bounds=(-1.0, 1.0), lr=0.5, patience=2, max_epochs=25)
    authors = train_lazy_adversarial(_model([0, 1]), data.x_train, data.y_train, **kw)
    assert (authors.epochs < 10).all()
    burn = train_lazy_adversarial(_model([0, 1]), data.x_train, data.y_train, arm_acc=0.9, burn_in=12, **kw)
    clean = torch.stack([h["clean_train_acc"] for h in burn.history[:-1]])
    assert float(clean.nan_to_num(0).max()) < 0.9  # never trained
    assert (burn.epochs >= 12 + 2).all()
    never = train_lazy_adversarial(_model([0, 1]), data.x_train, data.y_train, arm_acc=0.9, **kw)
    assert (never.epochs == 25).all() and not never.stopped.any()


def test_adversarial_examples_respect_ball_and_box(data):
    model = _model([0, 1])
    x = data.x_test
    xa = adversarial_examples(model, x, data.y_test, eps=0.2, steps=10, step_size=0.05, bounds=(-1.0, 1.0))
    assert xa.shape == (2, *x.shape)
    assert ((xa - x).norm(dim=-1) <= 0.2 + 1e-5).all() and xa.abs().max() <= 1.0
    with torch.no_grad():
        clean = (model(x.expand(2, -1, -1)) * data.y_test > 0).float().mean()
        adv = (model(xa) * data.y_test > 0).float().mean()
    assert adv < clean  # the attack hurts
    zero = adversarial_examples(model, x, data.y_test, eps=0.0, steps=10)
    assert torch.equal(zero[0], x)


def test_eps_zero_adversarial_training_is_projected_sgd(data):
    """With ε = 0 the robust training accuracy is the clean training accuracy."""
    model = _model([2])
    log = train_lazy_adversarial(model, data.x_train, data.y_train, radius=1e6, eps=0.0,
                                 generators=_gens([2]), attack_steps=3, lr=1.0, patience=50,
                                 max_epochs=5)
    with torch.no_grad():
        acc = ((model(data.x_train[None]) * data.y_train) > 0).float().mean().item()
    assert log.epochs.tolist() == [5.0]
    assert acc > 0.8
    assert log.history[-1]["robust_train_acc"].item() > 0.8


@pytest.mark.parametrize("bias", [True, False])
def test_closed_form_step_is_the_autograd_sgd_step(data, bias):
    """``_logistic_step`` (no autograd) against ``p -= lr·∇_p mean ℓ`` by autograd, float64; a
    masked copy does not move."""
    model = TwoLayerReLU.init([make_generator(s, "init") for s in (0, 1, 2)], m=32, d=12, bias=bias,
                              dtype=torch.float64)
    x, y = data.x_train.double(), data.y_train.double()
    xb = torch.stack([x[:20], x[20:40], x[40:60]])  # (3, 20, d)
    yb = torch.stack([y[:20], y[20:40], y[40:60]])
    ref = TwoLayerReLU.init([make_generator(s, "init") for s in (0, 1, 2)], m=32, d=12, bias=bias,
                            dtype=torch.float64)
    params = [p for p in (ref.weight, ref.bias) if p is not None]
    loss = logistic_loss(ref(xb), yb).mean(1)
    grads = torch.autograd.grad(loss.sum(), params)
    mask = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)
    net = _trainable(model, torch.arange(3))
    out, new_loss = _logistic_step(net, xb, yb, 0.7, mask=mask)
    model.put(torch.arange(3), net)
    torch.testing.assert_close(new_loss, loss.detach(), rtol=1e-12, atol=0)
    torch.testing.assert_close(out, ref(xb).detach(), rtol=1e-12, atol=1e-14)
    with torch.no_grad():
        for p, g, q in zip(params, grads, [model.weight, model.bias]):
            want = p - 0.7 * g * mask.reshape(-1, *([1] * (g.ndim - 1)))
            torch.testing.assert_close(q, want, rtol=1e-12, atol=1e-14)
            assert torch.equal(q[1], p[1])  # frozen exactly
            assert not torch.equal(q[0], p[0])


def test_closed_form_pgd_is_the_generic_pgd(data):
    """The lazy loops' PGD (closed-form input gradient) gives the examples of attacks.PGD over
    models.Flat (autograd), float64: same worst iterates up to rounding."""
    E = 2
    model = TwoLayerReLU.init([make_generator(s, "init") for s in (0, 1)], m=32, d=12, dtype=torch.float64)
    x, y = data.x_test.double(), data.y_test.double()
    for eps, steps in ((0.3, 8), (0.05, 3)):
        new = adversarial_examples(model, x, y, eps=eps, steps=steps, step_size=eps / 4, bounds=(-1.0, 1.0))
        atk = PGD(L2(eps), steps=steps, step_size=eps / 4, random_start=False)
        old = unfold(atk(Flat(model, E), fold(x.expand(E, -1, -1)), y.repeat(E), bounds=(-1.0, 1.0)), E)
        torch.testing.assert_close(new, old, rtol=0, atol=1e-12)
        with torch.no_grad():
            assert ((model(new) * y) > 0).float().mean() < ((model(x.expand(E, -1, -1)) * y) > 0).float().mean()


@pytest.mark.parametrize("check", ["epoch", "step"])
def test_inputs_zero_everywhere_are_skipped_exactly(data, check):
    """Blank input coordinates (MNIST's border) are left out of the GEMMs: the networks are bit
    for bit those trained without them, and their weights stay at the initialisation."""
    seeds = [0, 1, 2]
    plain = _model(seeds)
    extra = torch.randn(3, 32, 4, generator=make_generator(9, "extra"))
    padded = TwoLayerReLU(torch.cat([plain.weight.detach(), extra], -1), plain.top, plain.bias.detach(),
                          plain.top_bias)
    xp = torch.cat([data.x_train, torch.zeros(len(data.x_train), 4)], -1)
    kw = dict(radius=torch.tensor([0.4, 0.8, 1e6]), lr=1.0, batch_size=32, max_epochs=12, check=check)
    log = train_lazy_sgd(plain, data.x_train, data.y_train, generators=_gens(seeds), **kw)
    log_p = train_lazy_sgd(padded, xp, data.y_train, generators=_gens(seeds), **kw)
    assert len(set(log.epochs.tolist())) > 1
    assert torch.equal(log.epochs, log_p.epochs)
    assert torch.equal(padded.weight[:, :, :12], plain.weight) and torch.equal(padded.bias, plain.bias)
    assert torch.equal(padded.weight[:, :, 12:], extra)
    for h, hp in zip(log.history, log_p.history):
        assert torch.equal(h["train_loss"].nan_to_num(), hp["train_loss"].nan_to_num())

"""The faster lazy loops (stopped copies leave the batch; one gather per epoch; in-place
updates) give bit for bit what the loops that compute every copy to the end give."""

from __future__ import annotations

import math

import pytest
import torch
from _lazy_reference import reference_lazy_adversarial, reference_lazy_sgd

from robustlab.data import sphere_teacher
from robustlab.models import TwoLayerReLU
from robustlab.train.lazy import train_lazy_adversarial, train_lazy_sgd
from robustlab.utils import make_generator

SEEDS = [0, 1, 2, 3]


@pytest.fixture(scope="module")
def data():
    return sphere_teacher(12, n_train=150, n_test=50, teacher_width=2, margin=0.3, seed=0)


def _model(bias: bool) -> TwoLayerReLU:
    return TwoLayerReLU.init([make_generator(s, "init") for s in SEEDS], m=32, d=12, bias=bias)


def _gens():
    return [make_generator(s, "order") for s in SEEDS]


def _same(new: TwoLayerReLU, ref: TwoLayerReLU, log, ref_log) -> None:
    assert torch.equal(new.weight, ref.weight)
    if ref.bias is not None:
        assert torch.equal(new.bias, ref.bias)
    assert torch.equal(log.epochs, ref_log.epochs) and torch.equal(log.stopped, ref_log.stopped)
    assert len(log.history) == len(ref_log.history)
    for h, rh in zip(log.history, ref_log.history):
        assert torch.equal(h["active"], rh["active"])
    for k, v in ref_log.history[-1].items():  # the last entry scores every final network
        assert torch.equal(log.history[-1][k], v), k
    for h, rh in zip(log.history, ref_log.history):  # earlier ones: the copies still training
        for k in ("train_loss", "train_acc", "robust_train_acc"):
            if k in rh:
                assert torch.equal(h[k][rh["active"]], rh[k][rh["active"]]), k


# radii: copies leave their balls at different epochs; a per-copy radius; a cap reached first
@pytest.mark.parametrize("check", ["epoch", "step"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("radius, epochs", [
    (2.0 / math.sqrt(32), 40),
    (torch.tensor([0.2, 0.5, 0.3, 1e6]), 12),
])
def test_compacted_sgd_matches_the_full_loop_bit_for_bit(data, check, bias, radius, epochs):
    kw = dict(radius=radius, lr=2.0, batch_size=32, max_epochs=epochs, check=check)
    new, ref = _model(bias), _model(bias)
    log = train_lazy_sgd(new, data.x_train, data.y_train, generators=_gens(), **kw)
    ref_log = reference_lazy_sgd(ref, data.x_train, data.y_train, generators=_gens(), **kw)
    assert len(set(log.epochs.tolist())) > 1, "the copies must stop at different times"
    _same(new, ref, log, ref_log)


# the authors' rule (armed from the start); patience armed by clean accuracy (0.9: one copy
# reaches it, so they stop at different times), by a burn-in, by whichever comes first
@pytest.mark.parametrize("bias, arm_acc, burn_in, radius", [
    (True, None, 0, 1.0 / math.sqrt(32)), (False, None, 0, 1.0 / math.sqrt(32)),
    (True, 0.9, 0, torch.tensor([1e6, 1.0, 0.5, 2.0])),
    (True, None, 6, torch.tensor([1e6, 1.0, 0.5, 2.0])), (False, None, 6, torch.tensor([1e6, 1.0, 0.5, 2.0])),
    (False, 0.97, 9, torch.tensor([1e6, 1.0, 0.5, 2.0])),
])
def test_adversarial_training_matches_the_reference_loop_bit_for_bit(data, bias, arm_acc, burn_in, radius):
    kw = dict(radius=radius, eps=0.1, attack_steps=4, attack_step_size=0.05,
              bounds=(-1.0, 1.0), lr=0.5, batch_size=32, patience=2, max_epochs=30,
              arm_acc=arm_acc, burn_in=burn_in)
    new, ref = _model(bias), _model(bias)
    log = train_lazy_adversarial(new, data.x_train, data.y_train, generators=_gens(), **kw)
    ref_log = reference_lazy_adversarial(ref, data.x_train, data.y_train, generators=_gens(), **kw)
    assert len(set(log.epochs.tolist())) > 1, "the copies must stop at different times"
    _same(new, ref, log, ref_log)

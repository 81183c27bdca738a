"""Training the patch CNN: ε = 0 reduces to standard training, probes, the evaluation attacks."""

import dataclasses
import math

import pytest
import torch

from robustlab.attacks import FGSM, PGD, GradientStep
from robustlab.config import ConfigError
from robustlab.data.patches import PatchSpec, sample_ensemble
from robustlab.errors import NumericalError
from robustlab.models import Flat
from robustlab.models.patch_cnn import PatchCNN
from robustlab.train.feature import (
    ClosedFormStep,
    FeatureTrainSpec,
    _objective,
    crossing_step,
    evaluate_patch_cnn,
    train_attack,
    train_patch_cnn,
)
from robustlab.utils import make_generator

SMALL = PatchSpec(k=2, P=40, d=16, alpha=1.0, beta=0.4)  # sum beta^3 = 2.5 > alpha^3


def setup(seeds=(0, 1), spec=SMALL, m=4, sigma0=0.05, n=32):
    feats, train, test = sample_ensemble(spec, list(seeds), n, 64, make_generator)
    model = PatchCNN(len(seeds), spec.k, m, spec.d, sigma0=sigma0,
                     generators=[make_generator(s, "init") for s in seeds])
    return feats, train, test, model


def run(method, eps, steps=20, seeds=(0, 1), **kw):
    feats, train, test, model = setup(seeds)
    spec = FeatureTrainSpec(method=method, steps=steps, lr=1.0, eps=eps, eta_tilde=15.0, probe_every=2,
                            eval_every=10, eval_eps=0.4, eval_pgd_steps=2, **kw)
    hist = train_patch_cnn(model, feats, train, test, spec, batch_generator=make_generator(0, "b"),
                           attack_generator=make_generator(0, "a"), eval_generator=make_generator(0, "e"))
    return hist, model


def test_eps_zero_gradient_step_is_standard_training_bit_for_bit():
    h_std, m_std = run("standard", 0.4)
    h_adv, m_adv = run("gradient_step", 0.0)
    assert torch.equal(m_std.W, m_adv.W)
    for name in ("A", "B", "A_neuron", "B_neuron", "loss"):
        assert torch.equal(getattr(h_std, name), getattr(h_adv, name)), name
    h_pos, _ = run("gradient_step", 0.4)
    assert not torch.equal(h_pos.A, h_std.A)  # and a positive budget does change training


@pytest.mark.parametrize("act", ["smooth_relu", "relu", "gelu"])
@pytest.mark.parametrize("method, eps", [("standard", 0.4), ("gradient_step", 0.4), ("gradient_step", 0.05)])
def test_closed_form_step_matches_autograd_through_the_attack(act, method, eps):
    # float64: the closed-form loss and weight gradient equal autograd's through GradientStep and
    # the l-inf projection (eps = 0.05 clips most coordinates, 0.4 fewer)
    spec = PatchSpec(k=3, P=10, d=12, alpha=1.0, beta=0.4)
    feats, train, _ = sample_ensemble(spec, [0, 1], 7, 5, make_generator, dtype=torch.float64)
    model = PatchCNN(2, 3, 4, 12, sigma0=0.3, activation=act, q=2.5, rho=0.3, dtype=torch.float64,
                     generators=[make_generator(s, "i") for s in (0, 1)])
    ts = FeatureTrainSpec(method=method, eps=eps, eta_tilde=15.0)
    loss = _objective(model, train.x, train.y, train_attack(ts), ts, Flat(model, 2).eval(), None)
    (g,) = torch.autograd.grad(loss.sum(), model.W)
    loss2, g2 = ClosedFormStep(model, ts)(train.x, train.y, with_grad=True)
    assert torch.allclose(loss2, loss.detach(), rtol=1e-12, atol=1e-14)
    assert torch.allclose(g2, g, rtol=1e-10, atol=1e-14 * float(g.abs().max()))
    x = train.x.detach().requires_grad_(True)  # and the attack's unclipped move, per sample
    (gx,) = torch.autograd.grad(torch.nn.functional.cross_entropy(model(x).reshape(-1, 3), train.y.reshape(-1),
                                                                  reduction="sum"), x)
    assert torch.allclose(ClosedFormStep(model, ts).input_step(train.x, train.y), 15.0 * gx, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("method", ["gradient_step", "standard"])
def test_a_member_trains_the_same_in_any_ensemble(method):
    # copy e's weights do not depend on the other copies: bit for bit, float32
    _, m2 = run(method, 0.4, steps=6, seeds=(0, 1))
    _, m1 = run(method, 0.4, steps=6, seeds=(1,))
    assert torch.equal(m2.W[1], m1.W[0])


def test_history_shapes_and_probes_match_the_weights():
    hist, model = run("gradient_step", 0.4, steps=10)
    E, k, m = 2, 2, 4
    assert hist.probe_steps.tolist() == [0, 2, 4, 6, 8, 10]
    assert hist.A.shape == (E, 6, k) and hist.A_neuron.shape == (E, 6, k, m) and hist.loss.shape == (E, 6)
    assert hist.eval_steps.tolist() == [0, 10]
    assert math.isnan(float(hist.pgd_acc[0, 0])) and not math.isnan(float(hist.pgd_acc[0, -1]))
    W = model.W.detach()
    assert torch.allclose(hist.A_neuron[:, -1], W[..., :2].diagonal(dim1=1, dim2=3).transpose(1, 2))
    assert torch.allclose(hist.A[:, -1], hist.A_neuron[:, -1].max(-1).values)


def test_standard_training_grows_the_dense_feature():
    hist, _ = run("standard", 0.4, steps=40)
    A, B = hist.A.mean(-1)[:, -1], hist.B.mean(-1)[:, -1]
    assert (B > 5 * A).all() and (B > 1.0).all()
    assert (hist.clean_acc[:, -1] >= 0.95).all()


def test_minibatch_is_reproducible_and_differs_from_full_batch():
    h1, _ = run("standard", 0.4, batch_size=8)
    h2, _ = run("standard", 0.4, batch_size=8)
    h3, _ = run("standard", 0.4)
    assert torch.equal(h1.A, h2.A) and not torch.equal(h1.A, h3.A)


def test_train_attacks_are_the_shared_objects():
    assert train_attack(FeatureTrainSpec(method="standard")) is None
    gs = train_attack(FeatureTrainSpec(method="gradient_step", eps=0.3, eta_tilde=7.0))
    assert isinstance(gs, GradientStep) and gs.step == 7.0 and gs.eps == 0.3
    fgsm = train_attack(FeatureTrainSpec(method="fgsm"))
    assert isinstance(fgsm, FGSM)
    pgd = train_attack(FeatureTrainSpec(method="pgd", eps=0.4, pgd_steps=4))
    assert isinstance(pgd, PGD) and pgd.steps == 4 and pgd.step_size == pytest.approx(0.25)
    # the sign attacks must move on points the CNN fits far past float32's softmax (97 % of the
    # quick preset's PGD training points had an all-zero gradient without it); the paper's
    # one-step method uses the gradient's size and keeps the plain gradient
    assert fgsm.saturation_safe and pgd.saturation_safe and not hasattr(gs, "saturation_safe")


@pytest.mark.parametrize("kw, field", [({"method": "magic"}, "method"), ({"eps": -0.1}, "eps"),
                                       ({"eta_tilde": -1.0}, "eta_tilde"), ({"steps": 0}, "steps"),
                                       ({"lr": 0.0}, "lr"), ({"batch_size": -1}, "batch_size")])
def test_bad_train_spec(kw, field):
    with pytest.raises(ConfigError) as e:
        FeatureTrainSpec(**kw)
    assert e.value.field == field


def test_divergence_raises_numerical_error():
    feats, train, test, model = setup()
    with torch.no_grad():
        model.W.fill_(1e37)  # float32 logits overflow to inf
    with pytest.raises(NumericalError):
        train_patch_cnn(model, feats, train, test, FeatureTrainSpec(method="standard", steps=2, eval_pgd_steps=0))


def test_crossing_step():
    steps = torch.tensor([0, 5, 10, 15, 20])
    assert crossing_step(steps, torch.tensor([.1, .1, .3, .5, .6]), torch.tensor([.1, .4, .4, .4, .4])) == 15.0
    assert crossing_step(steps, torch.tensor([.2, .3, .4, .5, .6]), torch.tensor([.1, .1, .1, .1, .1])) is None
    assert crossing_step(steps, torch.tensor([.0, .1, .2, .2, .2]), torch.tensor([.1, .4, .4, .4, .4])) is None
    # a flat B has no first phase to end (B never reaches 3·B(0)), whatever A does
    assert crossing_step(steps, torch.tensor([.05, .1, .3, .5, .6]), torch.tensor([.1, .12, .11, .1, .1])) is None
    # a crossing that reverts is not one; the lasting one counts
    assert crossing_step(steps, torch.tensor([.1, .1, .5, .3, .6]), torch.tensor([.1, .4, .4, .4, .4])) == 20.0
    assert crossing_step(steps, torch.tensor([.1, .1, .5, .5, .3]), torch.tensor([.1, .4, .4, .4, .4])) is None


def _onehot_features(k, d, E=1):
    eye = torch.eye(d, dtype=torch.float64)
    return eye[:k].expand(E, k, d).clone(), eye[k:2 * k].expand(E, k, d).clone()


@pytest.mark.parametrize("which", ["u", "v"])
def test_span_pgd_breaks_v_weights_and_cannot_touch_u_weights(which):
    from robustlab.attacks.every_patch import span_pgd

    k, m, d, P, N = 2, 2, 8, 10, 16
    u, v = _onehot_features(k, d)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, k, (1, N), generator=g)
    x = 0.05 * torch.randn(1, N, P, d, generator=g, dtype=torch.float64)
    x[..., 0, :] += u[0][y[0]]  # one robust patch (α = 1), the rest non-robust (β = 0.4)
    x[..., 1:, :] += 0.4 * v[0][y[0]].unsqueeze(1)
    model = PatchCNN(1, k, m, d, sigma0=0.0, dtype=torch.float64)
    feat = u if which == "u" else v
    with torch.no_grad():
        model.W.copy_(0.5 * feat[0].view(1, k, 1, d).expand(1, k, m, d))
    with torch.no_grad():
        clean = model(x)
    x_adv, margin = span_pgd(model, x, y, v, 0.4, steps=20, restarts=2, generators=[torch.Generator().manual_seed(1)])
    delta = (x_adv - x)[0]
    assert delta[..., :k].abs().max() == 0 and delta[..., 2 * k:].abs().max() == 0  # inside span{v} only
    assert delta.abs().max() <= 0.4 + 1e-12
    if which == "u":  # the robust-feature weights do not see span{v}: margins unchanged
        true = clean.gather(-1, y.unsqueeze(-1)).squeeze(-1)
        assert torch.allclose(margin, true - clean.scatter(-1, y.unsqueeze(-1), -1e9).max(-1).values)
        assert bool((margin > 0).all())
    else:  # ε = β: the swap erases v_y and plants v_j on every patch
        assert bool((margin < 0).all())


def test_span_margin_gradient_matches_autograd():
    from robustlab.attacks.every_patch import _span_margin

    E, k, m, d, P, N = 2, 3, 2, 8, 4, 5
    g = torch.Generator().manual_seed(3)
    model = PatchCNN(E, k, m, d, sigma0=0.5, dtype=torch.float64, generators=[g, g])
    z0 = torch.randn(E, N, P, k * m, generator=g, dtype=torch.float64)
    fw = torch.randn(E, k, k * m, generator=g, dtype=torch.float64)
    y = torch.randint(0, k, (E, N), generator=g)
    c = (0.3 * torch.randn(E, N, P, k, generator=g, dtype=torch.float64)).requires_grad_(True)
    cls = torch.arange(k * m) // m
    margin, grad = _span_margin(model, z0, c.detach(), fw, y, cls, with_grad=True)
    z = z0 + torch.einsum("enpj,ejK->enpK", c, fw)
    logits = model.act(z).view(E, N, P, k, m).sum(dim=(2, 4))
    true = logits.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    ref = true - logits.scatter(-1, y.unsqueeze(-1), -1e9).max(-1).values
    (ref_grad,) = torch.autograd.grad(ref.sum(), c)
    assert torch.allclose(margin, ref.detach()) and torch.allclose(grad, ref_grad, atol=1e-10)


def _hand_model(spec, feats, which, a, E=1):
    model = PatchCNN(E, spec.k, 1, spec.d, sigma0=0.0)
    with torch.no_grad():
        model.W[:, :, 0] = a * (feats.u if which == "u" else feats.v)
    return model


def test_feature_attack_breaks_the_dense_detector_not_the_robust_one():
    spec = PatchSpec(k=2, P=48, d=64, alpha=1.0, beta=0.4, sigma_n=0.0)
    feats, _, test = sample_ensemble(spec, [0], 1, 200, make_generator)
    ts = FeatureTrainSpec(eval_eps=0.4, eval_pgd_steps=0)
    clean, feat, _ = evaluate_patch_cnn(_hand_model(spec, feats, "v", 2.0), feats, test, ts, None)
    assert clean.item() == 1.0
    # the attack erases v_y: every logit is 0 and argmax picks class 0, so accuracy = share of class 0
    assert feat.item() == pytest.approx((test.y == 0).float().mean().item())
    clean, feat, _ = evaluate_patch_cnn(_hand_model(spec, feats, "u", 2.0), feats, test, ts, None)
    assert clean.item() == 1.0 and feat.item() == 1.0


@pytest.mark.parametrize("a", [0.5, 1.7, 4.0])
def test_pgd_breaks_the_robust_detector_when_nonrobust_is_denser(a):
    """The obstruction in the study's docstring: adding +ε u_j to all P patches beats the one
    robust patch whenever P > (α/ε − 1)^q, which Assumption 2.3's density forces."""
    spec = PatchSpec(k=2, P=48, d=16, alpha=1.0, beta=0.4, sigma_n=0.0)
    feats, _, test = sample_ensemble(spec, [0], 1, 100, make_generator)
    ts = FeatureTrainSpec(eval_eps=0.4, eval_pgd_steps=20)
    clean, feat, pgd = evaluate_patch_cnn(_hand_model(spec, feats, "u", a), feats, test, ts, make_generator(0, "p"))
    assert clean.item() == 1.0 and feat.item() == 1.0 and pgd.item() == 0.0


@pytest.mark.filterwarnings("ignore:model outputs look like probabilities")
def test_pgd_spares_the_robust_detector_with_few_patches():
    # P = 2 < (α/ε − 1)^q = 3.375: at a = 1/(ε (α/ε − 1)) the robust patch wins
    spec = PatchSpec(k=2, P=2, d=8, alpha=1.0, beta=0.4, sigma_n=0.0)
    feats, _, test = sample_ensemble(spec, [0], 1, 100, make_generator)
    a = 1.0 / (0.4 * (1.0 / 0.4 - 1.0))
    ts = FeatureTrainSpec(eval_eps=0.4, eval_pgd_steps=20)
    _, _, pgd = evaluate_patch_cnn(_hand_model(spec, feats, "u", a), feats, test, ts, make_generator(0, "p"))
    assert pgd.item() == 1.0


def test_pgd_accuracy_is_evaluate_patch_cnns_pgd_from_the_same_generator():
    # the eps sweep of the main experiment asks for the PGD part alone
    from robustlab.train.feature import pgd_accuracy

    feats, train, test, model = setup(seeds=(0, 1, 2))
    spec = FeatureTrainSpec(method="gradient_step", steps=15, lr=1.0, eps=0.4, eval_every=15, eval_eps=0.4,
                            eval_pgd_steps=3)
    train_patch_cnn(model, feats, train, test, spec, batch_generator=make_generator(0, "b"))
    for eps in (0.05, 0.4):
        ts = dataclasses.replace(spec, eval_eps=eps)
        clean, _, pgd = evaluate_patch_cnn(model, feats, test, ts, make_generator(0, "p"))
        assert torch.equal(pgd_accuracy(model, test, ts, make_generator(0, "p")), pgd)
        assert (pgd <= clean).all()
    zero = dataclasses.replace(spec, eval_eps=0.0)
    assert torch.equal(pgd_accuracy(model, test, zero, None), evaluate_patch_cnn(model, feats, test, zero, None)[2])
    assert torch.isnan(pgd_accuracy(model, test, dataclasses.replace(spec, eval_pgd_steps=0), None)).all()


def test_evaluation_a_few_copies_at_a_time_gives_the_whole_ensembles_bits(monkeypatch):
    """evaluate_patch_cnn, pgd_accuracy and the study's threat rows split an ensemble into copy
    chunks that fit in cache: every chunk size gives the numbers of the whole ensemble at once,
    the PGD random starts included (drawn in copy order from the one generator)."""
    import robustlab.train.feature as feature
    from robustlab.studies.feature_learning.run import _threat_rows

    seeds = (0, 1, 2, 3, 4)
    spec = FeatureTrainSpec(method="gradient_step", steps=15, lr=1.0, eps=0.4, eta_tilde=15.0, probe_every=5,
                            eval_every=15, eval_eps=0.4, eval_pgd_steps=4)
    feats, train, test, model = setup(seeds)
    train_patch_cnn(model, feats, train, test, spec, batch_generator=make_generator(0, "b"),
                    attack_generator=make_generator(0, "a"), eval_generator=make_generator(0, "e"))

    def measured():
        ev = evaluate_patch_cnn(model, feats, test, spec, make_generator(0, "x"))
        pgd = feature.pgd_accuracy(model, test, spec, make_generator(0, "y"))
        threats = _threat_rows(model, feats, test, 0.4)
        return [*ev, pgd, *threats.values()]

    per_copy = test.x[0].numel()
    monkeypatch.setattr(feature, "CHUNK_FLOATS", 10 * per_copy)  # all five copies at once
    assert feature.member_chunks(5, per_copy) == [(0, 5)]
    assert feature.member_chunks(5, 1, "cuda") == [(0, 5)]  # a GPU keeps the ensemble whole
    whole = measured()
    for copies in (1, 2, 3):
        monkeypatch.setattr(feature, "CHUNK_FLOATS", copies * per_copy)
        assert len(feature.member_chunks(5, per_copy)) == -(-5 // copies)
        for a, b in zip(measured(), whole):
            assert torch.equal(a, b)
    # a chunk's model: the copies asked for, in that order, detached from the ensemble
    sub = model.members([3, 1])
    assert sub.E == 2 and torch.equal(sub.W, model.W[[3, 1]]) and sub.W.data_ptr() != model.W.data_ptr()
    assert torch.equal(sub(test.x[[3, 1]]), model(test.x)[[3, 1]])
    with torch.no_grad():
        sub.W.zero_()
    assert model.W.abs().sum() > 0


def _zero_gradient_share(monkeypatch, plain: bool) -> float:
    """Train one seed of the quick preset's PGD-training point (experiment=attack) and return
    the share of training points whose attack gradient was exactly zero; ``plain`` turns the
    attack's saturation_safe off."""
    import dataclasses

    import robustlab.attacks.pgd as pgd_module
    import robustlab.train.feature as feature
    from robustlab.studies.feature_learning import STUDY
    from robustlab.studies.feature_learning.presets import FeatureLearningConfig
    from robustlab.studies.feature_learning.run import run_points

    seen = []
    real_fn, real_attack = pgd_module.gradient_fn, feature.train_attack

    def counting(model, loss_fn, **kw):
        grad = real_fn(model, loss_fn, **kw)

        def wrapped(x, y, *, check=False):
            out = grad(x, y, check=check)
            if getattr(loss_fn, "__name__", "") == "cross_entropy":  # the training attack's loss
                seen.append(out[2].flatten(1).abs().amax(1).eq(0).float())
            return out
        return wrapped

    monkeypatch.setattr(pgd_module, "gradient_fn", counting)
    if plain:
        monkeypatch.setattr(feature, "train_attack",
                            lambda spec: dataclasses.replace(real_attack(spec), saturation_safe=False))
    cfg = FeatureLearningConfig(**{**STUDY.presets["quick"].overrides, "experiment": "attack", "method": "pgd",
                                   "pgd_steps": 3, "seed": 0,
                                   "n_test": 16, "span_steps": 2, "span_restarts": 1, "eval_pgd_steps": 1})
    run_points([cfg], "cpu")
    return float(torch.cat(seen).mean())


@pytest.mark.filterwarnings("ignore::robustlab.data.patches.AssumptionWarning")
@pytest.mark.filterwarnings("ignore::robustlab.attacks.checks.EvaluationWarning")
def test_pgd_training_moves_where_the_softmax_saturates(monkeypatch):
    """The quick preset's PGD training: with the plain cross-entropy most of its training points
    have an exactly zero attack gradient (the network fits them far past float32's softmax), so
    PGD training would be standard training; the study's saturation-safe attack has none."""
    assert _zero_gradient_share(monkeypatch, plain=True) > 0.5
    monkeypatch.undo()
    assert _zero_gradient_share(monkeypatch, plain=False) == 0.0

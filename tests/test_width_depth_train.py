"""Supervised SGD for ensembles (train/supervised.py): exactness against single models and
torch's SGD, the step-decay schedule, κ(t), and training to a target loss."""

from __future__ import annotations

import pytest
import torch

from robustlab.config import ConfigError
from robustlab.metrics import lazy_ratio
from robustlab.models.deep import DeepMLP
from robustlab.train.supervised import SGDSpec, evaluate, member_loss, train_supervised
from robustlab.utils import make_generator


def toy(n=48, d=6, k=3, seed=0, dtype=torch.float64):
    g = make_generator(seed, "toy")
    x = torch.randn(n, d, generator=g, dtype=dtype)
    x = x / x.norm(dim=1, keepdim=True)
    y = torch.randint(0, k, (n,), generator=g)
    return x, y


def test_ensemble_equals_each_copy_trained_alone():
    x, y = toy()
    spec = SGDSpec(epochs=3, lr=0.2, batch_size=10, momentum=0.9, decay_start=2, lr_gamma=0.5)
    ens = DeepMLP(6, 16, 3, 3, generators=[make_generator(s, "i") for s in range(3)], dtype=torch.float64)
    log = train_supervised(ens, x, y, spec, generators=[make_generator(s, "o") for s in range(3)])
    for s in range(3):
        one = DeepMLP(6, 16, 3, 3, generators=[make_generator(s, "i")], dtype=torch.float64)
        log1 = train_supervised(one, x, y, spec, generators=[make_generator(s, "o")])
        for W, W1 in zip(ens.weights, one.weights):
            torch.testing.assert_close(W[s:s + 1], W1, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(log.kappa[s], log1.kappa[0], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(log.loss[s], log1.loss[0], rtol=1e-10, atol=1e-12)


def test_update_is_torch_sgd_with_momentum():
    x, y = toy(n=30)
    spec = SGDSpec(epochs=2, lr=0.1, batch_size=8, momentum=0.9)
    ours = DeepMLP(6, 12, 2, 3, generators=[make_generator(1, "i")], dtype=torch.float64)
    ref = DeepMLP(6, 12, 2, 3, generators=[make_generator(1, "i")], dtype=torch.float64)
    train_supervised(ours, x, y, spec, generators=[make_generator(5, "o")])
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    g = make_generator(5, "o")
    for _ in range(2):
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), 8):
            idx = perm[i:i + 8]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ref(x[idx][None])[0], y[idx])
            loss.backward()
            opt.step()
    for W, R in zip(ours.weights, ref.weights):
        torch.testing.assert_close(W, R, rtol=1e-10, atol=1e-12)


def test_kappa_matches_the_metric():
    x, y = toy()
    model = DeepMLP(6, 32, 3, 3, generators=[make_generator(s, "i") for s in range(2)], dtype=torch.float64)
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    log = train_supervised(model, x, y, SGDSpec(epochs=4, lr=0.3, batch_size=16),
                           generators=[make_generator(s, "o") for s in range(2)])
    whole = lazy_ratio(model, init, ensemble=True)
    torch.testing.assert_close(log.kappa[:, -1], whole.double(), rtol=1e-5, atol=1e-8)
    per = lazy_ratio(model, init, ensemble=True, per_layer=True)
    for l, name in enumerate(per):
        torch.testing.assert_close(log.kappa_layers[:, -1, l], per[name].double(), rtol=1e-5, atol=1e-8)
    assert bool((log.kappa[:, 1:] > 0).all()) and log.kappa.shape == (2, 4)


def test_step_decay_schedule():
    spec = SGDSpec(epochs=8, lr=1.0, decay_start=3, lr_step=2, lr_gamma=0.5)
    assert [spec.lr_at(t) for t in range(8)] == [1, 1, 1, 0.5, 0.5, 0.25, 0.25, 0.125]
    once = SGDSpec(epochs=8, lr=1.0, decay_start=3, lr_step=0, lr_gamma=0.1)
    assert [once.lr_at(t) for t in range(5)] == pytest.approx([1, 1, 1, 0.1, 0.1])
    assert [SGDSpec(epochs=3, lr=0.5).lr_at(t) for t in range(3)] == [0.5] * 3
    x, y = toy()
    log = train_supervised(DeepMLP(6, 4, 2, 3, generators=[make_generator(0)], dtype=torch.float64), x, y,
                           spec, generators=[make_generator(0)])
    assert log.lr == [1, 1, 1, 0.5, 0.5, 0.25, 0.25, 0.125]


def test_target_loss_reports_and_freezes():
    x, _ = toy(n=40)
    y = x[:, :3].argmax(1)  # a learnable rule
    E = 3
    model = DeepMLP(6, 64, 2, 3, generators=[make_generator(s, "i") for s in range(E)], dtype=torch.float64)
    seen = {}

    def on_target(newly, epoch):
        for e in torch.nonzero(newly).flatten().tolist():
            seen[e] = (epoch, [W[e].detach().clone() for W in model.weights],
                       float(evaluate(model, x, y, "ce", E=E)[0][e]))

    spec = SGDSpec(epochs=60, lr=0.5, batch_size=8, momentum=0.9, target_loss=0.3, stop_at_target=True)
    log = train_supervised(model, x, y, spec, generators=[make_generator(s, "o") for s in range(E)],
                           on_target=on_target)
    assert sorted(seen) == list(range(E)), "every copy fits 40 points at width 64"
    for e, (epoch, weights, loss) in seen.items():
        assert int(log.reached[e]) == epoch == int(log.stopped[e])
        assert loss <= 0.3
        for W, W0 in zip(model.weights, weights):  # frozen from then on
            torch.testing.assert_close(W[e], W0, rtol=0, atol=0)
    # without stopping, the same copies reach the target at the same epochs and keep training
    model2 = DeepMLP(6, 64, 2, 3, generators=[make_generator(s, "i") for s in range(E)], dtype=torch.float64)
    log2 = train_supervised(model2, x, y, SGDSpec(epochs=60, lr=0.5, batch_size=8, momentum=0.9, target_loss=0.3),
                            generators=[make_generator(s, "o") for s in range(E)])
    assert log2.reached.tolist() == log.reached.tolist()
    assert log2.stopped.tolist() == [60] * E


def test_squared_loss_single_output():
    x, _ = toy(n=40)
    y = torch.where(x[:, 0] > 0, 1.0, -1.0).double()
    model = DeepMLP(6, 64, 2, 1, generators=[make_generator(0, "i")], dtype=torch.float64)
    log = train_supervised(model, x, y, SGDSpec(epochs=40, lr=0.05, batch_size=10, loss="mse"),
                           generators=[make_generator(0, "o")])
    assert float(log.loss[0, -1]) < 0.5 * float(log.loss[0, 0])
    per, correct = member_loss(torch.tensor([[[2.0], [-1.0]]]), torch.tensor([[1.0, 1.0]]), "mse")
    torch.testing.assert_close(per, torch.tensor([[0.5, 2.0]]))  # ½ (f − y)²
    assert correct.tolist() == [[True, False]]
    with pytest.raises(ValueError, match="single output"):
        member_loss(torch.zeros(1, 2, 3), torch.zeros(1, 2), "mse")


def test_divergence_is_reported_not_hidden():
    x, y = toy()
    model = DeepMLP(6, 32, 4, 3, generators=[make_generator(s, "i") for s in range(2)])
    log = train_supervised(model, x.float(), y, SGDSpec(epochs=5, lr=1e6, batch_size=8),
                           generators=[make_generator(s, "o") for s in range(2)])
    assert not bool(log.finite.all())


@pytest.mark.parametrize("kw,field", [
    ({"epochs": 0}, "epochs"), ({"lr": 0.0}, "lr"), ({"lr": float("nan")}, "lr"), ({"batch_size": 0}, "batch_size"),
    ({"momentum": 1.0}, "momentum"), ({"lr_gamma": 0.0}, "lr_gamma"), ({"loss": "hinge"}, "loss"),
    ({"target_loss": -1.0}, "target_loss"), ({"stop_at_target": True}, "stop_at_target"),
])
def test_bad_spec(kw, field):
    with pytest.raises(ConfigError) as info:
        SGDSpec(**{"epochs": 2, "lr": 0.1, **kw})
    assert info.value.field == field


def test_needs_leading_ensemble_dimension():
    x, y = toy()
    model = DeepMLP(6, 8, 2, 3, generators=[make_generator(0)], dtype=torch.float64)
    with pytest.raises(ValueError, match="leading ensemble"):
        train_supervised(model, x, y, SGDSpec(epochs=1, lr=0.1), generators=[make_generator(0), make_generator(1)])


@pytest.mark.parametrize("loss,momentum,stop", [("ce", 0.9, True), ("ce", 0.0, True), ("mse", 0.9, False),
                                                ("mse", 0.0, False), ("sq", 0.9, True), ("sq", 0.0, False)])
def test_closed_form_step_equals_autograd(loss, momentum, stop):
    """The DeepMLP fast path (closed-form backward, fused momentum) against autograd, float64:
    every loss, with and without momentum, with copies frozen at the target."""
    x, y = toy(n=40)
    k = 3
    if loss == "mse":
        y, k = torch.where(x[:, 0] > 0, 1.0, -1.0).double(), 1
    spec = SGDSpec(epochs=12, lr=0.3 if momentum else 0.5, batch_size=7, momentum=momentum, decay_start=8,
                   lr_step=2, loss=loss, target_loss=0.4 if stop else 0.0, stop_at_target=stop)
    logs, models = [], []
    for backprop in ("auto", "autograd"):
        m = DeepMLP(6, 64, 3, k, generators=[make_generator(s, "i") for s in range(3)], dtype=torch.float64)
        logs.append(train_supervised(m, x, y, spec, generators=[make_generator(s, "o") for s in range(3)],
                                     backprop=backprop))
        models.append(m)
    for W, R in zip(models[0].weights, models[1].weights):
        torch.testing.assert_close(W, R, rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(logs[0].loss, logs[1].loss, rtol=1e-9, atol=1e-11, equal_nan=True)
    assert logs[0].stopped.tolist() == logs[1].stopped.tolist()
    if stop:
        assert (logs[0].stopped < 12).any(), "some copy must freeze for the masked update to be tested"
    with pytest.raises(ValueError, match="backprop"):
        train_supervised(models[0], x, y, spec, generators=[make_generator(s, "o") for s in range(3)],
                         backprop="manual")


@pytest.mark.parametrize("dtype, momentum", [(torch.float64, 0.9), (torch.float32, 0.0), (torch.float32, 0.9)])
def test_stopped_copies_leave_the_batch_without_changing_the_others(dtype, momentum, monkeypatch):
    """``compact=True`` (the default) drops copies that reached the target from the batch, in
    two or more rounds. The copies still training draw the same minibatches and take the same
    steps as in the masked run, equal up to rounding (a batched product over fewer copies may
    sum in another order: ULPs); a stopped copy's later loss entries repeat its full-pass loss
    at the stop, which the masked run's running average also gives, reordered."""
    x, y = toy(n=40, dtype=dtype)
    E, T = 5, 40
    spec = SGDSpec(epochs=T, lr=0.3 if momentum else 0.6, batch_size=8, momentum=momentum, target_loss=0.35,
                   stop_at_target=True)
    import robustlab.train.supervised as sup

    step, rows = sup._mlp_step, []
    monkeypatch.setattr(sup, "_mlp_step", lambda W, *a: rows.append(W[0].shape[0]) or step(W, *a))
    runs, batch_rows = [], []
    for compact in (True, False):
        rows.clear()
        m = DeepMLP(6, 48, 3, 3, generators=[make_generator(s, "i") for s in range(E)], dtype=dtype)
        log = train_supervised(m, x, y, spec, generators=[make_generator(s, "o") for s in range(E)], compact=compact)
        runs.append((m, log))
        batch_rows.append(sorted(set(rows)))
    (mc, lc), (mm, lm) = runs
    stops = lc.stopped.tolist()
    assert len({s for s in stops if s < T}) >= 2, f"two rounds of stopping are needed for the test: {stops}"
    assert lc.stopped.tolist() == lm.stopped.tolist() and lc.reached.tolist() == lm.reached.tolist()
    tol = dict(rtol=1e-12, atol=1e-13) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-6)
    for W, R in zip(mc.weights, mm.weights):
        torch.testing.assert_close(W, R, **tol)
    last = max(stops)  # every copy stopped by then: the rest of the trace is never run
    for a, b in ((lc.kappa, lm.kappa), (lc.kappa_layers, lm.kappa_layers), (lc.loss, lm.loss), (lc.acc, lm.acc)):
        torch.testing.assert_close(a[:, :last], b[:, :last], **tol)
    for e, s in enumerate(stops):
        if s < last:
            assert torch.unique(lc.loss[e, s:last]).numel() == 1  # frozen, not recomputed
    # the stopped copies are really out of the batch: one stack size per round of stopping
    assert batch_rows[1] == [E] and len(batch_rows[0]) >= 3 and min(batch_rows[0]) < E


class _Stop(Exception):
    pass


@pytest.mark.parametrize("backprop, momentum, dtype", [("auto", 0.9, torch.float32), ("auto", 0.0, torch.float32),
                                                       ("autograd", 0.9, torch.float64)])
def test_a_run_resumed_from_a_saved_state_equals_the_uninterrupted_run(backprop, momentum, dtype):
    """``on_checkpoint`` hands out the state at each epoch boundary; a fresh model (its initial
    weights) and fresh generators given that state as ``resume`` train on to the same weights
    and traces, bit for bit, from every boundary: before, between and after copies stop at the
    target and leave the batch. A state that does not fit is refused before anything changes."""
    import io

    from robustlab.train.supervised import resume_fits

    x, y = toy(n=40, dtype=dtype)
    E, T = 5, 24
    spec = SGDSpec(epochs=T, lr=0.3 if momentum else 0.6, batch_size=8, momentum=momentum, target_loss=0.35,
                   stop_at_target=True, decay_start=16, lr_step=4)

    def fresh():
        return (DeepMLP(6, 48, 3, 3, generators=[make_generator(s, "i") for s in range(E)], dtype=dtype),
                [make_generator(s, "o") for s in range(E)])

    saved = {}

    def keep(state):  # what a checkpoint file holds: the state serialised at once
        buf = io.BytesIO()
        torch.save(state(), buf)
        st = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
        saved[st["epoch"]] = buf.getvalue()

    m, g = fresh()
    log = train_supervised(m, x, y, spec, generators=g, backprop=backprop, on_checkpoint=keep)
    stops = sorted({s for s in log.stopped.tolist() if s < T})
    if backprop == "auto":
        assert len(stops) >= 2, f"copies must stop at two epochs at least: {log.stopped.tolist()}"
    assert sorted(saved) == list(range(1, min(T, max(log.stopped.tolist()))))
    for epoch, blob in saved.items():
        state = torch.load(io.BytesIO(blob), weights_only=True)
        m2, g2 = fresh()
        assert resume_fits(state, m2, spec, E)
        log2 = train_supervised(m2, x, y, spec, generators=g2, backprop=backprop, resume=state)
        for W, R in zip(m.weights, m2.weights):
            assert torch.equal(W, R), epoch
        for a, b in ((log.loss, log2.loss), (log.acc, log2.acc), (log.kappa, log2.kappa),
                     (log.kappa_layers, log2.kappa_layers)):
            assert torch.equal(a.nan_to_num(-1.0), b.nan_to_num(-1.0)), epoch
        assert (log.lr, log.steps, log.stopped.tolist(), log.reached.tolist(), log.finite.tolist()) == \
            (log2.lr, log2.steps, log2.stopped.tolist(), log2.reached.tolist(), log2.finite.tolist())
    # another schedule or model: refused, the model untouched
    state = torch.load(io.BytesIO(saved[1]), weights_only=True)
    m3, g3 = fresh()
    before = [w.clone() for w in m3.weights]
    longer = SGDSpec(**{**spec.__dict__, "epochs": T + 1})
    assert not resume_fits(state, m3, longer, E) and not resume_fits({"epoch": 1}, m3, spec, E)
    with pytest.raises(ValueError, match="does not fit"):
        train_supervised(m3, x, y, longer, generators=g3, backprop=backprop, resume=state)
    assert all(torch.equal(a, b) for a, b in zip(before, m3.weights))
    other = DeepMLP(6, 32, 3, 3, generators=[make_generator(s, "i") for s in range(E)], dtype=dtype)
    assert not resume_fits(state, other, spec, E)


def test_on_step_sees_the_model_after_each_step_until_a_copy_stops():
    """Thm 3's window (issue 54): on_step(step) after every SGD step, the model as it stands; the
    weights it sees after step s are the ones a run of s steps ends with."""
    x, y = toy()
    seen = {}

    def run(epochs, hook=None):
        net = DeepMLP(6, 8, 2, 3, generators=[make_generator(s, "init") for s in range(2)], dtype=torch.float64)
        spec = SGDSpec(epochs=epochs, lr=0.1, batch_size=12, momentum=0.9)
        train_supervised(net, x, y, spec, generators=[make_generator(s, "order") for s in range(2)], on_step=hook)
        return net

    def hook(step):
        seen[step] = [W.detach().clone() for W in net.weights]

    net = DeepMLP(6, 8, 2, 3, generators=[make_generator(s, "init") for s in range(2)], dtype=torch.float64)
    train_supervised(net, x, y, SGDSpec(epochs=2, lr=0.1, batch_size=12, momentum=0.9),
                     generators=[make_generator(s, "order") for s in range(2)], on_step=hook)
    assert sorted(seen) == list(range(1, 9))  # 48 points in minibatches of 12: 4 steps per epoch
    one_epoch = run(1)
    assert all(torch.equal(a, b) for a, b in zip(seen[4], one_epoch.weights))


def test_spectral_change_per_layer_against_svd():
    from robustlab.studies.width_depth_init.run import spectral_change

    g = torch.Generator().manual_seed(0)
    w0 = [torch.randn(3, 5, 7, generator=g, dtype=torch.float64), torch.randn(3, 7, 2, generator=g, dtype=torch.float64)]
    w = [a + 0.1 * torch.randn(a.shape, generator=g, dtype=torch.float64) for a in w0]
    got = spectral_change(w0, w)
    assert got.shape == (3, 2)
    for e in range(3):
        for l in range(2):
            want = torch.linalg.svdvals(w[l][e] - w0[l][e])[0] / torch.linalg.svdvals(w0[l][e])[0]
            assert float(got[e, l]) == pytest.approx(float(want), rel=1e-12)


@pytest.mark.parametrize("field,value", [("early_steps", (10, 5)), ("early_steps", (0,)), ("loss_marks", (0.0,))])
def test_bad_windows_are_refused(field, value):
    from robustlab.studies.width_depth_init.run import WidthDepthInitConfig

    with pytest.raises(ConfigError):
        WidthDepthInitConfig(**{field: value})

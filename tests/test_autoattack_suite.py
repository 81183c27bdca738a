"""AutoAttack's standard suite in robustlab: APGD-T and Square of its own (checked against their
definitions and against torchattacks), FAB-T through the torchattacks adapter, and
``robustlab.evaluate(..., attacks="autoattack")``'s table."""

import pytest
import torch
from torch import nn

import robustlab
from robustlab.attacks import APGDT, Linf, Square, dlr_targeted_loss
from robustlab.attacks.square import p_schedule
from robustlab.config import ConfigError


@pytest.fixture(scope="module")
def cnn():
    """The 8×8 digits CNN of test_evaluate (20 epochs on 1,400 digits), 150 held-out digits."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(d.target)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(x), generator=g)
    tr, te = perm[:1400], perm[1400:1550]
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1, stride=2),
                        nn.ReLU(), nn.Flatten(), nn.Linear(32 * 16, 10))
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    for _ in range(20):
        for b in torch.split(tr[torch.randperm(1400, generator=g)], 100):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x[b]), y[b]).backward()
            opt.step()
    return net.eval(), x[te], y[te]


def robust(net, x_adv, y) -> int:
    with torch.no_grad():
        return int((net(x_adv).argmax(1) == y).sum())


def test_targeted_dlr_loss_by_hand():
    z = torch.tensor([[5.0, 3.0, 1.0, 0.0, -2.0], [0.0, 4.0, 1.0, 2.0, 6.0]])
    y, t = torch.tensor([0, 1]), torch.tensor([1, 4])
    # −(z_y − z_t) / (z_π1 − (z_π3 + z_π4) / 2): row 0: −(5 − 3)/(5 − 0.5), row 1: −(4 − 6)/(6 − 1.5)
    assert torch.allclose(dlr_targeted_loss(z, y, t), torch.tensor([-2 / 4.5, 2 / 4.5]))
    assert torch.allclose(dlr_targeted_loss(3 * z - 1, y, t), dlr_targeted_loss(z, y, t))  # shift, scale
    with pytest.raises(ValueError, match="k >= 4"):
        dlr_targeted_loss(torch.zeros(2, 3), torch.tensor([0, 1]), torch.tensor([1, 2]))


def test_square_schedule_and_config():
    assert p_schedule(0.8, 0, 10000) == 0.8 and p_schedule(0.8, 11, 10000) == 0.4
    assert p_schedule(0.8, 8001, 10000) == 0.8 / 512
    assert p_schedule(0.8, 501, 5000) == 0.8 / 32  # rescaled: query 501 of 5,000 is 1,002 of 10,000
    with pytest.raises(ConfigError):
        Square(Linf(0.1), queries=0)
    from robustlab.attacks import L2

    with pytest.raises(ConfigError, match="threat"):
        Square(L2(0.5))


def test_apgdt_and_square_stay_in_the_ball_and_box_and_repeat(cnn):
    net, x, y = cnn
    x, y = x[:40], y[:40]
    for attack in (APGDT(Linf(0.1), steps=10, targets=3), Square(Linf(0.1), queries=200),
                   APGDT(Linf(0.1), steps=10, targets=2, restarts=2), Square(Linf(0.1), queries=100, restarts=2)):
        a = attack(net, x, y, generator=torch.Generator().manual_seed(3))
        b = attack(net, x, y, generator=torch.Generator().manual_seed(3))
        assert torch.equal(a, b)
        assert (a - x).abs().max() <= 0.1 + 1e-6 and a.min() >= 0 and a.max() <= 1
        assert robust(net, a, y) < robust(net, x, y)
    with pytest.raises(ValueError, match="images"):
        Square(Linf(0.1), queries=5)(nn.Linear(64, 10), x.flatten(1), y)


def test_square_needs_no_gradient(cnn):
    """A model whose input gradient is exactly zero everywhere (the input enters detached, times
    a zero in the graph): gradient attacks see nothing, Square's random search still breaks it."""
    net, x, y = cnn
    x, y = x[:60], y[:60]

    class Masked(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, u):
            return self.inner(u.detach() + 0 * u)

    masked = Masked(net).eval()
    gen = torch.Generator().manual_seed(0)
    sq = robust(net, Square(Linf(0.1), queries=500)(masked, x, y, generator=gen), y)
    from robustlab.attacks import APGD

    with pytest.warns(robustlab.attacks.EvaluationWarning, match="exactly zero"):
        ap = robust(net, APGD(Linf(0.1), steps=20)(masked, x, y, generator=gen), y)
    assert sq < ap - 10


@pytest.mark.parametrize("eps", [0.1])
def test_apgdt_and_square_against_torchattacks(cnn, eps):
    """APGD-T (100 steps, 9 targets) within one sample in fifty of torchattacks' APGDT on 150
    digits; Square (1,000 queries) at least as strong as torchattacks' Square, less a sample in
    fifty (its window also visits the last row and column, the reference code's never does)."""
    torchattacks = pytest.importorskip("torchattacks")
    net, x, y = cnn
    ours = robust(net, APGDT(Linf(eps), steps=100)(net, x, y, generator=torch.Generator().manual_seed(0)), y)
    theirs = robust(net, torchattacks.APGDT(net, eps=eps, steps=100, n_classes=10, seed=0)(x, y), y)
    assert abs(ours - theirs) <= 3, (ours, theirs)
    ours = robust(net, Square(Linf(eps), queries=1000)(net, x, y, generator=torch.Generator().manual_seed(0)), y)
    theirs = robust(net, torchattacks.Square(net, eps=eps, n_queries=1000, seed=0)(x, y), y)
    assert ours <= theirs + 3, (ours, theirs)


def test_evaluate_autoattack_suite_table(cnn):
    pytest.importorskip("torchattacks")
    net, x, y = cnn
    x, y = x[:50], y[:50]
    state = torch.random.get_rng_state()
    ev = robustlab.evaluate(net, x, y, eps=[0.1], attacks="autoattack", steps=10, cascade=True)
    assert torch.equal(torch.random.get_rng_state(), state)  # the adapter leaves the global generator alone
    t = ev.table.set_index("attack")
    assert list(t.index) == ["clean", "apgd-ce", "apgd-t", "fab-t", "square", "worst case"]
    assert t.loc["fab-t", "implementation"].startswith("torchattacks") and "adapter" in t.loc["fab-t", "implementation"]
    assert t.loc["apgd-t", "implementation"].startswith("robustlab")
    # cascade: each attack sees what the earlier ones left, and the rows never go up
    acc = t["n_correct"].tolist()
    assert acc == sorted(acc, reverse=True) and t.loc["worst case", "n_correct"] == t.loc["square", "n_correct"]
    assert t.loc["apgd-t", "n_attacked"] == t.loc["apgd-ce", "n_correct"]
    with pytest.raises(robustlab.UserError, match="at least 4 classes"):
        robustlab.evaluate(nn.Linear(4, 3), torch.rand(5, 4), torch.tensor([0, 1, 2, 0, 1]), attacks=["apgd-t"])


def test_fab_t_adapter_maps_other_boxes(cnn):
    """torchattacks attacks [0, 1]: inputs in [−1, 1] are mapped onto it with ε; the points come
    back inside the caller's ball and box, and break the model as often as in pixel space."""
    pytest.importorskip("torchattacks")
    from robustlab.evaluation import TorchattacksAttack

    net, x, y = cnn
    x, y = x[:40], y[:40]
    shifted = nn.Sequential(robustlab.Normalized(net, mean=[-1.0], std=[2.0]))  # takes 2x − 1 back to x
    opts = (("steps", 10), ("n_restarts", 1), ("multi_targeted", True), ("n_classes", 10))
    gen = torch.Generator().manual_seed(0)
    a = TorchattacksAttack(Linf(0.1), cls="FAB", options=opts)(net, x, y, generator=gen)
    b = TorchattacksAttack(Linf(0.2), cls="FAB", options=opts)(shifted, 2 * x - 1, y, bounds=(-1.0, 1.0),
                                                              generator=torch.Generator().manual_seed(0))
    assert (b - (2 * x - 1)).abs().max() <= 0.2 + 1e-6 and b.min() >= -1 and b.max() <= 1
    assert abs(robust(shifted, b, y) - robust(net, a, y)) <= 2


def test_dlr_losses_closed_form_gradients_match_autograd_in_float64():
    """The logit gradients APGD and APGD-T use without autograd, against autograd of the losses."""
    from robustlab.attacks.apgd_t import _Targeted
    from robustlab.attacks.losses import closed_form, dlr_loss

    g = torch.Generator().manual_seed(0)
    z = torch.randn(64, 10, generator=g, dtype=torch.float64) * 3
    y = torch.randint(0, 10, (64,), generator=g)
    y[:8] = z[:8].argmax(1)  # some correctly classified rows
    t = (z.argsort(1, descending=True)[:, 1] + torch.randint(0, 2, (64,), generator=g)) % 10
    for fn in (dlr_loss, _Targeted(t)):
        zz = z.clone().requires_grad_(True)
        value = fn(zz, y)
        (ref,) = torch.autograd.grad(value.sum(), zz)
        v, dz, ok = closed_form(fn)(z, y, True)
        assert torch.allclose(v, value.detach(), rtol=1e-12, atol=1e-12)
        assert torch.allclose(dz, ref, rtol=1e-10, atol=1e-12)
        assert torch.equal(ok, z.argmax(1) == y)


def test_suite_without_torchattacks_and_given_attacks(cnn, monkeypatch):
    """fab-t (and so the autoattack suite) needs torchattacks: without it, one line saying so,
    before any attack runs; a robustlab Attack is re-budgeted per ε, and must match the threat."""
    from robustlab.attacks import APGD, L2
    from robustlab.evaluation import suite

    net, x, y = cnn
    monkeypatch.setattr(suite, "torchattacks_version", lambda: None)
    for attacks in ("autoattack", ["apgd-ce", "fab-t"]):
        with pytest.raises(robustlab.UserError, match="torchattacks is not installed"):
            robustlab.evaluate(net, x[:5], y[:5], eps=0.1, attacks=attacks)
    ev = robustlab.evaluate(net, x[:30], y[:30], eps=[0.0, 0.2], attacks=[APGD(Linf(0.05), steps=5)])
    t = ev.table.set_index(["eps", "attack"])
    assert t.loc[(0.0, "APGD"), "n_correct"] == t.loc[(0.0, "clean"), "n_correct"]  # ε = 0: nothing moves
    assert t.loc[(0.2, "APGD"), "n_correct"] < t.loc[(0.0, "APGD"), "n_correct"]
    with pytest.raises(robustlab.UserError, match="threat"):
        robustlab.evaluate(net, x[:5], y[:5], eps=0.1, attacks=[APGD(L2(0.5))])


def test_square_on_flat_inputs_is_a_one_line_error():
    torch.manual_seed(0)
    net = nn.Linear(64, 10)
    x = torch.rand(8, 64, generator=torch.Generator().manual_seed(0))
    y = net(x).argmax(1).detach()  # every sample correct clean, so Square is asked to run
    with pytest.raises(robustlab.UserError, match="square.*images"):
        robustlab.evaluate(net, x, y, eps=0.1, attacks=["square"])

"""Attacks on a small network trained in the test (sklearn digits, 10 classes, pixels in
[0, 1]): sanity of robust accuracy, no gradient masking, and a cross-check against an
independent implementation (torchattacks)."""

from __future__ import annotations

import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

from robustlab.attacks import FGSM, L2, PGD, Linf
from robustlab.metrics import accuracy, accuracy_vs_eps, robust_accuracy


@pytest.fixture(scope="module")
def trained():
    X, Y = load_digits(return_X_y=True)
    x = torch.tensor(X / 16.0, dtype=torch.float32)
    y = torch.tensor(Y, dtype=torch.long)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(x), generator=g)
    tr, te = perm[:1200], perm[1200:1500]
    torch.manual_seed(0)  # nn.Linear's own init; the test only needs *a* trained net
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[tr]), y[tr]).backward()
        opt.step()
    model.eval()
    return model, x[te], y[te]


def test_trained_net_is_accurate(trained):
    model, x, y = trained
    assert accuracy(model, x, y) > 0.9


@pytest.mark.parametrize("threat", [Linf, L2])
def test_robust_accuracy_monotone_pgd_beats_fgsm_and_reaches_zero(trained, threat):
    model, x, y = trained
    eps = [0.0, 0.02, 0.05, 0.1, 0.2, 0.4] if threat is Linf else [0.0, 0.25, 0.5, 1.0, 2.0, 4.0]
    pgd = PGD(threat(1.0), steps=20, step_size=0.25, random_start=False)
    # honest curve: each ε attacked on its own (no cumulative worst case)
    curve = accuracy_vs_eps(model, x, y, pgd, eps, cumulative=False)
    assert all(b <= a for a, b in zip(curve, curve[1:])), curve
    assert curve[0] == pytest.approx(accuracy(model, x, y))
    for e in eps[1:]:
        a_pgd = robust_accuracy(model, x, y, pgd.with_eps(e))
        a_fgsm = robust_accuracy(model, x, y, FGSM(threat(e)))
        assert a_pgd <= a_fgsm, (e, a_pgd, a_fgsm)
    # no gradient masking: a large enough budget breaks every point
    big = 1.0 if threat is Linf else 8.0
    assert robust_accuracy(model, x, y, PGD(threat(big), steps=20, step_size=big / 4, random_start=False)) == 0.0


def test_worst_case_over_attacks_and_restarts(trained):
    model, x, y = trained
    f, p = FGSM(Linf(0.05)), PGD(Linf(0.05), steps=10, step_size=0.0125, random_start=False)
    both = robust_accuracy(model, x, y, [f, p], per_sample=True)
    assert torch.equal(
        both, robust_accuracy(model, x, y, f, per_sample=True) & robust_accuracy(model, x, y, p, per_sample=True)
    )
    g = torch.Generator().manual_seed(0)
    r1 = robust_accuracy(model, x, y, PGD(Linf(0.05), steps=10, step_size=0.0125, random_start=True), generator=g)
    g = torch.Generator().manual_seed(0)
    r4 = robust_accuracy(
        model, x, y, PGD(Linf(0.05), steps=10, step_size=0.0125, random_start=True, restarts=4), generator=g
    )
    assert r4 <= r1


def test_at_least_as_strong_as_torchattacks(trained):
    ta = pytest.importorskip("torchattacks")
    model, x, y = trained
    eps, alpha, steps = 0.05, 0.01, 10
    # same deterministic iterates (no random start): ours also keeps the best iterate
    theirs = ta.PGD(model, eps=eps, alpha=alpha, steps=steps, random_start=False)(x, y)
    ours = PGD(Linf(eps), steps=steps, step_size=alpha, random_start=False)(model, x, y)
    acc_theirs, acc_ours = accuracy(model, theirs, y), accuracy(model, ours, y)
    assert acc_ours <= acc_theirs, (acc_ours, acc_theirs)
    # with random starts (different noise): ours with one restart within noise, with 3 no worse
    torch.manual_seed(0)
    theirs = ta.PGD(model, eps=eps, alpha=alpha, steps=steps, random_start=True)(x, y)
    g = torch.Generator().manual_seed(0)
    ours3 = PGD(Linf(eps), steps=steps, step_size=alpha, random_start=True, restarts=3)(model, x, y, generator=g)
    assert accuracy(model, ours3, y) <= accuracy(model, theirs, y)
    # the attacks agree in effect: both far below clean accuracy
    assert acc_theirs < accuracy(model, x, y) - 0.2


@pytest.mark.parametrize("threat", [Linf(0.05), L2(0.6)])
def test_early_stop_changes_cost_not_outcome(trained, threat):
    """Rows do not interact, so stopping fooled rows early leaves the fooled set unchanged."""
    model, x, y = trained
    pgd = PGD(threat, steps=15, step_size=threat.eps / 4, random_start=True, restarts=2)
    full = robust_accuracy(model, x, y, pgd, generator=torch.Generator().manual_seed(3), early_stop=False, per_sample=True)
    fast = robust_accuracy(
        model, x, y, pgd, generator=torch.Generator().manual_seed(3), early_stop=True, per_sample=True
    )
    assert 0.05 < float(full.float().mean()) < 0.95  # a budget where the question is open
    assert torch.equal(full, fast)

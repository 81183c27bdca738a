"""Study ``lazy-adversarial``: adversarial training cannot make a lazy network robust
(lazy training, NeurIPS 2022, §5.2 and Alg. 1).

Each point adversarially trains E seeds of the two-layer network with every neuron projected
back onto its ball after each SGD step (``C₀/√m``, or an absolute radius ``R``), then
measures clean and robust test accuracy under the same ℓ2 PGD. Two grids:

* robust accuracy against ``ε`` for several ``d`` inside the lazy ball — the theorem says
  a perturbation of size ``O(1/√d)`` always suffices, so the accuracy should collapse once
  ``ε`` passes a threshold that shrinks like ``d^{−1/2}``;
* robust accuracy against the radius ``R = R_factor·C0/√m`` for several widths at fixed ``d``
  and ``ε`` — once the neurons may move a little beyond the lazy radius, adversarial training
  should succeed.

The claims, their premises and controls are declared in :mod:`.adversarial_claims`.
Training stops on the authors' patience rule, counted only once a copy has reached the
"trained" bound on its clean training accuracy (or after a burn-in): the authors' rule counted
from the untrained network, whose robust accuracy (0.5 for a network that predicts one class)
is the first "best", and stopped 3 of 5 paper-preset seeds at d = 25 after 21 epochs with
clean accuracy 0.49–0.53.
"""

from __future__ import annotations

import math

import torch

from ...metrics import accuracy, neuron_distance
from ...models.ensemble import Flat, fold
from ...train.lazy import adversarial_examples, train_lazy_adversarial
from ..base import Preset, Study
from . import adversarial_claims as lvc
from .common import (
    MIN_TRAINED,
    NON_LAZY_C0,
    RICH_INIT_SCALE,
    LazyAdversarialConfig,
    input_bounds,
    input_grad_norm,
    neuron_params,
    start_point,
    weight_change,
    work,
)
from .figures import adversarial_figures as figures

SOURCE = lvc.SOURCE
eps_sharp_claim, eps_threshold_claim = lvc.eps_sharp_claim, lvc.eps_threshold_claim
radius_growth_claim = lvc.radius_growth_claim
claims = lvc.claims


# ---------------------------------------------------------------------------------------
# running a point

def run_points(cfgs: list[LazyAdversarialConfig], device: str = "cpu") -> list:
    """Adversarially train the seeds of one point as an ensemble; robust test accuracy."""
    st = start_point(cfgs, device)
    base, data, E, d, model, r = st.base, st.data, st.E, st.d, st.model, st.radius
    bounds = input_bounds(base)
    g0 = input_grad_norm(model, data.x_test)  # (E,): the gain's denominator, over every test point
    log = train_lazy_adversarial(
        model, data.x_train, data.y_train, radius=r, eps=base.eps, generators=st.generators,
        attack_steps=base.attack_steps, attack_step_size=base.eps / base.attack_step_div, bounds=bounds,
        lr=base.lr, batch_size=base.batch_size, patience=base.patience, min_gain=base.min_gain,
        max_epochs=base.epochs, arm_acc=base.patience_from, burn_in=base.burn_in)
    model.eval()
    flat = Flat(model, E).eval()
    steps = base.test_attack_steps or base.attack_steps
    x_adv = adversarial_examples(model, data.x_test, data.y_test, eps=base.eps, steps=steps,
                                 step_size=base.eps * base.attack_steps / (base.attack_step_div * steps),
                                 bounds=bounds)  # same path length ε·steps/div as in training
    yt = data.y_test.repeat(E)
    clean = accuracy(flat, fold(data.x_test.expand(E, -1, -1)), yt, per_sample=True).view(E, -1)
    robust = accuracy(flat, fold(x_adv), yt, per_sample=True).view(E, -1) & clean
    with torch.no_grad():
        offsets = neuron_distance(*neuron_params(model), per_neuron=True)  # (E, m)
    g1, moved = input_grad_norm(model, data.x_test), weight_change(model)
    final = log.history[-1]
    # compared as the stopping rule compares (a float32 tensor against the bound): 900/1000 is 0.9 in
    # float32 but 0.89999998 as a Python float, which read "never reached" for networks the rule armed
    armed = [next((i + 1 for i, h in enumerate(log.history)
                   if base.patience_from is not None and bool(h["clean_train_acc"][e] >= base.patience_from)),
                  None) for e in range(E)]
    lazy_r = base.C0 / math.sqrt(base.m)
    return [[{
        "d": d, "radius": r, "lazy_radius": lazy_r, "radius_over_lazy": r / lazy_r,
        "epochs_run": float(log.epochs[e]), "stopped": bool(log.stopped[e]),
        "reached_train_bound_at": armed[e],
        "offset_ratio": float(offsets[e].max() / r),
        "train_loss": float(final["train_loss"][e]),
        "robust_train_acc": float(final["robust_train_acc"][e]),
        "clean_acc": float(clean[e].float().mean()),
        "robust_acc": float(robust[e].float().mean()),
        "grad_all": float(g1[e]), "init_grad_all": float(g0[e]), "grad_gain": float(g1[e] / g0[e]),
        "weight_change": float(moved[e]),
    }] for e in range(E)]


# ---------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------

def _work(cfg: LazyAdversarialConfig) -> float:
    """Relative cost of a point: each epoch is a PGD of ``attack_steps`` steps (a forward and
    a pull-back each, plus the scoring pass) and one SGD pass over the training set."""
    return work(cfg, cfg.attack_steps + 2)


STUDY = Study(
    name="lazy-adversarial",
    title="Adversarial training inside the lazy ball",
    source=SOURCE,
    summary=("Projected adversarial training (ℓ2 PGD) with every neuron kept near its initialisation: "
             "robust accuracy against ε per d, and against the radius R per width."),
    config=LazyAdversarialConfig,
    presets={
        "quick": Preset(
            # 5 PGD steps of ε/2 in training (20 of ε/8 at test) travel the same 2.5ε as the
            # authors' 100 steps of ε/40. lr 0.5, 50× the authors' 0.01: at lr 0.01 a network
            # needs 100–200 epochs to reach the "trained" bound, which the quick budget cannot
            # pay; the projection after every step keeps every network in its ball whatever the
            # step, but larger steps reach a different point of the ball (this weakens
            # radius-growth most: whether the freedom beyond C0/√m is used depends on training).
            # Patience 5 armed ONLY once clean training accuracy reaches 0.9 (lazy2: no burn-in;
            # the burn-in at epoch 10 stopped ~50 networks a seed below the bound), and a hard cap
            # of 20 epochs (a network at the cap is recorded stopped = False, epochs_run = 20):
            # the rule cannot stop a network below the "trained" premise.
            {"sphere": True, "C0": 5.0, "m": 64, "max_train": 256, "attack_steps": 5,
             "attack_step_div": 2.0, "test_attack_steps": 20, "lr": 0.5, "patience": 5,
             "patience_from": MIN_TRAINED, "burn_in": 0, "epochs": 20},
            (
                # d = 25 and 49 included (where the paper preset failed); ε up to 0.8, where a
                # d = 25 network's robust accuracy halves (ε½ ≈ 2.3/√d)
                {"size": [5, 7, 10, 14, 28], "eps": [0.025, 0.05, 0.1, 0.2, 0.4, 0.8], "epochs": [20]},
                # the rich control on three of those sizes (its rules need >= 2 and >= 3 values of
                # d): a 100× smaller first layer and a ball that never binds (issue #53: C0 = 1000
                # from the standard init moved to C0_used 5.6–30 only, a lazy network by Def. 2.1)
                {"size": [5, 10, 28], "eps": [0.025, 0.05, 0.1, 0.2, 0.4, 0.8], "epochs": [20],
                 "C0": [NON_LAZY_C0], "init_scale": [RICH_INIT_SCALE]},
                # radius-growth is not measured at quick (integrator, 2026-11-28): its ε curves at 1/2/4
                # lazy radii and the rich control's at 0.25/0.5/1 (30 points, 10.5 CPU-s of 42) read
                # inconclusive at base seeds 0 and 17 (0.437 [0.320, 0.612], 0.484 [0.249, 0.569] against
                # 0.5), and the engine's power estimate asks 39-51 seeds, which quick cannot pay. They kept
                # the all-studies quick run at 95 s, over its 90 s budget. The paper preset is sized for
                # that claim (48 seeds) and decides it (the m = 64, d = 196 slice: R 0.814 [0.759, 0.865],
                # control C). At quick radius-growth reads not applicable, "not measured in this run".
            ),
            # Seeds from a power estimate (stats.seeds_for, power 0.9) on the former grid: the
            # halving-ε slope −0.48 against the band edge −0.7, per-(d, seed) spread 0.29 -> 8
            # seeds; robust accuracy at the smallest R 0.07 against 0.25, spread 0.11 -> 7.
            n_seeds=8,
            description="5 sizes × 6 ε inside the ball C0=5, 3 of them for the rich control (init ×0.01, C0=1000); "
                        "8 seeds (from a power estimate); radius-growth only in the paper preset"),
        "paper": Preset(
            # lazy2: sized by a power estimate per claim to decide each within 60 min on 2 cores,
            # with the quick preset's training (5 PGD steps of ε/2 travel the authors' 2.5ε; lr 0.5;
            # patience 5 armed only at clean training accuracy 0.9, no burn-in; a hard cap of 30
            # epochs, recorded) on the full data (1000 training points) at the authors' width 256.
            # The authors' Alg. 1 (100 PGD steps of ε/40, lr 0.01, up to 1000 epochs) was ≈ 6.8 h.
            {"sphere": True, "C0": 5.0, "m": 256, "attack_steps": 5, "attack_step_div": 2.0,
             "test_attack_steps": 20, "lr": 0.5, "patience": 5, "patience_from": MIN_TRAINED,
             "burn_in": 0, "epochs": 30},
            (
                {"size": [5, 7, 10, 14, 20, 28], "eps": [0.0125, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8]},
                # the rich control on three sizes, as in the quick preset (its rules need 2 and 3 values of d)
                {"size": [5, 10, 28], "eps": [0.0125, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8],
                 "C0": [NON_LAZY_C0], "init_scale": [RICH_INIT_SCALE]},
                # radius-growth: ε curves at 1–4 lazy radii at two widths, the rich control where its ball binds
                {"size": [14], "eps": [0.05, 0.1, 0.2, 0.4, 0.8], "m": [64, 256],
                 "R_factor": [1.0, 1.5, 2.0, 3.0, 4.0]},
                {"size": [14], "eps": [0.05, 0.1, 0.2, 0.4, 0.8], "m": [64, 256],
                 "R_factor": [0.25, 0.5, 1.0], "init_scale": [RICH_INIT_SCALE]},
            ),
            # Seeds from the power estimates at quick (base seeds 0 and 17): radius-growth, slope
            # 0.445 against 0.5 with an interval of ±0.14 at 8 seeds, needs 39–51 (the engine's
            # seeds_needed); the ε claims are decided at 8 with margin. One count for every group:
            # 48.
            n_seeds=48,
            description="quick's training (5 PGD steps of ε/2, lr 0.5, patience 5 armed at 0.9, cap 30) on 1000 "
                        "points at m=256; 6 sizes × 7 ε, rich control on 3; ε curves at 1–4 lazy radii for "
                        "m=64/256 (rich at 0.25–1); 48 seeds (radius-growth's power estimate)"),
    },
    run_points=run_points,
    claims=claims,
    figures=figures,
    ensemble=True,
    weight=_work,
    claim_specs=lvc.SPECS,
    populations={"placebo: the rich control's even seeds against its odd seeds":
                     "the rich control's networks split by seed parity"},
    premises=lvc.PREMISES,
)

__all__ = ["STUDY", "LazyAdversarialConfig", "run_points", "claims", "figures", "eps_sharp_claim",
           "eps_threshold_claim", "radius_growth_claim"]

"""Study ``width-depth-init``: how width, depth and initialisation move perturbation stability
(width-depth-init, NeurIPS 2022: "Robustness in deep learning: the good (width), the bad (depth),
and the ugly (initialization)"; SPEC §C).

Each point trains E seeds of a depth-``L`` width-``m`` ReLU network (the paper's Table 1, see
:mod:`robustlab.models.deep`) as one ensemble with minibatch SGD and a step-decay schedule
(§5.1), recording ``κ(t) = ‖θ(t) − θ(0)‖ / ‖θ(0)‖`` every epoch (§5.2), and measures on
held-out points ``P(f, ε) = E_x E_δ ‖J_x f δ‖² = ε² E_x ‖J_x f‖_F² / (d + 2)`` (the identity;
Def. 3 per network, Def. 1 the mean over networks) with the finite difference
``‖f(x+δ) − f(x)‖²`` against it, and the accuracies beside every stability number.

**Moments of measurement** (:func:`.analysis.view`): at initialisation; when a network first
reaches ``target_acc`` training accuracy (equal fit: the paper trains to a plateau, App. E.2,
and an accuracy target does not favour networks with large logits as a loss target does); at
the end of epoch ``early_epoch`` (Thm 3's window); at the end of the schedule. A network that
never reaches the target has no equal-fit values: the claims exclude it by premise and report
the end of the schedule as its own variant (``Claim.variants``), never as a substitute.

**Claims** (:mod:`.claims`, :mod:`.lazy_claims`; issue 54 on the engine of issue 51): every
control is the claim's own rule on other runs (:data:`.claims.SPECS`, fixed before the runs).

* ``width-peak`` (Thm 1, Fig. 4a) — at the end of training where the running training loss and
  accuracy have stopped changing (App. E.2: over the last 10 epochs by <= 1 % of chance loss and
  <= 1 point; ``analysis.PLATEAU_PREMISES``), every
  He/LeCun width sweep (depths 2-4, 10 and 2 classes): the paired curve log mean P − log mean
  P_init has an interior maximum over both ends; control: the small-init sweep. Equal fit and
  the trained curve alone are reported variants.
* ``width-peak-lazy-limit`` (Thm 1's own regime) — the same rule on networks linearised at
  initialisation and solved exactly (:mod:`.linearised`, ``regime=linearised``); control: the
  small-init sweep. Its paper-scale arm (``regime=alpha``, the ``paper-alpha`` slice; reported variants,
  never the verdict): the α-scaled networks f(θ0) + α (f(θ) − f(θ0)) trained at lr/α² on the one-hot
  squared loss, every layer within 0.1 of its initialisation in spectral norm, P by finite differences
  (the identity's mean grows ~α at the ReLU kinks), beside the linearised twins (min-norm, and after the
  arm's own steps: ``lin_steps``).
* ``width-peak-location``, ``width-peak-n-train`` (exploratory) — the peak's width against
  depth, and against the training-set size.
* ``depth-init-at-init`` (self-check) — the closed form at t = 0.
* ``depth-init-trained-{lecun,he,ntk}`` (§5.4) — the slope on depth of log mean P after training
  minus that at initialisation, below 0 for LeCun, above 0 for He and NTK; control: the other
  init's depth sweep (He for LeCun, LeCun for He and NTK) under the same rule.
* ``nonlazy-width-early`` (Thm 3) — slope on log m of log P(epoch 1)/P(init) below 0 at every
  γ; control: He in the same setting. ``nonlazy-width`` (Fig. 4b) — the small init's slope of
  log P on log m below 0; control: He.
* ``kappa`` (§5.2) — the non-lazy init's κ(t) growth exponent in [0.75, 1.25] in both windows;
  control: He. ``kappa-width`` (exploratory) — κ falls with width for both.
* ``mc-identity`` — a self-check: the Monte Carlo estimate against the identity.
"""

from __future__ import annotations

from ..base import Preset, Study
from .analysis import (
    FD_TOL,
    KAPPA_LAZY,
    PREMISES,
    PROTOCOLS,
    curve,
    finals,
    protocols,
    series,
    view,
)
from .claims import (
    POPULATIONS,
    SPECS,
    claim_depth_at_init,
    claim_depth_trained,
    claim_kappa,
    claim_kappa_width,
    claim_lecun_nonlazy,
    claim_mc,
    claim_nonlazy,
    claim_nonlazy_early,
    claim_width,
    claim_width_lazy_limit,
    claim_width_location,
    claim_width_moves,
    claims,
    growth_exponent,
)
from .figures import figures
from .lazy_claims import _closed_form_at_init, _he_vs_lecun_same_seed, closed_form_at_init
from .presets import (
    PAPER_BASE,
    PAPER_GRID,
    PAPER_SLICE_SEEDS,
    PAPER_SLICES,
    QUICK_BASE,
    QUICK_GRID,
    QUICK_WIDTH_SEEDS,
)
from .run import (
    ACC_FLOOR,
    AT_TARGET,
    PROBE_BATCHES,
    SOURCE,
    WidthDepthInitConfig,
    _n_train,
    _per_member_stability,
    _prepared,
    _stratified_subset,
    build_model,
    load_data,
    point_flops,
    probe_point,
    run_points,
)

__all__ = ["STUDY", "FD_TOL", "KAPPA_LAZY", "PREMISES", "PROTOCOLS", "SPECS", "curve", "finals", "protocols",
           "series", "view", "claim_depth_at_init", "claim_depth_trained", "claim_kappa", "claim_lecun_nonlazy",
           "claim_mc", "claim_nonlazy", "claim_nonlazy_early", "claim_width", "claim_width_moves", "claims",
           "claim_width_location", "claim_width_lazy_limit", "claim_kappa_width", "POPULATIONS",
           "growth_exponent", "figures", "_closed_form_at_init", "_he_vs_lecun_same_seed", "closed_form_at_init",
           "PAPER_BASE", "PAPER_GRID", "PAPER_SLICE_SEEDS", "PAPER_SLICES", "QUICK_BASE", "QUICK_GRID",
           "QUICK_WIDTH_SEEDS", "ACC_FLOOR", "AT_TARGET", "PROBE_BATCHES", "SOURCE", "WidthDepthInitConfig",
           "_n_train", "_per_member_stability", "_prepared", "_stratified_subset", "build_model", "load_data",
           "point_flops", "probe_point", "run_points"]

STUDY = Study(
    name="width-depth-init",
    title="Width, depth and initialisation: perturbation stability of trained ReLU networks",
    source=SOURCE,
    summary=("Trains depth-L width-m ReLU networks (LeCun, He, NTK and a small non-lazy initialisation) as "
             "ensembles over seeds with SGD and step decay, records kappa(t) every epoch, and measures the "
             "perturbation stability E|<grad f, delta>|^2 (exact identity, Monte Carlo at one point) beside "
             "train and test accuracy, across widths from under to well over the training-set size."),
    config=WidthDepthInitConfig,
    presets={
        # 5 seeds, from an 8-seed pilot (base seed 0): stats.seeds_for gives 4 for width-peak's He
        # depth-2 part (effect 1.22, per-seed sd 0.51) and 5 for its He depth-3 part, whose peak
        # sits where the networks start to fit 200 points; over 10 random 5-seed subsets of the
        # pilot every claim kept one verdict (at 4 seeds width-peak was inconclusive in 3 of 10).
        # Issue 54 set the width sweeps back to 5 (QUICK_WIDTH_SEEDS, see there) to fit depth 4 and
        # the lazy limit into the old CPU budget.
        "quick": Preset(QUICK_BASE, QUICK_GRID, n_seeds=5,
                        # issue 51 capped width-peak here (Preset.undecided: its sampled-init paired statistic
                        # read C at base seed 0 and I at 17); issue 54's second round removes the init term's
                        # noise by the closed form, and the claim reads I at both seeds (seed 0: raw R, no
                        # working control; seed 17: undecided at the He 2-class sweep), so the cap is gone
                        description="mnist5k 14x14, 200 training points, widths 1-1024 at depths 2-4 (and a 2-class "
                                    "sweep), depths 2-6 (35 networks per depth at init), 50 epochs, the lazy limit "
                                    "(linearised, 100 points, 10 and 2 classes), 5 seeds (~1.5 min on 2 idle cores)"),
        "paper": Preset(PAPER_BASE, PAPER_GRID, n_seeds=5,
                        description="mnist5k 28x28 (4000 training points), widths 1-16384, depths 2-8, 50 epochs "
                                    "with step decay, 5 seeds, and the width-n, Thm 3 and linearised depth blocks of the slices "
                                    "(5810 TFLOP of products: a floor of 5.4 h on 2 CPU cores, about 10 h estimated by "
                                    "--dry-run; about 8 min on one H100 with --device cuda)"),
        **{f"paper-{name}": Preset(PAPER_BASE, grid, n_seeds=PAPER_SLICE_SEEDS,
                                   description=f"the paper's setting, the {name} experiment only (~15 min on 2 "
                                               f"cores)")
           for name, grid in PAPER_SLICES.items()},
    },
    run_points=run_points,
    claims=claims,
    figures=figures,
    ensemble=True,
    cost=point_flops,
    probe=probe_point,
    claim_specs=SPECS,
    populations=POPULATIONS,
    premises=PREMISES,
)

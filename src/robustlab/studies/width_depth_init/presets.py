"""The width-depth-init presets: quick, paper and the paper-<experiment> slices."""

from __future__ import annotations

from ..base import SEEDS_KEY

# ---------------------------------------------------------------------------------------
# presets

_POW2 = [2**i for i in range(11)]  # 1 … 1024

# quick: 200 training points (20 per digit) at 14x14, so that widths 1…1024 run from
# under-parameterised (m·(d+k) < N at m = 1) to 5x the training set.
QUICK_BASE = {"size": 14, "n_train": 200, "n_test": 500, "epochs": 50, "batch_size": 20, "decay_start": 40,
              "lr_step": 5, "mc_width": 128}
THM3_BLOCK = {"init": ["small"], "depth": [2], "width": [16, 64, 256, 1024], "output": ["single"],
              "classes": [(0, 1)], "epochs": [5], "gamma": [1.0, 1.5, 2.0]}
# nonlazy-width-early's control: He (lazy) two-layer networks in Thm 3's own setting (one output,
# squared loss, two classes, the same window). Lazy weights barely move in one epoch, so the
# ratio P(epoch 1) / P(init) cannot fall with width there; chosen before any run of it.
THM3_CONTROL = {**THM3_BLOCK, "init": ["he"], "gamma": [2.0]}
# width-peak's two-class sweep: with 2 classes a width below the class count cannot make the
# peak, so a peak among widths >= 10 that is the paper's (the passage from under- to
# over-parameterised) must appear here too (SPEC §C; issue 35)
TWO_CLASS = {"init": ["he", "lecun"], "depth": [2], "classes": [(0, 1)]}
# networks drawn at initialisation only, per seed, for the depth claim at t = 0: 5 seeds + 5 x 6
# draws = 35 networks per point (the issue asks for 30+; an untrained draw costs one measurement)
INIT_DRAWS = 6
# Seeds of the width sweeps (width-peak), from a power estimate on 40 pooled pilot seeds
# (1000–1019 and 100–119, the width blocks only; a seed's networks are bit for bit the same in
# any ensemble, so the pool is exchangeable with a quick run's seeds). Per part (init × depth)
# the per-seed peak-over-ends statistic has effect / sd 1.40/0.42 (He L=2), 1.30/0.35 (LeCun
# L=2), 1.97/0.90 (He L=3), 1.86/0.88 (LeCun L=3); stats.seeds_for gives 4, 4, 5, 5 at power 0.9
# and 5, 4, 7, 7 at 0.99. That understates a small run's spread: the peak is picked on the
# other seeds, and with 4 others it flips from 4 to 8 when two of them peak at 8 (2 of the 40
# do, at LeCun L=3). So the count was checked by drawing n of the 40 seeds 450 times and
# judging width-peak on them as a run does: n=5 reproduced 87 % (inconclusive 10 %, not
# applicable 3 %), n=6 97 % (1.3 %, 1.8 %), n=7 97 % (inconclusive 0 of 450, not applicable
# 3 %), n=8 95 %, n=10 91 %, n=12 89 %. 7 is where the interval always decides (seeds_for at
# power 0.99); more seeds do not help, since a part is not applicable unless *every* seed
# reaches the target loss at the widths past the peak, and width 8 does so for only 88–98 %
# of seeds. Cost (base seed 0, one worker): 61 -> 75 s of CPU, 379 points instead of 295 (the
# other blocks keep 5 seeds).
QUICK_WIDTH_SEEDS = 7
QUICK_GRID = (
    # width sweeps (claim 1), He and LeCun: depth 2 up to 5x the training set, depth 3 up to 2.5x
    {"init": ["he", "lecun"], "depth": [2], "width": _POW2, SEEDS_KEY: [QUICK_WIDTH_SEEDS]},
    {"init": ["he", "lecun"], "depth": [3], "width": _POW2[:10], SEEDS_KEY: [QUICK_WIDTH_SEEDS]},
    # depth sweeps (claim 2); NTK's unit-variance output layer makes its updates larger: a
    # smaller rate lets it train as steadily as the others (it diverged at 0.1, depth 6)
    {"init": ["lecun", "he"], "depth": [2, 3, 4, 6], "width": [128], "init_draws": [INIT_DRAWS]},
    {"init": ["ntk"], "depth": [2, 3, 4, 6], "width": [128], "lr": [0.03], "init_draws": [INIT_DRAWS]},
    {**TWO_CLASS, "width": _POW2[1:], SEEDS_KEY: [QUICK_WIDTH_SEEDS]},
    # the non-lazy two-layer network (claims 3, 4), at He's rate: it reaches the target loss
    # before the decay (at 0.3 it fits sooner, and its κ(t) then levels off like He's)
    {"init": ["small"], "depth": [2], "width": [16, 64, 256, 512, 1024]},
    # Thm 3 (nonlazy-width-early): one output, squared loss, two classes, the small init; only
    # the first epoch is the claim's window, so the schedule stops at 5
    THM3_BLOCK,
    THM3_CONTROL,
)

PAPER_BASE = {"n_train": 0, "n_test": 1000, "epochs": 50, "batch_size": 64, "decay_start": 30, "lr_step": 10,
              "mc_width": 1024, "mc_samples": 500}
# The second training-set size of width-peak-n-train (1000 of the 4000 points) at equal SGD steps:
# epochs and the decay schedule x4 (the 4000-point side's 50 / 30 / 10). With equal epochs it got a
# quarter of the steps, and none of its 110 networks reached the 0.99 equal-fit target (best 0.988);
# at equal steps every network of widths 8-1024 reaches it (40 of 55 per init, measured 2026-11-26
# on the training accuracy alone, before the change; the stability was not read to choose this).
EQUAL_STEPS_1000 = {"n_train": [1000], "epochs": [200], "decay_start": [120], "lr_step": [40]}
# width-peak-n-train's sweep: He and LeCun at depth 2, from width 1 past the 1000-point side's
# interpolation width
WIDTH_N_SWEEP = {"init": ["he", "lecun"], "depth": [2], "width": [2**i for i in range(11)]}
PAPER_GRID = (
    {"init": ["he", "lecun"], "depth": [2], "width": [2**i for i in range(15)]},
    {"init": ["he", "lecun"], "depth": [4, 6, 8], "width": [2**i for i in range(13)]},
    {"init": ["ntk"], "depth": [2, 4, 6, 8], "width": [2**i for i in range(4, 13)], "lr": [0.03]},
    {"init": ["small"], "depth": [2], "width": [2**i for i in range(4, 15)]},
    # so that the preset measures every claim, the two experiments the blocks above lack, as
    # their slices run them: a second training-set size for width-peak-n-train (paper-width-n;
    # the first block is the 4000-point side) and Thm 3's squared-loss block for
    # nonlazy-width-early (paper-nonlazy): 210 points, 0.4 % of the preset's FLOPs.
    {**WIDTH_N_SWEEP, **EQUAL_STEPS_1000},
    {**THM3_BLOCK, "width": [2**i for i in range(4, 13, 2)]},
    {**THM3_CONTROL, "width": [2**i for i in range(4, 13, 2)]},
    {**TWO_CLASS, "width": [2**i for i in range(1, 15)]},
)

# Paper slices: one claim's experiment each, at the paper's setting (mnist5k 28x28 with its full
# training split of 4000 points, 50 epochs, step decay from epoch 30 every 10), sized for about
# 15 minutes on 2 CPU cores (the estimate and how it was measured: the issue-12 note).
# ``robustlab run width-depth-init --preset paper-<name>``.
PAPER_SLICES = {
    # width-peak: He and LeCun, depth 2 and 3, from under-parameterised (m (d + k) << 4000 k) to
    # past the interpolation width (m ~ 50); five seeds, as every slice (the budget: the quick
    # preset gives its width blocks 7, from a power estimate at its scale, QUICK_WIDTH_SEEDS; the paper-width
    # slice measured 2026-11-23 decided its parts at 5)
    "width": ({"init": ["he", "lecun"], "depth": [2, 3], "width": [2**i for i in range(11)]},
              {**TWO_CLASS, "width": [2**i for i in range(1, 11)]}),
    # width-peak-n-train: depth 2 at two training-set sizes (1000 and all 4000): the peak should
    # move to larger widths with more data (Thm 1 places it at the passage to over-parameterisation)
    "width-n": ({**WIDTH_N_SWEEP, "n_train": [0]}, {**WIDTH_N_SWEEP, **EQUAL_STEPS_1000}),
    # depth-init-at-init and -trained: the paper's depths at one width, each init at its rate
    "depth": ({"init": ["lecun", "he"], "depth": [2, 4, 6, 8], "width": [256], "mc_width": [256],
               "init_draws": [INIT_DRAWS]},
              {"init": ["ntk"], "depth": [2, 4, 6, 8], "width": [256], "lr": [0.03], "mc_width": [256],
               "init_draws": [INIT_DRAWS]}),
    # nonlazy-width (Fig. 4b): the non-lazy and He two-layer networks across widths
    "nonlazy": ({"init": ["small", "he"], "depth": [2], "width": [2**i for i in range(4, 12)]},
                {**THM3_BLOCK, "width": [2**i for i in range(4, 13, 2)]},
                {**THM3_CONTROL, "width": [2**i for i in range(4, 13, 2)]}),
    # kappa: widths past the training-set size, where lazy training applies; 1000 training points
    # (not 4000) keep three such widths within the budget
    "kappa": ({"init": ["small", "he"], "depth": [2], "width": [256, 1024, 2048, 4096], "n_train": [1000]},),
}
PAPER_SLICE_SEEDS = 5

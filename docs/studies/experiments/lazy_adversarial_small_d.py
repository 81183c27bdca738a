"""lazy-adversarial's paper preset on its three smallest sizes (d = 25, 49, 100): the ε grid
and its non-lazy control under the paper preset's own settings (the authors' Alg. 1: 100 PGD
steps of ε/40, lr 0.01, batch 32, patience 20 armed at clean training accuracy 0.9 or epoch
100), at its 5 seeds. The whole paper preset needs about 6.8 h on 2 cores (26 min for 6.4 % of
its work, 2026-11-26); this part is the d ≤ 100 share of the ε grid and of its control, about
a seventh of that work (cost ∝ d). Registered before its run (2026-11-27): it decides
eps-sharp-drop and eps-threshold under the authors' protocol, at the sizes the theorem is
furthest from (its statements are asymptotic in d), and reads nothing of the radius claims,
which need the d = 196 sweep.

``robustlab run docs/studies/experiments/lazy_adversarial_small_d.py --preset paper-small-d``

Its result (23.1 min, 2026-11-27): eps-threshold **contradicted**, slope −0.09 [−0.28, 0.10];
eps-sharp-drop inconclusive (its control passes). In the quick preset's own ε½ the slope is
−0.21 over d ≤ 100 and −0.56 over d ≥ 100, and at d ≤ 100 the lazy networks' ε½ is close to
the non-lazy control's: the candidate mechanism is that at small d the images' own margin, not
laziness, sets the halving ε, and the d^−1/2 fall begins near d = 100.

``paper-to-196`` adds d = 196 (size 14; the lazy ε grid and its control, the paper preset's
settings, 5 seeds) to test that mechanism under the authors' protocol, registered before its
run (2026-11-27 16:35). What the mechanism predicts, from the quick preset's ratio
ε½(196)/ε½(100) = 0.69 against (196/100)^−1/2 = 0.71: the lazy networks' mean ε½ at d = 196
below their d = 100 value by a factor of about 0.7 (0.221 → about 0.16), the non-lazy
control's by much less (quick: 0.415 at d = 100, 0.217 at d = 784, a factor 0.52 over 7.8× in
d where the lazy one fell by 0.31). Read on the mean ε½ per d with each seed's curve a unit.
The claim itself (the slope over every d of the run, 25–196) is reported as it reads.
``robustlab run docs/studies/experiments/lazy_adversarial_small_d.py --preset paper-to-196
--reuse runs/<the paper-small-d run>`` computes only the d = 196 points.

Its result (27.1 min in all, 2026-11-27): the lazy ε½ fell from 0.221 to 0.131 (ratio 0.59
[0.44, 0.80]); the control's stayed (0.249 → 0.252, ratio 1.00 [0.66, 1.52]). eps-threshold over
d = 25–196: inconclusive, −0.297 [−0.440, −0.154], its control contradicted.
"""
import dataclasses

from robustlab.studies.base import Preset
from robustlab.studies.lazy.adversarial import STUDY as LADV
from robustlab.studies.lazy.common import NON_LAZY_C0

_PAPER = LADV.presets["paper"]
_EPS = _PAPER.grid[0]["eps"]
SMALL_D = Preset(
    dict(_PAPER.overrides),
    (
        {"size": [5, 7, 10], "eps": _EPS},
        # the control on the same three sizes (the paper preset's runs it on 5, 10, 28; its rules
        # need 2 and 3 values of d)
        {"size": [5, 7, 10], "eps": _EPS, "C0": [NON_LAZY_C0]},
    ),
    n_seeds=_PAPER.n_seeds,
    description="the paper preset's ε grid and non-lazy control at d = 25, 49, 100 only",
)
TO_196 = Preset(
    dict(_PAPER.overrides),
    (
        {"size": [5, 7, 10, 14], "eps": _EPS},
        {"size": [5, 7, 10, 14], "eps": _EPS, "C0": [NON_LAZY_C0]},
    ),
    n_seeds=_PAPER.n_seeds,
    description="paper-small-d and d = 196: the ε grid and its non-lazy control at d = 25, 49, 100, 196",
)
STUDY = dataclasses.replace(LADV, name="lazy-adversarial-small-d",
                            presets={**LADV.presets, "paper-small-d": SMALL_D, "paper-to-196": TO_196})

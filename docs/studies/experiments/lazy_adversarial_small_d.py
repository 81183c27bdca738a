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
"""
import dataclasses

from robustlab.studies._lazy_common import NON_LAZY_C0
from robustlab.studies.base import Preset
from robustlab.studies.lazy_adversarial import STUDY as LADV

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
STUDY = dataclasses.replace(LADV, name="lazy-adversarial-small-d", presets={**LADV.presets, "paper-small-d": SMALL_D})

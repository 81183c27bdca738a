"""lazy-attack's raw-pixel runs alone, at 39 seeds: the count the 5-seed paper run's power
estimate gave for raw-eta-scaling (its effect -1.253 [-1.393, -1.12] against the band [-1.3, -0.7])."""
import dataclasses

from robustlab.studies.base import Preset
from robustlab.studies.lazy.attack import _SIZES_PAPER
from robustlab.studies.lazy.attack import STUDY as LA
from robustlab.studies.lazy.common import NON_LAZY_C0, RICH_INIT_SCALE

RAW = Preset(
    {"lr": 0.1, "epochs": 1000, "C0": 10.0},
    (
        {"size": _SIZES_PAPER, "m": [256, 1024, 4096], "sphere": [False], "bias": [True]},
        {"size": _SIZES_PAPER, "m": [256], "C0": [NON_LAZY_C0], "init_scale": [RICH_INIT_SCALE],
         "epochs": [100], "sphere": [False], "bias": [True]},
    ),
    n_seeds=39,
    description="the paper preset's raw-pixel blocks (lazy and the rich control) at 39 seeds",
)
STUDY = dataclasses.replace(LA, name="lazy-attack-raw", presets={**LA.presets, "raw": RAW})

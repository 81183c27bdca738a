"""Raw pixels as they are and divided by their mean norm at each size (``input_scale``), biases on,
lazy-attack's paper settings otherwise (m 256, C0 = 10, lr 0.1, <= 1000 epochs): the test of
whether the inputs' growing norm makes |f|/||x|| fall at large d."""
import dataclasses

from robustlab.studies.base import Preset
from robustlab.studies.lazy.attack import _SIZES_PAPER
from robustlab.studies.lazy.attack import STUDY as _LA

_SCALE = Preset(
    {"lr": 0.1, "epochs": 1000, "C0": 10.0},
    ({"size": _SIZES_PAPER, "m": [256], "sphere": [False], "bias": [True], "input_scale": ["none", "unit-mean"]},),
    n_seeds=20, description="raw pixels and raw pixels at unit mean norm, m 256")
STUDY = dataclasses.replace(_LA, name="lazy-attack-scale", presets={**_LA.presets, "scale-test": _SCALE})

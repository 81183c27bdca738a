"""Raw pixels with and without biases, lazy-attack's paper settings otherwise (m 256 and 1024,
C0 = 10, lr 0.1, <= 1000 epochs): the test of whether biases make |f|/||x|| fall at large d."""
import dataclasses

from robustlab.studies.base import Preset
from robustlab.studies.lazy.attack import _SIZES_PAPER
from robustlab.studies.lazy.attack import STUDY as _LA

_BIAS = Preset(
    {"lr": 0.1, "epochs": 1000, "C0": 10.0},
    ({"size": _SIZES_PAPER, "m": [256, 1024], "sphere": [False], "bias": [True, False]},),
    n_seeds=20, description="raw pixels, biases on and off, m 256 and 1024")
STUDY = dataclasses.replace(_LA, name="lazy-attack-bias", presets={**_LA.presets, "bias-test": _BIAS})

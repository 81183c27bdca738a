"""Attacks: threat models, the Attack base, one attack per file, and their losses.

>>> from robustlab.attacks import Linf, PGD
>>> attack = PGD(Linf(8 / 255))  # 10 steps of eps/4 from a random start, cross-entropy
>>> x_adv = attack(model, x, y, bounds=(0.0, 1.0), generator=g)  # doctest: +SKIP
"""

from . import losses
from .apgd import APGD, dlr_loss
from .apgd_t import APGDT, dlr_targeted_loss
from .base import Attack, loss_and_grad
from .checks import EvaluationWarning, reset_warnings
from .feature_direction import FeatureDirection
from .fgsm import FGSM
from .gradient_step import GradientStep
from .losses import correct, cross_entropy, get_loss, is_binary, logistic, margin_loss
from .min_flip import MinFlipResult, min_flip_along_gradient
from .pgd import PGD
from .square import Square
from .threat import L2, Linf, per_sample_norm, uniform_ball_l2

__all__ = [
    "Linf",
    "L2",
    "Attack",
    "FGSM",
    "GradientStep",
    "PGD",
    "APGD",
    "APGDT",
    "Square",
    "dlr_loss",
    "dlr_targeted_loss",
    "FeatureDirection",
    "min_flip_along_gradient",
    "MinFlipResult",
    "losses",
    "cross_entropy",
    "margin_loss",
    "logistic",
    "get_loss",
    "is_binary",
    "correct",
    "loss_and_grad",
    "per_sample_norm",
    "uniform_ball_l2",
    "EvaluationWarning",
    "reset_warnings",
]

"""Metrics: clean / robust accuracy, margins, gradient norms, perturbation stability, lazy ratio.

>>> from robustlab.metrics import robust_accuracy, perturbation_stability, lazy_ratio
"""

from .accuracy import (
    accuracy,
    accuracy_vs_eps,
    input_grad_norm,
    margins,
    robust_accuracy,
    robust_correct,
)
from .lazy import lazy_ratio, neuron_distance
from .stability import (
    MonteCarlo,
    expected_stability_at_init,
    jacobian_fro_sq,
    perturbation_stability,
)

__all__ = [
    "accuracy",
    "robust_accuracy",
    "robust_correct",
    "accuracy_vs_eps",
    "input_grad_norm",
    "margins",
    "perturbation_stability",
    "expected_stability_at_init",
    "jacobian_fro_sq",
    "MonteCarlo",
    "lazy_ratio",
    "neuron_distance",
]

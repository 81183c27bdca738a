"""``robustlab.evaluate`` and what it needs: the attacks and suites it runs
(:mod:`.suite`), the function and its result (:mod:`.core`), and the model and data loaders of
``robustlab evaluate`` (:mod:`.files`)."""

from .core import ATTACKS, SUITES, THREATS, Evaluation, Normalized, evaluate
from .files import load_data, load_model, load_object
from .suite import CallableAttack, TorchattacksAttack

__all__ = ["evaluate", "Evaluation", "Normalized", "ATTACKS", "SUITES", "THREATS", "load_model", "load_data",
           "load_object", "CallableAttack", "TorchattacksAttack"]

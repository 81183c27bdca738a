"""Models and their initialisations (no training code here)."""

from .ensemble import Flat, fold, unfold

__all__ = ["Flat", "fold", "unfold"]

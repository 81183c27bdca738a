"""robustlab: a laboratory for the science of adversarial robustness."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["load", "__version__"]


def load(out):
    """The results of a run directory as a pandas DataFrame (one row per result row)."""
    from .studies.base import load as _load

    return _load(out)

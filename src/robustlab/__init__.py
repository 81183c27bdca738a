"""robustlab: a laboratory for the science of adversarial robustness."""

from __future__ import annotations

from . import _userfiles
from .api import Run, compare, rerun, run, runs
from .config import ConfigError, UserError

__version__ = "0.1.0"

# Study files loaded by path must import again, by name, in worker processes (see _userfiles).
_userfiles.install()

__all__ = ["load", "run", "rerun", "runs", "compare", "evaluate", "Evaluation", "Normalized", "Run",
           "UserError", "ConfigError", "__version__"]

# imported on first use: `import robustlab` stays free of torch (the CLI starts fast)
_LAZY = ("evaluate", "Evaluation", "Normalized")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(".evaluation", __name__), name)
        globals()[name] = value  # found directly from now on
        return value
    raise AttributeError(f"module 'robustlab' has no attribute {name!r}")


def load(out):
    """The results of a run directory as a pandas DataFrame (one row per result row)."""
    from .studies.base import load as _load

    return _load(out)

"""robustlab: a laboratory for the science of adversarial robustness."""

from __future__ import annotations

from . import _userfiles
from .api import Run, rerun, run
from .config import ConfigError, UserError

__version__ = "0.1.0"

# Study files loaded by path must import again, by name, in worker processes (see _userfiles).
_userfiles.install()

__all__ = ["load", "run", "rerun", "Run", "UserError", "ConfigError", "__version__"]


def load(out):
    """The results of a run directory as a pandas DataFrame (one row per result row)."""
    from .studies.base import load as _load

    return _load(out)

"""The exceptions robustlab raises on purpose."""

from .config import ConfigError, UserError

__all__ = ["ConfigError", "UserError", "NumericalError"]


class NumericalError(RuntimeError):
    """Training diverged or produced NaN/inf: the point is recorded as failed, the sweep goes on."""

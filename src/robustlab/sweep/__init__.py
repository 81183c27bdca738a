"""Grid expansion, the crash-safe result store and execution backends."""

from .grid import expand, merge, parse_grid_args
from .runner import SweepOptions, run_sweep
from .store import Store

__all__ = ["expand", "merge", "parse_grid_args", "SweepOptions", "run_sweep", "Store"]

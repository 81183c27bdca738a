"""Grid expansion, the crash-safe result store and execution backends.

``grid`` turns ``--grid`` arguments and a study's default blocks into point configs;
``runner`` groups them (seeds of one point become one ensemble call), skips what the store
already holds and turns each group's outcome — rows, an exception, NaN — into store entries;
``backends`` runs the groups in this process, in a pool of worker processes or as Ray tasks,
while this process alone writes the ``store`` (one SQLite transaction per group) and drives
the ``progress`` bar. Imports point one way, ``backends → runner``: :func:`run_sweep` takes
the backend's ``execute`` as an argument (``run_sweep(..., execute=backends.execute)``).
"""

from .grid import expand, merge, parse_grid_args
from .runner import SweepOptions, run_sweep
from .store import Store

__all__ = ["expand", "merge", "parse_grid_args", "SweepOptions", "run_sweep", "Store"]

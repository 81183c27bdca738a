"""A progress bar over sweep points: ETA, the point(s) running, failures so far.

Quiet when asked (``--quiet``). When stderr is not a terminal (CI, pipes, a background run's
log file) there is no bar, only a line every :data:`LOG_EVERY_S` seconds while the run lasts
(points finished, failures, time elapsed, what runs), so a short run prints nothing and a run
of hours left in the background shows it is alive. In a Jupyter kernel,
:func:`robustlab.run` shows tqdm's notebook bar.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

__all__ = ["LOG_EVERY_S", "Progress", "in_notebook"]

LOG_EVERY_S = 600.0  # off a terminal: a line this often (a paper preset's groups take up to hours)


def in_notebook() -> bool:
    """Whether this process is a Jupyter (IPython) kernel, whose stderr is no terminal."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


class Progress:
    def __init__(self, *, total: int, initial: int = 0, label: str = "", quiet: bool = False,
                 saved: Callable[[], list[str]] | None = None):
        self.failed = 0
        self.current = ""
        self.label, self.quiet = label, quiet
        notebook = not quiet and in_notebook()
        self.disabled = quiet or not (notebook or sys.stderr.isatty())
        bar_class = tqdm
        if notebook:
            from tqdm.auto import tqdm as bar_class  # a widget when ipywidgets is there
        # tqdm's rate (hence the ETA) counts only points finished in this session, not the
        # `initial` ones a resumed run found in the store
        self.bar = bar_class(total=total, initial=initial, desc=label, unit="pt", disable=self.disabled,
                        leave=False, dynamic_ncols=True, file=sys.stderr)
        self.total, self.done, self.start = total, initial, time.monotonic()
        self.saved = saved  # the running groups' progress at their last checkpoint, for the line
        self._stop = threading.Event()
        self._log: threading.Thread | None = None
        if self.disabled and not quiet and LOG_EVERY_S > 0:  # off a terminal: a line now and then
            self._log = threading.Thread(target=self._heartbeat, name="robustlab-progress", daemon=True)
            self._log.start()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._log is not None:
            self._log.join()
        self.bar.close()

    def _heartbeat(self) -> None:
        while not self._stop.wait(LOG_EVERY_S):
            print(self.line(), file=sys.stderr, flush=True)

    def line(self) -> str:
        """Where the run stands, in one line (what a run off a terminal prints now and then)."""
        minutes = (time.monotonic() - self.start) / 60
        now = f"; running {self.current}" if self.current else ""
        head = f"{self.label}: " if self.label else ""
        saved = self.saved() if self.saved is not None else []
        within = f"; saved: {', '.join(saved)}" if saved else ""
        return f"{head}{self.done}/{self.total} points, failed={self.failed}, {minutes:.0f} min elapsed{now}{within}"

    def _postfix(self) -> str:
        return f"{self.current} | failed={self.failed}" if self.current else f"failed={self.failed}"

    def running(self, current: str) -> None:
        """Show what runs now (no progress made)."""
        self.current = current
        self.bar.set_postfix_str(self._postfix(), refresh=True)

    def advance(self, n: int, *, failed: int = 0, current: str | None = None) -> None:
        """``n`` more points finished, ``failed`` of them failed."""
        self.failed += failed
        self.done += n
        if current is not None:
            self.current = current
        self.bar.set_postfix_str(self._postfix(), refresh=False)
        self.bar.update(n)

    def warn(self, text: str) -> None:
        """Show one line (a warning from the points) above the bar, or alone without one."""
        if self.quiet:
            return
        line = f"{self.label}: {text}" if self.label else text
        if self.disabled:
            print(line, file=sys.stderr, flush=True)
        else:
            self.bar.write(line, file=sys.stderr)

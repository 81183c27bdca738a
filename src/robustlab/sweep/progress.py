"""A progress bar over sweep points: ETA, the point(s) running, failures so far.

Quiet when asked (``--quiet``) or when stderr is not a terminal (CI, pipes, log files) —
except in a Jupyter kernel, where :func:`robustlab.run` shows tqdm's notebook bar.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm

__all__ = ["Progress", "in_notebook"]


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
    def __init__(self, *, total: int, initial: int = 0, label: str = "", quiet: bool = False):
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

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.close()

    def _postfix(self) -> str:
        return f"{self.current} | failed={self.failed}" if self.current else f"failed={self.failed}"

    def running(self, current: str) -> None:
        """Show what runs now (no progress made)."""
        self.current = current
        self.bar.set_postfix_str(self._postfix(), refresh=True)

    def advance(self, n: int, *, failed: int = 0, current: str | None = None) -> None:
        """``n`` more points finished, ``failed`` of them failed."""
        self.failed += failed
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

"""A progress bar over sweep points (quiet when not on a terminal)."""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


class Progress:
    def __init__(self, *, total: int, initial: int = 0, label: str = "", quiet: bool = False):
        self.failed = 0
        disable = quiet or not sys.stderr.isatty()
        self.bar = tqdm(total=total, initial=initial, desc=label, unit="pt", disable=disable,
                        leave=False, dynamic_ncols=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.close()

    def advance(self, n: int, *, failed: int = 0, current: str = "") -> None:
        self.failed += failed
        self.bar.set_postfix_str(f"{current} failed={self.failed}", refresh=False)
        self.bar.update(n)

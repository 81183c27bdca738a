"""Execution backends. ``local``: in-process when workers=1, else a process pool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import Config, UserError
from .progress import Progress
from .runner import SweepOptions, run_group
from .store import Store

__all__ = ["execute"]


def execute(groups: list[list[Config]], fn: Callable[[list[Config], str], list[Any]], store: Store,
            options: SweepOptions, *, total: int, already: int, label: str) -> int:
    if options.backend != "local":
        raise UserError(f"backend={options.backend!r} is not allowed: one of local")
    failed = 0
    with Progress(total=total, initial=already, label=label, quiet=options.quiet) as bar:
        for group in groups:
            entries = run_group(fn, group, options.device)
            store.record(entries)
            n_fail = sum(e["status"] == "failed" for e in entries)
            failed += n_fail
            bar.advance(len(entries), failed=n_fail, current=_describe(group[0]))
    return failed


def _describe(cfg: Config) -> str:
    return cfg.to_dict().get("experiment", "") or ""

"""The arguments of the Python API (:func:`robustlab.run`, :func:`robustlab.rerun`,
:func:`robustlab.runs`, :func:`robustlab.compare`, :func:`robustlab.load`) checked by type
before anything runs: a wrong one is a :class:`~robustlab.config.UserError` naming the
argument and what it takes (as the command line's one line), never an AttributeError or a
TypeError from deep inside."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .config import UserError

__all__ = ["check"]

PATH = "path"  # a str or os.PathLike
_WORDS = {PATH: "a path (str or pathlib.Path)", str: "a string", bool: "True or False", int: "an integer",
          Mapping: "a dict", "paths": "a list of paths", "strings": "a list of strings"}


def _ok(value: Any, kind: Any) -> bool:
    if kind == PATH:
        return isinstance(value, str | os.PathLike) and str(os.fspath(value)).strip() != ""
    if kind == "strings":
        return isinstance(value, Sequence) and not isinstance(value, str | bytes) and all(isinstance(v, str) for v in value)
    if kind == "paths":
        return isinstance(value, Sequence) and not isinstance(value, str | bytes) and all(_ok(v, PATH) for v in value)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def check(spec: dict[str, tuple[Any, Any, bool]]) -> None:
    """``spec``: argument name -> (value, kind, may be None[, what it takes, in words]). ``kind``:
    :data:`PATH`, ``"paths"``, ``"strings"``, ``str``, ``bool``, ``int`` or ``Mapping``; a tuple of
    kinds takes either."""
    for name, (value, kind, optional, *words) in spec.items():
        if value is None and optional:
            continue
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not any(_ok(value, k) for k in kinds):
            want = words[0] if words else " or ".join(_WORDS.get(k, getattr(k, "__name__", str(k))) for k in kinds)
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise UserError(f"{name}={shown} is not allowed: {want}{' or None' if optional else ''}")


def at_least(name: str, value: int | None, lo: int) -> None:
    if value is not None and value < lo:
        raise UserError(f"{name}={value!r} is not allowed: an integer >= {lo}")

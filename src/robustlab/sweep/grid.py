"""Grids: unions of Cartesian products over config fields.

A grid is a list of *blocks*; each block maps field names to value lists and stands for
their Cartesian product; the grid is the union of its blocks (a study like lazy-adversarial
sweeps ε×d in one block and R×m in another). ``--grid key=v1,v2`` and
``--grid key=lo:hi:n`` / ``key=lo:hi:nlog`` (numeric fields: n evenly or log-spaced values,
ends included; integer fields round and drop repeats) replace that axis in every block (or
add it). A tuple field takes tuples separated by commas, items by semicolons:
``--grid widths=8;8,16;16``.
"""

from __future__ import annotations

import itertools
import math
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..config import Config, ConfigError, UserError, _strip_optional, parse_value, unknown_key_text

__all__ = ["parse_grid_args", "merge", "expand"]


def _parse_range(text: str, field: str, tp: Any, max_values: int | None = None) -> list[Any]:
    parts = text.split(":")
    if len(parts) == 4 and parts[3] == "log":
        parts = [parts[0], parts[1], parts[2] + "log"]
    if len(parts) != 3:
        raise UserError(f"--grid {field}={text!r} is not allowed: use v1,v2,... or lo:hi:n or lo:hi:nlog")
    lo_s, hi_s, n_s = parts
    log = n_s.endswith("log")
    n_s = n_s[:-3] if log else n_s
    try:
        lo, hi, n = float(lo_s), float(hi_s), int(n_s)
    except ValueError:
        raise UserError(f"--grid {field}={text!r} is not allowed: lo and hi must be numbers, n an integer") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise UserError(f"--grid {field}={text!r} is not allowed: lo and hi must be finite")
    if n < 1:
        raise UserError(f"--grid {field}={text!r} is not allowed: n must be >= 1")
    if max_values is not None and n > max_values:
        raise UserError(f"--grid {field}={text!r} is not allowed: {n} values, over the cap of {max_values} "
                        "points; narrow it, or raise the cap with --max-points")
    if log and (lo <= 0 or hi <= 0):
        raise UserError(f"--grid {field}={text!r} is not allowed: a log range needs lo, hi > 0")
    if n == 1:
        vals = [lo]
    elif log:
        vals = [math.exp(math.log(lo) + i * (math.log(hi) - math.log(lo)) / (n - 1)) for i in range(n)]
    else:
        vals = [lo + i * (hi - lo) / (n - 1) for i in range(n)]
    base, _ = _strip_optional(tp)
    if base is int:
        out: list[Any] = []
        for v in vals:
            iv = int(round(v))
            if iv not in out:
                out.append(iv)
        return out
    if base is float:
        return [float(f"{v:.12g}") for v in vals]
    raise UserError(f"--grid {field}={text!r} is not allowed: a range needs a numeric field")


def _numeric(tp: Any) -> bool:
    """Whether a field holds one int or float (a range ``lo:hi:n`` makes sense for it)."""
    base, _ = _strip_optional(tp)
    return base in (int, float)


def parse_grid_args(args: Sequence[str], config: type[Config], *,
                    max_values: int | None = None) -> dict[str, list[Any]]:
    """Parse ``--grid key=...`` strings into axes, converting values with the field type
    (a range of more than ``max_values`` values is refused before it is built)."""
    hints = typing.get_type_hints(config)
    names = config.field_names()
    axes: dict[str, list[Any]] = {}
    for arg in args:
        if "=" not in arg:
            raise UserError(f"--grid {arg!r} is not allowed: expected key=v1,v2,... or key=lo:hi:n(log)")
        key, text = arg.split("=", 1)
        key = key.strip()
        if key not in names:
            raise ConfigError(key, text, unknown_key_text(config.study, key, names))
        if not text.strip():
            raise UserError(f"--grid {key}= is not allowed: the axis is empty")
        if ":" in text and _numeric(hints[key]):
            values = _parse_range(text, key, hints[key], max_values)
        else:
            items = [s for s in text.split(",") if s.strip()]
            if not items:
                raise UserError(f"--grid {key}={text!r} is not allowed: the axis is empty")
            values = [parse_value(hints[key], s, key) for s in items]
        if key in axes:
            raise UserError(f"--grid {key} is given twice")
        axes[key] = values
    return axes


def merge(blocks: Sequence[Mapping[str, Sequence[Any]]], user_axes: Mapping[str, Sequence[Any]],
          fixed: set[str] = frozenset()) -> list[dict[str, list[Any]]]:
    """Apply user axes to the study's default blocks; fields fixed by ``--set`` drop out."""
    out: list[dict[str, list[Any]]] = []
    for block in blocks or ({},):
        b = {k: list(v) for k, v in block.items() if k not in fixed}
        b.update({k: list(v) for k, v in user_axes.items()})
        if b not in out:
            out.append(b)
    return out


def expand(blocks: Sequence[Mapping[str, Sequence[Any]]]) -> Iterator[dict[str, Any]]:
    """Every point of a union of products, in a deterministic order (block, then axes)."""
    for block in blocks:
        keys = list(block)
        for combo in itertools.product(*(block[k] for k in keys)):
            yield dict(zip(keys, combo))

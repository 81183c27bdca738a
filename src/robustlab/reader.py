"""The one reader of a run's records: ``manifest.json``, ``reproduce.json``, ``claims.json``
and ``results.jsonl`` (the store is opened by :class:`robustlab.sweep.store.Store`, which
makes the same file checks).

Every record is read the same careful way, whoever reads it (``report``, ``rerun``'s
comparison, ``compare``, ``export``, :func:`robustlab.load`, :func:`robustlab.runs`):

* only a regular file is read: a named pipe, a device or a directory put in a record's place
  is refused after ``os.lstat``, before anything opens it (an open would block), and the open
  itself is ``O_NONBLOCK | O_NOFOLLOW``; a symbolic link is refused too;
* its size is bounded (:data:`MAX_JSON_BYTES`, :data:`MAX_JSONL_BYTES`), and so is the nesting
  of what it holds (:data:`MAX_DEPTH`);
* it must be strict JSON: ``NaN``, ``Infinity``, a number that overflows a float
  (``1e999``) and an integer of more than :data:`MAX_INT_DIGITS` digits are refused (a
  manifest holding ``lr=NaN`` is damaged, not a config);
* its fields are checked against the record's shape (:data:`robustlab.records.SHAPES`; a
  claim's ``kind`` and ``verdict`` must be words robustlab writes);

and whatever is wrong is one line (a :class:`RecordError`, a ``UserError``: exit 2) naming
the file and what to do.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from .records import SHAPES, DamagedFile, check_shape

__all__ = ["RecordError", "MAX_DEPTH", "MAX_JSON_BYTES", "MAX_JSONL_BYTES", "MAX_INT_DIGITS",
           "read_bytes", "loads", "depth_problem", "read_json", "read_jsonl", "jsonl_rows"]

MAX_DEPTH = 64  # how deep a record's values may nest (a claim's evidence included)
MAX_JSON_BYTES = 64 * 2**20  # manifest.json, reproduce.json, claims.json
MAX_JSONL_BYTES = 2**31  # results.jsonl
MAX_INT_DIGITS = 40  # seeds, counts and sizes: an integer longer than this overflows what reads it

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_FIX = "restore it, or move the directory away to start over"


class RecordError(DamagedFile):
    """A record that cannot be read as what it must be (not a regular file, too large, not
    strict JSON, nested too deep, of the wrong shape): one line naming the file."""


def _damaged(path: Path, why: str, fix: str = _FIX) -> RecordError:
    return RecordError(f"{path} is damaged ({why}): {fix}")


def read_bytes(path: str | os.PathLike, *, limit: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of a record that is a regular file of at most ``limit`` bytes.

    ``FileNotFoundError`` when there is none (callers say what is missing); a
    :class:`RecordError` for anything else in its place."""
    path = Path(path)
    st = os.lstat(path)  # FileNotFoundError: the caller's to word
    if stat.S_ISLNK(st.st_mode):
        raise RecordError(f"{path} is not allowed: it is a symbolic link (robustlab reads and writes only its "
                          "own plain files in a run directory); remove it")
    if not stat.S_ISREG(st.st_mode):
        raise _damaged(path, "not a regular file: a named pipe, device or directory stands in its place")
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        raise _damaged(path, f"it cannot be opened: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)  # what was opened, not what was looked at (a swap in between)
        if not stat.S_ISREG(st.st_mode):
            raise _damaged(path, "not a regular file: a named pipe, device or directory stands in its place")
        if st.st_size > limit:
            raise _damaged(path, f"{st.st_size} bytes, over the {limit}-byte bound of this record")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise _damaged(path, f"over the {limit}-byte bound of this record")
        return data
    finally:
        os.close(fd)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"{text} overflows a float")
    return v


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def depth_problem(v: Any, depth: int = 0) -> str | None:
    """What is wrong with ``v``'s nesting (deeper than :data:`MAX_DEPTH`), or None."""
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(v, dict):
        return next((p for x in v.values() if (p := depth_problem(x, depth + 1))), None)
    if isinstance(v, list):
        return next((p for x in v if (p := depth_problem(x, depth + 1))), None)
    return None


def loads(text: str | bytes, path: str | os.PathLike, *, where: str = "") -> Any:
    """Strict JSON ``text`` of the record ``path`` (``where``: e.g. ``line 3``), bounded in depth;
    a :class:`RecordError` naming the file otherwise."""
    path = Path(path)
    at = f"{where}: " if where else ""
    try:
        data = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise _damaged(path, f"{at}not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except UnicodeDecodeError:
        raise _damaged(path, f"{at}not text") from None
    except RecursionError:
        raise _damaged(path, f"{at}nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # NaN, Infinity, 1e999, a 5000-digit integer
        raise _damaged(path, f"{at}{exc}") from None
    problem = depth_problem(data)
    if problem:
        raise _damaged(path, at + problem)
    return data


# a claim's kind and verdict must be words robustlab writes: a claim of kind null is not a claim
# of the paper that any reader may count as reproduced
_KINDS = ("claim", "self-check", "exploratory")
_VERDICTS = ("reproduced", "contradicted", "inconclusive", "not applicable")


def _claims_problem(data: Any) -> str | None:
    for i, c in enumerate(data):
        if "kind" in c and c["kind"] not in _KINDS:
            return f"claim {i} ({c.get('id')!r}): kind is {c['kind']!r}, expected one of {', '.join(_KINDS)}"
        if "verdict" in c and c["verdict"] not in _VERDICTS:
            return f"claim {i} ({c.get('id')!r}): verdict is {c['verdict']!r}, expected one of {', '.join(_VERDICTS)}"
    return None


def read_json(path: str | os.PathLike, shape: Any = None) -> Any:
    """A JSON record, read as the module says; checked against ``shape``, or the shape
    :data:`robustlab.records.SHAPES` gives its file name. ``FileNotFoundError`` when absent."""
    path = Path(path)
    data = loads(read_bytes(path), path)
    shape = shape if shape is not None else SHAPES.get(path.name)
    if shape is not None:
        problem = check_shape(data, shape)
        if problem:
            raise _damaged(path, problem)
    if path.name == "claims.json":
        problem = _claims_problem(data)
        if problem:
            raise _damaged(path, problem)
    return data


def jsonl_rows(path: str | os.PathLike) -> tuple[list[dict], list[int]]:
    """``(rows, damaged)``: the rows of a JSON-lines record that are JSON objects, and the numbers
    (from 1) of the lines that are not (garbage, a truncated write)."""
    path = Path(path)
    rows, damaged = [], []
    for i, line in enumerate(read_bytes(path, limit=MAX_JSONL_BYTES).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = loads(line, path, where=f"line {i}")
        except RecordError:
            damaged.append(i)
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            damaged.append(i)
    return rows, damaged


def read_jsonl(path: str | os.PathLike, *, fix: str = _FIX) -> list[dict]:
    """Every row of a JSON-lines record (``results.jsonl``), each a JSON object; a damaged line is
    a :class:`RecordError` naming the file and the line (``fix``: what to do)."""
    path = Path(path)
    rows, damaged = jsonl_rows(path)
    if damaged:
        more = f" and {len(damaged) - 1} more" if len(damaged) > 1 else ""
        raise _damaged(path, f"line {damaged[0]}{more} not a JSON object", fix)
    return rows

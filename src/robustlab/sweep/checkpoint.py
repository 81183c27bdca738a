"""Checkpoints inside a group: a long training run resumes from its last saved epoch.

A sweep resumes point by point: a run killed while a group trains computes that group again
from its first epoch. Most groups take seconds, but the width-depth-init paper preset's widest
ensembles train for one to two hours each on a CPU core, and a run of that preset spans
sittings. A study that trains for many epochs can therefore save its state at an epoch
boundary now and then (:data:`CHECKPOINT_EVERY_S`), into the run directory's
``checkpoints/`` folder, and a later run of the same group (a resume, ``--retry-failed``)
continues from there. The study restores everything its numbers depend on (weights, momentum
buffers, each copy's generator state, the traces so far), so a resumed group's records are
the ones an uninterrupted run writes, timing fields aside (tested).

The sweep runner says where the folder is (:func:`folder`, set while a group runs on the
local backend, in this process or a pool worker; Ray's workers may sit on other machines, so
a Ray run keeps none). A study asks for its group's checkpoint with :func:`for_group`, which
is None outside a run directory. Files are written whole (a temporary file, then a rename),
so a run killed while saving leaves the previous checkpoint, and the study removes its file
once the group's results are returned. A save that fails (a full disk) is a warning recorded
with the group's points, not a failure: the group trains on without checkpoints.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from .. import reader, records
from ..config import Config, UserError

__all__ = ["CHECKPOINT_EVERY_S", "Checkpoint", "folder", "for_group", "progress_of"]

CHECKPOINT_EVERY_S = 600.0  # at most one save per this many seconds of a group's training
_FORMAT = 1
_FOLDER: Path | None = None  # the run's checkpoints/ while a group runs in this process


@contextlib.contextmanager
def folder(path: str | Path | None) -> Iterator[None]:
    """Let the groups run inside the block keep their checkpoints in ``path`` (None: none)."""
    global _FOLDER
    before, _FOLDER = _FOLDER, (Path(path) if path is not None else None)
    try:
        yield
    finally:
        _FOLDER = before


def for_group(cfgs: Sequence[Config], every_s: float | None = None) -> Checkpoint | None:
    """The checkpoint of the group ``cfgs`` in the running sweep's folder, or None when the
    sweep keeps none (outside a run directory, on Ray)."""
    if _FOLDER is None:
        return None
    keys = [c.key() for c in cfgs]
    name = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:24]
    return Checkpoint(_FOLDER / f"{name}.pt", keys, CHECKPOINT_EVERY_S if every_s is None else every_s)


class Checkpoint:
    """One group's saved state: :meth:`load` what an earlier run saved, :meth:`save` when
    :meth:`due`, :meth:`clear` once the group is done."""

    def __init__(self, path: Path, keys: Sequence[str], every_s: float = CHECKPOINT_EVERY_S):
        self.path, self.keys, self.every_s = Path(path), list(keys), every_s
        self._since = time.monotonic()

    def load(self) -> dict[str, Any] | None:
        """The state saved for this group, or None (none saved, another format, other points,
        or a file that does not read back)."""
        if not self.path.is_file():
            return None
        try:
            # mapped, not read in: a paper group's state is 4 GB, and the worker holds its model
            # beside it; pages are read as the study copies them into place (copy-on-write)
            saved = torch.load(self.path, map_location="cpu", weights_only=True, mmap=True)
        except Exception:  # noqa: BLE001 - an unreadable checkpoint only costs the time it saved
            return None
        if not isinstance(saved, dict) or saved.get("format") != _FORMAT or saved.get("keys") != self.keys:
            return None
        return saved["state"]

    def due(self) -> bool:
        """Whether :data:`every_s` passed since this checkpoint was made or last saved."""
        return time.monotonic() - self._since >= self.every_s

    @property
    def _note(self) -> Path:
        return self.path.with_suffix(".json")

    def save(self, state: dict[str, Any], *, progress: str | None = None) -> None:
        """Write ``state`` (tensors, numbers, lists, dicts) whole: a temporary file, then a
        rename; ``progress`` (e.g. ``"epoch 13/50"``) goes beside it, for the run's log line
        (:func:`progress_of`). A save that fails (a full disk) warns, once, and the group
        trains on without checkpoints: they only save time, and the group's results do not
        depend on them."""
        if self.every_s == math.inf:
            return
        try:
            # safe temporaries (unique names, no link followed), renamed into place
            records.atomic_write_with(self.path, lambda fh: torch.save(
                {"format": _FORMAT, "keys": self.keys, "state": state}, fh), fsync=False)
            if progress is not None:
                records.atomic_write_text(self._note, json.dumps({"progress": progress, "points": len(self.keys)}))
        except OSError as exc:
            self.every_s = math.inf  # no more tries for this group
            warnings.warn(f"could not save a training checkpoint in {self.path.parent} ({exc}); the group "
                          "trains on without one, and an interruption would restart it", RuntimeWarning,
                          stacklevel=2)
        self._since = time.monotonic()

    def clear(self) -> None:
        """Remove the saved state (the group is done), and any save left half-written."""
        # a save killed half-way leaves its temporary (``.NAME.<random>.tmp``)
        left = list(self.path.parent.glob(f".{self.path.name}.*.tmp")) if self.path.parent.is_dir() else []
        for f in (self.path, self._note, *left):
            with contextlib.suppress(OSError):
                f.unlink(missing_ok=True)


def progress_of(path: str | Path) -> list[str]:
    """What the groups that saved a checkpoint in the folder ``path`` said of their progress
    at their last save (``["epoch 13/50", …]``, in no set order); unreadable notes are skipped."""
    out = []
    for f in sorted(Path(path).glob("*.json")) if Path(path).is_dir() else []:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, UserError):
            out.append(str(reader.read_json(f)["progress"]))  # a regular file only: a pipe would block
    return out

"""One writer per run directory: an OS file lock on ``DIR/.lock``.

A process that writes a run (or reproduce) directory — ``robustlab run``, ``reproduce``,
``report`` — holds an exclusive ``flock`` on ``DIR/.lock`` for as long as it writes, with its
pid written into the file. The lock belongs to the open file, so the kernel drops it when the
process dies, however it dies: a SIGKILLed run never blocks the next one, and a stale pid in
the file means nothing. A second writer does not wait: it gets a one-line :class:`UserError`
naming the holder's pid and writes nothing.

Within one process the lock is re-entrant (``reproduce`` holds its directory while each
study's ``execute`` takes the study's own directory; taking one directory twice only counts).
The file is opened close-on-exec; worker processes started from a fork server or by Ray do
not hold it.

Readers never take it: :func:`robustlab.load` and ``compare`` open the store read-only.
:func:`holder` tells who writes a directory now, without blocking and without creating files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ..config import UserError

__all__ = ["LOCK_NAME", "writer", "holder", "LockedError"]

LOCK_NAME = ".lock"

# lock file (resolved path) -> [fd, depth], for the locks this process holds
_HELD: dict[str, list[int]] = {}


class LockedError(UserError):
    """Another process writes the directory; ``pid`` is its process id (None if unknown)."""

    def __init__(self, directory: Path, pid: int | None):
        who = f"pid {pid}" if pid is not None else "another process"
        super().__init__(f"out={str(directory)!r} is not allowed: another robustlab process ({who}) "
                         "is writing it; wait for it to finish, or choose another --out")
        self.directory = directory
        self.pid = pid


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def writer(directory: str | os.PathLike) -> Iterator[None]:
    """Hold the writer lock of ``directory`` (which must exist) for the body.

    Raises :class:`LockedError` at once when another process holds it.
    """
    path = Path(directory) / LOCK_NAME
    key = str(path.resolve())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _read_pid(fd)
        os.close(fd)
        raise LockedError(Path(directory), pid) from None
    except BaseException:
        os.close(fd)
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        _HELD[key] = [fd, 1]
        yield
    finally:
        _HELD.pop(key, None)
        os.close(fd)  # releases the lock; the file (and its stale pid) stays


def holder(directory: str | os.PathLike) -> int | None:
    """The pid writing ``directory`` now (0 when its pid is unknown), or None when nobody
    does. Never blocks and creates nothing; this process's own locks count as nobody."""
    path = Path(directory) / LOCK_NAME
    if not path.exists() or str(path.resolve()) in _HELD:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            return pid if pid is not None else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)

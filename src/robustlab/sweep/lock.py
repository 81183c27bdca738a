"""One writer per run directory: an OS lock on the directory itself, its holder in ``DIR/.lock``.

A process that writes a run (or reproduce) directory — ``robustlab run``, ``reproduce``,
``report`` — holds an exclusive ``flock`` on an open descriptor of the directory for as long
as it writes, with its pid written into ``DIR/.lock``. Locking the directory, not the file,
means that deleting or replacing ``.lock`` mid-run lets no second writer in; ``.lock`` is
opened without following a symbolic link (one planted there is refused: the pid would land
in another file). The lock belongs to the open file, so the kernel drops it when the
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
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from ..config import UserError

try:  # POSIX; on Windows the lock file itself is locked with msvcrt (see _lock)
    import fcntl
except ImportError:  # pragma: no cover - exercised by a test that hides fcntl
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "writer", "holder", "LockedError"]

LOCK_NAME = ".lock"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

# directory (resolved path) -> [directory fd, lock-file fd, depth], for the locks this process holds
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
    except (OSError, ValueError, AttributeError):
        return None


def _check_lock_file(directory: Path) -> None:
    """``DIR/.lock`` is absent or robustlab's own plain file: a symbolic link, anything but a
    regular file, or a file with other hard links (a user's file linked in) is a UserError, and
    nothing is written to it."""
    from ..records import plain_file_problem

    path = directory / LOCK_NAME
    problem = plain_file_problem(path)
    if problem:
        raise UserError(f"{path} is not allowed: it is {problem}; remove it")


def _open_lock_file(directory: Path, flags: int) -> int:
    """``DIR/.lock`` opened without following a symbolic link and without blocking (a named
    pipe there would hang the open); a link, or anything but a plain file, is a UserError."""
    _check_lock_file(directory)
    path = directory / LOCK_NAME
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, 0o644)
    except OSError as exc:
        if path.is_symlink() or exc.errno in (getattr(os, "ELOOP", 40),):
            raise UserError(f"{path} is not allowed: it is a symbolic link (robustlab writes only its own "
                            "plain files in a run directory); remove it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"{path} is not allowed: it is not a plain file; remove it")
    return fd


def _write_pid(directory: Path) -> None:
    """The holder's pid into ``DIR/.lock``: a new file renamed into place (never written into an
    existing one, so a file planted there keeps its bytes)."""
    from .. import records

    records.atomic_write_with(directory / LOCK_NAME, lambda fh: fh.write(f"{os.getpid()}\n".encode("ascii")),
                              fsync=False)


def _open_dir(directory: Path) -> int | None:
    """A descriptor of the directory to lock (None where directories cannot be opened)."""
    if fcntl is None:
        return None
    return os.open(directory, os.O_RDONLY | _CLOEXEC | getattr(os, "O_DIRECTORY", 0))


def _lock(dir_fd: int | None, file_fd: int, shared: bool = False) -> None:
    """Take the lock without waiting (BlockingIOError when another process holds it)."""
    if fcntl is not None:
        fcntl.flock(dir_fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        return
    import msvcrt  # pragma: no cover - Windows

    try:  # pragma: no cover
        msvcrt.locking(file_fd, msvcrt.LK_NBLCK, 1)
    except OSError:  # pragma: no cover
        raise BlockingIOError from None


def _unlock(dir_fd: int | None, file_fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(dir_fd, fcntl.LOCK_UN)
        return
    import msvcrt  # pragma: no cover - Windows

    msvcrt.locking(file_fd, msvcrt.LK_UNLCK, 1)  # pragma: no cover


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


@contextlib.contextmanager
def writer(directory: str | os.PathLike) -> Iterator[None]:
    """Hold the writer lock of ``directory`` (which must exist) for the body.

    Raises :class:`LockedError` at once when another process holds it.
    """
    directory = Path(directory)
    key = str(directory.resolve())
    if key in _HELD:
        _HELD[key][2] += 1
        try:
            yield
        finally:
            _HELD[key][2] -= 1
        return
    _check_lock_file(directory)
    # the lock is on the directory; .lock only says who holds it (Windows locks the file itself)
    file_fd = _open_lock_file(directory, os.O_RDWR | os.O_CREAT) if fcntl is None else None
    dir_fd = None
    try:
        dir_fd = _open_dir(directory)
        _lock(dir_fd, file_fd)  # type: ignore[arg-type]
    except BlockingIOError:
        pid = _read_pid_of(directory) if file_fd is None else _read_pid(file_fd)
        _close(dir_fd, file_fd)
        raise LockedError(directory, pid) from None
    except BaseException:
        _close(dir_fd, file_fd)
        raise
    try:
        if file_fd is None:
            _write_pid(directory)
        else:  # pragma: no cover - Windows: the locked file holds the pid
            os.ftruncate(file_fd, 0)
            os.write(file_fd, f"{os.getpid()}\n".encode("ascii"))
        _HELD[key] = [dir_fd, file_fd, 1]  # type: ignore[list-item]
        yield
    finally:
        _HELD.pop(key, None)
        _close(file_fd, dir_fd)  # releases the lock; the file (and its stale pid) stays


def _read_pid_of(directory: Path) -> int | None:
    """The pid in ``DIR/.lock`` (None: none, or not robustlab's plain file)."""
    try:
        fd = os.open(directory / LOCK_NAME, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK)
    except OSError:
        return None
    try:
        return _read_pid(fd) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        _close(fd)


def holder(directory: str | os.PathLike) -> int | None:
    """The pid writing ``directory`` now (0 when its pid is unknown), or None when nobody
    does. Never blocks and creates nothing; this process's own locks count as nobody."""
    directory = Path(directory)
    path = directory / LOCK_NAME
    if not directory.is_dir() or str(directory.resolve()) in _HELD:
        return None
    try:
        file_fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK)
    except OSError:
        file_fd = None
    if fcntl is None and file_fd is None:
        return None
    dir_fd = None
    try:
        dir_fd = _open_dir(directory)
        try:
            _lock(dir_fd, file_fd, shared=True)  # type: ignore[arg-type]
        except BlockingIOError:
            pid = _read_pid(file_fd) if file_fd is not None else None
            return pid if pid is not None else 0
        _unlock(dir_fd, file_fd)  # type: ignore[arg-type]
        return None
    except OSError:
        return None
    finally:
        _close(dir_fd, file_fd)

"""Run records: atomic file writes and the manifest that makes every number reproducible.

A run directory holds ``manifest.json`` (config, seeds, grid, versions, times, host),
``store.sqlite`` (the sweep's result store), ``results.jsonl`` (its rows, in grid order),
``claims.json``, ``figures/*.png`` and ``report.html``. Every file is written to a
temporary name in the same directory and renamed into place, so a killed run never
leaves a half-written file.
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import subprocess
import tempfile
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from .config import UserError

__all__ = [
    "atomic_write_text",
    "atomic_write_bytes",
    "write_json",
    "read_json",
    "DamagedFile",
    "check_writable",
    "write_jsonl",
    "read_jsonl",
    "package_versions",
    "code_version",
    "host_info",
    "now_iso",
]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same dir, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes owner-only files; records are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _key(k: Any) -> str:
    """A dict key as ``json`` writes the keys it converts itself (``true``, ``null``, ``1.5``), and any
    other key as ``str(k)``: the same text whether or not :func:`dumps` takes the walk."""
    if isinstance(k, str):
        return k
    if k is None or isinstance(k, bool | int | float):
        return json.dumps(k)
    return str(k)


def _clean(obj: Any) -> Any:
    """Make a value strict-JSON: NaN/inf become None, numpy/torch scalars become Python."""
    if isinstance(obj, dict):
        return {_key(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, str | bytes):
        return _clean(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj: Any, **kw: Any) -> str:
    """Strict JSON of ``obj`` after :func:`_clean`. Most records are plain Python already, and
    ``json`` refuses what ``_clean`` would change (NaN/inf, numpy and torch values), so the
    walk runs only when it is needed: the same text at half the cost (a sweep's rows pass
    through here twice, into the store and into results.jsonl). Keys read the same either way
    (:func:`_key`)."""
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except (TypeError, ValueError):
        return json.dumps(_clean(obj), allow_nan=False, **kw)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, dumps(obj, indent=2, sort_keys=False) + "\n")


class DamagedFile(UserError):
    """A record file that exists but cannot be read (not valid JSON, not text)."""


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON record; a damaged one is a :class:`DamagedFile` (one line, exit 2) that
    names the file and what to do."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        why = f"{exc.msg} at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "not text"
        raise DamagedFile(f"{path} is damaged (not valid JSON: {why}): restore it, or move the "
                          "directory away to start over") from None


def check_writable(path: str | os.PathLike, *, what: str = "--out") -> None:
    """Raise :class:`UserError` unless ``path`` (a directory, existing or to be made) can be
    written: a probe file is made and removed in it, or in its nearest existing ancestor.

    Checked by trying rather than by permission bits: root ignores those, while a read-only
    file system, /proc or a full disk do not.
    """
    path = Path(path)
    probe_dir = path
    while not probe_dir.exists():
        if probe_dir.parent == probe_dir:
            break
        probe_dir = probe_dir.parent
    if probe_dir.exists() and not probe_dir.is_dir():
        raise UserError(f"{what} {str(path)!r} is not allowed: {str(probe_dir)!r} is a file, not a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".robustlab-probe.", dir=probe_dir)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        how = "cannot be created" if probe_dir != path else "cannot be written"
        raise UserError(f"{what} {str(path)!r} is not allowed: it {how} "
                        f"({exc.strerror or type(exc).__name__} in {str(probe_dir)!r}); choose a "
                        "writable directory") from None


def write_jsonl(path: str | os.PathLike, rows: list[dict]) -> None:
    atomic_write_text(path, "".join(dumps(r, sort_keys=True) + "\n" for r in rows))


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


_PACKAGES = ("robustlab", "torch", "numpy", "scikit-learn", "mlxtend", "matplotlib",
             "pandas", "torchvision", "ray")


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def code_version() -> dict[str, Any]:
    """The git commit of the robustlab checkout (and whether it had local changes)."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                                text=True, timeout=5).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=here,
                                    capture_output=True, text=True, timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    return {"git_commit": commit, "dirty": dirty}


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else the platform's word for it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_info() -> dict[str, Any]:
    """Where a run ran. ``cpu_capability`` is the instruction set PyTorch's CPU kernels run
    with (``AVX2``, ``AVX512``, ...): it and the CPU model decide which kernels oneDNN and the
    BLAS pick, and so the order in which they sum; two hosts that differ there can give results
    that differ in the last bits, and trained networks further."""
    import torch

    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "cpu_count": os.cpu_count(), "machine": platform.machine(), "cpu": cpu_model(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

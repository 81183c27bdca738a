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

__all__ = [
    "atomic_write_text",
    "atomic_write_bytes",
    "write_json",
    "read_json",
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


def _clean(obj: Any) -> Any:
    """Make a value strict-JSON: NaN/inf become None, numpy/torch scalars become Python."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, str | bytes):
        return _clean(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj: Any, **kw: Any) -> str:
    return json.dumps(_clean(obj), allow_nan=False, **kw)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text())


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


def host_info() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "cpu_count": os.cpu_count(), "machine": platform.machine()}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

"""Run records: atomic file writes and the manifest that makes every number reproducible.

A run directory holds ``manifest.json`` (config, seeds, grid, versions, times, host),
``store.sqlite`` (the sweep's result store), ``results.jsonl`` (its rows, in grid order),
``claims.json``, ``figures/*.png`` and ``report.html``. Every file is written to a
temporary name in the same directory and renamed into place, so a killed run never
leaves a half-written file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import secrets
import socket
import stat
import subprocess
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

from .config import UserError

__all__ = [
    "atomic_write_text",
    "atomic_write_bytes",
    "atomic_write_with",
    "safe_temp",
    "write_json",
    "read_json",
    "read_manifest",
    "DamagedFile",
    "check_writable",
    "write_jsonl",
    "read_jsonl",
    "package_versions",
    "code_version",
    "host_info",
    "now_iso",
    "Provenance",
    "provenance",
]


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


_PLAIN = "robustlab writes only its own plain files in a run directory"


def plain_file_problem(path: str | os.PathLike, *, writing: bool = True) -> str | None:
    """What makes ``path`` other than absent or robustlab's own plain file, as the words after
    "it is": a symbolic link, not a regular file (a named pipe, device or directory), or, for a
    writer, a hard link to another file (a user's file linked in); None when it is fine. Read
    with ``lstat``, so nothing is followed or opened. Each caller words its own error."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"a symbolic link ({_PLAIN})"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a named pipe, device or directory)"
    if writing and st.st_nlink > 1:
        return f"a hard link to another file ({st.st_nlink} names; {_PLAIN})"
    return None


def safe_temp(path: str | os.PathLike) -> tuple[int, Path]:
    """A new temporary file beside ``path``, opened for writing: ``(fd, its path)``.

    Its name is unique and unpredictable (``.NAME.<random>.tmp``), and it is created with
    ``O_CREAT | O_EXCL | O_NOFOLLOW``: a file or a symbolic link planted under that name makes
    the open fail instead of being followed or overwritten. Same directory as ``path``, so the
    final rename is atomic."""
    path = Path(path)
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
        except FileExistsError:
            continue
        return fd, tmp
    raise FileExistsError(f"no free temporary name beside {path}")  # pragma: no cover


def atomic_write_with(path: str | os.PathLike, write: Callable[[BinaryIO], Any], *, fsync: bool = True) -> None:
    """Write ``path`` atomically: ``write(fh)`` fills a :func:`safe_temp` file, which is
    fsynced (unless ``fsync=False``: a training checkpoint, only time lost if it is) and renamed
    over ``path``. A rename replaces whatever name ``path`` was (a link is
    replaced, never written through; a file with other hard links keeps its bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = safe_temp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # records are meant to be shared (umask aside)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a safe temporary in the same dir, fsync, rename)."""
    atomic_write_with(path, lambda fh: fh.write(data))


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
    """Read a JSON record through the one reader (:func:`robustlab.reader.read_json`): a regular
    file only, bounded in size and depth, strict JSON, of its shape (:data:`SHAPES`); whatever
    is wrong is a :class:`DamagedFile` (one line, exit 2) naming the file and the field."""
    from .reader import read_json as read

    return read(path)


# --- shapes of the records -------------------------------------------------------------------
# A shape is a type name ("str", "int", "float", "bool", "null", "dict", "list", "any"), a
# tuple of alternatives, ["list", item shape], or {"field": shape, "?optional": shape} (a
# mapping's other keys are free).

# a run's manifest, in full (read_manifest); any manifest.json read at all must have at least
# its study, and every other field of the right type where present (compare reads only those)
_MANIFEST = {
    "study": "str", "preset": "str", "base_config": "dict",
    "grid": ["list", "dict"], "seeds": ["list", "int"], "n_points": "int",
    "point_keys": ["list", "str"],
    "?threads": "int", "?device": "str", "?request": ("dict", "null"),
    "?study_origin": ("dict", "null"), "?code": ("dict", "null"), "?versions": ("dict", "null"),
    "?sittings": ["list", "dict"], "?reused": ["list", "dict"], "?finished": ("str", "null"),
    "?started": ("str", "null"), "?resumed": "int",
}
_ANY_MANIFEST = {("?" + k if not k.startswith("?") and k != "study" else k): v for k, v in _MANIFEST.items()}
_REPRODUCE = {"studies": ["list", "str"], "?preset": "str", "?seed": ("int", "null"),
              "?crashed": "dict", "?timings": "dict", "?resumed": "int"}
_NUMBER = ("float", "null")
_CLAIMS = ["list", {"id": "str", "?kind": "str", "?statement": "str", "?verdict": "str", "?passed": "bool",
                    "?effect": _NUMBER, "?interval": (["list", _NUMBER], "null"),
                    "?threshold": (_NUMBER[0], "null", ["list", _NUMBER]), "?side": ("str", "null"),
                    "?level": _NUMBER, "?n": ("int", "null"), "?method": ("str", "null"),
                    "?seeds": ("int", "null"), "?seeds_needed": ("int", "null"), "?more_seeds": ("int", "null"),
                    "?conditions": (["list", "dict"], "null"), "?reason": ("str", "null"),
                    "?control": ("dict", "null"), "?excluded": (["list", "dict"], "null"),
                    "?across": ("dict", "null"), "?evidence": ("dict", "null"), "?source": ("str", "null"),
                    "?incomplete": ("dict", "null")}]
SHAPES_RUN = _MANIFEST  # a run's manifest in full (read_manifest's shape)
SHAPES: dict[str, Any] = {"manifest.json": _ANY_MANIFEST, "reproduce.json": _REPRODUCE, "claims.json": _CLAIMS}


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """A run's manifest.json with every field a run needs (study, preset, base_config, grid,
    seeds, n_points, point_keys) of the right type; else :class:`DamagedFile` naming the field."""
    data = read_json(path)
    problem = check_shape(data, _MANIFEST)
    if problem:
        raise DamagedFile(f"{path} is damaged ({problem}): restore it, or move the directory away to start over")
    return data


_TYPES = {"str": str, "int": int, "float": (int, float), "bool": bool, "null": type(None),
          "dict": dict, "list": list}


def _type_word(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def check_shape(data: Any, shape: Any, where: str = "") -> str | None:
    """What is wrong with ``data`` against ``shape`` (one phrase naming the field), or None."""
    at = f"field {where!r}" if where else "the top level"
    if isinstance(shape, dict):
        if not isinstance(data, dict):
            return f"{at} is {_type_word(data)}, expected an object"
        for key, sub in shape.items():
            name = key.lstrip("?")
            if name not in data:
                if key.startswith("?"):
                    continue
                return f"field {(where + '.' if where else '') + name!r} is missing"
            bad = check_shape(data[name], sub, (where + "." if where else "") + name)
            if bad:
                return bad
        return None
    if isinstance(shape, list):
        if not isinstance(data, list):
            return f"{at} is {_type_word(data)}, expected a list"
        for i, item in enumerate(data):
            bad = check_shape(item, shape[1], f"{where}[{i}]")
            if bad:
                return bad
        return None
    alts = shape if isinstance(shape, tuple) else (shape,)
    for a in alts:
        if isinstance(a, list | dict):  # a list or object of a shape, among alternatives
            if isinstance(data, list if isinstance(a, list) else dict):
                return check_shape(data, a, where)
            continue
        if a == "any":
            return None
        if isinstance(data, _TYPES[a]) and not (a in ("int", "float") and isinstance(data, bool)):
            return None
    words = [a if isinstance(a, str) else ("list" if isinstance(a, list) else "dict") for a in alts]
    return f"{at} is {_type_word(data)}, expected " + " or ".join(words)


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
    """Every row of a JSON-lines record, through the one reader (:func:`robustlab.reader.read_jsonl`)."""
    from .reader import read_jsonl as read

    return read(path)


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


_CODE_CACHE: dict[str, Any] = {}


def _sources_hash(root: Path) -> str:
    """sha256 (16 hex) of every ``.py`` file under ``root``, by relative path and content."""
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def file_hash(path: str | os.PathLike) -> str | None:
    """sha256 (16 hex) of a file's bytes (None when it cannot be read)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def robustlab_code() -> dict[str, Any]:
    """The code identity of robustlab itself: its git commit and, when the checkout has local
    changes (or is no checkout), the hash of its sources — so two different dirty trees at one
    commit are told apart. Computed once per process."""
    if "robustlab" not in _CODE_CACHE:
        v = code_version()
        here = Path(__file__).resolve().parent
        dirty = _sources_hash(here) if v["dirty"] or v["git_commit"] is None else None
        _CODE_CACHE["robustlab"] = {"commit": v["git_commit"], "sources": dirty}
    return dict(_CODE_CACHE["robustlab"])


def study_code(origin: dict[str, Any] | None) -> dict[str, Any]:
    """The code identity of the code that computes a study's points: robustlab's
    (:func:`robustlab_code`), and for a study file its content hash, for a plugin its
    package and version (and the hash of the module file the entry point names, where found)."""
    o = dict(origin or {"kind": "built-in"})
    ident: dict[str, Any] = {"robustlab": robustlab_code(), "study": {"kind": o.get("kind", "built-in")}}
    if o.get("kind") == "file":
        ident["study"]["sha256"] = file_hash(o["path"])
    elif o.get("kind") == "package":
        ident["study"].update(package=o.get("package"), version=o.get("version"))
    return ident


@dataclasses.dataclass(frozen=True)
class Provenance:
    """Who computes a run: the code identity of its study (:func:`study_code`) and its id, the
    git state of robustlab, the package versions and the host. Computed once when a run starts
    (:func:`provenance`) and handed to every check and record of that run — the resume check,
    the mixed-code check, the sitting, the manifest, each stored point — so they all see one
    identity, even if a study file changes while the run is checked."""

    ident: dict[str, Any]
    code_id: str
    git: dict[str, Any]
    versions: dict[str, str | None]
    host: dict[str, Any]


def provenance(origin: dict[str, Any] | None) -> Provenance:
    """The :class:`Provenance` of a run of a study from ``origin`` (its ``Study.origin``), now."""
    ident = study_code(origin)
    return Provenance(ident, code_id(ident), code_version(), package_versions(), host_info())


def code_id(ident: dict[str, Any]) -> str:
    """A short id of a code identity (what each stored point carries)."""
    blob = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def legacy_code_id(manifest: dict[str, Any]) -> str:
    """The code id of points recorded before points carried one: from the manifest's ``code``
    (a dirty tree then had no hash, so it matches no current code)."""
    code = manifest.get("code") or {}
    origin = manifest.get("study_origin") or {"kind": "built-in"}
    kind = origin.get("kind", "built-in") if isinstance(origin, dict) else "built-in"
    study: dict[str, Any] = {"kind": kind}
    if kind == "file":
        study["sha256"] = "unknown"
    elif kind == "package":
        study.update(package=origin.get("package"), version=origin.get("version"))
    dirty = code.get("dirty")
    return code_id({"robustlab": {"commit": code.get("git_commit"),
                                  "sources": None if dirty is False else "unknown"}, "study": study})


def code_text(ident: dict[str, Any] | None) -> str:
    """A code identity in a few words, e.g. ``commit 1a2b3c4 + local changes 5d6e7f8, file 9a8b7c6``."""
    if not ident:
        return "unknown code"
    r = ident.get("robustlab") or {}
    text = f"commit {(r.get('commit') or '?')[:7]}"
    if r.get("sources"):
        text += f" + local changes {r['sources'][:7]}"
    st = ident.get("study") or {}
    if st.get("kind") == "file":
        text += f", study file {(st.get('sha256') or '?')[:7]}"
    elif st.get("kind") == "package":
        text += f", package {st.get('package')} {st.get('version')}"
    return text


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

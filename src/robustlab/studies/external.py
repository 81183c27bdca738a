"""Studies from outside the package: a file that defines ``STUDY``, or an installed package.

* ``robustlab run path/to/my_study.py`` imports the file (see :mod:`robustlab._userfiles`,
  which lets worker processes import it again by name) and runs its ``STUDY``.
* A package declares its studies as entry points in the group ``robustlab.studies``::

      [project.entry-points."robustlab.studies"]
      linear-margin = "robustlab_linear_margin:STUDY"

  The entry point's name is the study's name; it may point at a ``Study`` or at a module
  that defines ``STUDY``.

A built-in name always means the built-in study. Whatever goes wrong with an outside study
(missing file, no ``STUDY``, an exception on import, a name that clashes with a built-in)
is a :class:`UserError` of one line naming the file or entry point and the problem, raised
only when that study is asked for; :func:`listing` reports a broken plugin as one line and
lists the others.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any

from .. import _userfiles
from ..config import UserError
from .base import Study

__all__ = ["GROUP", "is_path", "load_file", "plugins", "load_plugin", "origin_text",
           "from_manifest", "Listed", "listing"]

GROUP = "robustlab.studies"


def is_path(name: str) -> bool:
    """Whether a study argument names a file rather than a registered study."""
    return name.endswith(".py") or os.sep in name or (os.altsep is not None and os.altsep in name)


def _one_line(exc: BaseException, file: str | None = None) -> str:
    """``Type: message`` on one line, with the line of ``file`` where it was raised."""
    msg = " ".join(str(exc).split()) or "(no message)"
    where = ""
    if file is not None:
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if Path(f.filename).resolve() == Path(file).resolve()]
        if frames:
            where = f" (line {frames[-1].lineno})"
        elif isinstance(exc, SyntaxError) and exc.lineno:
            where = f" (line {exc.lineno})"
    return f"{type(exc).__name__}: {msg}{where}"[:400]


def _check_study(obj: Any, what: str, builtin: set[str]) -> Study:
    if not isinstance(obj, Study):
        raise UserError(f"{what} is not allowed: STUDY must be a robustlab.studies.Study, "
                        f"got {type(obj).__name__}")
    if obj.name in builtin:
        raise UserError(f"{what} is not allowed: its study name {obj.name!r} clashes with a "
                        "built-in study; choose another name")
    return obj


def load_file(path: str | Path, builtin: set[str]) -> Study:
    """The ``STUDY`` a Python file defines, imported under a name workers can re-import."""
    path = Path(path)
    what = f"study={str(path)!r}"
    if not path.is_file():
        raise UserError(f"{what} is not allowed: no such file")
    if path.suffix != ".py":
        raise UserError(f"{what} is not allowed: a study file is a Python file (.py)")
    _userfiles.install()
    try:
        module = importlib.import_module(_userfiles.module_name(path))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the file raises (sys.exit too), one line names it
        raise UserError(f"{what} is not allowed: importing it raised {_one_line(exc, str(path))}") from None
    if not hasattr(module, "STUDY"):
        raise UserError(f"{what} is not allowed: it defines no STUDY "
                        "(a robustlab.studies.Study at module level)")
    study = _check_study(module.STUDY, what, builtin)
    return dataclasses.replace(study, origin={"kind": "file", "path": str(path.resolve())})


def plugins() -> dict[str, metadata.EntryPoint]:
    """The entry points of the group ``robustlab.studies``, by name (first one wins)."""
    out: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=GROUP):
        out.setdefault(ep.name, ep)
    return out


def _ep_text(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    pkg = f", package {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point '{ep.name} = {ep.value}'{pkg}"


def load_plugin(ep: metadata.EntryPoint, builtin: set[str]) -> Study:
    """The study an entry point names (a Study, or a module defining STUDY)."""
    what = f"study={ep.name!r} ({_ep_text(ep)})"
    if ep.name in builtin:
        raise UserError(f"{what} is not allowed: the name clashes with a built-in study; "
                        "the built-in one is used")
    try:
        obj = ep.load()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken plugin is one line, never a traceback
        raise UserError(f"{what} is not allowed: loading it raised {_one_line(exc)}") from None
    if not isinstance(obj, Study) and hasattr(obj, "STUDY"):
        obj = obj.STUDY
    study = _check_study(obj, what, builtin)
    if study.name != ep.name:
        raise UserError(f"{what} is not allowed: its STUDY is named {study.name!r}; "
                        "the entry point must carry the study's name")
    dist = getattr(ep, "dist", None)
    return dataclasses.replace(study, origin={
        "kind": "package", "entry_point": f"{ep.name} = {ep.value}",
        "package": dist.name if dist is not None else None,
        "version": dist.version if dist is not None else None})


def origin_text(study: Study) -> str:
    """Where a study comes from, for `robustlab list`."""
    o = study.origin or {"kind": "built-in"}
    if o["kind"] == "file":
        return f"file {o['path']}"
    if o["kind"] == "package":
        return f"package {o.get('package') or '?'} {o.get('version') or ''}".rstrip()
    return "built-in"


def from_manifest(manifest: dict[str, Any], get_study) -> Study:
    """The study a run directory was made with (a built-in, a file, or a plugin)."""
    origin = manifest.get("study_origin") or {"kind": "built-in"}
    if origin.get("kind") == "file":
        return get_study(origin["path"])
    return get_study(manifest["study"])


@dataclasses.dataclass(frozen=True)
class Listed:
    name: str
    study: Study | None  # None: broken
    problem: str = ""


def listing(builtin: set[str]) -> list[Listed]:
    """Every installed plugin study; a broken one carries its one-line problem."""
    out = []
    for name, ep in sorted(plugins().items()):
        try:
            out.append(Listed(name, load_plugin(ep, builtin)))
        except UserError as exc:
            out.append(Listed(name, None, str(exc)))
    return out

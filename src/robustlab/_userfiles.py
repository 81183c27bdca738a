"""Import a study file by its path, under a module name that encodes the path.

A study loaded from ``path/to/my_study.py`` becomes the module
``robustlab_userfile_<hex of the absolute path>``. Its functions and config classes then
pickle by reference to that name, and any process that has imported ``robustlab`` — a
worker of the local pool, a Ray worker — can import the module again from the name alone:
the finder below decodes the path. Nothing has to be sent or registered beforehand. The
file's folder is appended to ``sys.path``, so modules next to it import as usual.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path

__all__ = ["PREFIX", "module_name", "path_of", "install"]

PREFIX = "robustlab_userfile_"


def module_name(path: str | Path) -> str:
    """The module name a study file is imported under (absolute path, hex-encoded)."""
    return PREFIX + str(Path(path).resolve()).encode("utf-8").hex()


def path_of(name: str) -> str | None:
    """The file a module name made by :func:`module_name` stands for (None otherwise)."""
    if not name.startswith(PREFIX) or "." in name:
        return None
    try:
        return bytes.fromhex(name[len(PREFIX):]).decode("utf-8")
    except ValueError:
        return None


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # noqa: D401 - importlib protocol
        file = path_of(fullname)
        if file is None or not Path(file).is_file():
            return None
        # helpers next to the study file import as they would for `python my_study.py`
        # (appended, so that nothing installed is shadowed); workers do the same
        folder = str(Path(file).parent)
        if folder not in sys.path:
            sys.path.append(folder)
        return importlib.util.spec_from_file_location(fullname, file)


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once per process)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())

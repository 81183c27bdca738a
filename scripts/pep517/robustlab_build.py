"""robustlab's build backend: setuptools' own, leaving no litter in the source tree.

``pip wheel .`` (and ``python -m build``) run setuptools in the source folder, which writes
``build/`` and ``src/robustlab.egg-info/`` there and leaves them. This wrapper removes what a
build created (never what was there before it started); everything else is
``setuptools.build_meta`` unchanged. ``pip install -e .`` is left alone: an editable install
reads its metadata from the tree.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - the rest of the PEP 517/660 hooks, as they are

_LITTER = ("build", "src/robustlab.egg-info")


def _no_litter(hook):
    @functools.wraps(hook)
    def wrapped(*args, **kwargs):
        before = {p for p in _LITTER if Path(p).exists()}
        try:
            return hook(*args, **kwargs)
        finally:
            for p in _LITTER:
                if p not in before:
                    shutil.rmtree(p, ignore_errors=True)

    return wrapped


build_wheel = _no_litter(_setuptools.build_wheel)
build_sdist = _no_litter(_setuptools.build_sdist)
prepare_metadata_for_build_wheel = _no_litter(_setuptools.prepare_metadata_for_build_wheel)

"""robustlab-linear-margin: an external robustlab study (see study.py and docs/writing-a-study.md)."""

from .study import STUDY

__all__ = ["STUDY"]

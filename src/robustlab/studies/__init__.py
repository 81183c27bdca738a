"""Studies: config -> grid of runs -> results -> claims -> figures.

The registry maps a study's command name to the module that defines ``STUDY``; modules
are imported on first use so that ``robustlab list`` stays fast.
"""

from __future__ import annotations

import importlib

from ..config import UserError, did_you_mean
from .base import Claim, Context, Figure, Preset, Study

__all__ = ["REGISTRY", "get_study", "all_studies", "REPRODUCE_ORDER", "REPRODUCE_RUN_ORDER", "Study", "Preset", "Claim",
           "Context", "Figure"]

REGISTRY: dict[str, str] = {
    "smoke": "robustlab.studies.smoke",
    "feature-learning": "robustlab.studies.feature_learning",
    "lazy-attack": "robustlab.studies.lazy.attack",
    "lazy-adversarial": "robustlab.studies.lazy.adversarial",
    "width-depth-init": "robustlab.studies.width_depth_init",
}

# The studies `robustlab reproduce` runs, in the order its report lists them.
REPRODUCE_ORDER: list[str] = ["feature-learning", "lazy-attack", "lazy-adversarial", "width-depth-init"]

# The order it runs them in. A study's figures are drawn while the next study's points run,
# so the last study's drawing is the only one nothing overlaps: width-depth-init (about 8
# CPU-s of matplotlib at the quick preset) goes early, lazy-adversarial (about 1.5 s) last.
# Studies not listed (plugins, files) run first, in the order asked. Quick preset, back to
# back on 2 cores: 83.3 s in report order, 77.5 s in this one.
REPRODUCE_RUN_ORDER: list[str] = ["feature-learning", "width-depth-init", "lazy-attack", "lazy-adversarial"]


def get_study(name: str) -> Study:
    """A built-in study by name, a study file by path, or an installed plugin by name."""
    if name in REGISTRY:
        return importlib.import_module(REGISTRY[name]).STUDY
    from . import external

    if external.is_path(name):
        return external.load_file(name, set(REGISTRY))
    found = external.plugins()
    if name in found:
        return external.load_plugin(found[name], set(REGISTRY))
    known = list(REGISTRY) + [n for n in found if n not in REGISTRY]
    raise UserError(f"study={name!r} is not allowed{did_you_mean(name, known)}: one of {', '.join(known)}, "
                    "or the path of a .py file that defines STUDY")


def all_studies() -> list[Study]:
    return [get_study(n) for n in REGISTRY]

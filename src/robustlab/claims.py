"""The claims engine: what kind of check a verdict is, the control beside it, the premises each
point must meet, and whether the decision survives the study's own knobs.

A sound statistic on a weak test still says "reproduced". This module holds the conventions
that make a verdict able to fail (``../shared/SPEC.md``, "What the audits taught"):

* **Kinds.** A ``claim`` is a paper's statement decided on measurements; a ``self-check`` is an
  invariant of robustlab's own code (a projection, an ε → 0 path, a sampling identity) and a
  broken one fails the run; an ``exploratory`` question is one the paper does not state. Only
  claims count in "N of M reproduced".
* **Controls.** Each claim names a setting where its premise is removed or its effect is absent
  by construction, and the same decision rule is run there (:class:`Control`). A control that
  reads reproduced too means the test does not discriminate: the claim becomes inconclusive
  (:func:`with_control`, applied by :class:`~robustlab.studies.base.Claim` itself).
* **Premises per point.** A :class:`Premise` is a per-row test (trained, lazy, at equal fit, a
  theorem's own condition). :func:`apply_premises` keeps the rows that meet every premise and
  counts the rest (:class:`Exclusion`); a claim is *not applicable* only when fewer points
  remain than its test needs (:func:`too_few`).
* **No knob decides.** Where the paper leaves a setting open (a reference C0, a target loss, a
  fit range) the claim is decided at every value of the preset's grid; :func:`across` joins
  those verdicts and turns a disagreement into ``inconclusive`` with the values named.

A study declares its claims up front (:class:`ClaimSpec`: id, kind, premises by name, control
setting) so that a misspelt premise or a control outside the study's grid is an error when the
study is loaded (:func:`validate_specs`), before anything runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import stats
from .stats import Verdict

__all__ = [
    "CLAIM", "SELF_CHECK", "EXPLORATORY", "KINDS", "NO_CONTROL", "NOT_DISCRIMINATING",
    "Premise", "ControlSpec", "ClaimSpec", "Control", "Exclusion",
    "apply_premises", "too_few", "across", "with_control", "control_from", "validate_specs",
    "premise_at_least", "premise_at_most", "premise_true",
]

CLAIM = "claim"
SELF_CHECK = "self-check"
EXPLORATORY = "exploratory"
KINDS = (CLAIM, SELF_CHECK, EXPLORATORY)

NO_CONTROL = "no control: cannot fail-check"
NOT_DISCRIMINATING = "the test does not discriminate: its control passes too"


# ----------------------------------------------------------------------------------------
# premises

@dataclasses.dataclass(frozen=True)
class Premise:
    """A condition one point (one row of the results table) must meet to be used by a claim.

    ``test(df)`` returns one boolean per row (a Series aligned with ``df``, or an array);
    a row whose column is missing or NaN fails it. ``description`` says it in words with its
    bound ("clean test accuracy >= 0.9"), fixed before looking at results.
    """

    name: str
    description: str
    test: Callable[[pd.DataFrame], Any]

    def mask(self, df: pd.DataFrame) -> np.ndarray:
        out = self.test(df)
        arr = np.asarray(out.to_numpy() if isinstance(out, pd.Series) else out)
        if arr.shape == ():
            arr = np.full(len(df), bool(arr))
        if arr.shape != (len(df),):
            raise ValueError(f"premise {self.name!r}: its test gave shape {arr.shape} for {len(df)} rows")
        return np.where(pd.isna(arr), False, arr).astype(bool)


def _column(df: pd.DataFrame, col: str) -> pd.Series:
    if col not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[col], errors="coerce")


def premise_at_least(name: str, col: str, bound: float, what: str | None = None) -> Premise:
    """``df[col] >= bound`` per row (a trained network: ``clean_acc >= 0.9``)."""
    return Premise(name, f"{what or col} >= {bound:g}", lambda df: _column(df, col) >= bound)


def premise_at_most(name: str, col: str, bound: float, what: str | None = None) -> Premise:
    """``df[col] <= bound`` per row (a lazy network: ``kappa <= 0.1``)."""
    return Premise(name, f"{what or col} <= {bound:g}", lambda df: _column(df, col) <= bound)


def premise_true(name: str, col: str, what: str | None = None) -> Premise:
    """``df[col]`` is true per row (``reached_target``)."""
    return Premise(name, what or f"{col} is true",
                   lambda df: df[col].astype("boolean").fillna(False) if col in df.columns else False)


@dataclasses.dataclass(frozen=True)
class Exclusion:
    """How many of a claim's points one premise removed."""

    premise: str
    excluded: int
    of: int
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"premise": self.premise, "excluded": int(self.excluded), "of": int(self.of)}
        if self.detail:
            d["detail"] = self.detail
        return d


def _units(df: pd.DataFrame, unit: str | Sequence[str] | None) -> pd.Series:
    """One label per row naming the unit a premise is counted in (a point by default)."""
    if unit is None:
        unit = "point" if "point" in df.columns else None
    if unit is None:
        return pd.Series(np.arange(len(df)), index=df.index)
    cols = [unit] if isinstance(unit, str) else list(unit)
    out = df[cols[0]].astype(str)
    for c in cols[1:]:  # column by column: a row-wise join costs seconds on a few thousand rows
        out = out + "|" + df[c].astype(str)
    return out


def apply_premises(df: pd.DataFrame, premises: Iterable[Premise], *,
                   unit: str | Sequence[str] | None = None) -> tuple[pd.DataFrame, list[Exclusion]]:
    """The rows that meet every premise, and one :class:`Exclusion` per premise.

    Counts are in units (``unit``: the column(s) naming one point, e.g. ``("d", "seed")``;
    default the ``point`` column, else rows): a unit fails a premise when any of its rows does,
    and is then dropped whole. Each premise's count is independent (a point failing two
    premises is counted under both); ``of`` is the number of units before any exclusion.
    """
    premises = list(premises)
    if df.empty:
        return df, [Exclusion(p.name, 0, 0, p.description) for p in premises]
    labels = _units(df, unit)
    total = int(labels.nunique())
    bad_units: set[Any] = set()
    out = []
    for p in premises:
        failed_units = set(labels[~p.mask(df)])
        bad_units |= failed_units
        out.append(Exclusion(p.name, len(failed_units), total, p.description))
    keep = ~labels.isin(bad_units).to_numpy()
    return df[keep], out


def too_few(kept: pd.DataFrame | int, need: int | None, exclusions: Sequence[Exclusion] = (), *,
            unit: str | Sequence[str] | None = None, what: str = "points") -> Verdict | None:
    """``not applicable`` when fewer than ``need`` units remain after the premises, else None.
    ``need=None``: the caller found that no part of its test could be formed from what remains
    (e.g. no width sweep with enough widths); always not applicable, saying how many remain."""
    if isinstance(kept, pd.DataFrame):
        n = int(_units(kept, unit).nunique()) if len(kept) else 0
    else:
        n = int(kept)
    if need is not None and n >= need:
        return None
    lost = ", ".join(f"{e.premise}: {e.excluded} of {e.of} excluded" for e in exclusions if e.excluded)
    needs = "too few to form any part of the test" if need is None else f"the test needs {need}"
    return stats.not_applicable(f"only {n} {what} meet the premises, {needs}" + (f" ({lost})" if lost else ""))


# ----------------------------------------------------------------------------------------
# controls

@dataclasses.dataclass(frozen=True)
class ControlSpec:
    """Where a claim's control runs, and why it must fail there (written before looking).

    ``setting``: grid values that select the control's points (``{"C0": 1000}``), checked at
    load against the study's presets; or a string naming a control measured inside every point
    ("the same networks at initialisation", "standard-trained models of the same preset").
    """

    setting: Mapping[str, Any] | str
    why: str

    def label(self) -> str:
        if isinstance(self.setting, str):
            return self.setting
        return ", ".join(f"{k} = {v}" for k, v in self.setting.items())


@dataclasses.dataclass(frozen=True)
class Control:
    """The claim's decision rule applied where the effect must be absent."""

    setting: str
    verdict: Verdict
    why: str = ""

    @property
    def discriminates(self) -> bool:
        """True unless the control passes too (a not-applicable control says nothing either way)."""
        return self.verdict.verdict != stats.REPRODUCED

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict.to_dict()
        return {"setting": self.setting, "verdict": v["verdict"], "effect": v["effect"],
                "interval": v["interval"], "threshold": v["threshold"], "side": v["side"], "reason": v["reason"],
                "why": self.why}


def control_from(spec: ControlSpec, verdict: Verdict) -> Control:
    return Control(spec.label(), verdict, spec.why)


def with_control(verdict: Verdict, control: Control | None) -> Verdict:
    """A reproduced verdict whose control reads reproduced too becomes inconclusive."""
    if control is None or verdict.verdict != stats.REPRODUCED or control.discriminates:
        return verdict
    reason = "; ".join(x for x in (NOT_DISCRIMINATING, f"control {control.setting}", verdict.reason) if x)
    return dataclasses.replace(verdict, verdict=stats.INCONCLUSIVE, reason=reason, seeds_needed=None)


# ----------------------------------------------------------------------------------------
# knobs the paper does not fix

def across(knob: str, verdicts: Mapping[Any, Verdict]) -> tuple[Verdict, dict[str, dict[str, str]]]:
    """Join one claim's verdicts at every value of ``knob``.

    All applicable values agree: that verdict (the value whose decision is narrowest, via
    :func:`robustlab.stats.combine`'s pick). They disagree: ``inconclusive``, naming each value's
    verdict. None applicable: ``not applicable``. Returns the verdict and ``{knob: {value:
    verdict}}`` for ``claims.json``'s ``across``.
    """
    table = {str(k): v.verdict for k, v in verdicts.items()}
    record = {knob: table}
    if not verdicts:
        return stats.Verdict(stats.INCONCLUSIVE, reason=f"no value of {knob} could be judged"), record
    applicable = {k: v for k, v in verdicts.items() if v.verdict != stats.NOT_APPLICABLE}
    if not applicable:
        first = next(iter(verdicts.values()))
        return first, record
    kinds = {v.verdict for v in applicable.values()}
    listing = ", ".join(f"{k} → {v.verdict}" for k, v in verdicts.items())
    if len(kinds) == 1:
        joined = stats.combine(list(applicable.values()))
        return dataclasses.replace(joined, reason=f"same verdict at every {knob} ({listing})"), record
    pick = next(v for v in applicable.values())
    return (dataclasses.replace(pick, verdict=stats.INCONCLUSIVE, seeds_needed=None,
                                reason=f"the verdict depends on {knob}, which the paper does not fix: {listing}"),
            record)


# ----------------------------------------------------------------------------------------
# declarations, checked when a study is loaded

@dataclasses.dataclass(frozen=True)
class ClaimSpec:
    """A claim a study checks, declared before any run.

    ``premises`` name entries of the study's premise table; ``control`` is required for a
    built-in ``claim`` (a plugin's claim without one runs, marked :data:`NO_CONTROL`);
    ``min_points`` is how many points must survive the premises for the test to be made.
    """

    id: str
    kind: str = CLAIM
    premises: tuple[str, ...] = ()
    control: ControlSpec | None = None
    min_points: int = 1


def _grid_values(presets: Mapping[str, Any], field: str) -> list[Any]:
    seen: list[Any] = []
    for p in presets.values():
        if field in (getattr(p, "overrides", None) or {}):
            seen.append(p.overrides[field])
        for block in getattr(p, "grid", ()) or ():
            seen.extend(block.get(field, ()))
    return seen


def _same(a: Any, b: Any) -> bool:
    try:
        return a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and float(a) == float(b))
    except Exception:
        return False


def validate_specs(study_name: str, specs: Sequence[ClaimSpec], premises: Mapping[str, Premise],
                   presets: Mapping[str, Any], fields: Iterable[str], defaults: Mapping[str, Any] | None = None
                   ) -> list[str]:
    """Problems with a study's claim declarations, one line each (empty: all good).

    Checks: a known kind; unique ids; every premise named exists; a control's grid setting
    names a field of the study's config whose value appears in some preset (or is the
    config's default).
    """
    problems: list[str] = []
    fields = set(fields)
    defaults = dict(defaults or {})
    seen: set[str] = set()
    for spec in specs:
        where = f"study {study_name!r}, claim {spec.id!r}"
        if spec.id in seen:
            problems.append(f"{where}: declared twice")
        seen.add(spec.id)
        if spec.kind not in KINDS:
            problems.append(f"{where}: kind={spec.kind!r}: one of {', '.join(KINDS)}")
        for name in spec.premises:
            if name not in premises:
                known = ", ".join(sorted(premises)) or "none declared"
                problems.append(f"{where}: premise {name!r} is unknown (known: {known})")
        if spec.control is not None and not isinstance(spec.control.setting, str):
            for field, value in spec.control.setting.items():
                if field not in fields:
                    problems.append(f"{where}: control setting {field}={value!r}: no such field")
                    continue
                values = _grid_values(presets, field)
                if field in defaults:
                    values.append(defaults[field])
                if not any(_same(value, v) for v in values):
                    problems.append(f"{where}: control setting {field}={value!r} is in no preset's grid "
                                    f"(values there: {sorted({repr(v) for v in values})})")
    return problems

"""The claims engine: what kind of check a verdict is, the control beside it, the premises each
point must meet, and whether the decision survives the study's own knobs.

A sound statistic on a weak test still says "reproduced". This module holds the conventions
that make a verdict able to fail (``../shared/SPEC.md``, "What the audits taught"):

* **Kinds.** A ``claim`` is a paper's statement decided on measurements; a ``self-check`` is an
  invariant of robustlab's own code (a projection, an ε → 0 path, a sampling identity) and a
  broken one fails the run; an ``exploratory`` question is one the paper does not state. Only
  claims count in "N of M reproduced".
* **Controls.** Each claim names other runs — a grid setting, or a population of runs the study
  declares (untrained networks, standard-trained models) — where its premise is removed or its
  effect is absent, and :func:`judge` runs the claim's own decision rule there: a study cannot
  give its control a rule of its own, so a control judged by the claim's complement cannot be
  declared. A reproduced claim stands only beside a *working* control, one that reads
  contradicted under the same rule: a control that passes too means the test does not
  discriminate, and one that is not applicable, undecided, missing or not decided by the claim's
  rule leaves the claim inconclusive ("no working control"). :func:`with_control` applies this,
  called by :class:`~robustlab.studies.base.Claim` itself.
* **Premises per point.** A :class:`Premise` is a per-row test (trained, lazy, at equal fit, a
  theorem's own condition). :func:`apply_premises` keeps the rows that meet every premise and
  counts the rest (:class:`Exclusion`); a claim is *not applicable* only when fewer points
  remain than its test needs (:func:`too_few`).
* **No knob decides.** Where the paper leaves a setting open (a reference C0, a target loss, a
  fit range) the claim is decided at every value of the preset's grid; :func:`across` joins
  those verdicts with the statement's quantifier: "for every value" (one contradicted value
  contradicts it, and its numbers are reported) or "for some value"; values outside the
  theorem's regime are excluded and named, never joined.
* **Premise coverage.** A claim about a shape or a slope along an axis is not applicable when
  the premises leave too little of the axis to show it (:func:`coverage`), naming the premise
  that removed a side.

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
    "NO_WORKING_CONTROL", "OWN_RUNS", "ALL", "SOME",
    "apply_premises", "too_few", "across", "with_control", "control_from", "judge", "coverage",
    "validate_specs",
    "premise_at_least", "premise_at_most", "premise_true",
]

CLAIM = "claim"
SELF_CHECK = "self-check"
EXPLORATORY = "exploratory"
KINDS = (CLAIM, SELF_CHECK, EXPLORATORY)

NO_CONTROL = "no control: cannot fail-check"
NOT_DISCRIMINATING = "the test does not discriminate: its control passes too"
NO_WORKING_CONTROL = "no working control"
OWN_RUNS = "the control's rows are the claim's own rows (a control judges other runs)"
ALL, SOME = "all", "some"  # the quantifier of a statement over a knob's values


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

    ``setting`` names *other runs*, never another rule: grid values that select the control's
    points (``{"init_scale": 0.01}``), checked at load against the study's presets; or the name
    of a population of runs measured inside every point that the study declares in
    ``Study(populations=...)`` ("at-init": the same networks before any training step). A
    string that names no declared population ("bands swapped", "each init judged by the other's
    rule") is refused when the study is loaded. ``why`` says what the theory predicts there.
    """

    setting: Mapping[str, Any] | str
    why: str

    def label(self) -> str:
        if isinstance(self.setting, str):
            return self.setting
        return ", ".join(f"{k} = {v}" for k, v in self.setting.items())


@dataclasses.dataclass(frozen=True)
class Control:
    """The claim's decision rule applied where the effect must be absent.

    ``rule`` names the decision rule that produced ``verdict``; :func:`judge` fills it with the
    claim's own rule. A control built by hand (``rule`` empty) is reported but is not a working
    control: it cannot let a claim read reproduced.
    """

    setting: str
    verdict: Verdict
    why: str = ""
    rule: str = ""

    @property
    def discriminates(self) -> bool:
        """False when the control passes too (the test cannot tell the settings apart)."""
        return self.verdict.verdict != stats.REPRODUCED

    @property
    def working(self) -> bool:
        """Decided by the claim's rule and contradicted there: the only control that lets a
        claim read reproduced."""
        return bool(self.rule) and self.verdict.verdict == stats.CONTRADICTED

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict.to_dict()
        return {"setting": self.setting, "verdict": v["verdict"], "effect": v["effect"],
                "interval": v["interval"], "threshold": v["threshold"], "side": v["side"], "reason": v["reason"],
                "why": self.why, "rule": self.rule, "working": self.working}


def control_from(spec: ControlSpec, verdict: Verdict) -> Control:
    """A control whose verdict the study computed itself: reported, never a working control
    (use :func:`judge`, which runs the claim's own rule)."""
    return Control(spec.label(), verdict, spec.why)


def _rule_name(rule: Callable[..., Any]) -> str:
    name = getattr(rule, "__qualname__", None) or getattr(rule, "__name__", None) or type(rule).__name__
    return f"{getattr(rule, '__module__', '') or ''}.{name}".lstrip(".")


def _same_rows(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if a is b:
        return True
    try:
        return a.shape == b.shape and list(a.columns) == list(b.columns) and a.index.equals(b.index) and a.equals(b)
    except Exception:
        return False


def judge(spec: ClaimSpec | ControlSpec | None, rule: Callable[[pd.DataFrame], Verdict], rows: pd.DataFrame,
          control_rows: pd.DataFrame | None = None) -> tuple[Verdict, Control | None]:
    """Decide a claim and its control with one rule: ``rule(rows)`` and ``rule(control_rows)``.

    ``spec``: the claim's declaration (its ``control`` is used) or the control's; None or a claim
    without a control gives ``(rule(rows), None)``. ``control_rows``: the control setting's
    rows, prepared like the claim's (the same premises, the same columns: where the control is
    a population measured inside each point, its measurements filled into the claim's columns);
    None or empty: the control reads not applicable ("no runs in the control's setting"). Rows
    equal to the claim's own are refused the same way: a control judges other runs.
    """
    cspec = spec.control if isinstance(spec, ClaimSpec) else spec
    verdict = rule(rows)
    if not isinstance(verdict, Verdict):
        raise TypeError(f"a decision rule must return a Verdict, {_rule_name(rule)} returned {type(verdict).__name__}")
    if cspec is None:
        return verdict, None
    name = _rule_name(rule)
    if control_rows is None or len(control_rows) == 0:
        cv = stats.not_applicable("no runs in the control's setting")
    elif _same_rows(rows, control_rows):
        cv = stats.not_applicable(OWN_RUNS)
    else:
        cv = rule(control_rows)
        if not isinstance(cv, Verdict):
            raise TypeError(f"a decision rule must return a Verdict, {name} returned {type(cv).__name__}")
    return verdict, Control(cspec.label(), cv, cspec.why, rule=name)


def with_control(verdict: Verdict, control: Control | None, *, required: bool = True) -> Verdict:
    """A reproduced verdict stands only beside a working control (:attr:`Control.working`).

    A control that reads reproduced too: inconclusive, "the test does not discriminate". One
    that is not applicable, undecided or not decided by the claim's rule, or none at all where
    ``required``: inconclusive, "no working control". Other verdicts are unchanged, and a capped
    verdict carries no seeds-needed message (more seeds would not give it a control).
    """
    if verdict.verdict != stats.REPRODUCED:
        return verdict
    if control is None:
        if not required:
            return verdict
        why = f"{NO_WORKING_CONTROL}: none declared"
    elif control.verdict.verdict == stats.REPRODUCED:
        why = f"{NOT_DISCRIMINATING}; control {control.setting}"
    elif not control.rule:
        why = (f"{NO_WORKING_CONTROL}: control {control.setting} was not decided by the claim's own rule "
               f"(it read {control.verdict.verdict})")
    elif control.verdict.verdict == stats.CONTRADICTED:
        return verdict
    else:
        detail = f": {control.verdict.reason}" if control.verdict.reason else ""
        why = f"{NO_WORKING_CONTROL}: control {control.setting} reads {control.verdict.verdict}{detail}"
    reason = "; ".join(x for x in (why, verdict.reason) if x)
    return dataclasses.replace(verdict, verdict=stats.INCONCLUSIVE, reason=reason, seeds_needed=None)


# ----------------------------------------------------------------------------------------
# knobs the paper does not fix

def across(knob: str, verdicts: Mapping[Any, Verdict], *, quantifier: str = ALL,
           outside: Mapping[Any, str] | None = None) -> tuple[Verdict, dict[str, dict[str, str]]]:
    """Join one claim's verdicts at every value of ``knob``, with the statement's quantifier.

    ``quantifier="all"`` (a statement that holds for every value, the default): one contradicted
    value contradicts it; every value reproduced reproduces it (with the value that clears its
    threshold least); else inconclusive. ``"some"`` (an existential statement, "some width has
    a peak"): one reproduced value reproduces it; every value contradicted contradicts it.
    ``outside``: values where a declared per-value premise fails (outside the theorem's regime),
    ``{value: why}``; they are excluded and named, never joined, as are not-applicable values.
    The verdict returned carries the deciding value's effect, interval and reason, prefixed with
    that value. Returns the verdict and ``{knob: {value: verdict}}`` for ``claims.json``.
    """
    if quantifier not in (ALL, SOME):
        raise ValueError(f"quantifier={quantifier!r}: one of {ALL!r}, {SOME!r}")
    outside = {str(k): why for k, why in (outside or {}).items()}
    table = {str(k): (f"excluded: {outside[str(k)]}" if str(k) in outside else v.verdict)
             for k, v in verdicts.items()}
    for k, why in outside.items():
        table.setdefault(k, f"excluded: {why}")
    record = {knob: table}
    listing = ", ".join(f"{k} → {v}" for k, v in table.items())
    if not verdicts and not outside:
        return stats.Verdict(stats.INCONCLUSIVE, reason=f"no value of {knob} could be judged"), record
    usable = {str(k): v for k, v in verdicts.items()
              if str(k) not in outside and v.verdict != stats.NOT_APPLICABLE}
    if not usable:
        named = "; ".join(f"{knob} = {k}: {why}" for k, why in outside.items())
        first = next(iter(verdicts.values()), None)  # every value may be outside: none was judged
        reason = "; ".join(x for x in (f"no value of {knob} is in the claim's regime", named,
                                        first.reason if first is not None and first.verdict == stats.NOT_APPLICABLE
                                        else "") if x)
        return stats.not_applicable(reason), record
    by = {v: {k: x for k, x in usable.items() if x.verdict == v} for v in stats.VERDICTS}
    word = "every" if quantifier == ALL else "some"
    # "all": one contradicted value decides, and the clearest contradiction is reported; with every
    # value reproduced, the one that clears its threshold least. "some": the mirror image.
    decisive, other = (stats.CONTRADICTED, stats.REPRODUCED) if quantifier == ALL else (stats.REPRODUCED,
                                                                                         stats.CONTRADICTED)
    extreme = min if quantifier == ALL else max
    keep_need = False
    if by[decisive]:
        k, pick = extreme(by[decisive].items(), key=lambda kv: stats.margin(kv[1]))
        head = f"{decisive} at {knob} = {k} (the statement is for {word} {knob})"
    elif by[stats.INCONCLUSIVE]:
        k, pick = next(iter(by[stats.INCONCLUSIVE].items()))
        head = f"undecided at {knob} = {k}"
        keep_need = True
    else:
        k, pick = extreme(by[other].items(), key=lambda kv: stats.margin(kv[1]))
        head = (f"reproduced at every {knob} in the regime; least margin at {knob} = {k}" if quantifier == ALL
                else f"contradicted at every {knob}; least clear at {knob} = {k}")
    reason = "; ".join(x for x in (head, f"{word} {knob}: {listing}", pick.reason) if x)
    out = dataclasses.replace(pick, reason=reason)
    if not keep_need:
        out = dataclasses.replace(out, seeds_needed=None)
    return out, record


# ----------------------------------------------------------------------------------------
# premise coverage along an axis

def coverage(df: pd.DataFrame, premises: Iterable[Premise], axis: str, *, shape: str = "slope",
             min_distinct: int = 3, min_span: float | None = None,
             unit: str | Sequence[str] | None = None, min_per_value: int = 1) -> Verdict | None:
    """Is enough of ``axis`` left, once ``premises`` are applied, to show a ``shape`` along it?

    ``df``: the rows before the premises. A ``"peak"`` needs the design's smallest and largest
    ``axis`` value both kept (both sides of an interior maximum) and ``min_distinct`` values; a
    ``"slope"`` needs ``min_distinct`` distinct values spanning a factor ``min_span`` (max/min,
    for a positive axis) when given. An ``axis`` value counts as kept when at least
    ``min_per_value`` rows of it remain (a statistic that needs two networks per value cannot
    anchor an end on one). Returns None when it is, else ``not applicable``, "undecidable as
    designed", naming the premise that removed the missing side.
    """
    if shape not in ("peak", "slope"):
        raise ValueError(f"shape={shape!r}: 'peak' or 'slope'")
    premises = list(premises)
    if df.empty or axis not in df.columns:
        return stats.not_applicable(f"undecidable as designed: no values of {axis}")
    design = np.sort(pd.to_numeric(df[axis], errors="coerce").dropna().unique())
    kept, _ = apply_premises(df, premises, unit=unit)
    vals = pd.to_numeric(kept[axis], errors="coerce").dropna() if len(kept) else pd.Series(dtype=float)
    counts = vals.value_counts()
    have = np.sort(counts.index[counts >= min_per_value].to_numpy(np.float64)) if len(counts) else np.array([])

    def fmt(v: Any) -> str:
        return f"{float(v):g}"

    span = f"kept {fmt(have[0])} … {fmt(have[-1])}" if have.size else "kept none"
    span += f" of {fmt(design[0])} … {fmt(design[-1])}" if design.size else ""

    def who_removed(values: np.ndarray) -> str:
        """The premises that fail at every row of the given axis values."""
        sub = df[pd.to_numeric(df[axis], errors="coerce").isin(values)]
        names = [p.name for p in premises if len(sub) and not p.mask(sub).any()]
        if not names:
            names = [p.name for p in premises if len(sub) and not p.mask(sub).all()]
        return ", ".join(repr(n) for n in names) or "the premises together"

    missing: list[str] = []
    if shape == "peak" and design.size:
        if not have.size or have[0] > design[0]:
            gone = design[design < (have[0] if have.size else np.inf)]
            missing.append(f"premise {who_removed(gone)} removes {axis} < {fmt(have[0]) if have.size else '∞'}")
        if have.size and have[-1] < design[-1]:
            gone = design[design > have[-1]]
            missing.append(f"premise {who_removed(gone)} removes {axis} > {fmt(have[-1])}")
    if have.size < min_distinct and not missing:
        missing.append(f"{have.size} distinct {axis} values remain, the {shape} needs {min_distinct}"
                       + (f" (premise {who_removed(np.setdiff1d(design, have))})" if have.size < design.size else ""))
    if shape == "slope" and min_span is not None and have.size >= 2 and not missing:
        if have[0] > 0 and have[-1] / have[0] < min_span:
            missing.append(f"the kept {axis} values span a factor {have[-1] / have[0]:g}, the claim needs "
                           f"{min_span:g} (premise {who_removed(np.setdiff1d(design, have))})")
    if not missing:
        return None
    return stats.not_applicable(f"undecidable as designed: {'; '.join(missing)} ({span})")


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
                   presets: Mapping[str, Any], fields: Iterable[str], defaults: Mapping[str, Any] | None = None,
                   populations: Mapping[str, str] | None = None) -> list[str]:
    """Problems with a study's claim declarations, one line each (empty: all good).

    Checks: a known kind; unique ids; every premise named exists; a control's grid setting
    names a field of the study's config whose value appears in some preset (or is the
    config's default); a control named by a string names a population of runs the study
    declares (``populations``): a control is the claim's rule on other runs, so a string such
    as "bands swapped" (the same runs under another rule) is refused.
    """
    populations = dict(populations or {})
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
        if spec.control is not None and isinstance(spec.control.setting, str):
            if spec.control.setting not in populations:
                known = ", ".join(sorted(populations)) or "none declared"
                problems.append(f"{where}: control {spec.control.setting!r} names no population of runs the study "
                                f"declares (a control is the claim's own rule on other runs, never another rule "
                                f"on the same runs; declared: {known})")
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

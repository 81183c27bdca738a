"""The claims-engine calls of issue 51 this study uses: ``judge``, ``coverage`` and ``across`` with
a quantifier (``/work/notes/ENGINE_API.md`` §1, §3, §5).

Where :mod:`robustlab.claims` provides them they are used as they are; on an engine from before
issue 51 the stand-ins below do what that API documents, so the study runs on either. Once the
engine is merged, the stand-ins are dead code.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from ... import claims as cl
from ... import stats
from ...stats import Verdict

Rule = Callable[[pd.DataFrame], Verdict]


def _judge(spec: cl.ClaimSpec, rule: Rule, rows: pd.DataFrame, control_rows: pd.DataFrame | None
           ) -> tuple[Verdict, cl.Control | None]:
    verdict = rule(rows)
    if spec.control is None:
        return verdict, None
    if control_rows is None:
        cv = stats.not_applicable(f"the control's runs ({spec.control.label()}) are not in this run")
    else:
        cv = rule(control_rows)
    return verdict, cl.Control(spec.control.label(), cv, spec.control.why)


def judge(spec: cl.ClaimSpec, rule: Rule, rows: pd.DataFrame, control_rows: pd.DataFrame | None
          ) -> tuple[Verdict, cl.Control | None]:
    """The claim's rule on its rows and on its control's rows (ENGINE_API §1)."""
    if hasattr(cl, "judge"):
        return cl.judge(spec, rule, rows, control_rows)
    return _judge(spec, rule, rows, control_rows)


def _across(knob: str, verdicts: Mapping[Any, Verdict], quantifier: str,
            outside: Mapping[Any, str]) -> tuple[Verdict, dict]:
    record = {knob: {str(k): (f"excluded: {outside[k]}" if k in outside else v.verdict)
                     for k, v in verdicts.items()}}
    inside = {k: v for k, v in verdicts.items() if k not in outside}
    named = "; ".join(f"{knob} = {k} excluded: {w}" for k, w in outside.items())
    if not inside:
        return stats.not_applicable(named or f"no value of {knob} could be judged"), record
    by = {s: [(k, v) for k, v in inside.items() if v.verdict == s] for s in stats.VERDICTS}
    listing = ", ".join(f"{k} → {v.verdict}" for k, v in inside.items())

    def out(pick: Verdict, head: str) -> tuple[Verdict, dict]:
        reason = "; ".join(x for x in (head, named, pick.reason) if x)
        return dataclasses.replace(pick, reason=reason), record
    if quantifier == "some":
        if by[stats.REPRODUCED]:
            k, v = by[stats.REPRODUCED][0]
            return out(v, f"reproduced at {knob} = {k} ({listing})")
        applicable = [kv for kv in inside.items() if kv[1].verdict != stats.NOT_APPLICABLE]
        if applicable and all(v.verdict == stats.CONTRADICTED for _, v in applicable):
            return out(applicable[0][1], f"contradicted at every {knob} ({listing})")
    else:
        if by[stats.CONTRADICTED]:
            k, v = by[stats.CONTRADICTED][0]
            return out(dataclasses.replace(v, seeds_needed=None), f"contradicted at {knob} = {k} ({listing})")
        applicable = [v for v in inside.values() if v.verdict != stats.NOT_APPLICABLE]
        if applicable and all(v.verdict == stats.REPRODUCED for v in applicable) \
                and len(applicable) == len(inside):
            return out(stats.combine(applicable), f"reproduced at every {knob} ({listing})")
    open_ = by[stats.INCONCLUSIVE] or by[stats.NOT_APPLICABLE] or list(inside.items())
    k, v = open_[0]
    verdict = stats.INCONCLUSIVE if any(x.verdict != stats.NOT_APPLICABLE for x in inside.values()) \
        else stats.NOT_APPLICABLE
    return out(dataclasses.replace(v, verdict=verdict), f"undecided at {knob} = {k} ({listing})")


def across(knob: str, verdicts: Mapping[Any, Verdict], *, quantifier: str = "all",
           outside: Mapping[Any, str] | None = None) -> tuple[Verdict, dict]:
    """The claim's verdict over a knob's values with its quantifier (ENGINE_API §3)."""
    try:
        return cl.across(knob, verdicts, quantifier=quantifier, outside=dict(outside or {}))
    except TypeError:  # an engine from before issue 51: no quantifier
        return _across(knob, verdicts, quantifier, dict(outside or {}))


def _coverage(df: pd.DataFrame, kept: pd.DataFrame, axis: str, shape: str, min_distinct: int,
              min_span: float) -> Verdict | None:
    design = sorted(pd.to_numeric(df[axis]).unique()) if len(df) else []
    have = sorted(pd.to_numeric(kept[axis]).unique()) if len(kept) else []
    if not design:
        return None
    if shape == "peak":
        ok = len(have) >= 3 and design[0] in have and design[-1] in have
    else:
        ok = len(have) >= min_distinct and have[0] > 0 and have[-1] / have[0] >= min_span
    if ok:
        return None
    kept_s = f"{have[0]:g} … {have[-1]:g}" if have else "none"
    return stats.not_applicable(f"undecidable as designed: the premises keep {axis} {kept_s} "
                                f"of {design[0]:g} … {design[-1]:g} ({len(have)} distinct), a {shape} needs "
                                + ("both ends and >= 3 values" if shape == "peak"
                                   else f">= {min_distinct} values spanning a factor >= {min_span:g}"))


def coverage(df: pd.DataFrame, premises: Sequence[cl.Premise], kept: pd.DataFrame, *, axis: str, shape: str,
             min_distinct: int = 3, min_span: float = 4.0, unit: Sequence[str] = ("point", "seed")) -> Verdict | None:
    """None when the rows the premises keep still span ``axis`` as the shape needs, else not
    applicable (ENGINE_API §5). ``df``: the rows before the premises, ``kept``: after them."""
    if hasattr(cl, "coverage"):
        return cl.coverage(df, list(premises), axis=axis, shape=shape, min_distinct=min_distinct,
                           min_span=min_span, unit=tuple(u for u in unit if u in df.columns))
    return _coverage(df, kept, axis, shape, min_distinct, min_span)


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)

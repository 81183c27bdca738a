"""The report's words, shared by the terminal and the HTML report: verdict states, a claim's
decision (``effect [interval] vs threshold``), its control, exclusions and what an undecided
claim needs, evidence as ``key = value`` pairs, and the plain-text claim table (``-v``).

A claim dict is what :meth:`robustlab.studies.base.Claim.to_dict` writes: ``kind`` (claim,
self-check, exploratory), ``verdict`` one of the four states of :mod:`robustlab.stats`
(reproduced, contradicted, inconclusive, not applicable), ``effect``, ``interval``,
``threshold``, ``side``, ``control`` ({setting, verdict, effect, interval, why}), ``excluded``
([{premise, excluded, of}]), maybe ``across`` ({knob: {value: verdict}}), ``evidence``. An old
``claims.json`` holds only ``passed``: :func:`verdict_of` reads it as reproduced or contradicted.

Numbers print with 4 significant digits; a key ``k`` whose sibling ``k_ci`` holds two numbers
prints as ``k = v [lo, hi]`` (see :meth:`robustlab.report.plots.PowerLawFit.evidence`).
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from typing import Any

from .. import records

__all__ = ["StudySection", "claim_table_text", "format_evidence", "verdict_of", "kind_of", "paper_claims",
           "self_check_failures", "self_check_line", "control_text", "excluded_text", "strict_failures",
           "decision_text", "attention_text", "VERDICT_WORDS", "STRICT_FAIL"]

# the four verdict states (robustlab.stats.VERDICTS), their word and CSS class
VERDICT_WORDS = {"reproduced": "REPRODUCED", "contradicted": "CONTRADICTED", "inconclusive": "INCONCLUSIVE",
                 "not applicable": "NOT APPLICABLE"}
_VERDICT_CLASS = {"reproduced": "pass", "contradicted": "fail", "inconclusive": "inc", "not applicable": "na"}


@dataclasses.dataclass
class StudySection:
    name: str
    title: str
    source: str
    summary: str
    manifest: dict[str, Any]
    claims: list[dict[str, Any]]
    figures: list[dict[str, Any]]  # {"file", "title", "caption"}, file relative to the study dir
    failures: list[dict[str, Any]]
    problems: list[str]
    n_rows: int
    subdir: str = ""  # where the study's files live, relative to the report
    # warnings the points issued: {"message": "Category: text", "points": [params, ...]}
    warnings: list[dict[str, Any]] = dataclasses.field(default_factory=list)


# ----------------------------------------------------------------------------------------
# evidence and the plain-text claim table

_HIDDEN_KEYS = ("traceback",)


def _num(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.4g}"


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


@dataclasses.dataclass(frozen=True)
class _Estimate:
    """A number with its interval, printed ``v [lo, hi]``."""

    value: Any
    lo: Any
    hi: Any


# keys a bare ``ci`` entry belongs to, in order of preference
_CI_OWNERS = ("slope", "estimate", "value", "mean")


def _is_pair(v: Any) -> bool:
    return isinstance(v, list | tuple) and len(v) == 2 and all(x is None or _is_num(x) for x in v)


def _merge(d: dict[str, Any]) -> list[tuple[str, Any]]:
    """(key, value) pairs of a dict with ``k`` + ``k_ci`` (and ``slope`` + ``ci``) merged."""
    owner = None
    if _is_pair(d.get("ci")):
        owner = next((k for k in _CI_OWNERS if _is_num(d.get(k))), None)
    used: set[str] = set()
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        ci_key = f"{k}_ci" if _is_pair(d.get(f"{k}_ci")) else ("ci" if k == owner else None)
        if _is_num(v) and ci_key:
            ci = d[ci_key]
            out.append((k, _Estimate(v, ci[0], ci[1])))
            used.add(ci_key)
        else:
            out.append((k, v))
    return [(k, v) for k, v in out if k not in used and k not in _HIDDEN_KEYS]


def _clip(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _value(v: Any, limit: int | None = 240) -> str:
    """Compact text of an evidence value: numbers to 4 significant digits, intervals merged,
    long lists of numbers elided in the middle, dicts as ``{k=v, …}``."""
    if isinstance(v, _Estimate):
        return f"{_num(v.value)} [{_num(v.lo)}, {_num(v.hi)}]"
    if v is None or isinstance(v, bool) or _is_num(v):
        return _num(v)
    if isinstance(v, str):
        return _clip(v, limit)
    if isinstance(v, dict):
        return _clip("{" + ", ".join(f"{k}={_value(x, None)}" for k, x in _merge(v)) + "}", limit)
    if isinstance(v, list | tuple):
        if all(x is None or _is_num(x) for x in v):
            items = [_num(x) for x in v]
            if len(items) > 8:
                return f"[{', '.join(items[:3] + ['…'] + items[-2:])}] (n={len(v)})"
            return f"[{', '.join(items)}]"
        text = "[" + ", ".join(_value(x, None) for x in v) + "]"
        if limit is not None and len(text) > limit:
            text = _clip(text, limit - len(f" ({len(v)} items)")) + f" ({len(v)} items)"
        return text
    return _clip(str(v), limit)


def format_evidence(ev: dict[str, Any], *, limit: int | None = 240) -> list[tuple[str, str]]:
    """Evidence as (key, text) pairs, in the evidence's order; ``k`` and ``k_ci`` (or
    ``slope`` and ``ci``) merge into ``v [lo, hi]``; a ``traceback`` is left out."""
    ev = records._clean(dict(ev))  # numpy scalars -> Python, NaN -> None
    return [(k, _value(v, limit)) for k, v in _merge(ev)]


def verdict_of(claim: dict[str, Any]) -> str:
    """The claim's verdict state; an old claim dict without ``verdict`` reads its ``passed``."""
    v = claim.get("verdict")
    if v in VERDICT_WORDS:
        return v
    return "reproduced" if claim.get("passed") else "contradicted"


# verdicts of a paper claim that make ``--strict`` exit 1: every one but "reproduced" (one
# meaning on every command: exit 1 unless every claim is reproduced and every self-check holds)
STRICT_FAIL = ("contradicted", "inconclusive", "not applicable")


def kind_of(claim: dict[str, Any]) -> str:
    """``claim``, ``self-check`` or ``exploratory`` (a claim dict from before kinds is a claim)."""
    return claim.get("kind") or "claim"


def paper_claims(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only the paper's statements: what "N of M reproduced" counts."""
    return [c for c in claims if kind_of(c) == "claim"]


def self_check_failures(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Self-checks that do not hold (contradicted): robustlab's own code is wrong, the run fails."""
    return [c for c in claims if kind_of(c) == "self-check" and verdict_of(c) == "contradicted"]


def self_check_line(claims: list[dict[str, Any]]) -> str:
    """``self-checks: 2/4 hold (not holding: lazy-ball; undecided: mc-identity)``, or '' when there are
    none. A self-check that is not holding (contradicted) fails the run; one the run could not decide
    (its grid has no point it checks, or too few) is named apart, and does not."""
    checks = [c for c in claims if kind_of(c) == "self-check"]
    if not checks:
        return ""
    held = [c for c in checks if verdict_of(c) == "reproduced"]
    bad = [c["id"] for c in checks if verdict_of(c) == "contradicted"]
    open_ = [c["id"] for c in checks if verdict_of(c) not in ("reproduced", "contradicted")]
    notes = ([f"not holding: {', '.join(bad)}"] if bad else []) + ([f"undecided: {', '.join(open_)}"] if open_ else [])
    return f"self-checks: {len(held)}/{len(checks)} hold" + (f" ({'; '.join(notes)})" if notes else "")


def control_text(claim: dict[str, Any]) -> str:
    """``control: C0 = 1000 → contradicted ✓`` (✓: a working control, decided by the claim's own
    rule and contradicted there; ✗: it passes too; ?: not applicable, undecided, or not decided by
    the claim's rule, so the test's power to fail is unshown and the claim cannot read reproduced)."""
    if kind_of(claim) != "claim":
        return ""
    ctl = claim.get("control")
    if not ctl:
        return "no control: cannot fail-check"
    verdict = ctl.get("verdict")
    working = ctl.get("working")
    if working is None:  # a claims.json written before controls said whether they work
        working = verdict == "contradicted"
    mark = "✓" if working else ("✗" if verdict == "reproduced" else "?")
    return f"control: {ctl.get('setting')} → {verdict} {mark}"


def excluded_text(claim: dict[str, Any]) -> str:
    """``excluded: trained 3/20, lazy 1/20`` (the premises that removed points), or ''."""
    parts = [f"{e['premise']} {e['excluded']}/{e['of']}" for e in claim.get("excluded") or () if e.get("excluded")]
    return ("excluded: " + ", ".join(parts)) if parts else ""


def strict_failures(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What makes ``--strict`` exit 1: every paper claim not reproduced and every self-check that
    does not hold (exploratory questions never do), and either computed on an incomplete or
    partly failed grid (``incomplete``)."""
    return [c for c in claims if kind_of(c) in ("claim", "self-check")
            and (verdict_of(c) != "reproduced" or c.get("incomplete"))]


def _threshold_text(claim: dict[str, Any]) -> str:
    thr, side = claim.get("threshold"), claim.get("side")
    if thr is None:
        return ""
    if isinstance(thr, list | tuple):  # a band (side "inside"; a control's dict may not say)
        return f"in [{_num(thr[0])}, {_num(thr[1])}]" if len(thr) == 2 else ""
    return {"above": "> ", "below": "< "}.get(side or "", "vs ") + _num(thr)


def decision_text(claim: dict[str, Any]) -> str:
    """``effect [lo, hi] vs threshold`` of a claim (``in [a, b]`` for a band, ``> t`` / ``< t``
    for a side), or '' for an old claim without an effect."""
    if claim.get("effect") is None:
        return ""
    iv = claim.get("interval")
    text = _num(claim["effect"])
    if iv and len(iv) == 2:
        text += f" [{_num(iv[0])}, {_num(iv[1])}]"
    thr = _threshold_text(claim)
    return f"{text} {thr}".strip()


def attention_text(claim: dict[str, Any]) -> str:
    """What a reader must know about a claim that is not reproduced, in one line."""
    v = verdict_of(claim)
    if v == "inconclusive":
        need, more, seeds = claim.get("seeds_needed"), claim.get("more_seeds"), claim.get("seeds")
        if need is not None:
            extra = f" ({more} more)" if more is not None else ""
            at = f" at the observed effect and spread; this run has {seeds}" if seeds is not None else ""
            return f"inconclusive: about {need} seeds{extra} would decide it{at}"
        return "inconclusive: " + (claim.get("reason") or "no finite number of seeds would decide it")
    if v == "not applicable":
        unmet = [c for c in claim.get("conditions") or [] if not c.get("met")]
        if unmet:
            return "not applicable: " + "; ".join(
                f"condition '{c['name']}' not met" + (f" ({c['detail']})" if c.get("detail") else "") for c in unmet)
        return "not applicable: " + (claim.get("reason") or "a premise of the statement fails")
    if v == "contradicted":
        return "contradicted" + (f": {decision_text(claim)}" if decision_text(claim) else "")
    return "reproduced"


def _counts(sections: list[StudySection]) -> dict[str, int]:
    every = [c for s in sections for c in s.claims]
    claims = paper_claims(every)
    checks = [c for c in every if kind_of(c) == "self-check"]
    by = {v: sum(verdict_of(c) == v for c in claims) for v in VERDICT_WORDS}
    return {"claims": len(claims), "passed": by["reproduced"],
            "failed": len(claims) - by["reproduced"], **by,
            "self_checks": len(checks), "self_checks_holding": sum(verdict_of(c) == "reproduced" for c in checks),
            "exploratory": sum(kind_of(c) == "exploratory" for c in every),
            "failed_points": sum(len(s.failures) for s in sections),
            "problems": sum(len(s.problems) for s in sections)}


def _verdict_summary(n: dict[str, int]) -> str:
    return ", ".join(f"{n[v]} {v}" for v in VERDICT_WORDS if n[v] or v == "reproduced")


def claim_table_text(sections: list[StudySection], *, width: int = 110) -> str:
    """The claim table as plain text: one block per claim (id, verdict word, effect [interval]
    against the threshold, what an undecided claim needs, evidence, then the statement and its
    source on an indented line), and a one-line count of the verdicts."""
    sw = max([5] + [len(s.name) for s in sections])
    cw = max([5] + [len(c["id"]) for s in sections for c in s.claims])
    vw = 14  # "NOT APPLICABLE"
    head = f"{'study':<{sw}}  {'claim':<{cw}}  {'verdict':<{vw}}  effect [95 % interval] threshold; evidence"
    lines = [head, "-" * min(width, max(len(head), 60))]
    lead = sw + cw + vw + 6
    indent = " " * (sw + 2)
    for s in sections:
        for c in s.claims:
            v = verdict_of(c)
            bits = [f"effect = {decision_text(c)}"] if decision_text(c) else []
            if v in ("inconclusive", "not applicable"):
                bits.append(attention_text(c))
            bits += [f"{k} = {x}" for k, x in format_evidence(c["evidence"], limit=100)]
            ev = "; ".join(bits) or "-"
            wrapped = textwrap.wrap(ev, max(30, width - lead)) or ["-"]
            mark = VERDICT_WORDS[v]
            lines.append(f"{s.name:<{sw}}  {c['id']:<{cw}}  {mark:<{vw}}  {wrapped[0]}")
            lines.extend(" " * lead + w for w in wrapped[1:])
            src = c.get("source") or s.source
            statement = f"{c['statement']}  [{src}]" if src else c["statement"]
            lines.extend(textwrap.wrap(statement, width, initial_indent=indent + "» ",
                                       subsequent_indent=indent + "  "))
    n = _counts(sections)
    verdict = f"claims: {_verdict_summary(n)} (of {n['claims']})"
    if n["failed_points"]:
        verdict += f"; failed points: {n['failed_points']}"
    if n["problems"]:
        verdict += f"; problems: {n['problems']}"
    lines.append(verdict)
    return "\n".join(lines)

"""What ``robustlab run``, ``reproduce`` and ``report`` print when they end: a summary a
person reads in a minute, pytest-style.

One header line per study (``lazy-attack  6/6 reproduced  10.9 s``, its self-checks, how
many controls fail as they must, its exploratory readings and warnings counted), then exactly
one line per paper claim or self-check that is not reproduced (its mark, verdict, effect
[interval] against the threshold and a short reason, clipped to the width), and a final tally. ``verbose`` (``-v``) gives every claim, reproduced ones too, on
several lines: its control, the premises' exclusions, the verdict across a knob, the full
reason, the statement and the evidence (the report holds all of it too).

Reads claim dicts as :meth:`robustlab.studies.base.Claim.to_dict` writes them (``kind``,
``verdict``, ``effect``, ``interval``, ``threshold``, ``side``, ``control``, ``excluded``,
``across``, ``evidence``); a claim dict without ``kind`` is a paper claim.
"""

from __future__ import annotations

import textwrap
from typing import Any

from .text import (
    StudySection,
    attention_text,
    control_text,
    decision_text,
    excluded_text,
    format_evidence,
    kind_of,
    paper_claims,
    self_check_line,
    verdict_of,
)

__all__ = ["console_text", "study_header", "claim_lines", "short_reason", "tally_line", "MARKS"]

# one mark per verdict, as pytest prints one per test
MARKS = {"reproduced": "✓", "contradicted": "✗", "inconclusive": "?", "not applicable": "-"}
WORDS = {"reproduced": "reproduced", "contradicted": "CONTRADICTED", "inconclusive": "INCONCLUSIVE",
         "not applicable": "NOT APPLICABLE"}


def _seconds_text(s: float | None) -> str:
    if s is None:
        return ""
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def _controls_text(claims: list[dict[str, Any]]) -> str:
    """``controls 5/6 fail`` over the claims that name a control (a passing control makes its
    claim inconclusive: its test does not discriminate; one not applicable shows nothing)."""
    with_ctl = [c for c in paper_claims(claims) if c.get("control")]
    if not with_ctl:
        return ""
    failing = sum(c["control"].get("verdict") in ("contradicted", "inconclusive") for c in with_ctl)
    untested = sum(c["control"].get("verdict") == "not applicable" for c in with_ctl)
    return f"controls {failing}/{len(with_ctl)} fail" + (f" ({untested} not applicable)" if untested else "")


def study_header(sec: StudySection, seconds: float | None = None) -> str:
    """``lazy-attack  6/6 reproduced  10.9 s  ·  self-checks: 1/1 hold  ·  controls 6/6 fail``."""
    pc = paper_claims(sec.claims)
    n_rep = sum(verdict_of(c) == "reproduced" for c in pc)
    parts = [f"{n_rep}/{len(pc)} reproduced" if pc else "no paper claims"]
    if seconds is not None:
        parts[0] += f"  {_seconds_text(seconds)}"
    for extra in (self_check_line(sec.claims), _controls_text(sec.claims), _exploratory_text(sec.claims)):
        if extra:
            parts.append(extra)
    if sec.failures:
        parts.append(f"{len(sec.failures)} points failed")
    if sec.warnings:
        parts.append(f"{len(sec.warnings)} warning{'s' if len(sec.warnings) != 1 else ''}")
    return f"{sec.name}  " + "  ·  ".join(parts)


def _exploratory_text(claims: list[dict[str, Any]]) -> str:
    """``exploratory 1/3``: how many of the study's open questions read reproduced; one line
    each only with ``-v`` (they are reported, never counted among the paper's claims)."""
    exp = [c for c in claims if kind_of(c) == "exploratory"]
    if not exp:
        return ""
    return f"exploratory {sum(verdict_of(c) == 'reproduced' for c in exp)}/{len(exp)}"


def _reason(c: dict[str, Any]) -> str:
    v = verdict_of(c)
    if v in ("inconclusive", "not applicable"):
        return attention_text(c).split(": ", 1)[-1]
    return c.get("reason") or ""


def short_reason(c: dict[str, Any]) -> str:
    """Why a claim is not reproduced, in a few words: the seeds that would decide an
    inconclusive one, the premise an inapplicable one misses, a contradicted one's reason
    (else its control); '' for a reproduced claim."""
    v = verdict_of(c)
    if v == "reproduced":
        return ""
    if v == "inconclusive" and c.get("seeds_needed") is not None:
        more = f" ({c['more_seeds']} more)" if c.get("more_seeds") is not None else ""
        return f"about {c['seeds_needed']} seeds{more} would decide it"
    reason = " ".join((_reason(c) or "").split())
    if not reason and v == "contradicted" and c.get("control"):
        reason = control_text(c)
    return reason


def claim_lines(c: dict[str, Any], *, width: int = 110, verbose: bool = False) -> list[str]:
    """A claim in one line: mark, id, verdict, effect [interval] vs threshold and, for one not
    reproduced, a short reason (:func:`short_reason`), clipped to ``width``. With ``verbose``
    the line carries the control, and the lines under it the reason, exclusions, the verdict
    across a knob, the statement and the evidence."""
    v = verdict_of(c)
    kind = kind_of(c)
    tag = "" if kind == "claim" else f"[{kind}] "
    head = f"  {MARKS[v]} {tag}{c['id']}  {WORDS[v]}"
    line = head + (f"  {decision_text(c)}" if decision_text(c) else "")
    if not verbose:
        why = short_reason(c)
        return [_clip(line + (f"  —  {why}" if why else ""), width)]
    # a claim never decided on a measurement (a crashed study) has no control to speak of
    ctl = control_text(c) if c.get("effect") is not None or c.get("control") else ""
    more = []
    if ctl and len(line) + len(ctl) + 5 <= width:
        line += "  ·  " + ctl
    elif ctl:
        more.append(ctl)
    out = [_clip(line, width)]
    indent = "      "
    if v != "reproduced" and _reason(c):
        more.append(_reason(c))
    if excluded_text(c):
        more.append(excluded_text(c))
    if c.get("across"):
        more.append("across " + "; ".join(f"{knob}: " + ", ".join(f"{k} {x}" for k, x in vals.items())
                                         for knob, vals in c["across"].items()))
    more.append("» " + " ".join(str(c.get("statement", "")).split()))
    more += [f"{k} = {x}" for k, x in format_evidence(c.get("evidence") or {}, limit=100)]
    for text in more:
        out.extend(textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  "))
    return out


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def tally_line(sections: list[StudySection]) -> str:
    """``29 claims: 22 reproduced, 4 contradicted, 3 inconclusive; self-checks 5/5 hold``."""
    every = [c for s in sections for c in s.claims]
    pc = paper_claims(every)
    counts = {v: sum(verdict_of(c) == v for c in pc) for v in WORDS}
    parts = [f"{len(pc)} claim{'s' if len(pc) != 1 else ''}: "
             + ", ".join(f"{n} {v}" for v, n in counts.items() if n or v == "reproduced")]
    checks = [c for c in every if kind_of(c) == "self-check"]
    if checks:
        held = sum(verdict_of(c) == "reproduced" for c in checks)
        parts.append(f"self-checks {held}/{len(checks)} hold")
    n_exp = sum(kind_of(c) == "exploratory" for c in every)
    if n_exp:
        parts.append(f"{n_exp} exploratory")
    failed = sum(len(s.failures) for s in sections)
    if failed:
        parts.append(f"{failed} failed points")
    problems = sum(len(s.problems) for s in sections)
    if problems:
        parts.append(f"{problems} problem{'s' if problems != 1 else ''} (see the report)")
    return "; ".join(parts)


def console_text(sections: list[StudySection], *, seconds: dict[str, float] | None = None,
                 verbose: bool = False, width: int = 110) -> str:
    """The end-of-run summary: per study a header and one line per paper claim or self-check
    that needs a look (every claim, exploratory readings too, at length, with ``verbose``),
    then the tally."""
    seconds = seconds or {}
    lines: list[str] = []
    for s in sections:
        lines.append(study_header(s, seconds.get(s.name)))
        for problem in s.problems:
            lines.append(_clip("  ! " + problem.splitlines()[0], width))
        for c in s.claims:
            if verbose or (verdict_of(c) != "reproduced" and kind_of(c) != "exploratory"):
                lines.extend(claim_lines(c, width=width, verbose=verbose))
    if verbose:
        lines.append("")
    lines.append(tally_line(sections))
    return "\n".join(lines)

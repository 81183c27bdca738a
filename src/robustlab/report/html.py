"""The report: one self-contained HTML file (figures embedded as base64), readable offline.

Layout, top to bottom: a verdict banner (claims per verdict state, failed points, problems),
a box listing everything that needs attention (a contradicted claim; an inconclusive one with
the seeds that would decide it; a not-applicable one with the condition that failed), the
claim table (study, source and statement, verdict with effect [interval] against the
threshold, evidence), then one section per study — summary, its figures with numbered
captions, its failed points (reason and traceback), the configuration, seeds, and the
package and code versions — and an environment footer.

Evidence is a claim's ``evidence`` dict. Numbers print with 4 significant digits; a key
``k`` whose sibling ``k_ci`` holds two numbers prints as ``k = v [lo, hi]`` (see
:meth:`robustlab.report.plots.PowerLawFit.evidence`); a ``traceback`` entry is kept out of
the table and shown folded under the study. :func:`claim_table_text` prints the same
table as plain text for the terminal.

A claim dict is what :meth:`robustlab.studies.base.Claim.to_dict` writes: ``verdict`` is one
of the four states of :mod:`robustlab.stats` (reproduced, contradicted, inconclusive, not
applicable), shown as a word and a colour (green, red, amber, grey). An old ``claims.json``
holds only ``passed``: :func:`verdict_of` reads it as reproduced (true) or contradicted.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import math
import textwrap
from pathlib import Path
from typing import Any

from .. import records

__all__ = ["StudySection", "write_report", "claim_table_text", "format_evidence", "render_report",
           "verdict_of", "decision_text", "attention_text", "strict_failures", "VERDICT_WORDS", "STRICT_FAIL"]

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
    """``self-checks: 3/4 hold (broken: lazy-ball)``, or '' when there are none."""
    checks = [c for c in claims if kind_of(c) == "self-check"]
    if not checks:
        return ""
    held = [c for c in checks if verdict_of(c) == "reproduced"]
    bad = [c["id"] for c in checks if verdict_of(c) != "reproduced"]
    return f"self-checks: {len(held)}/{len(checks)} hold" + (f" (not holding: {', '.join(bad)})" if bad else "")


def control_text(claim: dict[str, Any]) -> str:
    """``control: C0 = 1000 → contradicted ✓`` (✓: the control does not pass, so the test can fail)."""
    if kind_of(claim) != "claim":
        return ""
    ctl = claim.get("control")
    if not ctl:
        return "no control: cannot fail-check"
    mark = "✗" if ctl.get("verdict") == "reproduced" else "✓"
    return f"control: {ctl.get('setting')} → {ctl.get('verdict')} {mark}"


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
    if side == "inside" and isinstance(thr, list | tuple) and len(thr) == 2:
        return f"in [{_num(thr[0])}, {_num(thr[1])}]"
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


# ----------------------------------------------------------------------------------------
# HTML

_CSS = """
:root{--pass:#1a7f37;--fail:#c62828;--muted:#57606a;--border:#d0d7de;--soft:#f6f8fa}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
 max-width:1120px;margin:0 auto;padding:1.2em 1.5em 4em;color:#1f2328;background:#fff}
h1{font-size:1.65em;margin:.3em 0 .1em}h2{font-size:1.35em;border-bottom:1px solid var(--border);
 padding-bottom:.2em;margin-top:2.2em}h3{font-size:1.08em;margin:1.4em 0 .4em}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
.meta{color:var(--muted);font-size:.88em}
.banner{padding:.7em 1em;border-radius:6px;margin:1em 0;font-weight:600;font-size:1.05em}
.banner.ok{background:#dafbe1;border:1px solid #4ac26b}
.banner.bad{background:#ffebe9;border:1px solid #ff8182}
.banner.warn{background:#fff8c5;border:1px solid #d4a72c}
.attention{border:2px solid var(--fail);border-radius:6px;padding:.4em 1.1em .6em;background:#fff8f8;margin:1em 0}
.attention h2{border:0;margin:.3em 0;color:var(--fail);font-size:1.15em}
.attention li{margin:.15em 0}
table{border-collapse:collapse;width:100%;font-size:.87em;margin:.6em 0 1em}
th,td{border:1px solid var(--border);padding:.35em .55em;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
tr.fail>td{background:#fff5f5}tr.inc>td{background:#fffbe6}tr.na>td{background:#f6f8fa}
td.res{text-align:center;white-space:nowrap}
.badge{display:inline-block;padding:.05em .6em;border-radius:1em;font-weight:700;font-size:.85em;color:#fff}
.badge.pass{background:var(--pass)}.badge.fail{background:var(--fail)}
.badge.inc{background:#9a6700}.badge.na{background:#6e7781}
.decision{display:block;font-size:.85em;margin-top:.3em;white-space:normal;font-family:ui-monospace,"DejaVu Sans Mono",monospace}
.chip{display:inline-block;border:1px solid var(--border);border-radius:1em;padding:0 .6em;margin:0 .3em .3em 0;
 font-size:.83em;background:var(--soft)}.chip.fail{border-color:#ff8182;background:#ffebe9;color:var(--fail);font-weight:600}
.ev{font-size:.92em}.ev .k{font-family:ui-monospace,"DejaVu Sans Mono",monospace;color:#444}
.ev .item{display:block}.ev details.item ul{margin:.2em 0 .4em;padding-left:1.2em}
.ev details.item summary{font-weight:normal}
#claims th:nth-child(1){width:11%}#claims th:nth-child(2){width:13%}#claims th:nth-child(3){width:32%}
#claims th:nth-child(4){width:11%}
.stmt{display:block;color:#333}.cid{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-weight:600}
figure{margin:1.4em 0 2em;padding:0}figure img{max-width:100%;height:auto;display:block;
 border:1px solid #eee;margin:0 auto}
figcaption{font-size:.9em;color:#333;margin:.5em auto 0;max-width:52em}
.failbox{border:2px solid var(--fail);border-radius:6px;padding:.2em 1em .6em;background:#fff8f8;margin:1em 0}
.failbox h3{color:var(--fail);margin:.5em 0}
pre{background:var(--soft);padding:.6em;overflow:auto;font-size:.78em;line-height:1.35}
pre.problem{background:#fff5f5;border-left:4px solid var(--fail)}
details{margin:.6em 0}summary{cursor:pointer;font-weight:600}
table.kv{width:auto;min-width:50%}table.kv td:first-child{font-family:ui-monospace,"DejaVu Sans Mono",monospace}
footer{margin-top:3em;border-top:1px solid var(--border);padding-top:.6em;color:var(--muted);font-size:.85em}
@media print{details>*{display:block}body{max-width:none}}
"""


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _anchor(name: str) -> str:
    return "study-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name)


def _badge(claim: dict[str, Any]) -> str:
    v = verdict_of(claim)
    return f"<span class='badge {_VERDICT_CLASS[v]}'>{VERDICT_WORDS[v]}</span>"


def _estimates(items: list[Any] | tuple[Any, ...]) -> str:
    """The intervals inside a list of dicts (e.g. one fit per width), for a folded summary:
    ``: slope −0.39 [−0.47, −0.31], −0.45 [−0.52, −0.38]``."""
    found: list[tuple[str, str]] = []
    for x in items:
        if isinstance(x, dict):
            est = [(k, _value(v)) for k, v in _merge(x) if isinstance(v, _Estimate)]
            if est:
                found.append(est[0])
    if not found:
        return ""
    names = {k for k, _ in found}
    head = f"{found[0][0]} " if len(names) == 1 else ""
    return _clip(": " + head + ", ".join(t if head else f"{k} {t}" for k, t in found), 160)


def _evidence_html(ev: dict[str, Any]) -> str:
    """Evidence as one line per key; a long value (e.g. one fit per width) folds into a
    ``<details>`` listing its items, so the claim table stays readable."""
    items = _merge(records._clean(dict(ev)))
    if not items:
        return "<span class='meta'>–</span>"
    out = []
    for k, v in items:
        text = _value(v, None)
        key = f"<span class='k'>{_esc(k)}</span>"
        if len(text) <= 160:
            out.append(f"<span class='item'>{key} = {_esc(text)}</span>")
        elif isinstance(v, list | tuple) and len(v) > 1:
            lis = "".join(f"<li>{_esc(_value(x, 400))}</li>" for x in v[:200])
            more = f"<li>… {len(v) - 200} more in claims.json</li>" if len(v) > 200 else ""
            out.append(f"<details class='item'><summary>{key} ({len(v)} items){_esc(_estimates(v))}"
                       f"</summary><ul>{lis}{more}</ul></details>")
        else:
            out.append(f"<details class='item'><summary>{key} = {_esc(_clip(text, 80))}</summary>"
                       f"<div>{_esc(_clip(text, 4000))}</div></details>")
    return "".join(out)


_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml",
         ".gif": "image/gif", ".webp": "image/webp"}


def _img(path: Path, alt: str) -> str:
    mime = _MIME.get(path.suffix.lower(), "application/octet-stream")
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{_esc(alt)}" src="data:{mime};base64,{data}">'


def _seeds_text(seeds: list[Any] | None) -> str:
    if not seeds:
        return "–"
    s = sorted(int(x) for x in seeds)
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}–{s[-1]} ({len(s)} seeds)"
    return ", ".join(map(str, s))


def _grid_text(grid: list[dict[str, list[Any]]] | None) -> str:
    if not grid:
        return "–"
    blocks = []
    for block in grid:
        axes = [f"{k} ∈ {{{', '.join(_value(v) if not isinstance(v, str) else v for v in vals)}}}"
                for k, vals in block.items() if k != "seed"]
        blocks.append(" × ".join(axes) or "(base point)")
    return " ∪ ".join(f"[{b}]" for b in blocks) if len(blocks) > 1 else blocks[0]


def _code_text(code: dict[str, Any] | None) -> str:
    if not code or not code.get("git_commit"):
        return "unknown (not a git checkout)"
    text = str(code["git_commit"])[:12]
    if code.get("dirty"):
        text += " + local changes"
    return text


def _kv_table(d: dict[str, Any]) -> str:
    rows = "".join(f"<tr><td>{_esc(k)}</td><td>{_esc(_value(v) if not isinstance(v, str) else v)}</td></tr>"
                   for k, v in d.items())
    return f"<table class='kv'>{rows}</table>"


def _versions_text(v: dict[str, Any] | None) -> str:
    if not v:
        return "–"
    return ", ".join(f"{k} {x}" for k, x in v.items() if x)


def _point_label(params: dict[str, Any], base: dict[str, Any]) -> str:
    diff = {k: v for k, v in params.items() if base.get(k) != v or k == "seed"}
    return ", ".join(f"{k}={_value(v) if not isinstance(v, str) else v}" for k, v in diff.items())


def _warned_points(points: list[dict[str, Any]], manifest: dict[str, Any]) -> str:
    """The points a warning concerns, as short labels (the first 12, then a count)."""
    base = manifest.get("base_config") or {}
    n_all = manifest.get("n_points")
    labels = [_esc(_point_label(p, base)) for p in points[:12]]
    more = f" … and {len(points) - 12} more" if len(points) > 12 else ""
    head = f"{len(points)} of {n_all} points" if n_all is not None else f"{len(points)} points"
    return f"{head}: " + "; ".join(labels) + more


def _origin_text(m: dict[str, Any]) -> str:
    """Where the study came from (built-in, a file, a package), and what the run re-ran."""
    o = m.get("study_origin") or {"kind": "built-in"}
    if o.get("kind") == "file":
        text = f"file {o.get('path')}"
    elif o.get("kind") == "package":
        text = f"package {o.get('package')} {o.get('version') or ''} (entry point {o.get('entry_point')})"
    else:
        text = "built-in"
    if m.get("rerun_of"):
        text += f"; a rerun of {m['rerun_of']}"
    return text


def _section_html(i: int, s: StudySection, root: Path) -> list[str]:
    m = s.manifest or {}
    base = root / s.subdir if s.subdir else root
    pc = paper_claims(s.claims)
    n_pass = sum(verdict_of(c) == "reproduced" for c in pc)
    n_bad = sum(verdict_of(c) in ("contradicted", "inconclusive") for c in pc)
    sweep = m.get("sweep") or {}
    chips = [f"<span class='chip{' fail' if n_bad else ''}'>claims {n_pass}/{len(pc)} reproduced</span>"]
    if self_check_line(s.claims):
        chips.append(f"<span class='chip{' fail' if self_check_failures(s.claims) else ''}'>"
                     f"{_esc(self_check_line(s.claims))}</span>")
    n_points = m.get("n_points")
    done = (m.get("completeness") or {}).get("done")  # what the store holds, not what was planned
    if done is not None:
        chips.append(f"<span class='chip{' fail' if done < n_points else ''}'>points {done}/{n_points} done"
                     f"{f', {len(s.failures)} failed' if s.failures else ''}</span>")
    elif n_points is not None:
        chips.append(f"<span class='chip{' fail' if s.failures else ''}'>points {n_points - len(s.failures)}"
                     f"/{n_points} done{f', {len(s.failures)} failed' if s.failures else ''}</span>")
    chips.append(f"<span class='chip'>{s.n_rows} result rows</span>")
    if sweep.get("seconds") is not None:
        chips.append(f"<span class='chip'>ran {float(sweep['seconds']):.1f} s</span>")
    if m.get("preset"):
        chips.append(f"<span class='chip'>preset {_esc(m['preset'])}</span>")
    out = [f"<section id='{_anchor(s.name)}'><h2>{i}. {_esc(s.title)}</h2>",
           f"<p class='meta'>study <code>{_esc(s.name)}</code> · source: {_esc(s.source)}</p>",
           "<p>" + "".join(chips) + "</p>", f"<p>{_esc(s.summary)}</p>"]

    bad = [c for c in s.claims if verdict_of(c) != "reproduced"]
    if s.failures or s.problems or bad:
        out.append("<div class='failbox'>")
        if bad:
            out.append(f"<h3>Claims not reproduced ({len(bad)})</h3><ul>")
            out += [f"<li>{_badge(c)} <span class='cid'>{_esc(c['id'])}</span>: {_esc(c['statement'])}<br>"
                    f"<b>{_esc(attention_text(c))}</b><br>"
                    f"<span class='ev'>{_evidence_html(c['evidence'])}</span></li>" for c in bad]
            out.append("</ul>")
            for c in bad:
                tb = c["evidence"].get("traceback")
                if tb:
                    out.append(f"<details><summary>traceback of {_esc(c['id'])}</summary>"
                               f"<pre class='problem'>{_esc(tb)}</pre></details>")
        if s.problems:
            out.append(f"<h3>Problems ({len(s.problems)})</h3>")
            out += [f"<pre class='problem'>{_esc(p)}</pre>" for p in s.problems]
        if s.failures:
            base_cfg = m.get("base_config") or {}
            out.append(f"<h3>Failed points ({len(s.failures)} of {n_points if n_points is not None else '?'})</h3>"
                       "<table><tr><th>point (fields that differ from the base config)</th><th>reason</th></tr>")
            for fl in s.failures[:100]:
                tb = fl.get("traceback")
                tb_html = (f"<details><summary>traceback</summary><pre>{_esc(tb)}</pre></details>" if tb else "")
                out.append(f"<tr class='fail'><td>{_esc(_point_label(fl.get('params') or {}, base_cfg))}</td>"
                           f"<td>{_esc(fl.get('reason'))}{tb_html}</td></tr>")
            out.append("</table>")
            if len(s.failures) > 100:
                out.append(f"<p>… and {len(s.failures) - 100} more (all are in store.sqlite).</p>")
        out.append("</div>")

    if s.figures:
        out.append("<h3>Figures</h3>")
    for j, f in enumerate(s.figures, 1):
        p = base / f["file"]
        label = f"Figure {i}.{j}"
        if p.exists():
            out.append(f"<figure id='{_anchor(s.name)}-fig{j}'>{_img(p, f'{label}: ' + f['title'])}"
                       f"<figcaption><b>{label}. {_esc(f['title'])}.</b> {_esc(f['caption'])}"
                       "</figcaption></figure>")
        else:
            out.append(f"<pre class='problem'>{label} ({_esc(f['title'])}): file {_esc(f['file'])} is missing</pre>")

    out.append("<h3>Configuration, seeds and versions</h3>")
    out.append("<table class='kv'>"
               f"<tr><td>preset</td><td>{_esc(m.get('preset', '–'))}</td></tr>"
               f"<tr><td>study from</td><td>{_esc(_origin_text(m))}</td></tr>"
               f"<tr><td>seeds</td><td>{_esc(_seeds_text(m.get('seeds')))}</td></tr>"
               f"<tr><td>grid</td><td>{_esc(_grid_text(m.get('grid')))}</td></tr>"
               f"<tr><td>points</td><td>{_esc(m.get('n_points', '–'))}</td></tr>"
               f"<tr><td>device / backend</td><td>{_esc(m.get('device', '–'))} / {_esc(m.get('backend', '–'))}"
               f" ({_esc(m.get('workers', '–'))} worker(s))</td></tr>"
               f"<tr><td>started / finished</td><td>{_esc(m.get('started', '–'))} / {_esc(m.get('finished', '–'))}</td></tr>"
               f"<tr><td>code version</td><td>{_esc(_code_text(m.get('code')))}</td></tr>"
               f"<tr><td>packages</td><td>{_esc(_versions_text(m.get('versions')))}</td></tr>"
               f"<tr><td>files</td><td>{_esc((s.subdir + '/') if s.subdir else '')}manifest.json, results.jsonl, "
               "claims.json, store.sqlite</td></tr></table>")
    if m.get("base_config"):
        out.append("<details><summary>Base configuration (every point starts from these values)</summary>"
                   + _kv_table(m["base_config"]) + "</details>")
    out.append("</section>")
    return out


def render_report(sections: list[StudySection], *, root: Path, title: str,
                  meta: dict[str, Any] | None = None) -> str:
    """The report's HTML text (see the module docstring for its layout)."""
    meta = meta or {}
    n = _counts(sections)
    broken = n["contradicted"] or n["failed_points"] or n["problems"] or not n["claims"]
    ok = not broken and not n["inconclusive"] and not n["not applicable"]
    mood = "ok" if ok else ("bad" if broken else "warn")
    first = sections[0].manifest if sections else {}
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{_esc(title)}</h1>"]
    bits = []
    if meta.get("preset"):
        bits.append(f"preset <b>{_esc(meta['preset'])}</b>")
    if meta.get("finished") or first.get("finished"):
        bits.append(f"finished {_esc(meta.get('finished') or first.get('finished'))}")
    if meta.get("seconds") is not None:
        bits.append(f"wall time {float(meta['seconds']):.0f} s")
    bits.append(f"code {_esc(_code_text(meta.get('code') or first.get('code')))}")
    parts.append(f"<p class='meta'>{' · '.join(bits)}</p>")

    words = [f"<span class='badge {_VERDICT_CLASS[v]}'>{n[v]} {VERDICT_WORDS[v]}</span>"
             for v in VERDICT_WORDS if n[v]]
    verdict = f"{n['passed']} of {n['claims']} claims reproduced " + " ".join(words)
    if n["failed_points"]:
        verdict += f" · {n['failed_points']} failed points"
    if n["problems"]:
        verdict += f" · {n['problems']} problems"
    parts.append(f"<div class='banner {mood}' id='verdict'>{verdict}</div>")

    if not ok or any(s.warnings for s in sections):
        parts.append("<div class='attention' id='attention'><h2>Needs attention</h2><ul>")
        for s in sections:
            link = f"<a href='#{_anchor(s.name)}'>{_esc(s.name)}</a>"
            for c in s.claims:
                if verdict_of(c) != "reproduced":
                    parts.append(f"<li>{link}: claim <span class='cid'>{_esc(c['id'])}</span> "
                                 f"{_badge(c)} {_esc(attention_text(c))} — {_esc(c['statement'])}</li>")
            if s.failures:
                parts.append(f"<li>{link}: {len(s.failures)} of {s.manifest.get('n_points', '?')} points "
                             "failed (reasons listed in its section)</li>")
            for p in s.problems:
                parts.append(f"<li>{link}: {_esc(p.splitlines()[0] if p else p)}</li>")
            for w in s.warnings:
                parts.append(f"<li class='warning'>{link}: warning — {_esc(w['message'])}<br>"
                             f"<span class='ev'>{_warned_points(w['points'], s.manifest)}</span></li>")
        if not n["claims"]:
            parts.append("<li>no claim was checked</li>")
        parts.append("</ul></div>")

    if len(sections) > 1:
        parts.append("<p class='meta'>Studies: " + " · ".join(
            f"<a href='#{_anchor(s.name)}'>{i}. {_esc(s.title)}</a>" for i, s in enumerate(sections, 1))
            + "</p>")

    parts.append("<h2 id='claims-heading'>Claims</h2>"
                 "<p class='meta'>Each claim is decided on an effect with its 95 % interval over seeds "
                 "against the paper's threshold: <b>reproduced</b> when the interval lies on the paper's "
                 "side, <b>contradicted</b> when it lies on the other side, <b>inconclusive</b> when it "
                 "straddles the threshold (more seeds would decide it), <b>not applicable</b> when the run "
                 "does not meet a premise of the statement. Intervals in brackets are 95 % confidence "
                 "intervals unless the key says otherwise.</p>"
                 "<table id='claims'><thead><tr><th>study</th><th>source</th><th>claim</th>"
                 "<th>verdict</th><th>evidence</th></tr></thead><tbody>")
    for s in sections:
        for c in s.claims:
            cls = _VERDICT_CLASS[verdict_of(c)]
            dec = decision_text(c)
            if verdict_of(c) in ("inconclusive", "not applicable"):
                dec = (dec + " · " if dec else "") + attention_text(c)
            dec_html = f"<span class='decision'>{_esc(dec)}</span>" if dec else ""
            parts.append(f"<tr class='{cls}'><td><a href='#{_anchor(s.name)}'>{_esc(s.name)}</a></td>"
                         f"<td>{_esc(c.get('source') or s.source)}</td>"
                         f"<td><span class='cid'>{_esc(c['id'])}</span>"
                         f"<span class='stmt'>{_esc(c['statement'])}</span></td>"
                         f"<td class='res'>{_badge(c)}{dec_html}</td>"
                         f"<td class='ev'>{_evidence_html(c['evidence'])}</td></tr>")
    parts.append("</tbody></table>")

    for i, s in enumerate(sections, 1):
        parts += _section_html(i, s, root)

    env = meta.get("versions") or first.get("versions")
    host = meta.get("host") or first.get("host") or {}
    foot = [f"packages: {_esc(_versions_text(env))}"]
    if host:
        cpu = f" ({host['cpu']}, {host['cpu_capability']} kernels)" if host.get("cpu_capability") else ""
        foot.append(f"host: {_esc(host.get('platform', ''))}, {_esc(host.get('cpu_count', '?'))} CPUs{_esc(cpu)}")
    if meta.get("command"):
        foot.append(f"command: <code>{_esc(meta['command'])}</code>")
    foot.append("rebuild from the saved results with <code>robustlab report DIR</code>")
    parts.append("<footer>" + "<br>".join(foot) + "</footer></body></html>")
    return "\n".join(parts)


def write_report(path: Path, sections: list[StudySection], *, root: Path, title: str,
                 meta: dict[str, Any] | None = None) -> None:
    """Write :func:`render_report` atomically to ``path``."""
    records.atomic_write_text(path, render_report(sections, root=Path(root), title=title, meta=meta))

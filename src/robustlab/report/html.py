"""The HTML report: one page that opens on its verdicts, readable offline.

Top to bottom: the title and a one-line tally; the verdict table, one row per check (study ·
claim · verdict badge · effect [interval] vs threshold · control · points excluded by the
premises), a header row per study citing its paper once; one "needs attention" list (claims not
reproduced and why, self-checks that do not hold, failed points, problems, warnings); then a
section per study: summary, each claim's evidence folded under it (statement, decision,
control and why it must fail, exclusions, the verdict across a knob, evidence), figures,
failed points and, folded, configuration, seeds and versions.

Figures are stored once, as the PNG files beside the report (``figures/`` of a study's run
directory; ``STUDY/figures/`` from a reproduce directory's combined report), and linked by a
relative path: the report opens offline wherever its directory goes, and carries no script.
The words (verdicts, decisions, evidence) come from :mod:`robustlab.report.text`.
"""

from __future__ import annotations

import html
import urllib.parse
from pathlib import Path
from typing import Any

from .. import records
from .text import (  # noqa: F401 - re-exported
    _VERDICT_CLASS,
    STRICT_FAIL,
    VERDICT_WORDS,
    StudySection,
    _clip,
    _counts,
    _Estimate,
    _merge,
    _value,
    attention_text,
    claim_table_text,
    control_text,
    decision_text,
    excluded_text,
    format_evidence,
    kind_of,
    paper_claims,
    self_check_failures,
    self_check_line,
    strict_failures,
    verdict_of,
)

__all__ = ["StudySection", "write_report", "claim_table_text", "format_evidence", "render_report",
           "verdict_of", "decision_text", "attention_text", "strict_failures", "VERDICT_WORDS", "STRICT_FAIL",
           "kind_of", "paper_claims", "self_check_failures", "self_check_line", "control_text", "excluded_text"]

_CSS = """
:root{--pass:#1a7f37;--fail:#c62828;--muted:#57606a;--border:#d0d7de;--soft:#f6f8fa}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
 max-width:1200px;margin:0 auto;padding:.8em 1.5em 4em;color:#1f2328;background:#fff}
h1{font-size:1.45em;margin:.2em 0 .1em}h2{font-size:1.3em;border-bottom:1px solid var(--border);
 padding-bottom:.2em;margin-top:2em}h3{font-size:1.05em;margin:1.2em 0 .4em}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
.meta{color:var(--muted);font-size:.88em;margin:.2em 0}
.banner{padding:.35em .8em;border-radius:6px;margin:.5em 0;font-weight:600}
.banner.ok{background:#dafbe1;border:1px solid #4ac26b}
.banner.bad{background:#ffebe9;border:1px solid #ff8182}
.banner.warn{background:#fff8c5;border:1px solid #d4a72c}
.attention{border:2px solid var(--fail);border-radius:6px;padding:.2em 1em .4em;background:#fff8f8;margin:1em 0}
.attention h2{border:0;margin:.3em 0;color:var(--fail);font-size:1.1em}
.attention li{margin:.1em 0}
table{border-collapse:collapse;width:100%;font-size:.9em;margin:.4em 0 1em}
th,td{border:1px solid var(--border);padding:.22em .5em;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
#claims tr.study th{background:#eef2f6;font-weight:600}#claims tr.study .meta{font-weight:normal}
#claims td:first-child{white-space:nowrap}#claims td:nth-child(4){min-width:12em}#claims td:nth-child(4),#claims td:nth-child(6){font-size:.9em}
#claims td.num{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.92em;white-space:nowrap}
tr.fail>td{background:#fff5f5}tr.inc>td{background:#fffbe6}tr.na>td{background:#f6f8fa}
tr.aside>td{color:var(--muted)}
.badge{display:inline-block;padding:0 .55em;border-radius:1em;font-weight:700;font-size:.8em;color:#fff;white-space:nowrap}
.badge.pass{background:var(--pass)}.badge.fail{background:var(--fail)}
.badge.inc{background:#9a6700}.badge.na{background:#6e7781}
.kind{font-size:.78em;color:var(--muted);border:1px solid var(--border);border-radius:.8em;padding:0 .4em;margin-left:.3em}
.chip{display:inline-block;border:1px solid var(--border);border-radius:1em;padding:0 .6em;margin:0 .3em .3em 0;
 font-size:.83em;background:var(--soft)}.chip.fail{border-color:#ff8182;background:#ffebe9;color:var(--fail);font-weight:600}
.ev{font-size:.92em}.ev .k{font-family:ui-monospace,"DejaVu Sans Mono",monospace;color:#444}
.ev .item{display:block}.ev details.item ul{margin:.2em 0 .4em;padding-left:1.2em}
.ev details.item summary{font-weight:normal}
.cid{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-weight:600}
details.claim{border:1px solid var(--border);border-radius:6px;padding:.3em .7em;margin:.4em 0}
details.claim>summary{font-weight:normal}details.claim dl{margin:.4em 0}
details.claim dt{font-weight:600;margin-top:.3em}details.claim dd{margin:0 0 0 1.2em}
figure{margin:1.2em 0 1.8em;padding:0}figure img{max-width:100%;height:auto;display:block;
 border:1px solid #eee;margin:0 auto}
figcaption{font-size:.9em;color:#333;margin:.5em auto 0;max-width:52em}
.failbox{border:2px solid var(--fail);border-radius:6px;padding:.2em 1em .6em;background:#fff8f8;margin:1em 0}
.failbox h3{color:var(--fail);margin:.5em 0}
pre{background:var(--soft);padding:.6em;overflow:auto;font-size:.78em;line-height:1.35}
pre.problem{background:#fff5f5;border-left:4px solid var(--fail)}
details{margin:.5em 0}summary{cursor:pointer;font-weight:600}
table.kv{width:auto;min-width:50%}table.kv td:first-child{font-family:ui-monospace,"DejaVu Sans Mono",monospace}
footer{margin-top:3em;border-top:1px solid var(--border);padding-top:.6em;color:var(--muted);font-size:.85em}
@media print{details>*{display:block}body{max-width:none}}
"""

# rows of a study in the verdict table: the paper's claims first, then questions, then self-checks
_KIND_ORDER = {"claim": 0, "exploratory": 1, "self-check": 2}


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


def _badge(claim: dict[str, Any]) -> str:
    v = verdict_of(claim)
    return f"<span class='badge {_VERDICT_CLASS[v]}'>{VERDICT_WORDS[v]}</span>"


def _kind_tag(claim: dict[str, Any]) -> str:
    k = kind_of(claim)
    return "" if k == "claim" else f"<span class='kind'>{_esc(k)}</span>"


def _figure_src(root: Path, s: StudySection, file: str) -> str:
    """The figure's path relative to the report (``figures/x.png`` or ``STUDY/figures/x.png``)."""
    rel = f"{s.subdir}/{file}" if s.subdir else file
    return urllib.parse.quote(rel.replace("\\", "/"))


def _control_cell(c: dict[str, Any]) -> str:
    text = control_text(c)
    return _esc(text.removeprefix("control: ")) if text else ""


def _excluded_cell(c: dict[str, Any]) -> str:
    return _esc(excluded_text(c).removeprefix("excluded: "))


def _study_row(s: StudySection) -> str:
    """The verdict table's header row of a study: its name (linking to its section), its paper
    once, its tally and its self-check line."""
    pc = paper_claims(s.claims)
    n_rep = sum(verdict_of(c) == "reproduced" for c in pc)
    tally = [f"{n_rep}/{len(pc)} reproduced"] if pc else []
    if self_check_line(s.claims):
        tally.append(self_check_line(s.claims))
    if s.failures:
        tally.append(f"{len(s.failures)} points failed")
    return (f"<tr class='study'><th colspan='6'><a href='#{_anchor(s.name)}'>{_esc(s.name)}</a> "
            f"<span class='meta'>— {_esc(s.source)} · {_esc(' · '.join(tally))}</span></th></tr>")


def _verdict_table(sections: list[StudySection]) -> list[str]:
    """The first screen: one compact row per check, grouped by study."""
    out = ["<table id='claims'><thead><tr><th>claim</th><th>verdict</th>"
           "<th>effect [95 % interval] vs threshold</th><th>control → its verdict</th>"
           "<th>excluded by premises</th><th>reason</th></tr></thead><tbody>"]
    for s in sections:
        out.append(_study_row(s))
        for c in sorted(s.claims, key=lambda c: _KIND_ORDER.get(kind_of(c), 0)):
            v = verdict_of(c)
            cls = _VERDICT_CLASS[v] + (" aside" if kind_of(c) != "claim" else "")
            reason = attention_text(c).split(": ", 1)[-1] if v in ("inconclusive", "not applicable") else ""
            out.append(f"<tr class='claim {cls}'><td><a class='cid' href='#{_anchor(s.name)}-{_esc(c['id'])}' "
                       f"title='{_esc(c.get('statement', ''))}'>{_esc(c['id'])}</a>{_kind_tag(c)}</td>"
                       f"<td>{_badge(c)}</td><td class='num'>{_esc(decision_text(c))}</td>"
                       f"<td>{_control_cell(c)}</td><td>{_excluded_cell(c)}</td>"
                       f"<td>{_esc(_clip(reason, 140))}</td></tr>")
    out.append("</tbody></table>")
    return out


def _attention(sections: list[StudySection]) -> list[str]:
    """The one "needs attention" list: what a reader must look at, each once."""
    items = []
    for s in sections:
        link = f"<a href='#{_anchor(s.name)}'>{_esc(s.name)}</a>"
        for c in s.claims:
            v = verdict_of(c)
            if v == "reproduced" or (kind_of(c) == "self-check" and v == "not applicable"):
                continue
            why = attention_text(c)
            if why == "contradicted":  # no effect to show: say what it contradicts
                why = _clip(" ".join(str(c.get("statement", "")).split()), 200)
            items.append(f"<li>{link}: {kind_of(c)} <a class='cid' href='#{_anchor(s.name)}-{_esc(c['id'])}'>"
                         f"{_esc(c['id'])}</a> {_badge(c)} {_esc(why)}</li>")
        if s.failures:
            items.append(f"<li>{link}: {len(s.failures)} of {s.manifest.get('n_points', '?')} points "
                         "failed (reasons listed in its section)</li>")
        for p in s.problems:
            items.append(f"<li>{link}: {_esc(p.splitlines()[0] if p else p)}</li>")
        for w in s.warnings:
            items.append(f"<li class='warning'>{link}: warning — {_esc(_sentence(w['message']))}<br>"
                         f"<span class='ev'>{_warned_points(w['points'], s.manifest)}</span></li>")
    if not any(s.claims for s in sections):
        items.append("<li>no claim was checked</li>")
    if not items:
        return []
    return ["<div class='attention' id='attention'><h2>Needs attention</h2><ul>", *items, "</ul></div>"]


def _sentence(message: str) -> str:
    from ..sweep.runner import warning_sentence

    return warning_sentence(message)


def _claim_details(s: StudySection, c: dict[str, Any]) -> str:
    """One claim's evidence, folded: statement, decision, control and why it must fail,
    exclusions, the verdict across a knob, evidence."""
    rows = [("statement", _esc(c.get("statement", "")))]
    if c.get("source") and c["source"] != s.source:
        rows.append(("source", _esc(c["source"])))
    if decision_text(c):
        rows.append(("decision", f"{_esc(decision_text(c))}" + (f" · {_esc(c['method'])}" if c.get("method") else "")))
    if verdict_of(c) != "reproduced":
        rows.append(("why not reproduced", _esc(attention_text(c))))
    ctl = c.get("control")
    if ctl:
        dec = decision_text(ctl) if ctl.get("effect") is not None else ""
        rows.append(("control", f"{_esc(control_text(c))}" + (f" ({_esc(dec)})" if dec else "")
                     + (f"<br><span class='meta'>why it must fail: {_esc(ctl.get('why'))}</span>" if ctl.get("why") else "")))
    elif kind_of(c) == "claim":
        rows.append(("control", _esc(control_text(c))))
    if excluded_text(c) or c.get("excluded"):
        rows.append(("premises", _esc(excluded_text(c) or "no point excluded")))
    for knob, vals in (c.get("across") or {}).items():
        rows.append((f"across {knob}", _esc(", ".join(f"{k}: {x}" for k, x in vals.items()))))
    rows.append(("evidence", f"<span class='ev'>{_evidence_html(c.get('evidence') or {})}</span>"))
    tb = (c.get("evidence") or {}).get("traceback")
    if tb:
        rows.append(("traceback", f"<pre class='problem'>{_esc(tb)}</pre>"))
    dl = "".join(f"<dt>{_esc(k)}</dt><dd>{v}</dd>" for k, v in rows)
    opened = " open" if verdict_of(c) != "reproduced" and kind_of(c) != "exploratory" else ""
    return (f"<details class='claim' id='{_anchor(s.name)}-{_esc(c['id'])}'{opened}><summary>{_badge(c)} "
            f"<span class='cid'>{_esc(c['id'])}</span>{_kind_tag(c)} {_esc(_clip(c.get('statement', ''), 160))}"
            f"</summary><dl>{dl}</dl></details>")


def _failures_html(s: StudySection) -> list[str]:
    m = s.manifest or {}
    n_points = m.get("n_points")
    out = []
    if s.problems:
        out.append(f"<div class='failbox'><h3>Problems ({len(s.problems)})</h3>")
        out += [f"<pre class='problem'>{_esc(p)}</pre>" for p in s.problems]
        out.append("</div>")
    if s.failures:
        base_cfg = m.get("base_config") or {}
        out.append(f"<div class='failbox'><h3>Failed points ({len(s.failures)} of "
                   f"{n_points if n_points is not None else '?'})</h3>"
                   "<table><tr><th>point (fields that differ from the base config)</th><th>reason</th></tr>")
        for fl in s.failures[:100]:
            tb = fl.get("traceback")
            tb_html = f"<details><summary>traceback</summary><pre>{_esc(tb)}</pre></details>" if tb else ""
            out.append(f"<tr class='fail'><td>{_esc(_point_label(fl.get('params') or {}, base_cfg))}</td>"
                       f"<td>{_esc(fl.get('reason'))}{tb_html}</td></tr>")
        out.append("</table>")
        if len(s.failures) > 100:
            out.append(f"<p>… and {len(s.failures) - 100} more (all are in store.sqlite).</p>")
        out.append("</div>")
    return out


def _config_html(s: StudySection) -> str:
    m = s.manifest or {}
    rows = [("preset", m.get("preset", "–")), ("study from", _origin_text(m)), ("seeds", _seeds_text(m.get("seeds"))),
            ("grid", _grid_text(m.get("grid"))), ("points", m.get("n_points", "–")),
            ("device / backend", f"{m.get('device', '–')} / {m.get('backend', '–')} ({m.get('workers', '–')} worker(s))"),
            ("started / finished", f"{m.get('started', '–')} / {m.get('finished', '–')}"),
            ("code version", _code_text(m.get("code"))), ("packages", _versions_text(m.get("versions"))),
            ("files", f"{(s.subdir + '/') if s.subdir else ''}manifest.json, results.jsonl, claims.json, store.sqlite")]
    table = "<table class='kv'>" + "".join(f"<tr><td>{_esc(k)}</td><td>{_esc(v)}</td></tr>" for k, v in rows) + "</table>"
    base = ("<details><summary>Base configuration (every point starts from these values)</summary>"
            + _kv_table(m["base_config"]) + "</details>") if m.get("base_config") else ""
    return f"<details><summary>Configuration, seeds and versions</summary>{table}{base}</details>"


def _section_html(i: int, s: StudySection, root: Path) -> list[str]:
    m = s.manifest or {}
    chips = []
    if m.get("preset"):
        chips.append(f"preset {_esc(m['preset'])}")
    done = (m.get("completeness") or {}).get("done")  # what the store holds, not what was planned
    if m.get("n_points") is not None:
        held = f"{done}/{m['n_points']} points done" if done is not None else f"{m['n_points']} points"
        failed = f", {len(s.failures)} failed" if s.failures else ""
        chips.append(f"{held}{failed}, {s.n_rows} result rows")
    if (m.get("sweep") or {}).get("seconds") is not None:
        chips.append(f"ran {float(m['sweep']['seconds']):.1f} s")
    out = [f"<section id='{_anchor(s.name)}'><h2>{i}. {_esc(s.title)}</h2>",
           f"<p class='meta'>study <code>{_esc(s.name)}</code> · paper: {_esc(s.source)} · {' · '.join(chips)}</p>",
           f"<p>{_esc(s.summary)}</p>"]
    out += _failures_html(s)
    if s.claims:
        out.append("<h3>Claims and their evidence</h3>")
        out += [_claim_details(s, c) for c in sorted(s.claims, key=lambda c: _KIND_ORDER.get(kind_of(c), 0))]
    if s.figures:
        out.append("<h3>Figures</h3>")
    for j, f in enumerate(s.figures, 1):
        label = f"Figure {i}.{j}"
        if (root / s.subdir / f["file"] if s.subdir else root / f["file"]).exists():
            out.append(f"<figure id='{_anchor(s.name)}-fig{j}'><img alt=\"{_esc(label + ': ' + f['title'])}\" "
                       f"src=\"{_figure_src(root, s, f['file'])}\" loading='lazy'>"
                       f"<figcaption><b>{label}. {_esc(f['title'])}.</b> {_esc(f['caption'])}</figcaption></figure>")
        else:
            out.append(f"<pre class='problem'>{label} ({_esc(f['title'])}): file {_esc(f['file'])} is missing</pre>")
    out.append(_config_html(s))
    out.append("</section>")
    return out


def render_report(sections: list[StudySection], *, root: Path, title: str,
                  meta: dict[str, Any] | None = None) -> str:
    """The report's HTML text (see the module docstring for its layout). ``root``: the
    directory the report is written to (figures are linked relative to it)."""
    meta = meta or {}
    n = _counts(sections)
    broken = n["contradicted"] or n["failed_points"] or n["problems"] or not n["claims"]
    broken = broken or any(self_check_failures(s.claims) for s in sections)
    ok = not broken and not n["inconclusive"] and not n["not applicable"]
    mood = "ok" if ok else ("bad" if broken else "warn")
    first = sections[0].manifest if sections else {}
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>", f"<h1>{_esc(title)}</h1>"]
    bits = []
    if meta.get("preset"):
        bits.append(f"preset <b>{_esc(meta['preset'])}</b>")
    if meta.get("finished") or first.get("finished"):
        bits.append(f"finished {_esc(meta.get('finished') or first.get('finished'))}")
    if meta.get("seconds") is not None:
        bits.append(f"wall time {float(meta['seconds']):.0f} s")
    bits.append(f"code {_esc(_code_text(meta.get('code') or first.get('code')))}")
    parts.append(f"<p class='meta'>{' · '.join(bits)}</p>")
    words = [f"<span class='badge {_VERDICT_CLASS[v]}'>{n[v]} {VERDICT_WORDS[v]}</span>" for v in VERDICT_WORDS if n[v]]
    verdict = f"{n['passed']} of {n['claims']} claims reproduced " + " ".join(words)
    if n["self_checks"]:
        verdict += f" · self-checks {n['self_checks_holding']}/{n['self_checks']} hold"
    if n["failed_points"]:
        verdict += f" · {n['failed_points']} failed points"
    if n["problems"]:
        verdict += f" · {n['problems']} problems"
    parts.append(f"<div class='banner {mood}' id='verdict'>{verdict}</div>")
    parts += _verdict_table(sections)
    parts += _attention(sections)
    parts.append("<p class='meta'>A claim is decided on an effect with its 95 % interval against the paper's "
                 "threshold: <b>reproduced</b> when the interval lies on the paper's side, <b>contradicted</b> "
                 "on the other, <b>inconclusive</b> when it straddles the threshold or its control passes too, "
                 "<b>not applicable</b> when too few points meet the statement's premises. Only claims count in "
                 "the tally; self-checks test robustlab's own code, exploratory questions go beyond the paper.</p>")
    for i, s in enumerate(sections, 1):
        parts += _section_html(i, s, root)
    parts.append(_footer(meta, first))
    return "\n".join(parts)


def _footer(meta: dict[str, Any], first: dict[str, Any]) -> str:
    host = meta.get("host") or first.get("host") or {}
    foot = [f"packages: {_esc(_versions_text(meta.get('versions') or first.get('versions')))}"]
    if host:
        cpu = f" ({host['cpu']}, {host['cpu_capability']} kernels)" if host.get("cpu_capability") else ""
        foot.append(f"host: {_esc(host.get('platform', ''))}, {_esc(host.get('cpu_count', '?'))} CPUs{_esc(cpu)}")
    if meta.get("command"):
        foot.append(f"command: <code>{_esc(meta['command'])}</code>")
    foot.append("rebuild from the saved results with <code>robustlab report DIR</code>")
    return "<footer>" + "<br>".join(foot) + "</footer></body></html>"


def write_report(path: Path, sections: list[StudySection], *, root: Path, title: str,
                 meta: dict[str, Any] | None = None) -> None:
    """Write :func:`render_report` atomically to ``path``."""
    records.atomic_write_text(path, render_report(sections, root=Path(root), title=title, meta=meta))

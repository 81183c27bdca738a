"""A self-contained HTML report (figures embedded as base64), readable offline."""

from __future__ import annotations

import base64
import dataclasses
import html
import json
from pathlib import Path
from typing import Any

from .. import records

__all__ = ["StudySection", "write_report", "claim_table_text"]


@dataclasses.dataclass
class StudySection:
    name: str
    title: str
    source: str
    summary: str
    manifest: dict[str, Any]
    claims: list[dict[str, Any]]
    figures: list[dict[str, Any]]  # {"file", "title", "caption"}, file relative to root of the study dir
    failures: list[dict[str, Any]]
    problems: list[str]
    n_rows: int
    subdir: str = ""  # where the study's files live, relative to the report


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _evidence(ev: dict[str, Any]) -> str:
    items = []
    for k, v in ev.items():
        if isinstance(v, float):
            v = f"{v:.4g}"
        elif isinstance(v, list | dict):
            v = json.dumps(records._clean(v), default=str)
            if len(v) > 300:
                v = v[:300] + "…"
        items.append(f"<b>{_esc(k)}</b>: {_esc(v)}")
    return "; ".join(items)


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{_esc(path.name)}" src="data:image/png;base64,{data}">'


def claim_table_text(sections: list[StudySection]) -> str:
    """The claim table as plain text for the terminal."""
    lines = [f"{'study':<18} {'claim':<28} {'result':<6} evidence"]
    for s in sections:
        for c in s.claims:
            ev = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in c["evidence"].items() if not isinstance(v, list | dict))
            lines.append(f"{s.name:<18} {c['id']:<28} {'PASS' if c['passed'] else 'FAIL':<6} {ev[:120]}")
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;width:100%;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;font-size:0.9em}
th{background:#f0f0f0}.pass{color:#176b2c;font-weight:bold}.fail{color:#b00020;font-weight:bold}
figure{margin:1.5em 0}figure img{max-width:100%;border:1px solid #ddd}figcaption{font-size:0.9em;color:#444}
pre{background:#f7f7f7;padding:0.6em;overflow:auto;font-size:0.8em}
"""


def write_report(path: Path, sections: list[StudySection], *, root: Path, title: str) -> None:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{_esc(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{_esc(title)}</h1>"]
    parts.append("<h2>Claims</h2><table id='claims'><tr><th>study</th><th>source</th><th>claim</th>"
                 "<th>result</th><th>evidence</th></tr>")
    for s in sections:
        for c in s.claims:
            ok = "pass" if c["passed"] else "fail"
            parts.append(f"<tr><td>{_esc(s.name)}</td><td>{_esc(c.get('source') or s.source)}</td>"
                         f"<td><b>{_esc(c['id'])}</b>: {_esc(c['statement'])}</td>"
                         f"<td class='{ok}'>{ok.upper()}</td><td>{_evidence(c['evidence'])}</td></tr>")
    parts.append("</table>")
    for s in sections:
        m = s.manifest
        parts.append(f"<h2 id='{_esc(s.name)}'>{_esc(s.title)}</h2><p>{_esc(s.summary)}</p>"
                     f"<p><i>{_esc(s.source)}</i></p>")
        base = root / s.subdir if s.subdir else root
        for f in s.figures:
            p = base / f["file"]
            if p.exists():
                parts.append(f"<figure>{_img(p)}<figcaption><b>{_esc(f['title'])}.</b> "
                             f"{_esc(f['caption'])}</figcaption></figure>")
        if s.failures:
            parts.append(f"<h3>Failed points ({len(s.failures)})</h3><table><tr><th>point</th><th>reason</th></tr>")
            for fl in s.failures:
                parts.append(f"<tr><td>{_esc(json.dumps(fl['params']))}</td><td>{_esc(fl['reason'])}</td></tr>")
            parts.append("</table>")
        for pr in s.problems:
            parts.append(f"<pre class='fail'>{_esc(pr)}</pre>")
        parts.append("<details><summary>Configuration, seeds and versions</summary><pre>"
                     + _esc(json.dumps({k: m.get(k) for k in ("preset", "base_config", "grid", "seeds",
                                                              "versions", "code", "host", "started",
                                                              "finished", "device", "backend")},
                                       indent=1, default=str)) + "</pre></details>")
        parts.append(f"<p>{s.n_rows} result rows.</p>")
    parts.append("</body></html>")
    records.atomic_write_text(path, "\n".join(parts))

"""Stability as a check: every study at several base seeds, and whether each verdict agrees.

``robustlab reproduce --replicate K`` runs :func:`robustlab.studies.reproduce.reproduce` K
times into ``OUT/seed-S`` for the base seeds ``S = seed, seed + 17, seed + 34, …`` (seed 0 by
default, so K = 2 is seeds 0 and 17: the pair every issue's reviews used). A claim whose verdict
differs between base seeds is **unstable**: its verdict at any one seed is a draw, not a
measurement. The result:

    OUT/seed-0/ …, OUT/seed-17/ …   each a whole reproduce directory (its own report.html)
    OUT/stability.json              per claim: kind, the verdict at each base seed, agree or not
    OUT/report.html                 the same as a table, unstable claims marked, linking each run
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from .. import records
from ..config import UserError

STEP = 17  # the base seeds are seed, seed + 17, ...: far apart, so no two replicates share a seed
UNSTABLE = "unstable"


def base_seeds(seed: int | None, k: int) -> list[int]:
    """The K base seeds of a replicated reproduce."""
    if k < 1:
        raise UserError(f"--replicate {k} is not allowed: a count >= 1")
    s0 = 0 if seed is None else seed
    return [s0 + STEP * i for i in range(k)]


def _claims_of(run: Path) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(run.glob("*/claims.json")):
        try:
            claims = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"{path}: cannot be read ({exc.__class__.__name__}); run `robustlab report {run}`") from exc
        for c in claims if isinstance(claims, list) else []:
            if isinstance(c, dict) and "id" in c:
                out[(path.parent.name, str(c["id"]))] = c
    return out


def stability(out: Path, seeds: list[int]) -> dict[str, Any]:
    """Per claim of every study, its verdict at each base seed and whether they agree."""
    per_seed = {s: _claims_of(out / f"seed-{s}") for s in seeds}
    keys: list[tuple[str, str]] = []
    for s in seeds:
        keys.extend(k for k in per_seed[s] if k not in keys)
    rows = []
    for study, cid in keys:
        found = [per_seed[s].get((study, cid)) for s in seeds]
        kind = next((c.get("kind") for c in found if c), None) or "claim"
        verdicts = {str(s): (c or {}).get("verdict", "missing") for s, c in zip(seeds, found)}
        effects = {str(s): (c or {}).get("effect") for s, c in zip(seeds, found)}
        agree = len(set(verdicts.values())) == 1
        rows.append({"study": study, "id": cid, "kind": kind, "verdicts": verdicts, "effects": effects,
                     "agree": agree, "mark": "" if agree else UNSTABLE})
    claims = [r for r in rows if r["kind"] == "claim"]
    return {"seeds": seeds, "rows": rows, "claims": len(claims),
            "unstable_claims": [f"{r['study']}/{r['id']}" for r in claims if not r["agree"]],
            "unstable_other": [f"{r['study']}/{r['id']}" for r in rows if r["kind"] != "claim" and not r["agree"]]}


def console_lines(st: dict[str, Any]) -> list[str]:
    seeds = ", ".join(str(s) for s in st["seeds"])
    n_bad = len(st["unstable_claims"])
    lines = [f"stability over base seeds {seeds}: {st['claims']} claims, {n_bad} unstable"
             + (f"; {len(st['unstable_other'])} exploratory or self-check readings unstable"
                if st["unstable_other"] else "")]
    for r in st["rows"]:
        if not r["agree"]:
            seen = ", ".join(f"seed {s}: {v}" for s, v in r["verdicts"].items())
            lines.append(f"  {UNSTABLE}: {r['study']} {r['id']} ({r['kind']}): {seen}")
    return lines


def write_report(out: Path, st: dict[str, Any]) -> Path:
    """A page with one row per claim: its verdict at each base seed, unstable ones marked."""
    seeds = st["seeds"]
    head = "".join(f"<th><a href='seed-{s}/report.html'>seed {s}</a></th>" for s in seeds)
    body = []
    for r in st["rows"]:
        cells = "".join(f"<td>{html.escape(str(r['verdicts'][str(s)]))}</td>" for s in seeds)
        mark = f"<td class='bad'>{UNSTABLE}</td>" if not r["agree"] else "<td>agrees</td>"
        body.append(f"<tr><td>{html.escape(r['study'])}</td><td><code>{html.escape(r['id'])}</code></td>"
                    f"<td>{html.escape(r['kind'])}</td>{cells}{mark}</tr>")
    n_bad = len(st["unstable_claims"])
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>robustlab stability</title>
<style>body{{font-family:sans-serif;margin:2em}} td,th{{padding:2px 8px;border-bottom:1px solid #ddd}}
.bad{{color:#b00;font-weight:bold}}</style></head><body>
<h1>Stability across base seeds {', '.join(str(s) for s in seeds)}</h1>
<p>{st['claims']} paper claims, <b>{n_bad} unstable</b> (a verdict that changes with the base seed
is a draw, not a measurement). Each column links that seed's full report.</p>
<table><tr><th>study</th><th>claim</th><th>kind</th>{head}<th>stability</th></tr>
{''.join(body)}</table></body></html>"""
    path = out / "report.html"
    records.atomic_write_text(path, page)
    return path


def replicate(out: Path, *, k: int, seed: int | None, run_one: Any) -> int:
    """Run ``run_one(out/seed-S, S)`` (a reproduce, returning its exit code) for each base
    seed, then write and print the stability table. The exit code is the worst of the runs'."""
    seeds = base_seeds(seed, k)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    codes = []
    for s in seeds:
        print(f"== base seed {s} ({seeds.index(s) + 1}/{len(seeds)})")
        codes.append(run_one(out / f"seed-{s}", s))
    st = stability(out, seeds)
    records.write_json(out / "stability.json", st)
    path = write_report(out, st)
    for line in console_lines(st):
        print(line)
    print(f"stability report: {path.resolve()}")
    return max(codes) if codes else 0

"""`robustlab reproduce`: every study in order into one directory, then one report."""

from __future__ import annotations

import time
from pathlib import Path

from .. import records
from ..config import UserError
from ..report import html as report_html
from ..sweep.runner import SweepOptions
from . import REPRODUCE_ORDER, get_study
from .base import execute, finalize, plan

__all__ = ["reproduce", "rebuild"]


def _top_report(out: Path, sections: list[report_html.StudySection], preset: str) -> Path:
    path = out / "report.html"
    report_html.write_report(path, sections, root=out, title=f"robustlab reproduce — preset {preset}")
    return path


def reproduce(out: Path, *, preset: str, options: SweepOptions, seed: int | None = None,
              strict: bool = False, studies: list[str] | None = None) -> int:
    names = studies or REPRODUCE_ORDER
    plans = [plan(get_study(n), preset=preset, seed=seed) for n in names]  # validate all first
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / "reproduce.json").exists():
        raise UserError(f"--out {str(out)!r} exists and is not a robustlab reproduce directory")
    out.mkdir(parents=True, exist_ok=True)
    records.write_json(out / "reproduce.json", {"preset": preset, "studies": names, "seed": seed,
                                                "started": records.now_iso()})
    sections = []
    t0 = time.perf_counter()
    for i, p in enumerate(plans):
        summary = execute(p, out / p.study.name, options,
                          progress_label=f"[{i + 1}/{len(plans)}] {p.study.name}")
        sec = summary["section"]
        sec.subdir = p.study.name
        sections.append(sec)
    path = _top_report(out, sections, preset)
    print(report_html.claim_table_text(sections))
    print(f"reproduce ({preset}) finished in {time.perf_counter() - t0:.1f}s -> {path}")
    failed = any(not c["passed"] for s in sections for c in s.claims)
    return 1 if strict and failed else 0


def rebuild(out: Path) -> int:
    out = Path(out)
    if (out / "reproduce.json").exists():
        meta = records.read_json(out / "reproduce.json")
        sections = []
        for name in meta["studies"]:
            if not (out / name / "manifest.json").exists():
                continue
            sec = finalize(out / name, get_study(name))["section"]
            sec.subdir = name
            sections.append(sec)
        path = _top_report(out, sections, meta.get("preset", "?"))
    elif (out / "manifest.json").exists():
        manifest = records.read_json(out / "manifest.json")
        sections = [finalize(out, get_study(manifest["study"]))["section"]]
        path = out / "report.html"
    else:
        raise UserError(f"dir={str(out)!r} is not allowed: not a robustlab run directory (no manifest.json)")
    print(report_html.claim_table_text(sections))
    print(f"report rebuilt -> {path}")
    return 0

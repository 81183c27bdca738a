"""`robustlab reproduce`: every study in order into one directory, then one report.

Layout of a reproduce directory::

    OUT/reproduce.json        what was asked (preset, seed, studies), timings, versions
    OUT/report.html           the report over every study (self-contained)
    OUT/<study>/...           one run directory per study (manifest, store, results, figures)

Every study is planned (and so validated) before anything is written. A study that
crashes outside its points (a bug, not a failed point) is reported as a failed claim with
its traceback and the others still run; the exit code is then 1. Otherwise the exit code
is 0 however the claims came out, unless ``strict``: then a failed claim gives 1 (failed
points are listed in the report and the terminal either way). Re-running into the same directory resumes: finished points are not re-run.
:func:`rebuild` re-derives claims, figures and reports from the saved stores only.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .. import records
from ..config import UserError
from ..report import html as report_html
from ..sweep.runner import SweepOptions
from . import REGISTRY, REPRODUCE_ORDER, get_study
from .base import Plan, Study, execute, finalize, plan

__all__ = ["reproduce", "rebuild", "resolve_studies"]


def resolve_studies(names: list[str] | None) -> list[Study]:
    """The studies to run, in order (default: REPRODUCE_ORDER); unknown or repeated names
    and studies whose module is missing are user errors."""
    names = list(names) if names else list(REPRODUCE_ORDER)
    seen: set[str] = set()
    out = []
    for name in names:
        if name not in REGISTRY:
            raise UserError(f"study={name!r} is not allowed: one of {', '.join(REGISTRY)}")
        if name in seen:
            raise UserError(f"study={name!r} is not allowed: it is listed twice")
        seen.add(name)
        try:
            out.append(get_study(name))
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("robustlab.studies"):
                raise UserError(f"study={name!r} is not available in this installation "
                                f"(module {exc.name} is missing)") from None
            raise
    return out


def _say(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def _workers_text(options: SweepOptions) -> str:
    t = f"{options.threads} thread{'s' if options.threads != 1 else ''}"
    if options.backend != "local":
        return f"{options.backend} backend, {t} per task"
    return f"{options.workers} worker{'s' if options.workers != 1 else ''} x {t}"


def _command(out: Path, preset: str, seed: int | None, names: list[str]) -> str:
    cmd = f"robustlab reproduce --preset {preset} --out {out}"
    if seed is not None:
        cmd += f" --seed {seed}"
    if names != REPRODUCE_ORDER:
        cmd += f" --only {','.join(names)}"
    return cmd


def _broken_section(study: Study, out: Path, claim_id: str, statement: str, problem: str,
                    evidence: dict[str, Any]) -> report_html.StudySection:
    """A section for a study that crashed or never ran: one failed claim saying so."""
    manifest_path = out / "manifest.json"
    manifest = records.read_json(manifest_path) if manifest_path.exists() else {}
    claim = {"id": claim_id, "statement": statement, "passed": False, "evidence": evidence,
             "source": study.source}
    return report_html.StudySection(
        name=study.name, title=study.title, source=study.source, summary=study.summary,
        manifest=manifest, claims=[claim], figures=[], failures=[], problems=[problem], n_rows=0,
        subdir=out.name)


def _crashed_section(study: Study, out: Path, error: str, tb: str | None) -> report_html.StudySection:
    problem = f"the study crashed: {error}" + (f"\n{tb}" if tb else "")
    return _broken_section(study, out, "study-crashed", "the study ran to the end", problem,
                           {"error": error})


def _finalized_section(study: Study, out: Path) -> report_html.StudySection:
    """Claims, figures and the study's own report from its store; a crash becomes a section."""
    try:
        sec = finalize(out, study)["section"]
    except Exception as exc:  # noqa: BLE001 - shown in the report, not hidden
        return _broken_section(study, out, "study-crashed", "the study's results could be analysed",
                               f"finalizing the study crashed: {exc!r}\n{traceback.format_exc()}",
                               {"error": repr(exc)})
    if not sec.manifest.get("finished"):
        sec.problems.append("the run did not finish (interrupted or crashed): re-run the same "
                            "`robustlab reproduce` command with the same --out to complete it")
    sec.subdir = out.name
    return sec


def _study_line(label: str, sec: report_html.StudySection, seconds: float) -> str:
    n_pass = sum(bool(c["passed"]) for c in sec.claims)
    points = sec.manifest.get("n_points", "?")
    return (f"{label}: done in {seconds:.1f} s — {points} points, {len(sec.failures)} failed; "
            f"claims {n_pass}/{len(sec.claims)} pass")


def _write_top(out: Path, sections: list[report_html.StudySection], meta: dict[str, Any]) -> Path:
    path = out / "report.html"
    report_html.write_report(path, sections, root=out, meta=meta,
                             title=f"robustlab reproduce — preset {meta.get('preset', '?')}")
    return path


def reproduce(out: Path, *, preset: str, options: SweepOptions, seed: int | None = None,
              strict: bool = False, studies: list[str] | None = None) -> int:
    """Run the studies into ``out``/<study>, write ``out``/report.html, print the claim table.

    Returns the exit code: 1 when a study crashed, or (``strict``) when a claim failed;
    0 otherwise.
    """
    chosen = resolve_studies(studies)
    names = [s.name for s in chosen]
    plans: list[Plan] = [plan(s, preset=preset, seed=seed) for s in chosen]  # validate all first
    out = Path(out)
    meta_path = out / "reproduce.json"
    if meta_path.exists():
        old = records.read_json(meta_path)
        asked = {"preset": preset, "seed": seed, "studies": names}
        if any(old.get(k) != v for k, v in asked.items()):
            raise UserError(f"--out {str(out)!r} holds a reproduce run of another kind (preset "
                            f"{old.get('preset')!r}, seed {old.get('seed')!r}, studies "
                            f"{','.join(old.get('studies', []))}): choose a new --out")
        meta = old
        meta["resumed"] = old.get("resumed", 0) + 1
    elif out.exists() and any(out.iterdir()):
        raise UserError(f"--out {str(out)!r} exists and is not a robustlab reproduce directory: "
                        "choose a new --out")
    else:
        meta = {"preset": preset, "seed": seed, "studies": names, "started": records.now_iso()}
    meta.update({"command": _command(out, preset, seed, names), "device": options.device,
                 "backend": options.backend, "workers": options.workers,
                 "versions": records.package_versions(), "code": records.code_version(),
                 "host": records.host_info(), "finished": None, "timings": meta.get("timings", {}),
                 "crashed": meta.get("crashed", {})})
    out.mkdir(parents=True, exist_ok=True)
    records.write_json(meta_path, meta)

    quiet = options.quiet
    sections: list[report_html.StudySection] = []
    crashed: list[str] = []
    t0 = time.perf_counter()
    total_points = sum(len(p.points) for p in plans)
    _say(f"robustlab reproduce (preset {preset}): {len(plans)} stud{'y' if len(plans) == 1 else 'ies'}, "
         f"{total_points} points, {_workers_text(options)} -> {out}", quiet)
    for i, p in enumerate(plans, 1):
        label = f"[{i}/{len(plans)}] {p.study.name}"
        _say(f"{label}: {len(p.points)} points", quiet)
        ts = time.perf_counter()
        try:
            sec = execute(p, out / p.study.name, options, progress_label=label)["section"]
            sec.subdir = p.study.name
            meta["crashed"].pop(p.study.name, None)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - a crashed study is reported; the others run
            crashed.append(p.study.name)
            meta["crashed"][p.study.name] = repr(exc)
            sec = _crashed_section(p.study, out / p.study.name, repr(exc), traceback.format_exc())
        seconds = time.perf_counter() - ts
        meta["timings"][p.study.name] = round(seconds, 3)
        records.write_json(meta_path, meta)
        sections.append(sec)
        _say(_study_line(label, sec, seconds), quiet)

    meta["finished"] = records.now_iso()
    meta["seconds"] = round(time.perf_counter() - t0, 3)
    records.write_json(meta_path, meta)
    path = _write_top(out, sections, meta)
    print(report_html.claim_table_text(sections))
    print(f"reproduce (preset {preset}) finished in {meta['seconds']:.1f} s")
    print(f"report: {path.resolve()}")
    if crashed:
        print(f"robustlab: {len(crashed)} stud{'y' if len(crashed) == 1 else 'ies'} crashed "
              f"({', '.join(crashed)}); see the report", file=sys.stderr)
        return 1
    failed = any(not c["passed"] for s in sections for c in s.claims)
    return 1 if strict and failed else 0


def rebuild(out: Path, *, strict: bool = False) -> int:
    """Rebuild claims, figures and report(s) of a run or reproduce directory from its saved
    results (nothing is re-run); print the claim table and the report path."""
    out = Path(out)
    if (out / "reproduce.json").exists():
        meta = records.read_json(out / "reproduce.json")
        sections = []
        for study in resolve_studies(meta["studies"]):
            sub = out / study.name
            if study.name in meta.get("crashed", {}):
                # report the crash as the original run did (re-running resumes it)
                sections.append(_crashed_section(study, sub, meta["crashed"][study.name], None))
            elif (sub / "manifest.json").exists() and (sub / "store.sqlite").exists():
                sections.append(_finalized_section(study, sub))
            else:
                sections.append(_broken_section(
                    study, sub, "study-not-run", "the study ran",
                    "the study never ran: the reproduce run stopped before it", {"directory": str(sub)}))
        path = _write_top(out, sections, meta)
    elif (out / "manifest.json").exists():
        manifest = records.read_json(out / "manifest.json")
        study = resolve_studies([manifest["study"]])[0]
        sections = [finalize(out, study)["section"]]
        path = out / "report.html"
    else:
        raise UserError(f"dir={str(out)!r} is not allowed: not a robustlab run directory "
                        "(no manifest.json or reproduce.json)")
    print(report_html.claim_table_text(sections))
    print(f"report rebuilt: {path.resolve()}")
    failed = any(not c["passed"] for s in sections for c in s.claims)
    return 1 if strict and failed else 0

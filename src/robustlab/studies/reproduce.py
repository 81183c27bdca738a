"""`robustlab reproduce`: every study into one directory, then one report (in the order
asked; the studies run in :func:`run_order`).

Layout of a reproduce directory::

    OUT/reproduce.json        what was asked (preset, seed, studies), timings, versions
    OUT/report.html           the report over every study (self-contained)
    OUT/<study>/...           one run directory per study (manifest, store, results, figures)

Every study is planned (and so validated) before anything is written. A study that
crashes outside its points (a bug, not a failed point) is reported as a failed claim with
its traceback and the others still run; the exit code is then 1. Otherwise the exit code
is 0 however the claims came out, unless ``strict``: then 1 unless every paper claim is
reproduced and every self-check holds (failed points are listed in the report and the
terminal either way). Re-running into the same directory resumes: finished points are not re-run.
:func:`rebuild` re-derives claims, figures and reports from the saved stores only.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import sqlite3
import sys
import tempfile
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .. import records, stats
from ..config import UserError, did_you_mean
from ..report import html as report_html
from ..report.console import console_text
from ..stats import Verdict
from ..sweep import backends as sweep_backends
from ..sweep import lock as runlock
from ..sweep.runner import SweepOptions
from ..sweep.store import Store
from . import REGISTRY, REPRODUCE_ORDER, REPRODUCE_RUN_ORDER, external, get_study
from .base import Claim, Plan, Study, check_run_dir, execute, finalize, plan

__all__ = ["reproduce", "rebuild", "resolve_studies"]

_log = logging.getLogger(__name__)  # diagnostics; the CLI shows them on stderr (cli.main)


def resolve_studies(names: list[str] | None) -> list[Study]:
    """The studies to run, in order (default: REPRODUCE_ORDER); unknown or repeated names
    and studies whose module is missing are user errors."""
    names = list(names) if names else list(REPRODUCE_ORDER)
    seen: set[str] = set()
    out = []
    for name in names:
        if name not in REGISTRY:
            raise UserError(f"study={name!r} is not allowed{did_you_mean(name, list(REGISTRY))}: "
                            f"one of {', '.join(REGISTRY)}")
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
    claim = Claim(claim_id, statement, Verdict(stats.INCONCLUSIVE, reason=problem.splitlines()[0]),
                  evidence, study.source).to_dict()
    return report_html.StudySection(
        name=study.name, title=study.title, source=study.source, summary=study.summary,
        manifest=manifest, claims=[claim], figures=[], failures=[], problems=[problem], n_rows=0,
        subdir=out.name)


def _crashed_section(study: Study, out: Path, error: str, tb: str | None) -> report_html.StudySection:
    problem = f"the study crashed: {error}" + (f"\n{tb}" if tb else "")
    return _broken_section(study, out, "study-crashed", "the study ran to the end", problem,
                           {"error": error})


def _finalized_section(study: Study, out: Path, force: bool = False) -> report_html.StudySection:
    """Claims, figures and the study's own report from its store; a crash becomes a section
    (a refusal to rewrite a study's records is the user's error, and stops the rebuild)."""
    try:
        sec = finalize(out, study, force=force)["section"]
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - shown in the report, not hidden
        return _broken_section(study, out, "study-crashed", "the study's results could be analysed",
                               f"finalizing the study crashed: {exc!r}\n{traceback.format_exc()}",
                               {"error": repr(exc)})
    if not sec.manifest.get("finished"):
        sec.problems.append("the run did not finish (interrupted or crashed): re-run the same "
                            "`robustlab reproduce` command with the same --out to complete it")
    sec.subdir = out.name
    return sec


def _recovered_section(study: Study, out: Path, force: bool) -> report_html.StudySection | None:
    """The section of a study recorded as crashed, if every one of its points finished and it now
    analyses without error (a crash while drawing, fixed since); None otherwise."""
    if not ((out / "manifest.json").exists() and (out / "store.sqlite").exists()):
        return None
    if not records.read_json(out / "manifest.json").get("finished"):
        return None
    sec = _finalized_section(study, out, force)
    if any(c.get("id") == "study-crashed" for c in sec.claims):
        return None
    return sec


def _timed(fn: Any) -> tuple[Any, float]:
    return fn(), time.perf_counter()


def _study_line(label: str, sec: report_html.StudySection, seconds: float) -> str:
    points = sec.manifest.get("n_points", "?")
    failed = f", {len(sec.failures)} failed" if sec.failures else ""
    return f"{label}: done in {seconds:.1f} s ({points} points{failed})"


def _write_top(out: Path, sections: list[report_html.StudySection], meta: dict[str, Any]) -> Path:
    path = out / "report.html"
    report_html.write_report(path, sections, root=out, meta=meta,
                             title=f"robustlab reproduce — preset {meta.get('preset', '?')}")
    return path


def reproduce(out: Path, *, preset: str, options: SweepOptions, seed: int | None = None,
              strict: bool = False, studies: list[str] | None = None, max_points: int | None = None,
              allow_mixed_code: bool = False, verbose: bool = False) -> int:
    """Run the studies into ``out``/<study>, write ``out``/report.html, print the summary
    (:func:`robustlab.report.console.console_text`; every claim and its evidence with ``verbose``).

    Returns the exit code: 1 when a study crashed or a self-check does not hold, or
    (``strict``) unless every paper claim is reproduced; 0 otherwise.
    """
    chosen = resolve_studies(studies)
    names = [s.name for s in chosen]
    plans: list[Plan] = [plan(s, preset=preset, seed=seed, **({} if max_points is None else {"max_points": max_points}))
                         for s in chosen]  # validate all first
    # the backend can run (e.g. a Ray address answers), before anything is written; after the
    # plans, whose imports then overlap the workers' fork server's own (the check waits for it)
    sweep_backends.prepare(options)
    out = Path(out)
    fresh = not out.exists()
    _reproduce_meta(out, preset, seed, names)  # before anything is written
    out.mkdir(parents=True, exist_ok=True)
    try:
        # one writer per reproduce directory (each study's directory is locked by execute too)
        with runlock.writer(out):
            meta = _reproduce_meta(out, preset, seed, names)  # again, now that nobody else writes
            meta.update({"command": _command(out, preset, seed, names), "device": options.device,
                         "backend": options.backend, "workers": options.workers,
                         "versions": records.package_versions(), "code": records.code_version(),
                         "host": records.host_info(), "finished": None,
                         "timings": meta.get("timings", {}), "crashed": meta.get("crashed", {})})
            records.write_json(out / "reproduce.json", meta)
            return _reproduce_locked(out, plans, meta, options, preset, strict, allow_mixed_code, verbose)
    except runlock.LockedError:
        raise
    except BaseException:
        if fresh and not (out / "reproduce.json").exists():
            shutil.rmtree(out, ignore_errors=True)
        raise


def _reproduce_meta(out: Path, preset: str, seed: int | None, names: list[str]) -> dict[str, Any]:
    """The reproduce.json to continue (a resumed run) or start; a UserError when ``out``
    holds something else."""
    meta_path = out / "reproduce.json"
    check_run_dir(out)  # writable; and below, every study's records readable before any is touched
    for name in names:
        if (out / name).is_dir():
            check_run_dir(out / name)
    if meta_path.exists():
        old = records.read_json(meta_path)
        asked = {"preset": preset, "seed": seed, "studies": names}
        if any(old.get(k) != v for k, v in asked.items()):
            raise UserError(f"--out {str(out)!r} holds a reproduce run of another kind (preset "
                            f"{old.get('preset')!r}, seed {old.get('seed')!r}, studies "
                            f"{','.join(old.get('studies', []))}): choose a new --out")
        old["resumed"] = old.get("resumed", 0) + 1
        return old
    if out.exists() and any(p.name != runlock.LOCK_NAME for p in out.iterdir()):
        raise UserError(f"--out {str(out)!r} exists and is not a robustlab reproduce directory: "
                        "choose a new --out")
    return {"preset": preset, "seed": seed, "studies": names, "started": records.now_iso()}


def run_order(plans: list[Plan]) -> list[Plan]:
    """The plans in the order to run them (see :data:`REPRODUCE_RUN_ORDER`): studies it does
    not list first, as asked, then the built-in ones in its order."""
    rank = {name: i for i, name in enumerate(REPRODUCE_RUN_ORDER)}
    return sorted(plans, key=lambda p: rank.get(p.study.name, -1))


def _reproduce_locked(out: Path, plans: list[Plan], meta: dict[str, Any], options: SweepOptions,
                      preset: str, strict: bool,
                      allow_mixed_code: bool = False, verbose: bool = False) -> int:
    meta_path = out / "reproduce.json"
    report_order = [p.study.name for p in plans]
    plans = run_order(plans)
    quiet = options.quiet
    sections: list[report_html.StudySection] = []
    crashed: list[str] = []
    t0 = time.perf_counter()
    total_points = sum(len(p.points) for p in plans)
    _say(f"robustlab reproduce (preset {preset}): {len(plans)} stud{'y' if len(plans) == 1 else 'ies'}, "
         f"{total_points} points, {_workers_text(options)} -> {out}", quiet)
    # A study's claims, figures and report are drawn on one background thread while the next
    # study's points run in worker processes: drawing is single-threaded Python, and the
    # workers would otherwise wait for it. Points that run in this process (one local worker)
    # would share the interpreter with the drawing, so there it stays in line.
    overlap = options.parallel
    pending: list[tuple[str, Plan, float, Future]] = []  # (label, plan, start, its drawing)

    def collect(block: bool) -> None:
        """Record finished studies in plan order (all of them when ``block``)."""
        while pending and (block or pending[0][3].done()):
            label, p, ts, fut = pending.pop(0)
            try:
                result, end = fut.result()
                sec = result["section"]
                sec.subdir = p.study.name
            except Exception as exc:  # noqa: BLE001 - a crashed study is reported; the others run
                crashed.append(p.study.name)
                meta["crashed"][p.study.name] = repr(exc)
                sec = _crashed_section(p.study, out / p.study.name, repr(exc),
                                       "".join(traceback.format_exception(exc)))
                end = time.perf_counter()
            seconds = end - ts  # its points and its drawing (which may overlap the next study's points)
            meta["timings"][p.study.name] = round(seconds, 3)
            records.write_json(meta_path, meta)
            sections.append(sec)
            _say(_study_line(label, sec, seconds), quiet)

    with ThreadPoolExecutor(1, thread_name_prefix="robustlab-finalize") as drawer:
        try:
            for i, p in enumerate(plans, 1):
                label = f"[{i}/{len(plans)}] {p.study.name}"  # the progress bar's; a line when done
                ts = time.perf_counter()
                fut: Future = Future()
                try:
                    swept = execute(p, out / p.study.name, options, progress_label=label,
                                    finalize_later=overlap, allow_mixed_code=allow_mixed_code)
                    meta["crashed"].pop(p.study.name, None)
                    if overlap:
                        fut = drawer.submit(_timed, swept["finalize"])
                    else:
                        fut.set_result((swept, time.perf_counter()))
                except UserError:
                    raise
                except Exception as exc:  # noqa: BLE001 - reported by collect; the others run
                    fut.set_exception(exc)
                pending.append((label, p, ts, fut))
                collect(block=False)
            collect(block=True)
        finally:
            drawer.shutdown(wait=True, cancel_futures=True)

    sections.sort(key=lambda sec: report_order.index(sec.name))  # the report keeps the asked order
    meta["timings"] = {n: meta["timings"][n] for n in report_order if n in meta["timings"]}
    meta["finished"] = records.now_iso()
    meta["seconds"] = round(time.perf_counter() - t0, 3)
    path = _write_top(out, sections, meta)
    records.write_json(meta_path, meta)  # last: a run is finished once its report exists
    print(console_text(sections, seconds=meta["timings"], verbose=verbose))
    print(f"report: {path.resolve()}  (preset {preset}, {meta['seconds']:.1f} s)")
    if crashed:
        _log.warning(f"robustlab: {len(crashed)} stud{'y' if len(crashed) == 1 else 'ies'} crashed "
                     f"({', '.join(crashed)}); see the report")
        return 1
    return _exit_code(sections, strict)


def _exit_code(sections: list[report_html.StudySection], strict: bool) -> int:
    """1 when a self-check does not hold (robustlab's own code is wrong: always), or, with
    ``strict``, unless every paper claim is reproduced and every self-check holds; else 0."""
    every = [c for s in sections for c in s.claims]
    from .integrity import failure_line

    for s in sections:  # no point produced results, or claims()/figures() failed: not a success
        line = failure_line(s.name, s.claims, s.problems, None)
        if line:
            print(line, file=sys.stderr)
            return 1
    broken = report_html.self_check_failures(every)
    if broken:
        _log.warning("robustlab: self-check failed: " + ", ".join(c["id"] for c in broken)
                     + " (robustlab's own code is wrong; see the report)")
        return 1
    if strict and report_html.strict_failures(every):
        from .integrity import incomplete_line

        line = incomplete_line(every)
        if line:
            _log.warning(line)
        return 1
    return 0


def rebuild(out: Path, *, strict: bool = False, force: bool = False, verbose: bool = False) -> int:
    """Rebuild claims, figures and report(s) of a run or reproduce directory from its saved
    results (nothing is re-run); print the claim table and the report path.

    A reader never waits for a writer. While a run or reproduce process writes ``out`` (it
    holds the directory's writer lock, see :mod:`robustlab.sweep.lock`), the claims are
    computed from a snapshot of the stores in a temporary directory and printed, and
    nothing in ``out`` is touched; the writer rebuilds the files itself when it ends.
    Otherwise the rebuild holds the lock itself, so that no run starts writing meanwhile.
    """
    out = Path(out)
    if not (out / "reproduce.json").exists() and not (out / "manifest.json").exists():
        raise UserError(f"dir={str(out)!r} is not allowed: not a robustlab run directory "
                        "(no manifest.json or reproduce.json)")
    dirs = [out] + [p for p in sorted(out.iterdir()) if p.is_dir()]
    busy = {d: pid for d in dirs if (pid := runlock.holder(d)) is not None}
    if busy:
        d, pid = next(iter(busy.items()))
        with tempfile.TemporaryDirectory(prefix="robustlab-report-") as tmp:
            snap = Path(tmp) / out.name
            _snapshot(out, snap)
            sections, _ = _rebuild(snap)
        print(console_text(sections, seconds=_timings(out), verbose=verbose))
        who = f"pid {pid}" if pid else "another process"
        print(f"{d} is being written by a robustlab process ({who}): the claims above are from the "
              f"points finished so far; no file in {out} was changed (that run rebuilds them when "
              "it ends)")
    else:
        records.check_writable(out, what="dir")  # the report, claims and figures are rewritten
        records.read_json(out / ("reproduce.json" if (out / "reproduce.json").exists() else "manifest.json"))
        try:
            with contextlib.ExitStack() as stack:
                for d in dirs:
                    if d == out or (d / "manifest.json").exists():
                        stack.enter_context(runlock.writer(d))
                sections, path = _rebuild(out, force)
        except runlock.LockedError as exc:  # a run started in between
            raise UserError(f"{exc}; or run `robustlab report` again") from None
        print(console_text(sections, seconds=_timings(out), verbose=verbose))
        print(f"report rebuilt: {path.resolve()}")
    return _exit_code(sections, strict)


def _timings(out: Path) -> dict[str, float]:
    """The seconds each study of a reproduce directory took when it ran (none for a run directory)."""
    path = out / "reproduce.json"
    return dict(records.read_json(path).get("timings") or {}) if path.exists() else {}


def _snapshot(src: Path, dst: Path) -> None:
    """Copy the records of a run or reproduce directory (a consistent copy of each store,
    through SQLite's backup), leaving out figures and reports."""
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_dir():
            if (p / "manifest.json").exists():
                _snapshot(p, dst / p.name)
        elif p.name == "store.sqlite":
            with Store(p, readonly=True) as st, sqlite3.connect(dst / p.name) as copy:
                st.conn.backup(copy)
            copy.close()
        elif p.suffix == ".json":
            shutil.copyfile(p, dst / p.name)


def _rebuild(out: Path, force: bool = False) -> tuple[list[report_html.StudySection], Path]:
    if (out / "reproduce.json").exists():
        meta = records.read_json(out / "reproduce.json")
        sections = []
        cleared = []
        for study in resolve_studies(meta["studies"]):
            sub = out / study.name
            if study.name in meta.get("crashed", {}):
                sec = _recovered_section(study, sub, force)
                if sec is None:  # its points did not all run: report the crash as the run did
                    sections.append(_crashed_section(study, sub, meta["crashed"][study.name], None))
                else:  # its points all ran and it analyses now (the crash was in the drawing, since fixed)
                    sections.append(sec)
                    cleared.append(study.name)
            elif (sub / "manifest.json").exists() and (sub / "store.sqlite").exists():
                sections.append(_finalized_section(study, sub, force))
            else:
                sections.append(_broken_section(
                    study, sub, "study-not-run", "the study ran",
                    "the study never ran: the reproduce run stopped before it", {"directory": str(sub)}))
        if cleared:
            meta["crashed"] = {k: v for k, v in meta["crashed"].items() if k not in cleared}
            meta["recovered"] = sorted(set(meta.get("recovered", [])) | set(cleared))
            records.write_json(out / "reproduce.json", meta)
        path = _write_top(out, sections, meta)
    elif (out / "manifest.json").exists():
        manifest = records.read_manifest(out / "manifest.json")
        study = external.from_manifest(manifest, get_study)  # built-in, file or plugin
        sections = [finalize(out, study, force=force)["section"]]
        path = out / "report.html"
    else:
        raise UserError(f"dir={str(out)!r} is not allowed: not a robustlab run directory "
                        "(no manifest.json or reproduce.json)")
    return sections, path

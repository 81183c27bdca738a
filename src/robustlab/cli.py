"""The robustlab command line: list, run, reproduce, report, compare, new, rerun, evaluate, export.

The only module that reads sys.argv. A user's mistake (bad key, value, preset, study,
grid, path) prints one line ``robustlab: error: ...`` and exits 2, before any run
directory is created.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import warnings
from datetime import datetime
from pathlib import Path

from .config import UserError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse prints usage otherwise)
        raise UserError(message)


def _kv(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise UserError(f"{flag} {item!r} is not allowed: expected key=value")
        k, v = item.split("=", 1)
        if k.strip() in out:  # the earlier value would be dropped silently
            raise UserError(f"{flag} {k.strip()} is given twice ({out[k.strip()]!r} and {v!r}): give it once")
        out[k.strip()] = v
    return out


_STRICT_HELP = "exit 1 unless every paper claim is reproduced and every self-check holds"
_PRESET_HELP = "the study's named settings (default quick); `robustlab run STUDY --help` lists them"


class _StudyHelp(argparse.Action):
    """``-h/--help`` that names the presets of the study given before it (``run STUDY -h``),
    or, for ``reproduce``, those every study of ``reproduce`` has."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):  # noqa: A002
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001
        preset = next(a for a in parser._actions if "--preset" in a.option_strings)
        try:
            preset.help = presets_help(getattr(namespace, "study", None))
        except UserError:
            pass  # an unknown study: the generic help
        parser.print_help()
        parser.exit()


def presets_help(study: str | None) -> str:
    """``--preset``'s help: the named study's presets, or those every built-in study has."""
    from .studies import REGISTRY, get_study

    if study:
        st = get_study(study)
        return f"named settings of {st.name} (default quick): " + ", ".join(st.presets)
    common = [k for k in get_study(next(iter(REGISTRY))).presets
              if all(k in get_study(n).presets for n in REGISTRY)]
    return (f"named settings (default quick); every built-in study has {', '.join(common)}; "
            "`robustlab list STUDY` lists a study's own")


def _add_sweep_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-h", "--help", action=_StudyHelp, help="show this help (with the study's presets) and exit")
    p.add_argument("--preset", default="quick", help=_PRESET_HELP)
    p.add_argument("--out", type=Path, default=None, help="run directory (default runs/NAME-TIME)")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or auto")
    p.add_argument("--backend", default="local", help="local (default) or ray")
    p.add_argument("--workers", type=int, default=None,
                   help="local backend: parallel processes (default: CPU cores // --threads)")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads of each point, on every backend (default 1; results depend on it)")
    p.add_argument("--ray-address", default=None, help="join this Ray cluster (default: start a local one)")
    p.add_argument("--retry-failed", action="store_true", help="re-run points recorded as failed")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("-v", "--verbose", action="store_true", help="print every claim with its evidence")
    p.add_argument("--strict", action="store_true", help=_STRICT_HELP)
    p.add_argument("--max-points", type=int, default=None, metavar="N",
                   help="refuse a grid of more points than this (default 100000), before it is expanded")
    p.add_argument("--allow-mixed-code", action="store_true",
                   help="resume a run whose points were computed by other code (recorded in the manifest)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the number of points and an estimated wall time (from timing a few "
                        "of them in a temporary directory); write nothing")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(prog="robustlab", description="A laboratory for the science of adversarial robustness.")
    parser.add_argument("--version", action="version", version=f"robustlab {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    p_list = sub.add_parser("list", help="the studies, one line each; `list STUDY`: its presets and parameters")
    p_list.add_argument("study", nargs="?", help="show this study's presets, claims and parameters")
    p_run = sub.add_parser("run", help="run one study", add_help=False)
    p_run.add_argument("study", nargs="?", default=None,
                       help="a study name, or the path of a .py file that defines STUDY")
    p_run.add_argument("--config", type=Path, default=None, metavar="EXP.TOML",
                       help="an experiment file (study, preset, set, grid, seeds, ...); options given here override it")
    p_run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config field")
    p_run.add_argument("--grid", dest="grids", action="append", default=[], metavar="KEY=V1,V2|LO:HI:N[log]",
                       help="sweep a config field")
    p_run.add_argument("--seed", type=int, default=None, help="base seed (seeds are seed, seed+1, ...)")
    p_run.add_argument("--seeds", type=int, default=None, help="number of seeds (default: the preset's)")
    p_run.add_argument("--data-dir", default=None,
                       help="folder with torchvision dataset files (sets the study's data_dir)")
    p_run.add_argument("--resume", action="store_true",
                       help="continue a run: the one in --out (refused if it holds none), or without --out the "
                            "latest run of this study under runs/ (re-running into a run's --out resumes it too)")
    p_run.add_argument("--reuse", action="append", default=[], metavar="DIR",
                       help="take the finished points of this earlier run of the study whose configs are exactly "
                            "this run's, instead of computing them (repeatable)")
    _add_sweep_options(p_run)
    p_rep = sub.add_parser("reproduce", help="run every study and write one report", add_help=False)
    p_rep.add_argument("--seed", type=int, default=None, help="base seed of every study")
    p_rep.add_argument("--replicate", type=int, default=None, metavar="K",
                       help="run every study at K base seeds (seed, seed+17, ...) into OUT/seed-S and report, per "
                            "claim, whether the verdicts agree (a claim whose verdict changes is marked unstable)")
    p_rep.add_argument("--only", default=None, metavar="NAME[,NAME]",
                       help="run only these studies, in this order (default: all of "
                            "feature-learning, lazy-attack, lazy-adversarial, width-depth-init)")
    _add_sweep_options(p_rep)
    p_report = sub.add_parser("report", help="rebuild figures, claims and report from saved results")
    p_report.add_argument("dir", type=Path, help="a run directory or a reproduce directory")
    p_report.add_argument("--strict", action="store_true", help=_STRICT_HELP)
    p_report.add_argument("-v", "--verbose", action="store_true", help="print every claim with its evidence")
    p_report.add_argument("--force", action="store_true",
                          help="rewrite results.jsonl, claims.json and report.html even from a store holding "
                               "fewer rows than they do")
    _add_lab_commands(sub)
    _add_compare(sub)
    _add_evaluate_export(sub)
    return parser


def _add_lab_commands(sub) -> None:
    """Subcommands for studies of one's own and runs re-executed from their record."""
    p_new = sub.add_parser("new", help="write a study scaffold NAME.py and its test test_NAME.py")
    p_new.add_argument("name", help="the study's name (letters, digits, '-' and '_')")
    p_new.add_argument("--dir", type=Path, default=Path("."), help="where to write (default: here)")
    p_new.add_argument("--package", action="store_true",
                       help="write a plugin package DIR/NAME/ (pyproject.toml with its entry point, the study, tests)")
    p_rerun = sub.add_parser("rerun", help="re-execute a run exactly from its manifest.json")
    p_rerun.add_argument("dir", type=Path, help="a run directory")
    p_rerun.add_argument("--out", type=Path, default=None, help="the new run directory (default runs/NAME-rerun-TIME)")
    p_rerun.add_argument("--backend", default="local", help="local (default) or ray")
    p_rerun.add_argument("--workers", type=int, default=None,
                         help="local backend: parallel processes (default: CPU cores // the run's threads)")
    p_rerun.add_argument("--quiet", action="store_true", help="no progress bar")
    p_rerun.add_argument("--strict", action="store_true", help=_STRICT_HELP)
    p_rerun.add_argument("-v", "--verbose", action="store_true", help="print every claim with its evidence")


def _default_out(name: str) -> Path:
    return Path("runs") / f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def default_workers(threads: int) -> int:
    """Worker processes that fill the machine: its cores divided by each point's threads (the
    one default of ``run``, ``reproduce``, ``rerun``, :func:`robustlab.run` and :func:`robustlab.rerun`)."""
    from .sweep.runner import default_workers as fill

    return fill(threads)


def _resolve_workers(args: argparse.Namespace) -> None:
    """Fill in the default --workers: the whole machine."""
    if args.workers is None:
        args.workers = default_workers(args.threads)


def workers_line(options) -> str:
    """One line saying how the points run, e.g. ``local backend: 2 workers x 1 thread``."""
    if options.backend != "local":
        return f"{options.backend} backend: {options.threads} thread{'s' if options.threads != 1 else ''} per task"
    return (f"local backend: {options.workers} worker{'s' if options.workers != 1 else ''} x "
            f"{options.threads} thread{'s' if options.threads != 1 else ''}")


def _sweep_options(args: argparse.Namespace):
    from .sweep.runner import SweepOptions, check_threads
    from .utils import resolve_device

    _resolve_workers(args)
    check_threads(args.threads)
    resolve_device(args.device)  # validate now, before anything is written
    if args.ray_address and args.backend != "ray":
        raise UserError("--ray-address is not allowed without --backend ray")
    return SweepOptions(backend=args.backend, workers=args.workers, device=args.device,
                        ray_address=args.ray_address, quiet=args.quiet, threads=args.threads,
                        retry_failed=args.retry_failed, isolate=_isolate(args))


def _isolate(args: argparse.Namespace) -> bool:
    """On the command line (``main()`` reading sys.argv), one local worker still runs the points
    in a worker process: a point that kills its process is then a failed point and one line, not
    a dead robustlab. ``main([...])`` called from Python keeps them in its own process (a
    debugger, a monkeypatched study), as :func:`robustlab.run` does."""
    return args.backend == "local" and getattr(args, "from_sys_argv", False)


def _fmt_seconds(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _dry_run(plans: list, options, what: str, skips: list[set[str]] | None = None) -> int:
    """--dry-run: points, groups and an estimated wall time per study; nothing written.
    ``skips``: per plan, the keys of points the run would not compute (resumed or reused)."""
    import dataclasses

    options = dataclasses.replace(options, isolate=False)  # timings of the points, not of a worker's start
    from .studies.estimate import estimate

    print(f"{what} --dry-run ({workers_line(options)}): timing a few points of each study in a "
          "temporary directory; nothing is written", file=sys.stderr, flush=True)
    print(f"{'study':<18}{'to run':>8}{'groups':>8}{'sampled':>9}{'sample time':>13}{'estimate':>11}")
    total = 0.0
    floors = []
    for p, skip in zip(plans, skips or [set()] * len(plans)):
        e = estimate(p, options, say=lambda m: print(m, file=sys.stderr, flush=True), skip=frozenset(skip))
        if e["to_run"] < e["points"]:
            print(f"{e['study']}: {e['points'] - e['to_run']} of {e['points']} points are finished already "
                  f"(in --out, or taken with --reuse); the estimate is for the {e['to_run']} left",
                  file=sys.stderr, flush=True)
        total += e["estimate_seconds"]
        if e["floor_seconds"] is not None:
            floors.append(e)
        note = f"  ({e['sample_failed']} sampled points failed)" if e["sample_failed"] else ""
        if e.get("probed_groups"):
            note += f"  (and {e['probed_groups']} probed)"
        print(f"{e['study']:<18}{e['to_run']:>8}{e['groups']:>8}{e['sampled_groups']:>9}"
              f"{_fmt_seconds(e['sample_seconds']):>13}{_fmt_seconds(e['estimate_seconds']):>11}{note}",
              flush=True)
        if e.get("busy") is not None and e["busy"] < 0.9:
            print(f"  {e['study']}: the timings got {e['busy']:.0%} of their cores (their CPU seconds over their wall "
                  f"time: other jobs share this machine); on idle cores: {_fmt_seconds(e['estimate_seconds'] * e['busy'])}")
        if e.get("model"):
            print(f"  {e['study']}: model: {e['model']}")
            for said, seconds in e.get("calibration", []):
                print(f"    calibration: {said}: {seconds:.1f} s")
    for e in floors:
        where = (f"the GPU's {e['matmul_gflops']:.0f} GFLOP/s (one device, shared by the workers)"
                 if e.get("floor_device") == "cuda" and e.get("floor_parallel") == 1 else
                 f"this machine's {e['matmul_gflops']:.0f} GFLOP/s per worker ({e['floor_parallel']} in parallel)")
        print(f"{e['study']}: {e['flops'] / 1e12:.1f} TFLOP of matrix products; at {where} that alone takes "
              f"{_fmt_seconds(e['floor_seconds'])}: a floor under any run of this grid here")
    print(f"estimated wall time: {_fmt_seconds(total)} (the sampled groups' time per group, per unit of weight "
          "where a study weighs its points, or per FLOP where it counts them (the costlier half of the groups at "
          "its own rate, timed whole or by short probes), x the whole run / parallel workers; on a GPU a fixed "
          "time per group plus the floor; rough where a point's cost varies along the grid)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``list``: one line per study (built-in, then plugins; a broken plugin is one line and
    hides no other); ``list STUDY``: its paper, presets, claims and parameters."""
    from .studies import REGISTRY, external, get_study

    if args.study:
        _list_study(get_study(args.study))
        return 0
    rows = [(st.name, st) for st in (get_study(n) for n in REGISTRY)]
    rows += [(item.name, item.study or item.problem) for item in external.listing(set(REGISTRY))]
    for name, st in rows:
        if isinstance(st, str):  # a broken plugin: one line, and it hides no other
            print(f"{name}: BROKEN — {st}")
            continue
        n = len(st.presets)
        tail = f"  ({n} preset{'s' if n != 1 else ''})"
        if st.origin and st.origin.get("kind") != "built-in":
            tail += f"  [{external.origin_text(st)}]"
        print(f"{name}: " + _clip(st.title, max(20, 100 - len(name) - 2 - len(tail))) + tail)
    print("details: robustlab list STUDY")
    return 0


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _list_study(st) -> None:  # noqa: ANN001 - a Study
    """Everything a run of the study can be told: presets, claims, parameters."""
    import textwrap

    from .studies import external

    print(f"{st.name}: {st.title}")
    print(f"  paper: {st.source}   [{external.origin_text(st)}]")
    if st.summary:
        print(textwrap.fill(" ".join(st.summary.split()), 100, initial_indent="  ", subsequent_indent="  "))
    print("presets (--preset):")
    pw = max(len(k) for k in st.presets)
    for k, v in st.presets.items():
        print(_clip(f"  {k:<{pw}}  {v.description or 'no description'}", 120))
    if st.claim_specs:
        print("claims:")
        cw = max(len(c.id) for c in st.claim_specs)
        for c in st.claim_specs:
            ctl = f"control: {c.control.label()}" if c.control is not None else ""
            prem = f"premises: {', '.join(c.premises)}" if c.premises else ""
            print(_clip(f"  {c.id:<{cw}}  {c.kind:<11}  " + "; ".join(x for x in (ctl, prem) if x), 120))
    print("parameters (--set KEY=VALUE, --grid KEY=V1,V2):")
    for fname, tname, default, help_ in st.config.describe():
        print(_clip(f"  {fname:<22} {tname:<18} default={default!r:<12} {help_}", 140))


def _early_workers(args: argparse.Namespace) -> None:
    """With --workers N, start the workers' fork server before the heavy imports below, so
    that its imports (torch, the studies) run alongside ours."""
    _resolve_workers(args)
    if args.backend == "local" and (args.workers > 1 or _isolate(args)):
        from .sweep.backends import DRIVER_PRELOAD, start_fork_server

        start_fork_server(DRIVER_PRELOAD)


def cmd_run(args: argparse.Namespace) -> int:
    if args.study is None:
        raise UserError("study is required: a study name, a .py file, or --config EXP.TOML")
    _early_workers(args)
    from .api import execute_run, prepare_run
    from .report.console import console_text

    options = _sweep_options(args)
    out_dir = args.out
    if args.resume and out_dir is None:
        out_dir = latest_run(args.study)
    p, out = prepare_run(args.study, preset=args.preset, sets=_kv(args.sets, "--set"), grids=args.grids,
                         seed=args.seed, seeds=args.seeds, out=out_dir, data_dir=args.data_dir,
                         resume=args.resume, max_points=_max_points(args))
    if args.dry_run:
        from .studies.base import check_reuse, finished_keys

        sources = check_reuse(p, Path(out), options, args.reuse)  # bad input is an error here too
        return _dry_run([p], options, f"robustlab run {p.study.name}",
                        [finished_keys(p, Path(out), options, sources)])

    def started() -> None:
        if not args.quiet:
            print(f"robustlab run {p.study.name}: {len(p.points)} points, {workers_line(options)}",
                  file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    run = execute_run(p, out, options, record=_run_file_record(args), started=started, reuse=args.reuse,
                      allow_mixed_code=args.allow_mixed_code)
    summary = run.summary
    sec = summary["section"]
    print(console_text([sec], seconds={sec.name: time.perf_counter() - t0}, verbose=args.verbose))
    pts = summary["points"]
    print(f"report: {run.out}/report.html  ·  {pts['done']}/{pts['planned']} points done ({pts['failed']} failed)")
    return _died_exit(summary["failures"], run.out) or _failed_exit(sec, run.out) \
        or _claims_exit(summary["claims"], args.strict)


def _failed_exit(section, out) -> int:  # noqa: ANN001 - a StudySection
    """1, with one line, when no point produced results or the study's claims() or figures()
    raised or exited (:func:`robustlab.studies.integrity.failure_line`)."""
    from .studies.integrity import failure_line

    line = failure_line(section.name, section.claims, section.problems, out)
    if line:
        print(line, file=sys.stderr)
        return 1
    return 0


def _died_exit(failures: list[dict], out) -> int:
    """2, with one line, when a point killed the process that ran it (twice: it is retried
    alone once): the study's error, recorded as a failed point; the run is resumable."""
    from .sweep.backends import WORKER_DIED

    died = [f for f in failures if (f.get("reason") or "").startswith(WORKER_DIED.split(":")[0])]
    if not died:
        return 0
    print(f"robustlab: error: {len(died)} point{'s' if len(died) != 1 else ''} killed the process running "
          f"{'them' if len(died) != 1 else 'it'} (os._exit, a signal, a crash in native code, or out of memory), "
          f"twice: recorded as failed in {out}; fix the study, then re-run with --retry-failed", file=sys.stderr)
    return 2


def latest_run(study: str, root: Path = Path("runs")) -> Path:
    """``run STUDY --resume`` without ``--out``: the newest run directory of that study under
    ``runs/`` (the default ``--out`` names them ``runs/STUDY-DATE-TIME``)."""
    from .studies import get_study

    name = get_study(study).name
    found = sorted((d for d in root.glob(f"{name}-*") if (d / "manifest.json").is_file()
                    and d.name[len(name) + 1:][:1].isdigit()), key=lambda d: d.name)
    if not found:
        raise UserError(f"--resume found no run of {name} under {str(root)!r}: give its --out")
    return found[-1]


def _claims_exit(claims: list[dict], strict: bool) -> int:
    """1 when a self-check does not hold (always: robustlab's own code is wrong), or, with
    ``--strict``, unless every paper claim is reproduced."""
    from .report.html import self_check_failures, strict_failures

    broken = self_check_failures(claims)
    if broken:
        print("robustlab: self-check failed: " + ", ".join(c["id"] for c in broken)
              + " (robustlab's own code is wrong; see the report)", file=sys.stderr)
        return 1
    if strict and strict_failures(claims):
        from .studies.integrity import incomplete_line

        line = incomplete_line(claims)
        if line:
            print(line, file=sys.stderr)
        return 1
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    _early_workers(args)
    from .studies.reproduce import reproduce

    only = None
    if args.only is not None:
        only = [n.strip() for n in args.only.split(",") if n.strip()]
        if not only:
            raise UserError(f"--only {args.only!r} is not allowed: name at least one study")
    options = _sweep_options(args)
    if args.dry_run:
        from .studies.base import finished_keys, plan
        from .studies.reproduce import resolve_studies

        plans = [plan(s, preset=args.preset, seed=args.seed, max_points=_max_points(args))
                 for s in resolve_studies(only)]
        skips = [finished_keys(pl, args.out / pl.study.name, options) if args.out else set() for pl in plans]
        return _dry_run(plans, options, f"robustlab reproduce --preset {args.preset}", skips)
    out = args.out or _default_out("reproduce")  # reproduce checks the backend before writing
    if args.replicate is not None:
        from .studies.replicate import base_seeds, replicate

        base_seeds(args.seed, args.replicate)  # a bad count fails before anything is written
        return replicate(out, k=args.replicate, seed=args.seed, run_one=lambda sub, s: reproduce(
            sub, preset=args.preset, options=options, seed=s, strict=args.strict, studies=only,
            verbose=args.verbose, max_points=_max_points(args), allow_mixed_code=args.allow_mixed_code))
    return reproduce(out, preset=args.preset, options=options, seed=args.seed, strict=args.strict,
                     studies=only, verbose=args.verbose, max_points=_max_points(args),
                     allow_mixed_code=args.allow_mixed_code)


def _max_points(args: argparse.Namespace) -> int:
    from .studies.base import MAX_POINTS

    if args.max_points is None:
        return MAX_POINTS
    if args.max_points < 1:
        raise UserError(f"--max-points {args.max_points} is not allowed: a value >= 1")
    return args.max_points


def cmd_report(args: argparse.Namespace) -> int:
    from .studies.reproduce import rebuild

    if not args.dir.is_dir():
        raise UserError(f"dir={str(args.dir)!r} is not allowed: no such directory")
    return rebuild(args.dir, strict=args.strict, force=args.force, verbose=args.verbose)


def cmd_new(args: argparse.Namespace) -> int:
    from .scaffold import pytest_hint, write_package, write_scaffold

    for path in (write_package if args.package else write_scaffold)(args.name, args.dir):
        print(f"wrote {path}")
    if args.package:
        print(f"install it with: pip install -e {args.dir / args.name}  (then: robustlab run {args.name})")
    hint = pytest_hint()
    if hint:
        print(hint)
    return 0


def cmd_rerun(args: argparse.Namespace) -> int:
    from . import reader, records
    from .api import rerun, results_differ
    from .report.console import console_text

    # the record the rerun is compared with must be readable before anything is recomputed
    fix = f"rebuild it from the run's store with `robustlab report {args.dir}`, then rerun"
    if args.dir.is_dir() and (args.dir / "manifest.json").exists():
        try:
            reader.read_jsonl(args.dir / "results.jsonl", fix=fix)
        except FileNotFoundError:
            raise UserError(f"{args.dir / 'results.jsonl'} is missing: {fix}") from None
    run = rerun(args.dir, out=args.out, workers=args.workers, backend=args.backend, quiet=args.quiet)
    print(console_text([run.summary["section"]], verbose=args.verbose))
    differ = results_differ(args.dir / "results.jsonl", run.out / "results.jsonl")
    from .api import study_file_change

    changed = study_file_change(records.read_json(args.dir / "manifest.json"))
    print(f"rerun of {args.dir} -> {run.out}/report.html; results.jsonl "
          + ("DIFFERS from the original" if differ else "byte-identical to the original")
          + (f" ({changed})" if changed else ""))
    for line in differ:
        print(f"  differs: {line}")
    then = records.read_json(args.dir / "manifest.json").get("host") or {}
    now = run.manifest.get("host") or {}
    cpu = [(h.get("cpu"), h.get("cpu_capability")) for h in (then, now)]
    if None not in cpu[0] and cpu[0] != cpu[1]:
        print(f"note: recorded on {cpu[0][0]} ({cpu[0][1]} kernels), re-run on {cpu[1][0]} ({cpu[1][1]} "
              "kernels): the CPU kernels sum in the order their instruction set suits, so results can "
              "differ in the last bits, and trained networks further")
    if differ:  # a rerun that does not reproduce its record is a failure, whatever the claims say
        print(f"robustlab: rerun differs from the record in {len(differ)} field(s): "
              + ", ".join(d.split(":", 1)[0] for d in differ), file=sys.stderr)
        return 1
    return _failed_exit(run.summary["section"], run.out) or _claims_exit(run.claim_dicts, args.strict)


def _run_file_record(args: argparse.Namespace) -> dict | None:
    """The experiment file a run came from, kept in its manifest (path and text)."""
    if getattr(args, "config", None) is None:
        return None
    return {"config_file": {"path": str(args.config.resolve()), "text": args.config.read_text()}}


def _with_run_file(parser: argparse.ArgumentParser, argv: list[str] | None,
                   args: argparse.Namespace) -> argparse.Namespace:
    """``run --config exp.toml``: the file's values become the defaults of `run`, and the
    command line is parsed again, so that options given there override the file."""
    from .api import read_run_file

    data = read_run_file(args.config)
    dests = {"set": "sets", "grid": "grids"}
    defaults = {dests.get(k, k): v for k, v in data.items()}
    if "set" in data:
        from .api import value_text

        defaults["sets"] = [f"{k}={value_text(f'set.{k}', v)}" for k, v in data["set"].items()]
    if "grid" in data:
        from .api import grid_args

        defaults["grids"] = grid_args(data["grid"])
    if "out" in data:
        defaults["out"] = Path(data["out"])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["run"].set_defaults(**defaults)
    given = list(args.sets)  # on the command line: they override the file's, and may not repeat
    _kv(given, "--set")
    args = parser.parse_args(argv)
    keys = {g.split("=", 1)[0].strip() for g in given}
    args.sets = [x for x in defaults.get("sets", []) if x.split("=", 1)[0].strip() not in keys] + given
    # a --grid on the command line replaces the file's axis of the same field
    last = {g.split("=", 1)[0].strip(): g for g in args.grids}
    args.grids = list(last.values())
    return args


# ----------------------------------------------------------------------------------------
# compare: two runs' verdicts side by side (logic in robustlab.report.compare)

def _add_compare(sub) -> None:
    p = sub.add_parser("compare", help="every claim's verdict and effect in two runs, side by side")
    p.add_argument("dir_a", type=Path, help="a run directory or a reproduce directory")
    p.add_argument("dir_b", type=Path, help="another one (e.g. the same study at other base seeds)")
    p.add_argument("--fail-on-change", action="store_true", help="exit 1 when a claim's verdict changed")


def cmd_compare(args: argparse.Namespace) -> int:
    from .report.compare import compare_dirs, compare_text

    sa, sb, rows = compare_dirs(args.dir_a, args.dir_b)
    print(compare_text(sa, sb, rows))
    return 1 if args.fail_on_change and any(r.changed for r in rows) else 0


# ----------------------------------------------------------------------------------------
# evaluate: a saved model's robust accuracy; export: a run's results as one table

def _add_evaluate_export(sub) -> None:
    p = sub.add_parser("evaluate", help="robust accuracy of a saved model per ε and attack, and the worst case")
    p.add_argument("model", type=Path, help="a TorchScript file, or a state dict with --module")
    p.add_argument("--module", default=None, metavar="PKG.MOD:FACTORY",
                   help="builds the model for a state dict (pkg.mod:Name or file.py:Name, called with no arguments)")
    p.add_argument("--data", type=Path, required=True, help="a .pt file with {'x': inputs, 'y': labels}, or an .npz")
    p.add_argument("--eps", required=True, help="budgets, comma-separated (e.g. 0.01,0.03)")
    p.add_argument("--attacks", default="apgd-ce,apgd-dlr",
                   help="comma-separated: fgsm, pgd, apgd-ce, apgd-dlr, apgd-t, fab-t, square; the suite "
                        "autoattack; or your own fn(model, x, y) -> x_adv as pkg.mod:fn or file.py:fn")
    p.add_argument("--threat", default="linf", help="linf (default) or l2")
    p.add_argument("--bounds", default="0,1", help="the input range LO,HI (default 0,1), or none")
    p.add_argument("--steps", type=int, default=None, help="steps of the iterative attacks (default: theirs)")
    p.add_argument("--restarts", type=int, default=1, help="random restarts of the iterative attacks")
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cascade", action="store_true",
                   help="attack only the samples every earlier attack left robust (AutoAttack's order; "
                        "the same worst case, less work)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or auto")
    p.add_argument("--out", type=Path, default=None,
                   help="write evaluation.csv, per_sample.csv and robust_accuracy.png here (a new directory)")
    p = sub.add_parser("export", help="runs' results (with their configs) and claims as one CSV or Parquet "
                                      "table, or to MLflow")
    p.add_argument("dir", type=Path, nargs="+", help="run directories or reproduce directories (one or more)")
    p.add_argument("--format", default="csv", help="csv (default), parquet, or mlflow (pip install "
                                                   "'robustlab[mlflow]')")
    p.add_argument("--out", type=Path, required=True,
                   help="the results file (the claims go beside it); for mlflow, the tracking URI")
    p.add_argument("--force", action="store_true", help="replace existing files")


def _floats(text: str, flag: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{flag} {text!r} is not allowed: comma-separated numbers") from None


def _attack_list(text: str) -> dict:
    """``--attacks``: names and suites as they are; ``pkg.mod:fn`` / ``file.py:fn`` imported, shown as ``fn``."""
    from .evaluation import load_object

    out: dict = {}
    for item in (a.strip() for a in text.split(",")):
        if not item:
            continue
        if ":" in item:
            out[item.rsplit(":", 1)[1]] = load_object(item, "--attacks")
        else:
            out[item] = item
    if not out:
        raise UserError(f"--attacks {text!r} is not allowed: name at least one attack")
    return out


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .evaluation import evaluate, load_data, load_model
    from .utils import resolve_device

    device = resolve_device(args.device)
    bounds = None if args.bounds.strip().lower() == "none" else tuple(_floats(args.bounds, "--bounds"))
    if bounds is not None and (len(bounds) != 2 or not bounds[0] < bounds[1]):
        raise UserError(f"--bounds {args.bounds!r} is not allowed: LO,HI with LO < HI, or none")
    if args.out is not None and args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        raise UserError(f"--out {str(args.out)!r} is not allowed: it exists; choose a new directory")
    model = load_model(args.model, args.module).to(device)
    x, y = load_data(args.data)
    ev = evaluate(model, x, y, threat=args.threat, eps=_floats(args.eps, "--eps"),
                  attacks=_attack_list(args.attacks), bounds=bounds, steps=args.steps, restarts=args.restarts,
                  batch_size=args.batch_size, seed=args.seed, cascade=args.cascade, progress=args.progress)
    print(ev.table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        ev.table.to_csv(args.out / "evaluation.csv", index=False)
        ev.per_sample.to_csv(args.out / "per_sample.csv", index=False)
        ev.figure(args.out / "robust_accuracy.png")
        print(f"-> {args.out}/evaluation.csv, per_sample.csv, robust_accuracy.png")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import export

    if args.format == "mlflow":
        from .export import export_mlflow

        ids = export_mlflow(args.dir, tracking_uri=str(args.out))
        print(f"logged {len(ids)} run{'s' if len(ids) != 1 else ''} to MLflow at {args.out}")
        return 0
    for path in export(args.dir, args.out, fmt=args.format, force=args.force):
        print(f"wrote {path}")
    return 0


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """Show a warning as one line, without the file and source line Python would print.
    (Warnings from the points are captured and stored by the sweep; this covers the rest.)"""
    from .sweep.runner import warning_sentence

    text = warning_sentence(" ".join(str(message).split()))
    print(f"robustlab: warning: {text}", file=file or sys.stderr, flush=True)


class _Stderr(logging.StreamHandler):
    """The library's log records (logger ``robustlab``), one line each on the current stderr."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):  # whatever sys.stderr is at the time (a test may have replaced it)
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    shown = warnings.showwarning
    warnings.showwarning = _one_line_warning
    log = logging.getLogger("robustlab")  # the library logs; the CLI shows its warnings
    handler, level = _Stderr(), log.level
    handler.setLevel(logging.WARNING)
    log.addHandler(handler)
    if log.getEffectiveLevel() > logging.WARNING:
        log.setLevel(logging.WARNING)
    try:
        return _main(argv)
    finally:
        warnings.showwarning = shown
        log.removeHandler(handler)
        log.setLevel(level)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        if args.command == "run" and args.config is not None:
            args = _with_run_file(parser, argv, args)
        args.from_sys_argv = argv is None
        handler = {"list": cmd_list, "run": cmd_run, "reproduce": cmd_reproduce, "report": cmd_report,
                   "new": cmd_new, "rerun": cmd_rerun, "compare": cmd_compare, "evaluate": cmd_evaluate,
                   "export": cmd_export}
        return handler[args.command](args)
    except UserError as exc:
        print(f"robustlab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("robustlab: interrupted (finished points are kept; re-run with the same --out to resume)",
              file=sys.stderr)
        return 130
    except OSError as exc:
        # the machine refused a write or read (disk full, read-only or vanished directory):
        # a fact about the environment, said in one line; the store keeps what finished
        if os.environ.get("ROBUSTLAB_TRACEBACK"):
            raise
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"robustlab: error: {where}{exc.strerror or exc} (finished points are kept; fix it and "
              "re-run the same command to resume; ROBUSTLAB_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

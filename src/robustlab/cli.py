"""The robustlab command line: list, run, reproduce, report.

The only module that reads sys.argv. A user's mistake (bad key, value, preset, study,
grid, path) prints one line ``robustlab: error: ...`` and exits 2, before any run
directory is created.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
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
        out[k.strip()] = v
    return out


def _add_sweep_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="quick", help="named settings: quick (default) or paper")
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
    p.add_argument("--strict", action="store_true", help="exit 1 when a claim fails")
    p.add_argument("--dry-run", action="store_true",
                   help="print the number of points and an estimated wall time (from timing a few "
                        "of them in a temporary directory); write nothing")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="robustlab", description="A laboratory for the science of adversarial robustness.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    p_list = sub.add_parser("list", help="studies and their parameters")
    p_list.add_argument("study", nargs="?", help="show one study only")
    p_run = sub.add_parser("run", help="run one study")
    p_run.add_argument("study")
    p_run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config field")
    p_run.add_argument("--grid", dest="grids", action="append", default=[], metavar="KEY=V1,V2|LO:HI:N[log]",
                       help="sweep a config field")
    p_run.add_argument("--seed", type=int, default=None, help="base seed (seeds are seed, seed+1, ...)")
    p_run.add_argument("--seeds", type=int, default=None, help="number of seeds (default: the preset's)")
    p_run.add_argument("--data-dir", default=None,
                       help="folder with torchvision dataset files (sets the study's data_dir)")
    p_run.add_argument("--resume", action="store_true", help="continue the run in --out (also implied by re-running into it)")
    _add_sweep_options(p_run)
    p_rep = sub.add_parser("reproduce", help="run every study and write one report")
    p_rep.add_argument("--seed", type=int, default=None, help="base seed of every study")
    p_rep.add_argument("--only", default=None, metavar="NAME[,NAME]",
                       help="run only these studies, in this order (default: all of "
                            "feature-learning, lazy-attack, lazy-adversarial, width-depth-init)")
    _add_sweep_options(p_rep)
    p_report = sub.add_parser("report", help="rebuild figures, claims and report from saved results")
    p_report.add_argument("dir", type=Path, help="a run directory or a reproduce directory")
    p_report.add_argument("--strict", action="store_true", help="exit 1 when a claim fails")
    return parser


def _default_out(name: str) -> Path:
    return Path("runs") / f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def default_workers(threads: int) -> int:
    """Worker processes that fill the machine: its cores divided by each point's threads."""
    return max(1, (os.cpu_count() or 1) // max(1, threads))


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
    from .sweep.runner import SweepOptions
    from .utils import resolve_device

    _resolve_workers(args)
    resolve_device(args.device)  # validate now, before anything is written
    if args.ray_address and args.backend != "ray":
        raise UserError("--ray-address is not allowed without --backend ray")
    return SweepOptions(backend=args.backend, workers=args.workers, device=args.device,
                        ray_address=args.ray_address, quiet=args.quiet, threads=args.threads,
                        retry_failed=args.retry_failed)


def _fmt_seconds(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _dry_run(plans: list, options, what: str) -> int:
    """--dry-run: points, groups and an estimated wall time per study; nothing written."""
    from .studies.base import estimate

    print(f"{what} --dry-run ({workers_line(options)}): timing a few points of each study in a "
          "temporary directory; nothing is written", file=sys.stderr, flush=True)
    print(f"{'study':<18}{'points':>8}{'groups':>8}{'sampled':>9}{'sample time':>13}{'estimate':>11}")
    total = 0.0
    for p in plans:
        e = estimate(p, options, say=lambda m: print(m, file=sys.stderr, flush=True))
        total += e["estimate_seconds"]
        note = f"  ({e['sample_failed']} sampled points failed)" if e["sample_failed"] else ""
        print(f"{e['study']:<18}{e['points']:>8}{e['groups']:>8}{e['sampled_groups']:>9}"
              f"{_fmt_seconds(e['sample_seconds']):>13}{_fmt_seconds(e['estimate_seconds']):>11}{note}",
              flush=True)
    print(f"estimated wall time: {_fmt_seconds(total)} (sampled groups' mean time x groups / parallel "
          "workers; points whose cost varies along the grid make it rough)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from .studies import REGISTRY, get_study

    names = [args.study] if args.study else list(REGISTRY)
    for name in names:
        st = get_study(name)
        print(f"{st.name}: {st.title}  ({st.source})")
        print("  presets: " + ", ".join(f"{k} ({v.description or 'no description'})" for k, v in st.presets.items()))
        for fname, tname, default, help_ in st.config.describe():
            print(f"  {fname:<22} {tname:<34} default={default!r:<14} {help_}")
        print()
    return 0


def _early_workers(args: argparse.Namespace) -> None:
    """With --workers N, start the workers' fork server before the heavy imports below, so
    that its imports (torch, the studies) run alongside ours."""
    _resolve_workers(args)
    if args.backend == "local" and args.workers > 1:
        from .sweep.backends import start_fork_server

        # sklearn.datasets (the embedded digits) alone takes a second or more to import
        start_fork_server(["robustlab.studies", "robustlab.report.plots", "sklearn.datasets"])


def cmd_run(args: argparse.Namespace) -> int:
    _early_workers(args)
    from .report.html import claim_table_text
    from .studies import get_study
    from .studies.base import execute, plan

    study = get_study(args.study)
    sets = _kv(args.sets, "--set")
    if args.data_dir is not None:
        if "data_dir" not in study.config.field_names():
            raise UserError(f"--data-dir is not allowed for study {study.name!r}: it reads no dataset files")
        if not Path(args.data_dir).is_dir():
            raise UserError(f"--data-dir {args.data_dir!r} is not allowed: no such directory")
        sets["data_dir"] = args.data_dir
    p = plan(study, preset=args.preset, sets=sets, grids=args.grids,
             seed=args.seed, n_seeds=args.seeds)
    options = _sweep_options(args)
    if args.dry_run:
        return _dry_run([p], options, f"robustlab run {study.name}")
    out = args.out or _default_out(study.name)
    if args.resume and not (out / "manifest.json").exists():
        raise UserError(f"--resume needs an existing run in --out; {str(out)!r} holds none")
    def started() -> None:
        if not args.quiet:
            print(f"robustlab run {study.name}: {len(p.points)} points, {workers_line(options)}",
                  file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    summary = execute(p, out, options, started=started)
    print(claim_table_text([summary["section"]]))
    n_fail = len(summary["failures"])
    print(f"{len(p.points)} points ({n_fail} failed) in {time.perf_counter() - t0:.1f}s -> {out}/report.html")
    if args.strict and not all(c["passed"] for c in summary["claims"]):
        return 1
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    _early_workers(args)
    from .studies.reproduce import reproduce
    from .sweep.backends import prepare

    only = None
    if args.only is not None:
        only = [n.strip() for n in args.only.split(",") if n.strip()]
        if not only:
            raise UserError(f"--only {args.only!r} is not allowed: name at least one study")
    options = _sweep_options(args)
    if args.dry_run:
        from .studies.base import plan
        from .studies.reproduce import resolve_studies

        plans = [plan(s, preset=args.preset, seed=args.seed) for s in resolve_studies(only)]
        return _dry_run(plans, options, f"robustlab reproduce --preset {args.preset}")
    prepare(options)  # an unreachable --ray-address fails before the directory is made
    out = args.out or _default_out("reproduce")
    return reproduce(out, preset=args.preset, options=options, seed=args.seed, strict=args.strict,
                     studies=only)


def cmd_report(args: argparse.Namespace) -> int:
    from .studies.reproduce import rebuild

    if not args.dir.is_dir():
        raise UserError(f"dir={str(args.dir)!r} is not allowed: no such directory")
    return rebuild(args.dir, strict=args.strict)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        handler = {"list": cmd_list, "run": cmd_run, "reproduce": cmd_reproduce, "report": cmd_report}
        return handler[args.command](args)
    except UserError as exc:
        print(f"robustlab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("robustlab: interrupted (finished points are kept; re-run with the same --out to resume)",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

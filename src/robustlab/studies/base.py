"""What a study is, and how one is run into a run directory.

A study is a config class (one *point* of its grid: scalars only), named presets (base
values, a default grid and a number of seeds), and three functions:

* ``run_points(cfgs, device) -> list[list[dict] | Exception]`` — runs a group of points.
  For an ensemble study the group holds configs that differ only in ``seed`` (trained in
  one batched pass); otherwise it holds a single config. It returns, per config, its
  result rows (JSON-able dicts) or the exception that made that point fail.
* ``claims(df, ctx) -> list[Claim]`` — checks the paper's claims on the results table.
* ``figures(df, ctx) -> list[Figure]`` — draws figures into ``ctx.figdir``.

:func:`execute` validates everything, then creates the run directory, runs the sweep into
its store, and calls :func:`finalize`, which (re)builds results.jsonl, claims.json, the
figures and report.html from the store alone — ``robustlab report DIR`` calls only that.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .. import records
from ..config import Config, ConfigError, UserError, apply_overrides, config_hash
from ..report import html as report_html
from ..sweep import backends as sweep_backends
from ..sweep import grid as gridmod
from ..sweep.runner import SweepOptions, group_points, run_sweep
from ..sweep.store import Store

__all__ = ["Study", "Preset", "Claim", "Figure", "Context", "Plan", "plan", "execute",
           "finalize", "load"]


@dataclasses.dataclass(frozen=True)
class Preset:
    """Named settings: base field values, the default grid and the number of seeds."""

    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    grid: Sequence[Mapping[str, Sequence[Any]]] = ({},)
    n_seeds: int = 1
    description: str = ""


@dataclasses.dataclass(frozen=True)
class Claim:
    """A checked claim: ``passed`` with the numbers it rests on."""

    id: str
    statement: str
    passed: bool
    evidence: dict[str, Any]
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "statement": self.statement, "passed": bool(self.passed),
                "evidence": self.evidence, "source": self.source}


@dataclasses.dataclass(frozen=True)
class Figure:
    file: str  # relative to the run directory, e.g. "figures/grad_norm.png"
    title: str
    caption: str  # what the reader should see


@dataclasses.dataclass(frozen=True)
class Context:
    """What claims and figures see besides the results table."""

    out: Path
    figdir: Path
    manifest: dict[str, Any]
    failures: list[dict[str, Any]]

    @property
    def base_config(self) -> dict[str, Any]:
        return self.manifest["base_config"]


@dataclasses.dataclass(frozen=True)
class Study:
    name: str
    title: str
    source: str
    summary: str
    config: type[Config]
    presets: Mapping[str, Preset]
    run_points: Callable[[list[Config], str], list[Any]]
    claims: Callable[[pd.DataFrame, Context], list[Claim]]
    figures: Callable[[pd.DataFrame, Context], list[Figure]]
    ensemble: bool = False
    max_ensemble: int = 64

    def describe(self) -> str:
        return self.summary


# ----------------------------------------------------------------------------------------
# planning: base config + grid -> list of point configs (validated before anything is written)

@dataclasses.dataclass(frozen=True)
class Plan:
    study: Study
    preset: str
    base: Config
    grid: list[dict[str, list[Any]]]
    points: list[Config]
    seeds: list[int]


def plan(
    study: Study,
    *,
    preset: str = "quick",
    sets: Mapping[str, str] | None = None,
    grids: Sequence[str] = (),
    seed: int | None = None,
    n_seeds: int | None = None,
) -> Plan:
    """Resolve preset, ``--set`` and ``--grid`` into the validated list of point configs."""
    if preset not in study.presets:
        raise UserError(f"preset={preset!r} is not allowed: one of {', '.join(study.presets)}")
    pre = study.presets[preset]
    sets = dict(sets or {})
    base = study.config().replace(**dict(pre.overrides))
    base = apply_overrides(base, sets)
    base_seed = base.seed if seed is None else seed
    if base_seed < 0:
        raise ConfigError("seed", base_seed, "a value >= 0")
    base = base.replace(seed=base_seed)
    if n_seeds is not None and n_seeds < 1:
        raise ConfigError("seeds", n_seeds, "a value >= 1")
    count = pre.n_seeds if n_seeds is None else n_seeds
    seeds = [base_seed + i for i in range(count)]

    user_axes = gridmod.parse_grid_args(grids, study.config)
    union = gridmod.merge(pre.grid, user_axes, fixed=set(sets))
    if "seed" not in user_axes and "seed" not in sets:
        union = [{**g, "seed": seeds} for g in union]
    points: list[Config] = []
    seen: set[str] = set()
    for overrides in gridmod.expand(union):
        cfg = base.replace(**overrides)
        key = config_hash(cfg.to_dict())
        if key not in seen:
            seen.add(key)
            points.append(cfg)
    if not points:
        raise UserError("grid is empty: no point to run")
    return Plan(study, preset, base, [{k: list(v) for k, v in g.items()} for g in union],
                points, sorted({p.seed for p in points}))


# ----------------------------------------------------------------------------------------
# execution

def execute(plan_: Plan, out: Path, options: SweepOptions, *, progress_label: str | None = None,
            started: Callable[[], None] | None = None) -> dict:
    """Run a planned study into ``out`` (created only now), then finalize. Returns summary.

    ``started`` is called once the run is checked and its manifest written, before any point
    runs (the CLI says there how many workers it uses: an input error stays one line)."""
    study = plan_.study
    out = Path(out)
    manifest_path = out / "manifest.json"
    fresh = not out.exists()
    if manifest_path.exists():
        old = records.read_json(manifest_path)
        if old.get("study") != study.name or old.get("point_keys") != [
            config_hash(p.to_dict()) for p in plan_.points
        ]:
            raise UserError(f"--out {str(out)!r} holds a different run (study "
                            f"{old.get('study')!r} or another grid): choose a new --out")
        if old.get("threads", 1) != options.threads:
            # float bits depend on the thread count: a run keeps the one it started with
            raise UserError(f"threads={options.threads} is not allowed: the run in --out {str(out)!r} "
                            f"started with threads={old.get('threads', 1)}; resume with that")
    elif out.exists() and any(out.iterdir()):
        raise UserError(f"--out {str(out)!r} exists and is not a robustlab run directory: choose a new --out")
    sweep_backends.prepare(options)  # e.g. an unreachable Ray address fails here, nothing written
    out.mkdir(parents=True, exist_ok=True)
    try:
        manifest = {
            "study": study.name,
            "title": study.title,
            "source": study.source,
            "preset": plan_.preset,
            "base_config": plan_.base.to_dict(),
            "grid": plan_.grid,
            "seeds": plan_.seeds,
            "n_points": len(plan_.points),
            "point_keys": [config_hash(p.to_dict()) for p in plan_.points],
            "device": options.device,
            "backend": options.backend,
            "workers": options.workers,
            "threads": options.threads,
            "versions": records.package_versions(),
            "code": records.code_version(),
            "host": records.host_info(),
            "started": records.now_iso(),
            "finished": None,
        }
        if manifest_path.exists():
            old = records.read_json(manifest_path)
            manifest["started"] = old.get("started", manifest["started"])
            manifest["resumed"] = old.get("resumed", 0) + 1
        records.write_json(manifest_path, manifest)
    except BaseException:
        if fresh:
            shutil.rmtree(out, ignore_errors=True)
        raise
    if started is not None:
        started()
    with Store(out / "store.sqlite") as store:
        stats = run_sweep(plan_.points, study.run_points, store, options,
                          ensemble=study.ensemble, max_group=study.max_ensemble,
                          label=progress_label or study.name)
    manifest["finished"] = records.now_iso()
    manifest["sweep"] = stats
    records.write_json(manifest_path, manifest)
    return finalize(out, study)


def estimate(plan_: Plan, options: SweepOptions, *, samples: int = 3,
             say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Estimate a planned run's wall time without writing anything where the run would go.

    Runs ``samples`` groups of points (seeds trained together count as one group, exactly as
    the run forms them), spread evenly over the grid, through the same sweep code into a
    store in a temporary directory that is deleted afterwards; the mean time of a group,
    times the number of groups, over the workers that can run them at once, is the estimate.
    It is rough where the cost of a point varies along the grid (sizes, widths, epochs that
    stop early): evenly spread samples see some of that spread, not all of it.
    """
    study = plan_.study
    groups = group_points(plan_.points, study.ensemble, study.max_ensemble)
    k = max(1, min(samples, len(groups)))
    picked = [groups[round(i * (len(groups) - 1) / max(1, k - 1))] for i in range(k)] if k > 1 else groups[:1]
    sample = [p for g in picked for p in g]
    one = dataclasses.replace(options, workers=1, quiet=True, retry_failed=False)
    seconds = 0.0
    with tempfile.TemporaryDirectory(prefix="robustlab-dry-run-") as tmp, \
            Store(Path(tmp) / "store.sqlite") as store:
        for i, g in enumerate(picked, 1):  # one group at a time, each timed and said
            t0 = time.perf_counter()
            run_sweep(g, study.run_points, store, one, ensemble=study.ensemble,
                      max_group=study.max_ensemble, label=f"{study.name} (dry run)")
            seconds += time.perf_counter() - t0
            if say is not None:
                say(f"{study.name}: sampled group {i}/{len(picked)} ({len(g)} points) in "
                    f"{time.perf_counter() - t0:.1f} s")
        failed = len(store.failures())
    parallel = min(len(groups), options.workers if options.backend == "local" else
                   max(1, (os.cpu_count() or 1) // options.threads))
    per_group = seconds / len(picked)
    return {"study": study.name, "points": len(plan_.points), "groups": len(groups),
            "sampled_groups": len(picked), "sampled_points": len(sample), "sample_seconds": seconds,
            "sample_failed": failed, "parallel": parallel,
            "estimate_seconds": per_group * len(groups) / parallel}


def load(out: str | Path) -> pd.DataFrame:
    """The results of a run directory as one DataFrame (one row per result row)."""
    out = Path(out)
    with Store(out / "store.sqlite", readonly=True) as store:
        return _frame(store)


def _frame(store: Store) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for rec in store.done():
        params = rec["params"]
        for r in rec["rows"]:
            rows.append({**params, **r, "point": rec["key"]})
    return pd.DataFrame(rows)


def finalize(out: Path, study: Study) -> dict:
    """Rebuild results.jsonl, claims.json, figures and report.html from the store."""
    out = Path(out)
    manifest = records.read_json(out / "manifest.json")
    with Store(out / "store.sqlite", readonly=True) as store:
        order = {k: i for i, k in enumerate(manifest["point_keys"])}
        done = sorted(store.done(), key=lambda r: order.get(r["key"], len(order)))
        failures = store.failures()
        df = _frame(store)
    flat = []
    for rec in done:
        for r in rec["rows"]:
            flat.append({**rec["params"], **r, "point": rec["key"]})
    records.write_jsonl(out / "results.jsonl", flat)
    figdir = out / "figures"
    figdir.mkdir(exist_ok=True)
    ctx = Context(out=out, figdir=figdir, manifest=manifest, failures=failures)
    claims: list[Claim] = []
    figures: list[Figure] = []
    problems: list[str] = []
    if len(df):
        try:
            claims = study.claims(df, ctx)
        except Exception as exc:  # a claim that cannot be computed is reported, not hidden
            problems.append(f"claims could not be computed: {exc!r}")
            claims = [Claim("claims-error", "the claim checks ran", False,
                            {"error": repr(exc), "traceback": traceback.format_exc()}, study.source)]
        try:
            figures = study.figures(df, ctx)
        except Exception as exc:
            problems.append(f"figures could not be drawn: {exc!r}\n{traceback.format_exc()}")
    else:
        claims = [Claim("no-results", "the study produced results", False,
                        {"failed_points": len(failures)}, study.source)]
    claim_dicts = [c.to_dict() for c in claims]
    records.write_json(out / "claims.json", claim_dicts)
    section = report_html.StudySection(
        name=study.name, title=study.title, source=study.source, summary=study.summary,
        manifest=manifest, claims=claim_dicts, figures=[dataclasses.asdict(f) for f in figures],
        failures=failures, problems=problems, n_rows=len(df),
    )
    report_html.write_report(out / "report.html", [section], root=out,
                             title=f"robustlab — {study.title}")
    return {"out": str(out), "claims": claim_dicts, "failures": failures, "problems": problems,
            "section": section}


def product_grid(**axes: Sequence[Any]) -> list[dict[str, Any]]:
    """All combinations of the given axes (a helper for studies)."""
    keys = list(axes)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(axes[k] for k in keys))]


def json_safe(obj: Any) -> Any:
    return json.loads(records.dumps(obj))

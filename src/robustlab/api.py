"""Starting runs: the one code path behind ``robustlab run``, ``robustlab rerun`` and
:func:`robustlab.run` (the Python entry point for notebooks and scripts).

``start_run`` resolves the study (built-in, file or plugin), plans it (validating every
value before anything is written), executes it into its run directory and returns a
:class:`Run`, a handle on that directory. ``read_run_file`` turns an experiment file
(``robustlab run --config exp.toml``) into the same arguments, and ``rerun`` re-executes a
run directory exactly from its ``manifest.json``.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from . import records
from .config import ConfigError, UserError

__all__ = ["Run", "runs", "RUN_COLUMNS", "compare", "Comparison", "claims_frame", "prepare_run", "execute_run", "start_run", "run", "rerun", "read_run_file", "RUN_FILE_KEYS", "default_out", "value_text",
           "grid_args", "results_differ", "study_file_change"]


def default_out(name: str) -> Path:
    """``runs/NAME-DATE-TIME`` (the directory a run goes to without ``out``)."""
    return Path("runs") / f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


CLAIM_COLUMNS = ["id", "kind", "verdict", "effect", "interval_lo", "interval_hi", "threshold", "side", "n",
                 "seeds", "seeds_needed", "method", "control_verdict", "excluded", "reason", "statement"]


def claims_frame(claims: list[dict[str, Any]]):
    """Claim dicts (claims.json) as a DataFrame, one row per claim (:data:`CLAIM_COLUMNS`).

    ``interval`` is split into ``interval_lo``/``interval_hi``; ``control_verdict`` is the
    verdict of the claim's control (None without one); ``excluded`` counts the excluded points."""
    import pandas as pd

    from .report.html import kind_of, verdict_of

    rows = []
    for c in claims:
        iv = c.get("interval") if isinstance(c.get("interval"), list | tuple) and len(c["interval"]) == 2 else (None, None)
        control = c.get("control") if isinstance(c.get("control"), dict) else None
        excluded = c.get("excluded") or []
        rows.append({"id": c.get("id"), "kind": kind_of(c), "verdict": verdict_of(c), "effect": c.get("effect"),
                     "interval_lo": iv[0], "interval_hi": iv[1], "threshold": c.get("threshold"),
                     "side": c.get("side"), "n": c.get("n"), "seeds": c.get("seeds"),
                     "seeds_needed": c.get("seeds_needed"), "method": c.get("method"),
                     "control_verdict": verdict_of(control) if control else None,
                     "excluded": sum(int(e.get("excluded", 0)) for e in excluded if isinstance(e, dict)),
                     "reason": c.get("reason"), "statement": c.get("statement")})
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


@dataclasses.dataclass
class Run:
    """A finished run directory: ``out``, its results, claims, figures and report.

    ``results`` is read from the store on first use (a pandas DataFrame, one row per result
    row, as :func:`robustlab.load` returns); ``claims`` is a DataFrame, one row per claim
    (:func:`claims_frame`), and ``claim_dicts`` the dicts of claims.json as written.
    """

    out: Path
    summary: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    @cached_property
    def results(self):
        from .studies.base import load

        return load(self.out)

    @property
    def claim_dicts(self) -> list[dict[str, Any]]:
        if "claims" in self.summary:
            return self.summary["claims"]
        return records.read_json(self.out / "claims.json")

    @property
    def claims(self):
        return claims_frame(self.claim_dicts)

    @property
    def figures(self) -> list[Path]:
        return sorted((self.out / "figures").glob("*.png"))

    @property
    def report_path(self) -> Path:
        return self.out / "report.html"

    @property
    def manifest(self) -> dict[str, Any]:
        return records.read_json(self.out / "manifest.json")

    @property
    def failures(self) -> list[dict[str, Any]]:
        return list(self.summary.get("failures", []))

    def _repr_html_(self) -> str:  # a notebook shows the claim table, every text escaped
        from html import escape

        from .report.html import verdict_of

        rows = "".join(f"<tr><td>{escape(str(c.get('id')))}</td><td>{escape(verdict_of(c))}</td>"
                       f"<td>{escape(str(c.get('statement', '')))}</td></tr>" for c in self.claim_dicts)
        return f"<p>run {escape(str(self.out))}</p><table>{rows}</table>"


def value_text(key: str, value: Any) -> str:
    """A ``set``/``grid`` value given as a Python or TOML value, as command-line text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return ",".join(";".join(value_text(key, v) for v in item) if isinstance(item, list | tuple)
                        else value_text(key, item) for item in value)
    raise ConfigError(key, value, "expected a number, a string, true/false or a list of them")


def grid_args(grid: Mapping[str, Any] | Sequence[str] | None) -> list[str]:
    if grid is None:
        return []
    if isinstance(grid, Mapping):
        out = []
        for k, v in grid.items():
            if not isinstance(v, list | tuple | str):
                raise ConfigError(f"grid.{k}", v, "expected a list of values or a string like 'lo:hi:n'")
            out.append(f"{k}={value_text(f'grid.{k}', v)}")
        return out
    if isinstance(grid, str):
        raise ConfigError("grid", grid, "expected a mapping key -> values, or a list of 'key=...' strings")
    return list(grid)


def prepare_run(study: str, *, preset: str = "quick", sets: Mapping[str, Any] | None = None,
                grids: Mapping[str, Any] | Sequence[str] | None = None, seed: int | None = None,
                seeds: int | None = None, out: str | Path | None = None, data_dir: str | None = None,
                resume: bool = False, max_points: int | None = None):
    """Resolve and plan one study (everything validated, nothing written): ``(plan, out)``.
    ``max_points``: the cap on the grid's size (default :data:`robustlab.studies.base.MAX_POINTS`)."""
    from .studies import get_study
    from .studies.base import MAX_POINTS, plan

    st = get_study(study)
    sets = {k: value_text(k, v) for k, v in (sets or {}).items()}
    if data_dir is not None:
        if "data_dir" not in st.config.field_names():
            raise UserError(f"--data-dir is not allowed for study {st.name!r}: it reads no dataset files")
        if not Path(data_dir).is_dir():
            raise UserError(f"--data-dir {data_dir!r} is not allowed: no such directory")
        sets["data_dir"] = str(data_dir)
    p = plan(st, preset=preset, sets=sets, grids=grid_args(grids), seed=seed, n_seeds=seeds,
             max_points=MAX_POINTS if max_points is None else max_points)
    p.request["study"] = study  # as given: a name, or the path of a file
    out = Path(out) if out is not None else default_out(st.name)
    if resume and not (out / "manifest.json").exists():
        raise UserError(f"--resume needs an existing run in --out; {str(out)!r} holds none")
    return p, out


def execute_run(p, out: Path, options, **execute_kw: Any) -> Run:
    """Execute a planned study into ``out``; ``execute_kw`` go to
    :func:`robustlab.studies.base.execute` unchanged."""
    from .studies.base import execute

    return Run(Path(out), execute(p, Path(out), options, **execute_kw))


def start_run(study: str, *, options, preset: str = "quick", sets: Mapping[str, Any] | None = None,
              grids: Mapping[str, Any] | Sequence[str] | None = None, seed: int | None = None,
              seeds: int | None = None, out: str | Path | None = None, data_dir: str | None = None,
              resume: bool = False, **execute_kw: Any) -> Run:
    """Plan and execute one study into ``out``; everything is validated before it is created."""
    p, out = prepare_run(study, preset=preset, sets=sets, grids=grids, seed=seed, seeds=seeds, out=out,
                         data_dir=data_dir, resume=resume)
    return execute_run(p, out, options, **execute_kw)


def run(study: str, *, preset: str = "quick", set: Mapping[str, Any] | None = None,
        grid: Mapping[str, Any] | Sequence[str] | None = None, seed: int | None = None,
        seeds: int | None = None, out: str | Path | None = None, backend: str = "local",
        workers: int | None = None, threads: int = 1, device: str = "cpu", ray_address: str | None = None,
        quiet: bool = False, retry_failed: bool = False, data_dir: str | None = None,
        reuse: Sequence[str | Path] = ()) -> Run:
    """Run one study, exactly as ``robustlab run`` does, and return the :class:`Run`.

    ``study``: a built-in or plugin name, or the path of a file defining ``STUDY``.
    ``set``: field -> value (``{"lr": 0.05}``); ``grid``: field -> list of values, or a
    range string (``{"size": [6, 10, 14]}``, ``{"lr": "0.01:1:5log"}``). ``reuse``: run
    directories of the same study whose finished points with exactly these configs are taken,
    not recomputed (``--reuse``). Bad input raises
    :class:`robustlab.UserError` (a :class:`ConfigError` for a bad field) before anything
    is written. Progress shows in a terminal and in a notebook unless ``quiet``. ``workers``:
    local worker processes, by default the CPU cores // ``threads``, as ``robustlab run``.
    """
    from . import _args
    from .sweep.runner import SweepOptions, check_threads, default_workers
    from .utils import resolve_device

    _args.check({"study": (study, _args.PATH, False, "a study name, or the path of a .py file that defines STUDY"), "preset": (preset, str, False), "set": (set, Mapping, True),
                 "grid": (grid, (Mapping, "strings"), True), "seed": (seed, int, True), "seeds": (seeds, int, True),
                 "out": (out, _args.PATH, True), "backend": (backend, str, False), "workers": (workers, int, True),
                 "threads": (threads, int, False), "device": (device, str, False), "ray_address": (ray_address, str, True),
                 "quiet": (quiet, bool, False), "retry_failed": (retry_failed, bool, False),
                 "data_dir": (data_dir, _args.PATH, True), "reuse": (reuse, "paths", False)})
    _args.at_least("seed", seed, 0)
    _args.at_least("seeds", seeds, 1)
    _args.at_least("workers", workers, 1)
    _args.at_least("threads", threads, 1)
    check_threads(threads)
    resolve_device(device)
    if ray_address and backend != "ray":
        raise UserError("ray_address is not allowed without backend='ray'")
    if workers is None:
        workers = default_workers(threads)
    options = SweepOptions(backend=backend, workers=workers, device=device, ray_address=ray_address,
                           quiet=quiet, threads=threads, retry_failed=retry_failed)
    return start_run(study, options=options, preset=preset, sets=set, grids=grid, seed=seed,
                     seeds=seeds, out=out, data_dir=data_dir, reuse=tuple(reuse))


# ----------------------------------------------------------------------------------------
# experiment files: robustlab run --config exp.toml

# key -> (the type it must have, what the error says is allowed)
RUN_FILE_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "study": ((str,), "a study name or the path of a study file"),
    "preset": ((str,), "a preset name, e.g. 'quick'"),
    "set": ((dict,), "a table of field = value"),
    "grid": ((dict,), "a table of field = [values] or field = 'lo:hi:n'"),
    "seed": ((int,), "an integer >= 0"),
    "seeds": ((int,), "an integer >= 1"),
    "backend": ((str,), "'local' or 'ray'"),
    "workers": ((int,), "an integer >= 1"),
    "threads": ((int,), "an integer >= 1"),
    "out": ((str,), "a directory path"),
    "device": ((str,), "'cpu', 'cuda' or 'auto'"),
}


def read_run_file(path: str | Path) -> dict[str, Any]:
    """An experiment file as ``{key: value}``, every key and type checked (one-line errors).

    Relative ``out`` and study-file paths are taken relative to the file's folder.
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise UserError("--config is not allowed on Python 3.10 without the tomli package") from None
    path = Path(path)
    if not path.is_file():
        raise UserError(f"config={str(path)!r} is not allowed: no such file")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"config={str(path)!r} is not allowed: not valid TOML ({exc})") from None
    for key, value in data.items():
        if key not in RUN_FILE_KEYS:
            raise ConfigError(key, value, f"unknown key in {path.name}; known keys: {', '.join(RUN_FILE_KEYS)}")
        types, allowed = RUN_FILE_KEYS[key]
        if not isinstance(value, types) or isinstance(value, bool):
            raise ConfigError(key, value, f"expected {allowed} (in {path.name})")
    for key, value in data.get("set", {}).items():
        value_text(f"set.{key}", value)  # scalars or lists of them; the study checks the field
    grid_args(data.get("grid"))
    for key in ("seed", "workers", "threads", "seeds"):
        lo = 0 if key == "seed" else 1
        if key in data and data[key] < lo:
            raise ConfigError(key, data[key], f"expected {RUN_FILE_KEYS[key][1]} (in {path.name})")
    root = path.resolve().parent
    if "out" in data:
        data["out"] = str(root / data["out"])
    if "study" in data and data["study"].endswith(".py"):
        data["study"] = str(root / data["study"])
    return data


# ----------------------------------------------------------------------------------------
# rerun: a run directory re-executed from its record

def rerun(src: str | Path, *, out: str | Path | None = None, options=None, quiet: bool = False,
          workers: int | None = None, backend: str = "local") -> Run:
    """Re-execute the run in ``src`` from its manifest: the same study, base config, grid,
    seeds, thread count and device, into ``out`` (a new directory). On a CPU of the kind the
    record names (``host.cpu``, ``host.cpu_capability``) its results.jsonl is byte-identical to
    the original's; another kind of CPU may sum in another order. ``workers``: by default the
    CPU cores // the run's threads, as ``robustlab rerun``."""
    from . import _args
    from .studies import external, get_study
    from .studies.base import execute, plan_from_manifest
    from .sweep.runner import SweepOptions, default_workers

    _args.check({"src": (src, _args.PATH, False), "out": (out, _args.PATH, True), "quiet": (quiet, bool, False),
                 "workers": (workers, int, True), "backend": (backend, str, False)})
    _args.at_least("workers", workers, 1)
    if options is not None and not dataclasses.is_dataclass(options):
        raise UserError(f"options={options!r} is not allowed: a robustlab.sweep.runner.SweepOptions or None")
    src = Path(src)
    if not (src / "manifest.json").is_file():
        raise UserError(f"dir={str(src)!r} is not allowed: not a robustlab run directory (no manifest.json)")
    manifest = records.read_manifest(src / "manifest.json")
    study = external.from_manifest(manifest, get_study)
    p = plan_from_manifest(study, manifest)
    if options is None:
        threads = int(manifest.get("threads", 1))
        options = SweepOptions(backend=backend, workers=workers or default_workers(threads), quiet=quiet)
    # what decides the bits comes from the record; how it runs (workers, backend) may differ
    options = dataclasses.replace(options, threads=int(manifest.get("threads", 1)),
                                  device=manifest.get("device", "cpu"))
    from .sweep.runner import check_threads

    check_threads(options.threads)  # a manifest pinning more threads than this machine has
    out = Path(out) if out is not None else default_out(f"{study.name}-rerun")
    if out.resolve() == src.resolve():
        raise UserError(f"--out {str(out)!r} is not allowed: it is the run being re-run; choose a new one")
    if out.exists() and any(out.iterdir()):
        prior = records.read_json(out / "manifest.json") if (out / "manifest.json").is_file() else {}
        if prior.get("rerun_of") != str(src.resolve()):  # an interrupted rerun of src resumes
            raise UserError(f"--out {str(out)!r} is not allowed: it exists; choose a new directory")
    changed = study_file_change(manifest)
    if changed:
        logging.getLogger(__name__).warning(f"robustlab: warning: {changed}; the rerun runs it as it is now")
    summary = execute(p, out, options, record={"rerun_of": str(src.resolve())})
    return Run(out, summary)


def study_file_change(manifest: Mapping[str, Any]) -> str | None:
    """For a run of a study file: a sentence naming the file when its bytes are no longer those
    the run's sittings recorded (their sha256), else None (a built-in or plugin study, an
    unchanged file, or an old record without hashes)."""
    origin = manifest.get("study_origin") or {}
    if not isinstance(origin, dict) or origin.get("kind") != "file" or not origin.get("path"):
        return None
    recorded = [((s.get("code") or {}).get("study") or {}).get("sha256")
                for s in manifest.get("sittings") or [] if isinstance(s, dict)]
    recorded = [h for h in recorded if h and h != "unknown"]
    if not recorded:
        return None
    now = records.file_hash(origin["path"])
    if now in recorded:
        return None
    state = f"sha256 {recorded[-1][:12]} then, {now[:12]} now" if now else "it is gone or unreadable now"
    return f"the study file {origin['path']} changed since the run ({state})"


def results_differ(a: str | Path, b: str | Path, *, limit: int = 8) -> list[str]:
    """How two results.jsonl files differ, as short texts (empty when byte-identical).

    Rows are matched by position (both are in the plan's order): a differing row count is one
    text; otherwise each field whose value differs in some row, with how many rows and the
    first such row (``loss: 12 of 48 rows, first row 3: 2.3045 vs 2.3051``)."""
    from . import reader

    a, b = Path(a), Path(b)
    if reader.read_bytes(a, limit=reader.MAX_JSONL_BYTES) == reader.read_bytes(b, limit=reader.MAX_JSONL_BYTES):
        return []
    rows_a, rows_b = reader.read_jsonl(a), reader.read_jsonl(b)  # a damaged line: one line naming it
    if len(rows_a) != len(rows_b):
        return [f"{len(rows_a)} rows vs {len(rows_b)} rows"]
    fields: dict[str, list[int]] = {}
    for i, (ra, rb) in enumerate(zip(rows_a, rows_b)):
        for k in dict.fromkeys([*ra, *rb]):
            if ra.get(k, _MISSING) != rb.get(k, _MISSING):
                fields.setdefault(k, []).append(i)
    out = []
    for k, rows in list(fields.items())[:limit]:
        i = rows[0]
        out.append(f"{k}: {len(rows)} of {len(rows_a)} rows, first row {i}: "
                   f"{rows_a[i].get(k, '(missing)')!r} vs {rows_b[i].get(k, '(missing)')!r}")
    if len(fields) > limit:
        out.append(f"and {len(fields) - limit} more fields")
    return out or ["the same values, written differently (key order or number format)"]


_MISSING = object()


# ----------------------------------------------------------------------------------------
# looking across runs from Python

RUN_COLUMNS = ["path", "study", "preset", "seeds", "n_points", "device", "code", "rerun_of", "reproduced",
               "contradicted", "inconclusive", "not_applicable", "exploratory", "exploratory_reproduced",
               "self_checks", "self_checks_failed", "started", "finished", "seconds", "points_done", "complete"]


def _grid_values(grid: Any) -> dict[str, list[Any]]:
    """The values each field takes over a manifest's grid (its blocks joined, seeds left out:
    they have their own column)."""
    out: dict[str, list[Any]] = {}
    for block in grid if isinstance(grid, list) else []:
        for k, vals in (block.items() if isinstance(block, dict) else ()):
            if k != "seed":
                out.setdefault(k, [])
                out[k] += [v for v in vals if v not in out[k]]
    return out


def _run_row(path: Path, m: dict[str, Any], claims: list[Any]) -> dict[str, Any]:
    from .report.compare import _code_text
    from .report.html import kind_of, verdict_of

    req = m.get("request") or {}
    base = m.get("base_config") or {}
    tally = {v: 0 for v in ("reproduced", "contradicted", "inconclusive", "not applicable")}
    by_kind: dict[str, list[str]] = {"claim": [], "self-check": [], "exploratory": []}
    for c in claims:
        if isinstance(c, dict):
            by_kind.setdefault(kind_of(c), []).append(verdict_of(c))
    for v in by_kind["claim"]:
        tally[v] += 1
    row: dict[str, Any] = {
        "path": str(path), "study": m["study"], "preset": m.get("preset"),
        "seeds": [int(x) for x in m.get("seeds") or []], "n_points": m.get("n_points"),
        "device": m.get("device"), "code": _code_text(m), "rerun_of": m.get("rerun_of"),
        **{k.replace(" ", "_"): n for k, n in tally.items()},
        "exploratory": len(by_kind["exploratory"]),
        "exploratory_reproduced": sum(v == "reproduced" for v in by_kind["exploratory"]),
        "self_checks": len(by_kind["self-check"]),
        "self_checks_failed": sum(v == "contradicted" for v in by_kind["self-check"]),
        "started": m.get("started"), "finished": m.get("finished"),
        "seconds": (m.get("sweep") or {}).get("seconds")}
    # the fields the request set or swept, each its own column: a set field holds its resolved
    # (typed) value, a swept one the list of values it took
    for k in req.get("set") or {}:
        row[f"set.{k}"] = base.get(k, (req.get("set") or {}).get(k))
    for k, vals in _grid_values(m.get("grid")).items():
        row[f"grid.{k}"] = vals
    return row


def runs(root: str | Path = "runs"):
    """Every run directory under ``root`` (searched recursively; the studies of a reproduce
    directory included) as a typed DataFrame, one row per run, sorted by start time.

    Columns (:data:`RUN_COLUMNS`): ``path, study, preset``; ``seeds`` (a list of ints);
    ``n_points, device, code``; ``rerun_of`` (the run directory a ``robustlab rerun`` re-ran,
    else None); the tally of its paper claims' verdicts (``reproduced, contradicted,
    inconclusive, not_applicable``), ``exploratory`` and ``exploratory_reproduced``,
    ``self_checks`` and ``self_checks_failed``; ``started`` and ``finished`` (UTC datetimes)
    and ``seconds`` (the sweep's wall time); ``points_done`` and ``complete`` (false for a
    partial run: killed, with failed points, or an emptied store; from its store). Then one
    column per field the run's request set (``set.epochs``: its value, typed as the study's
    config types it) or swept (``grid.lr``: the list of values). A directory that is not
    readable as a run is skipped (a claims.json whose claim has no kind, or one robustlab does
    not write, is damaged: never counted). ``UserError`` when ``root`` is not a directory."""
    import pandas as pd

    from . import _args

    _args.check({"root": (root, _args.PATH, False)})
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"root={str(root)!r} is not allowed: no such directory")
    rows = []
    for mpath in sorted(root.rglob("manifest.json")):
        try:
            m = records.read_json(mpath)
            claims = records.read_json(mpath.parent / "claims.json") if (mpath.parent / "claims.json").is_file() else []
            comp = _completeness(mpath.parent, m)
        except (OSError, ValueError, UserError):  # damaged or unreadable: not a run to list
            continue
        if not isinstance(m, dict) or "study" not in m or not isinstance(claims, list):
            continue
        row = _run_row(mpath.parent, m, claims)
        row.update(points_done=comp["done"] if comp else None, complete=comp["complete"] if comp else None)
        rows.append(row)
    extra = sorted({k for r in rows for k in r if k not in RUN_COLUMNS})
    df = pd.DataFrame(rows, columns=RUN_COLUMNS + extra)
    for col in ("started", "finished"):
        df[col] = pd.to_datetime(df[col], utc=True, errors="coerce", format="ISO8601")
    for col in ("n_points", "reproduced", "contradicted", "inconclusive", "not_applicable", "exploratory",
                "exploratory_reproduced", "self_checks", "self_checks_failed", "points_done"):
        df[col] = df[col].astype("Int64")
    df["complete"] = df["complete"].astype("boolean")
    df["seconds"] = df["seconds"].astype("float64")
    for col in extra:  # one type per column where the runs agree (an int field stays int)
        if col.startswith("set.") and df[col].notna().all():
            df[col] = df[col].convert_dtypes()
    return df.sort_values("started", kind="stable", na_position="last").reset_index(drop=True)


def _completeness(run: Path, manifest: dict[str, Any]) -> dict[str, Any] | None:
    from .studies.integrity import store_completeness

    return store_completeness(run, manifest)


@dataclasses.dataclass
class Comparison:
    """Two runs side by side (:func:`compare`): ``config``, the recorded settings that differ (a
    DataFrame ``study, field, a, b``; empty when they agree), and ``claims``, one row per claim
    (``study, claim, kind_a, kind_b, verdict_a, verdict_b, effect_a, effect_b, interval_lo_a,
    interval_hi_a, interval_lo_b, interval_hi_b, changed, apart``: the interval split as
    ``Run.claims`` splits it); ``text`` is what ``robustlab compare`` prints."""

    config: Any
    claims: Any
    text: str = dataclasses.field(repr=False, default="")

    def _repr_html_(self) -> str:
        return ("<p>configuration differences</p>" + self.config.to_html(index=False, escape=True)
                + "<p>claims</p>" + self.claims.to_html(index=False, escape=True))


def compare(a: str | Path, b: str | Path) -> Comparison:
    """Two runs (or reproduce directories) side by side, as ``robustlab compare`` shows them:
    a :class:`Comparison` holding two DataFrames, ``config`` and ``claims``."""
    from . import _args
    from .report.compare import claims_table, compare_dirs, compare_text, config_table

    _args.check({"a": (a, _args.PATH, False), "b": (b, _args.PATH, False)})
    sa, sb, rows = compare_dirs(a, b)
    return Comparison(config_table(sa, sb), claims_table(rows), compare_text(sa, sb, rows))

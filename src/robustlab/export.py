"""`robustlab export DIR [DIR ...] --format csv|parquet|mlflow --out FILE`: runs' results as one table.

``FILE`` holds every result row with its point's config (the columns :func:`robustlab.load`
gives: each config field, ``seed`` and ``point``, then the study's measured columns), plus
``study``, ``run`` (the run directory) and ``complete`` (false for a partial run: killed, with
failed points, or an emptied store), so that the rows of several runs, and of a reproduce
directory — one run per study — sit in one table (fields one study lacks are empty there) and a
partial run's rows are never taken for a whole one. Beside it, ``FILE``'s stem + ``.claims.csv`` (or
``.claims.parquet``) holds the claims, one row per claim with its verdict, effect, interval,
control verdict and excluded count (:func:`robustlab.api.claims_frame`).

Lists and dicts inside a cell (a per-epoch curve, say) are written as JSON text, which both
formats hold and ``json.loads`` reads back. Parquet needs ``pyarrow`` (``pip install
'robustlab[parquet]'``). An existing output file is refused unless ``force``; an output inside a run directory is
refused always (it could replace the run's own records); every check runs before anything is
written, and each file is written to a safe temporary and renamed into place.

``--format mlflow`` (``pip install 'robustlab[mlflow]'``) logs each run to MLflow instead, at the
tracking URI ``--out`` (a folder, or a server's address): one MLflow run per robustlab run, its
base config and request as parameters, each claim's effect and interval bounds as metrics
(``CLAIM.effect``, ``CLAIM.interval_lo``, ``CLAIM.interval_hi``) with its verdict as a tag, and
``report.html``, ``claims.json`` and ``manifest.json`` as artifacts (:func:`export_mlflow`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from . import records
from .config import UserError

__all__ = ["export", "export_mlflow", "FORMATS", "claims_path", "run_dirs"]

FORMATS = ("csv", "parquet", "mlflow")
Sources = str | Path | Sequence[str | Path]


def claims_path(out: Path, fmt: str) -> Path:
    """Where the claims go beside ``out``: ``NAME.claims.csv`` / ``NAME.claims.parquet``."""
    return out.with_name(f"{out.stem}.claims.{fmt}")


def run_dirs(src: Path) -> list[Path]:
    """The run directories of ``src``: itself, or the finished studies of a reproduce directory."""
    if not src.is_dir():
        raise UserError(f"dir={str(src)!r} is not allowed: no such directory")
    if (src / "reproduce.json").is_file():
        meta = records.read_json(src / "reproduce.json")
        found = [src / n for n in meta.get("studies", []) if (src / n / "store.sqlite").is_file()]
        if not found:
            raise UserError(f"dir={str(src)!r} is not allowed: the reproduce directory holds no study results")
        return found
    if not (src / "manifest.json").is_file() or not (src / "store.sqlite").is_file():
        raise UserError(f"dir={str(src)!r} is not allowed: not a robustlab run directory (no manifest.json "
                        "and store.sqlite)")
    return [src]


def _json_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Lists and dicts in object columns as JSON text (both formats hold strings)."""
    df = df.copy()
    for col in df.columns:
        if df[col].dtype == object and df[col].map(lambda v: isinstance(v, list | tuple | dict)).any():
            df[col] = df[col].map(lambda v: json.dumps(v) if isinstance(v, list | tuple | dict) else v)
    return df


def _runs_of(src: Sources) -> list[Path]:
    """The run directories of one source or several (each once, in the order given)."""
    srcs = [src] if isinstance(src, str | Path) else list(src)
    if not srcs:
        raise UserError("dir is not allowed empty: name at least one run or reproduce directory")
    return list(dict.fromkeys(run for s in srcs for run in run_dirs(Path(s))))


def tables(src: Sources) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(results, claims)`` of one or several run or reproduce directories, each with
    ``study`` and ``run`` columns first."""
    from .api import claims_frame
    from .studies.base import load

    results, claims = [], []
    for run in _runs_of(src):
        study = records.read_json(run / "manifest.json").get("study")
        df = load(run)
        complete = df.attrs.get("complete")  # False for a partial run (killed, failed points, emptied)
        df.insert(0, "complete", complete)
        df.insert(0, "run", str(run))
        df.insert(0, "study", study)
        results.append(df)
        # whatever stands at claims.json is read (a pipe or damage there is one line, not "no claims")
        cl = claims_frame(records.read_json(run / "claims.json")) if os.path.lexists(run / "claims.json") \
            else claims_frame([])
        cl.insert(0, "complete", complete)
        cl.insert(0, "run", str(run))
        cl.insert(0, "study", study)
        claims.append(cl)
    return pd.concat(results, ignore_index=True), pd.concat(claims, ignore_index=True)


def export(src: Sources, out: str | Path, *, fmt: str = "csv", force: bool = False) -> list[Path]:
    """Write the results of ``src`` (a run or reproduce directory, or a list of them) to ``out``
    and their claims beside it; returns both paths. ``fmt="mlflow"``: :func:`export_mlflow`
    with ``out`` as the tracking URI (returns no paths)."""
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r} is not allowed: one of {', '.join(FORMATS)}")
    if fmt == "mlflow":
        export_mlflow(src, tracking_uri=str(out))
        return []
    out = Path(out)
    check_out_outside_runs(out)
    paths = [out, claims_path(out, fmt)]
    for p in paths:
        if p.exists() and not force:
            raise UserError(f"--out {str(p)!r} is not allowed: the file exists (nothing was written; "
                            "--force replaces it)")
        if p.is_dir():
            raise UserError(f"--out {str(p)!r} is not allowed: it is a directory")
    if not out.parent.is_dir():
        raise UserError(f"--out {str(out)!r} is not allowed: no such directory {str(out.parent)!r}")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise UserError("--format parquet is not allowed here: it needs pyarrow "
                            "(pip install 'robustlab[parquet]'); --format csv needs nothing") from None
    results, claims = (_json_cells(t) for t in tables(src))
    for table, path in zip((results, claims), paths):
        # a safe temporary (unique name, no link followed) renamed into place
        records.atomic_write_with(path, lambda fh, t=table: _write_table(t, fh, fmt))
    return paths


def _write_table(table: pd.DataFrame, fh, fmt: str) -> None:  # noqa: ANN001 - a binary file
    if fmt == "csv":
        fh.write(table.to_csv(index=False).encode("utf-8"))
    else:
        table.to_parquet(fh, index=False)


RUN_RECORDS = ("manifest.json", "reproduce.json", "store.sqlite")


def check_out_outside_runs(out: Path) -> None:
    """``out`` is not inside a run or reproduce directory (one holding manifest.json,
    reproduce.json or store.sqlite): an export there could replace the run's own records (its
    store, its results) and is refused, ``force`` or not."""
    here = Path(out).resolve().parent
    for d in (here, *here.parents):
        if any(os.path.lexists(d / n) for n in RUN_RECORDS):
            raise UserError(f"--out {str(out)!r} is not allowed: it is inside the run directory {str(d)!r} "
                            "(a run's files are robustlab's records, never an export's); write it elsewhere")


def _key(text: str) -> str:
    """An MLflow parameter or metric name (letters, digits, ``_ - . /`` and spaces)."""
    return re.sub(r"[^\w\-./ ]", "_", str(text))[:250]


def _param(value: Any) -> str:
    return (value if isinstance(value, str) else json.dumps(value))[:500]


def export_mlflow(src: Sources, *, tracking_uri: str | None = None, experiment: str = "robustlab") -> list[str]:
    """Log each run of ``src`` to MLflow as one MLflow run; returns their MLflow run ids.

    Parameters: the study, preset, seeds and every base-config field (``config.NAME``);
    metrics: each claim's ``effect``, ``interval_lo`` and ``interval_hi`` (``CLAIM.effect``, …),
    where finite; tags: each claim's verdict and kind, the run's path, code and ``rerun_of``;
    artifacts: ``report.html``, ``claims.json``, ``manifest.json``. Needs ``mlflow``
    (``pip install 'robustlab[mlflow]'``)."""
    import math

    try:
        import mlflow
    except ImportError:
        raise UserError("--format mlflow is not allowed here: it needs mlflow "
                        "(pip install 'robustlab[mlflow]')") from None
    from .api import claims_frame
    from .report.compare import _code_text

    runs = _runs_of(src)
    if tracking_uri is not None:
        mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment)
    ids = []
    for run in runs:
        m = records.read_json(run / "manifest.json")
        claims = records.read_json(run / "claims.json") if (run / "claims.json").is_file() else []
        params = {"study": m.get("study"), "preset": m.get("preset"), "seeds": m.get("seeds"),
                  "device": m.get("device"), "threads": m.get("threads"),
                  **{f"config.{k}": v for k, v in (m.get("base_config") or {}).items()}}
        metrics, tags = {}, {"robustlab.path": str(run), "robustlab.code": _code_text(m)}
        if m.get("rerun_of"):
            tags["robustlab.rerun_of"] = str(m["rerun_of"])
        for row in claims_frame(claims).itertuples(index=False):
            for name in ("effect", "interval_lo", "interval_hi"):
                v = getattr(row, name)
                if isinstance(v, int | float) and math.isfinite(v):
                    metrics[_key(f"{row.id}.{name}")] = float(v)
            tags[_key(f"claim.{row.id}.verdict")] = str(row.verdict)
            tags[_key(f"claim.{row.id}.kind")] = str(row.kind)
        with mlflow.start_run(run_name=f"{m.get('study')} {run.name}") as active:
            mlflow.log_params({_key(k): _param(v) for k, v in params.items()})
            if metrics:
                mlflow.log_metrics(metrics)
            mlflow.set_tags(tags)
            for name in ("report.html", "claims.json", "manifest.json"):
                if (run / name).is_file():
                    mlflow.log_artifact(str(run / name))
            ids.append(active.info.run_id)
    return ids

"""A run directory is a record to trust: the checks that keep it one.

* **The store is the source of truth and is never destroyed.** results.jsonl, claims.json and
  report.html are derived from ``store.sqlite``; a rebuild from a store that is empty or holds
  fewer points than the files it would replace is refused (:func:`guard_rewrite`), and the
  figures' folder is checked writable first, so that a report is never replaced by a worse one.
* **The store belongs to its manifest.** The store records its run's identity (study, seeds,
  the hash of its point keys); a store copied in from another run, or a manifest edited to name
  another study, is refused before any claim is computed (:func:`check_identity`).
* **Completeness is said.** Points done, planned and failed go into every summary; a claim
  computed on an incomplete or partly failed grid carries ``incomplete`` in claims.json and
  fails ``--strict`` (:func:`completeness`, :func:`mark_incomplete`).
* **Code is never mixed silently.** Every point carries the code id of the code that computed
  it; a resume by other code is refused unless ``allow_mixed_code`` (:func:`check_code`), and
  the manifest keeps one entry per sitting (:func:`sitting`).
* **Only robustlab's own plain files.** A symbolic link planted where robustlab writes
  (``.lock``, the store, a record) is refused (:func:`check_no_links`); study names are
  restricted to a safe character set (:func:`check_study_name`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import records
from ..config import UserError, config_hash

__all__ = ["SAFE_NAME", "check_study_name", "OWN_FILES", "check_no_links", "check_own_files", "identity", "check_identity",
           "guard_rewrite", "completeness", "mark_incomplete", "check_code", "sitting", "code_summary",
           "failure_line", "check_values", "store_completeness"]

# letters, digits, '-', '_' and '.', starting with a letter or digit, no '..': a study's name
# becomes a directory name (runs/NAME-TIME, a reproduce directory's NAME/)
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

# what robustlab writes in a run directory (and the sqlite journal it makes beside the store)
OWN_FILES = (".lock", "manifest.json", "store.sqlite", "store.sqlite-journal", "results.jsonl",
             "claims.json", "report.html", "reproduce.json", "figures", "checkpoints")


def check_study_name(name: Any) -> None:
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name) or ".." in name:
        raise UserError(f"study name {name!r} is not allowed: letters, digits, '-', '_' and '.', starting "
                        "with a letter or digit, at most 64 characters, no '..' (it names a directory)")


def check_no_links(out: Path) -> None:
    """None of robustlab's own files in ``out`` is a symbolic link (writing through one would
    write outside the run directory)."""
    for name in OWN_FILES:
        p = Path(out) / name
        if p.is_symlink():
            raise UserError(f"{p} is not allowed: it is a symbolic link (robustlab writes only its own "
                            "plain files in a run directory); remove it")


# the files robustlab writes in place (SQLite writes the store and its journal itself, and the
# lock names its holder there): a writer refuses them with other hard links (a user's file)
_WRITTEN_IN_PLACE = ("store.sqlite", "store.sqlite-journal", ".lock")


def check_own_files(out: Path) -> None:
    """Before a writer touches ``out``: no own file of robustlab there is a symbolic link, none
    is anything but a regular file (a named pipe would block), and none written in place has
    other hard links (writing it would change a file outside the run)."""
    check_no_links(out)
    for name in OWN_FILES:
        p = Path(out) / name
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        if name in ("figures", "checkpoints"):
            continue
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{p} is not allowed: it is not a regular file (a named pipe, device or directory); "
                            "restore the run's own file, or move the directory away")
        if name in _WRITTEN_IN_PLACE and st.st_nlink > 1:
            fix = "remove it" if name == ".lock" else "restore the run's own file"
            raise UserError(f"{p} is not allowed: it is a hard link to another file ({st.st_nlink} names; robustlab "
                            f"writes only its own plain files in a run directory); {fix}")


# ---------------------------------------------------------------------------------------------
# the store's identity against the manifest

def identity(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies a run's points: its study, seeds and the hash of its point keys."""
    return {"study": manifest["study"], "seeds": list(manifest["seeds"]),
            "points": config_hash({"keys": list(manifest["point_keys"])})}


def _seeds_text(seeds: Sequence[Any]) -> str:
    s = list(seeds)
    return f"{s[0]}..{s[-1]}" if len(s) > 1 else (str(s[0]) if s else "none")


def check_identity(out: Path, manifest: Mapping[str, Any], store: Any, config: Any = None) -> None:
    """The store in ``out`` holds this manifest's run: its recorded identity matches, every point it
    holds is one of the manifest's, and, for a store from before identities (``config``: the
    study's config class), the manifest's base config is one of that study's (not checked where
    the identity is: a field removed since would refuse an honest old run). A UserError (one
    line) otherwise."""
    want = identity(manifest)
    got = store.identity()
    where = Path(out) / "store.sqlite"
    fix = "restore this run's store or manifest, or move the directory away"
    if got is not None and got != want:
        what = [k for k in ("study", "seeds", "points") if got.get(k) != want[k]]
        raise UserError(f"{where} is not allowed: it holds another run than manifest.json (study "
                        f"{got.get('study')!r}, seeds {_seeds_text(got.get('seeds') or [])} against study "
                        f"{want['study']!r}, seeds {_seeds_text(want['seeds'])}; differing: {', '.join(what)}): {fix}")
    stray = store.keys() - set(manifest["point_keys"])
    if stray:
        raise UserError(f"{where} is not allowed: {len(stray)} of its points are not in manifest.json's plan "
                        f"(a store of another run, or an edited manifest): {fix}")
    if config is not None and got is None:  # a store from before identities: the manifest's config, at least
        try:
            config.from_dict(manifest["base_config"])
        except (UserError, TypeError) as exc:
            raise UserError(f"{Path(out) / 'manifest.json'} is not allowed: its base_config is not a config of "
                            f"study {manifest['study']!r} ({exc}): {fix}") from None


# ---------------------------------------------------------------------------------------------
# the store's values against what was written when each point finished, and against results.jsonl

def check_values(out: Path, store: Any, done: Sequence[Mapping[str, Any]] | None = None) -> None:
    """The store's points hold what was written when each finished (their checksums), and every
    point that results.jsonl holds has the same rows in the store (``done``: the store's finished
    points, read already). A value edited in the store is refused in one line, not republished
    into results.jsonl, claims.json and the figures."""
    where = Path(out) / "store.sqlite"
    fix = (f"restore the store (or results.jsonl) from a copy, or recompute the run with "
           f"`robustlab rerun {out}`")
    bad = store.tampered()
    if bad:
        raise UserError(f"{where} is not allowed: {len(bad)} of its points do not match the checksum written when "
                        f"they finished (point {bad[0]}: a value edited or damaged in the store): {fix}")
    results = Path(out) / "results.jsonl"
    if not os.path.lexists(results):
        return
    from ..reader import jsonl_rows

    try:
        rows, _ = jsonl_rows(results)
    except (OSError, UserError):
        return  # damaged or not a file: rebuilt from the store (guard_rewrite decides)
    held: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if isinstance(r.get("point"), str):
            held.setdefault(r["point"], []).append(r)
    if not held:
        return
    stored = {d["key"]: [{**d["params"], **r, "point": d["key"]} for r in d["rows"]]
              for d in (done if done is not None else store.done())}
    differ = [k for k, rs in held.items() if k in stored and json_text(stored[k]) != json_text(rs)]
    if differ:
        raise UserError(f"{where} is not allowed: {len(differ)} of its points differ from the rows results.jsonl "
                        f"holds for them (point {differ[0]}): the store or results.jsonl was edited; {fix}")


def json_text(rows: Any) -> str:
    """Rows as the records write them (sorted keys): equal texts, equal records."""
    return records.dumps(rows, sort_keys=True)


def store_completeness(out: Path, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """Points planned, done, failed and missing of the run in ``out``, read from its store
    (None: it has none, or the manifest is not a run's in full). What every reader says of a
    partial run."""
    from ..sweep.store import Store

    if not os.path.lexists(Path(out) / "store.sqlite") or records.check_shape(manifest, records.SHAPES_RUN):
        return None
    with Store(Path(out) / "store.sqlite", readonly=True) as st:
        return completeness(manifest, st.keys("done"), st.keys("failed"))


# ---------------------------------------------------------------------------------------------
# never rewrite the derived files from a smaller store

def result_rows(path: Path) -> int:
    """The result rows ``path`` holds: its lines that are JSON objects (a garbage line, a
    truncated write, or a pipe in its place holds none; the store rebuilds the file)."""
    from ..reader import jsonl_rows

    try:
        return len(jsonl_rows(path)[0])
    except (OSError, UserError):
        return 0


def guard_rewrite(out: Path, n_rows: int, n_points: int, *, force: bool = False) -> None:
    """Refuse to rewrite results.jsonl, claims.json and report.html from a store holding ``n_rows``
    result rows over ``n_points`` recorded points when the files there hold more: the store was
    emptied, truncated or replaced, and the files are the last copy of the results."""
    if force:
        return
    out = Path(out)
    held = result_rows(out / "results.jsonl")
    fix = (f"restore store.sqlite, or recompute it with `robustlab rerun {out}`, or pass --force to "
           "rewrite them from the store as it is")
    if held > n_rows:
        raise UserError(f"{out / 'results.jsonl'} is not allowed to be rewritten: it holds {held} result rows "
                        f"and store.sqlite only {n_rows} (emptied, damaged or replaced): {fix}")
    if n_points == 0:
        present = [n for n in ("results.jsonl", "claims.json", "report.html") if (out / n).exists()]
        if present:
            raise UserError(f"{out / present[0]} is not allowed to be rewritten: store.sqlite holds no point at "
                            f"all (emptied or replaced): {fix}")


# ---------------------------------------------------------------------------------------------
# completeness

def completeness(manifest: Mapping[str, Any], done: set[str], failed: set[str]) -> dict[str, Any]:
    """Points planned, done, failed and missing (neither: never run, e.g. a killed run)."""
    keys = list(manifest["point_keys"])
    planned = len(keys)
    n_done = sum(k in done for k in keys)
    n_failed = sum(k in failed and k not in done for k in keys)
    return {"planned": planned, "done": n_done, "failed": n_failed, "missing": planned - n_done - n_failed,
            "complete": n_done == planned}


def completeness_text(c: Mapping[str, Any]) -> str:
    """``points 351/390 done, 0 failed, 39 not run``."""
    text = f"points {c['done']}/{c['planned']} done, {c['failed']} failed"
    return text + (f", {c['missing']} not run" if c["missing"] else "")


def mark_incomplete(claims: list[dict[str, Any]], c: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each claim computed on an incomplete grid carries ``incomplete`` (its counts); ``--strict``
    fails on it (:func:`robustlab.report.html.strict_failures`)."""
    if c["complete"]:
        return claims
    note = {k: c[k] for k in ("planned", "done", "failed", "missing")}
    return [{**d, "incomplete": note} for d in claims]


def incomplete_line(claims: list[dict[str, Any]]) -> str | None:
    """The one line ``--strict`` prints when claims rest on an incomplete grid (None: none do)."""
    marked = [c for c in claims if c.get("incomplete") and c.get("kind", "claim") in ("claim", "self-check")]
    if not marked:
        return None
    c = marked[0]["incomplete"]
    return (f"robustlab: --strict: {len(marked)} claim{'s' if len(marked) != 1 else ''} computed on an incomplete grid "
            f"(points {c['done']}/{c['planned']} done, {c['failed']} failed, {c['missing']} not run): "
            "resume the run to complete it")


# ---------------------------------------------------------------------------------------------
# code provenance

def _stored_codes(store: Any, manifest: Mapping[str, Any] | None) -> dict[str, int]:
    """code id -> points, points from before code ids counted under the manifest's legacy id."""
    out: dict[str, int] = {}
    for cid, n in store.codes().items():
        cid = cid if cid is not None else (records.legacy_code_id(dict(manifest)) if manifest else "unknown")
        out[cid] = out.get(cid, 0) + n
    return out


def _known_codes(manifest: Mapping[str, Any] | None) -> dict[str, dict]:
    known: dict[str, dict] = {}
    for s in (manifest or {}).get("sittings") or ():
        if isinstance(s, dict) and isinstance(s.get("code_id"), str) and s.get("code"):
            known[s["code_id"]] = s["code"]
    for r in (manifest or {}).get("reused") or ():
        for cid, ident in (r.get("code_ids") or {}).items() if isinstance(r, dict) else ():
            if ident:
                known.setdefault(cid, ident)
    return known


def _accepted(manifest: Mapping[str, Any] | None) -> tuple[set[str], set[str]]:
    """(codes accepted together by an earlier ``--allow-mixed-code`` sitting, codes taken with
    ``--reuse``): a resume by one of the former may add to points of the others, and reused
    points were the user's explicit choice."""
    together: set[str] = set()
    seen: list[str] = []
    for s in (manifest or {}).get("sittings") or ():
        if isinstance(s, dict) and isinstance(s.get("code_id"), str):
            seen.append(s["code_id"])
            if s.get("allow_mixed_code"):
                together |= set(seen)
    reused = {cid for r in (manifest or {}).get("reused") or () if isinstance(r, dict)
              for cid in (r.get("code_ids") or {})}
    return together, reused


def check_code(out: Path, manifest: Mapping[str, Any] | None, store: Any, current: str,
               current_ident: dict[str, Any], allow_mixed: bool) -> dict[str, int]:
    """Refuse (one line) to add points computed by code ``current`` to a store whose points came
    from other code, unless ``allow_mixed``; returns the store's code id -> points."""
    codes = _stored_codes(store, manifest)
    together, reused = _accepted(manifest)
    other = {c: n for c, n in codes.items()
             if c != current and c not in reused and not {c, current} <= together}
    if other and not allow_mixed:
        known = _known_codes(manifest)
        then = "; ".join(f"{n} by {records.code_text(known.get(c)) if c in known else _legacy_text(manifest, c)}"
                         for c, n in other.items())
        raise UserError(f"--out {str(out)!r} is not allowed: its points were computed by other code ({then}) "
                        f"than this ({records.code_text(current_ident)}); resuming would mix them in one run: "
                        "choose a new --out, or pass --allow-mixed-code to continue (recorded in the manifest)")
    return codes


def _legacy_text(manifest: Mapping[str, Any] | None, cid: str) -> str:
    code = (manifest or {}).get("code") or {}
    if manifest and cid == records.legacy_code_id(dict(manifest)):
        dirty = " with local changes" if code.get("dirty") else ""
        return f"commit {(code.get('git_commit') or '?')[:7]}{dirty}"
    return f"code {cid}"


def sitting(options: Any, prov: records.Provenance, allow_mixed: bool) -> dict[str, Any]:
    """One entry of the manifest's ``sittings``: when, with which code, versions and host (the
    run's :class:`~robustlab.records.Provenance`)."""
    return {"started": records.now_iso(), "finished": None, "code_id": prov.code_id,
            "code": prov.ident, "allow_mixed_code": bool(allow_mixed), "versions": prov.versions,
            "host": prov.host, "workers": options.workers, "backend": options.backend}


def code_summary(store_codes: Mapping[str | None, int], manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Which points came from which code: ``[{"code_id", "points", "code"}]`` (most points first)."""
    known = _known_codes(manifest)
    merged: dict[str, int] = {}
    for cid, n in store_codes.items():
        cid = cid if cid is not None else records.legacy_code_id(dict(manifest))
        merged[cid] = merged.get(cid, 0) + n
    rows = [{"code_id": c, "points": n,
             "code": records.code_text(known[c]) if c in known else _legacy_text(manifest, c)}
            for c, n in merged.items()]
    return sorted(rows, key=lambda r: -r["points"])


# ---------------------------------------------------------------------------------------------
# a run that produced nothing, or whose study code failed, does not end well

def failure_line(name: str, claims: Sequence[Mapping[str, Any]], problems: Sequence[str], out: Any) -> str | None:
    """The one line a run, report or rerun ends with when it must not exit 0 (None: it may): no
    point produced results, or the study's ``claims()`` or ``figures()`` raised or exited."""
    from .base import CLAIMS_ERROR, FIGURES_FAILED

    report = f"{out}/report.html" if out is not None else "the report"
    by_id = {c.get("id"): c for c in claims if isinstance(c, Mapping)}
    if "no-results" in by_id:
        failed = (by_id["no-results"].get("evidence") or {}).get("failed_points")
        why = f" ({failed} failed)" if failed else ""
        return (f"robustlab: error: {name}: no point produced results{why}: nothing to check; see "
                f"{report}, fix the study, then re-run with --retry-failed")
    if CLAIMS_ERROR in by_id:
        err = str((by_id[CLAIMS_ERROR].get("evidence") or {}).get("error", "?"))
        return (f"robustlab: error: {name}: the study's claims() failed ({' '.join(err.split())[:200]}): "
                f"no claim was checked; see {report}")
    for p in problems:
        if p.startswith(FIGURES_FAILED):
            first = " ".join(p.split("\n", 1)[0].split())[:200]
            return f"robustlab: error: {name}: the study's {first}; see {report}"
    return None

"""A crash-safe result store: one SQLite file per run directory.

Each group of points is written in a single transaction (rollback journal, synchronous
writes), so after a crash — even SIGKILL mid-commit — a point is either fully recorded or
absent; the primary key on the point's config hash means it is never recorded twice. Failed
points keep their reason and traceback; a retried failure is replaced in place, a finished
point never is. Only the sweep's driver process writes; readers may open it read-only.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

from .. import records
from ..config import UserError

__all__ = ["Store", "StoreError"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY,
    params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    rows TEXT NOT NULL,
    reason TEXT,
    traceback TEXT,
    seconds REAL,
    warnings TEXT
)
"""


class StoreError(UserError):
    """The store cannot be used: damaged, or its directory not writable (one line, exit 2)."""


def _store_error(path: Path, exc: Exception) -> StoreError:
    text = " ".join(str(exc).split())  # one line (an integrity report spans several)
    if isinstance(exc, sqlite3.OperationalError) and any(
            s in text for s in ("unable to open", "readonly", "disk is full", "disk I/O", "locked")):
        return StoreError(f"{path} cannot be written ({text}): check the directory's permissions and "
                          "free space, then re-run the same command to resume (finished points are kept)")
    return StoreError(f"{path} is damaged ({text}): move it away to start over, or restore it")


class Store:
    def __init__(self, path: str | Path, *, readonly: bool = False):
        self.path = Path(path)
        self.conn = None
        try:
            self._open(readonly)
        except sqlite3.Error as exc:
            if self.conn is not None:
                self.conn.close()
            raise _store_error(self.path, exc) from None

    def _open(self, readonly: bool) -> None:
        if readonly and not self.path.exists():
            raise FileNotFoundError(f"no result store at {self.path}")
        if readonly and Path(f"{self.path}-journal").exists():
            # a writer was killed mid-commit: a read-only connection cannot roll its hot
            # journal back, so let a brief read-write one do it first (any read does; the
            # schema's, since a writer killed while creating its store leaves no table)
            rec = sqlite3.connect(self.path, timeout=60)
            try:
                rec.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            finally:
                rec.close()
        uri = "file:" + urllib.parse.quote(str(self.path.resolve())) + ("?mode=ro" if readonly else "")
        self.conn = sqlite3.connect(uri, uri=True, timeout=60, isolation_level=None)
        if readonly and self.conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone() == (0,):
            # no table at all: a writer killed after SQLite created the file but before the
            # schema went in (or an empty file). Nothing was recorded: read it as an empty
            # store; the next writer adds the schema.
            self.conn.close()
            self.conn = sqlite3.connect(":memory:", isolation_level=None)
            self.conn.execute(_SCHEMA)
        if not readonly:
            self.conn.execute("PRAGMA journal_mode=DELETE")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute(_SCHEMA)
        # a few overwritten bytes may leave the header readable: check every page now, so that
        # damage is one clear error before anything runs (cheap: stores are small)
        (status,) = self.conn.execute("PRAGMA quick_check").fetchone()
        if status != "ok":
            raise sqlite3.DatabaseError(f"integrity check: {status}")
        self.conn.execute("SELECT key, params, status, rows FROM points LIMIT 1").fetchall()
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(points)")}
        self._has_warnings = "warnings" in columns
        if not readonly and columns and not self._has_warnings:
            # a store written before warnings were kept: add the column (NULL for old points)
            self.conn.execute("ALTER TABLE points ADD COLUMN warnings TEXT")
            self._has_warnings = True

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def keys(self, status: str | None = None) -> set[str]:
        """Keys of every recorded point, or of those with the given status (done, failed)."""
        if status is None:
            return {k for (k,) in self.conn.execute("SELECT key FROM points")}
        return {k for (k,) in self.conn.execute("SELECT key FROM points WHERE status=?", (status,))}

    def record(self, entries: list[dict[str, Any]], *, replace_failed: bool = False) -> None:
        """Record points atomically: each entry has key, params, status, rows[, reason, traceback,
        seconds, warnings (a list of one-line texts)].

        A point already recorded is left as it is, except that with ``replace_failed`` a
        failed record is overwritten (a retry).
        """
        conflict = ("ON CONFLICT(key) DO UPDATE SET params=excluded.params, status=excluded.status, "
                    "rows=excluded.rows, reason=excluded.reason, traceback=excluded.traceback, "
                    "seconds=excluded.seconds, warnings=excluded.warnings WHERE points.status='failed'"
                    if replace_failed else "ON CONFLICT(key) DO NOTHING")
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for e in entries:
                cur.execute(
                    "INSERT INTO points (key, params, status, rows, reason, traceback, seconds, warnings) "
                    f"VALUES (?, ?, ?, ?, ?, ?, ?, ?) {conflict}",
                    (e["key"], records.dumps(e["params"], sort_keys=True), e["status"],
                     records.dumps(e.get("rows", []), sort_keys=True), e.get("reason"),
                     e.get("traceback"), e.get("seconds"),
                     records.dumps(e["warnings"]) if e.get("warnings") else None),
                )
            cur.execute("COMMIT")
        except sqlite3.OperationalError as exc:  # disk full, read-only, I/O: the machine's, not ours
            if self.conn.in_transaction:
                cur.execute("ROLLBACK")
            raise _store_error(self.path, exc) from None
        except BaseException:
            if self.conn.in_transaction:
                cur.execute("ROLLBACK")
            raise

    def _select(self, status: str) -> list[dict[str, Any]]:
        warn = "warnings" if self._has_warnings else "NULL"  # an old store read read-only
        cur = self.conn.execute(
            f"SELECT key, params, rows, reason, traceback, seconds, {warn} FROM points WHERE status=? "
            "ORDER BY rowid", (status,))
        try:
            return [{"key": k, "params": json.loads(p), "rows": json.loads(r), "reason": reason,
                     "traceback": tb, "seconds": s, "warnings": json.loads(w) if w else []}
                    for k, p, r, reason, tb, s, w in cur]
        except (json.JSONDecodeError, sqlite3.Error) as exc:  # bytes damaged inside a record
            raise _store_error(self.path, exc) from None

    def done(self) -> list[dict[str, Any]]:
        return self._select("done")

    def failures(self) -> list[dict[str, Any]]:
        return self._select("failed")

    def count(self, status: str | None = None) -> int:
        if status is None:
            return self.conn.execute("SELECT COUNT(*) FROM points").fetchone()[0]
        return self.conn.execute("SELECT COUNT(*) FROM points WHERE status=?", (status,)).fetchone()[0]

    def table(self) -> list[tuple[str, str, str, str, str | None]]:
        """(key, params, status, rows, reason) of every point, sorted by key: what a run
        computed, without timings, tracebacks or the order points finished in."""
        return list(self.conn.execute(
            "SELECT key, params, status, rows, reason FROM points ORDER BY key"))

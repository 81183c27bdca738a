"""A crash-safe result store: one SQLite file per run directory.

Each group of points is written in a single transaction (rollback journal, synchronous
writes), so after a crash — even SIGKILL mid-commit — a point is either fully recorded or
absent; the primary key on the point's config hash means it is never recorded twice. Failed
points keep their reason and traceback; a retried failure is replaced in place, a finished
point never is. Only the sweep's driver process writes; readers may open it read-only.

Each point carries the code id of the code that computed it (``code``, see
:func:`robustlab.records.study_code`), and the store its run's identity (``meta``: study,
seeds and the hash of its point keys), which a report checks against the run's manifest: a
store copied in from another run is refused rather than reported as this one.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

from .. import reader, records
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
    warnings TEXT,
    code TEXT,
    checksum TEXT
);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
)
"""
# columns added since the first stores: an old store gets them (NULL for its points) when it is
# opened for writing, and reads as NULL through a read-only connection
_LATER_COLUMNS = ("warnings", "code", "checksum")


def checksum(key: str, params: str, status: str, rows: str) -> str:
    """sha256 (16 hex) of a point's record as stored (its key, params and rows as JSON text, its
    status): written when the point finishes, so that a value edited in the store afterwards is
    found (:meth:`Store.tampered`) instead of republished."""
    return hashlib.sha256("\0".join((key, params, status, rows)).encode("utf-8")).hexdigest()[:16]


class StoreError(UserError):
    """The store cannot be used: damaged, or its directory not writable (one line, exit 2)."""


def _store_error(path: Path, exc: Exception) -> StoreError:
    text = " ".join(str(exc).split())  # one line (an integrity report spans several)
    if isinstance(exc, sqlite3.OperationalError) and any(
            s in text for s in ("unable to open", "readonly", "disk is full", "disk I/O", "locked")):
        return StoreError(f"{path} cannot be written ({text}): check the directory's permissions and "
                          "free space, then re-run the same command to resume (finished points are kept)")
    return StoreError(f"{path} is damaged ({text}): move it away to start over, or restore it")


def _check_plain(p: Path, *, writing: bool) -> None:
    """``p`` is absent or a regular file of its own: a symbolic link (SQLite would follow it and
    write outside the run directory), a named pipe or device (opening it would block), or, for a
    writer, a file with other hard links (a user's file linked in) is a :class:`StoreError`."""
    from ..records import plain_file_problem

    problem = plain_file_problem(p, writing=writing)
    if problem:
        raise StoreError(f"{p} is not allowed: it is {problem}; "
                         + ("remove it" if problem.startswith("a symbolic") else
                            "restore the run's own file, or move the directory away"))


class Store:
    def __init__(self, path: str | Path, *, readonly: bool = False, code: str | None = None):
        self.path = Path(path)
        self.conn = None
        self.code = code  # the code id given to points recorded without one
        for p in (self.path, Path(f"{self.path}-journal")):
            _check_plain(p, writing=not readonly)
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
            self.empty_file = True
            # no table at all: a writer killed after SQLite created the file but before the
            # schema went in (or an empty file). Nothing was recorded: read it as an empty
            # store; the next writer adds the schema.
            self.conn.close()
            self.conn = sqlite3.connect(":memory:", isolation_level=None)
            self.conn.executescript(_SCHEMA)
        if not readonly:
            self.conn.execute("PRAGMA journal_mode=DELETE")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.executescript(_SCHEMA)
        # a few overwritten bytes may leave the header readable: check every page now, so that
        # damage is one clear error before anything runs (cheap: stores are small)
        (status,) = self.conn.execute("PRAGMA quick_check").fetchone()
        if status != "ok":
            raise sqlite3.DatabaseError(f"integrity check: {status}")
        self.conn.execute("SELECT key, params, status, rows FROM points LIMIT 1").fetchall()
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(points)")}
        for col in _LATER_COLUMNS:
            if not readonly and columns and col not in columns:
                self.conn.execute(f"ALTER TABLE points ADD COLUMN {col} TEXT")
                columns.add(col)
        self._columns = columns
        self._has_meta = bool(self.conn.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()[0])

    empty_file = False  # a read-only store whose file holds no table at all (e.g. zero bytes)

    def identity(self) -> dict[str, Any] | None:
        """The run identity recorded in the store (None: a store from before identities)."""
        if not self._has_meta:
            return None
        row = self.conn.execute("SELECT value FROM meta WHERE name='identity'").fetchone()
        return reader.loads(row[0], self.path, where="its run identity") if row else None

    def set_identity(self, ident: dict[str, Any]) -> None:
        """Record the run identity (a writer, once, when the store is new or from before them)."""
        self.conn.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('identity', ?)",
                          (records.dumps(ident, sort_keys=True),))

    def codes(self) -> dict[str | None, int]:
        """code id -> number of points recorded with it (None: recorded before points had one)."""
        if "code" not in self._columns:
            return {None: self.count()} if self.count() else {}
        return dict(self.conn.execute("SELECT code, COUNT(*) FROM points GROUP BY code").fetchall())

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
                    "seconds=excluded.seconds, warnings=excluded.warnings, code=excluded.code, checksum=excluded.checksum "
                    "WHERE points.status='failed'"
                    if replace_failed else "ON CONFLICT(key) DO NOTHING")
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for e in entries:
                params = records.dumps(e["params"], sort_keys=True)
                rows = records.dumps(e.get("rows", []), sort_keys=True)
                cur.execute(
                    "INSERT INTO points (key, params, status, rows, reason, traceback, seconds, warnings, code, "
                    f"checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) {conflict}",
                    (e["key"], params, e["status"], rows, e.get("reason"),
                     e.get("traceback"), e.get("seconds"),
                     records.dumps(e["warnings"]) if e.get("warnings") else None,
                     e.get("code") or self.code, checksum(e["key"], params, e["status"], rows)),
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
        warn, code, _ = (c if c in self._columns else "NULL" for c in _LATER_COLUMNS)  # an old store, read-only
        cur = self.conn.execute(
            f"SELECT key, params, rows, reason, traceback, seconds, {warn}, {code} FROM points WHERE status=? "
            "ORDER BY rowid", (status,))
        try:
            return [{"key": k, "params": reader.loads(p, self.path, where=f"point {k}"),
                     "rows": reader.loads(r, self.path, where=f"point {k}"), "reason": reason,
                     "traceback": tb, "seconds": s, "warnings": json.loads(w) if w else [], "code": c}
                    for k, p, r, reason, tb, s, w, c in cur]
        except (json.JSONDecodeError, sqlite3.Error) as exc:  # bytes damaged inside a record
            raise _store_error(self.path, exc) from None

    def tampered(self) -> list[str]:
        """Keys of the points whose stored record no longer matches the checksum written when
        they finished (a value edited in the store, or damaged bytes); points recorded before
        checksums have none to check."""
        if "checksum" not in self._columns:
            return []
        cur = self.conn.execute("SELECT key, params, status, rows, checksum FROM points WHERE checksum IS NOT NULL "
                                "ORDER BY rowid")
        return [k for k, p, s, r, c in cur if checksum(k, p, s, r) != c]

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

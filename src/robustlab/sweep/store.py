"""A crash-safe result store: one SQLite file per run directory.

Each point is written in a single transaction, so after a crash (even SIGKILL) a point is
either fully recorded or absent; the primary key on the point's config hash means it is
never recorded twice. Failed points keep their reason and traceback.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from .. import records

__all__ = ["Store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY,
    params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    rows TEXT NOT NULL,
    reason TEXT,
    traceback TEXT,
    seconds REAL
)
"""


class Store:
    def __init__(self, path: str | Path, *, readonly: bool = False):
        self.path = Path(path)
        if readonly and not self.path.exists():
            raise FileNotFoundError(f"no result store at {self.path}")
        uri = f"file:{self.path}?mode=ro" if readonly else f"file:{self.path}"
        self.conn = sqlite3.connect(uri, uri=True, timeout=60, isolation_level=None)
        if not readonly:
            self.conn.execute("PRAGMA journal_mode=DELETE")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute(_SCHEMA)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def keys(self) -> set[str]:
        return {k for (k,) in self.conn.execute("SELECT key FROM points")}

    def record(self, entries: list[dict[str, Any]]) -> None:
        """Record points atomically: each entry has key, params, status, rows[, reason, traceback, seconds]."""
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for e in entries:
                cur.execute(
                    "INSERT OR IGNORE INTO points (key, params, status, rows, reason, traceback, seconds) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (e["key"], records.dumps(e["params"], sort_keys=True), e["status"],
                     records.dumps(e.get("rows", []), sort_keys=True), e.get("reason"),
                     e.get("traceback"), e.get("seconds")),
                )
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise

    def _select(self, status: str) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT key, params, rows, reason, traceback, seconds FROM points WHERE status=? ORDER BY rowid",
            (status,))
        return [{"key": k, "params": json.loads(p), "rows": json.loads(r), "reason": reason,
                 "traceback": tb, "seconds": s} for k, p, r, reason, tb, s in cur]

    def done(self) -> list[dict[str, Any]]:
        return self._select("done")

    def failures(self) -> list[dict[str, Any]]:
        return self._select("failed")

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM points").fetchone()[0]

"""SQLite persistence for devhub's objects, so `--data-dir` survives restarts.

One row per object (its JSON, exactly as served), keyed by resource (Namespaces are
`namespaces`) and the store's key (the name, or `namespace/name` for a namespaced kind), plus the
cluster-wide resourceVersion counter, written in the same transaction as the object, so after a
restart every object, uid and creationTimestamp is back and new resourceVersions keep increasing.
WAL mode with `synchronous=NORMAL`: a crash may lose the last moments of writes but never corrupts
the file, which is the trade-off a local development hub wants."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Final

__all__ = ["DB_FILE", "SqliteStore"]

DB_FILE: Final = "devhub.sqlite3"
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS objects (
    resource TEXT NOT NULL,
    name TEXT NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (resource, name)
);
CREATE TABLE IF NOT EXISTS counters (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""
_RV_KEY: Final = "resourceVersion"


class SqliteStore:
    """Owned by the devhub event-loop thread; every method commits before it returns."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / DB_FILE
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def resource_version(self) -> int:
        row = self._db.execute("SELECT value FROM counters WHERE key = ?", (_RV_KEY,)).fetchone()
        return int(row[0]) if row else 0

    def objects(self) -> Iterator[tuple[str, str, bytes]]:
        yield from self._db.execute("SELECT resource, name, body FROM objects ORDER BY rowid")

    def put(self, resource: str, name: str, body: bytes, rv: int) -> None:
        with self._transaction():
            self._db.execute(
                "INSERT INTO objects (resource, name, body) VALUES (?, ?, ?) "
                "ON CONFLICT (resource, name) DO UPDATE SET body = excluded.body",
                (resource, name, body),
            )
            self._set_rv(rv)

    def delete(self, resource: str, name: str, rv: int) -> None:
        with self._transaction():
            self._db.execute(
                "DELETE FROM objects WHERE resource = ? AND name = ?", (resource, name)
            )
            self._set_rv(rv)

    def clear(self, rv: int) -> None:
        with self._transaction():
            self._db.execute("DELETE FROM objects")
            self._set_rv(rv)

    def close(self) -> None:
        self._db.close()

    def _set_rv(self, rv: int) -> None:
        self._db.execute(
            "INSERT INTO counters (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (_RV_KEY, rv),
        )

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("COMMIT" if exc_type is None else "ROLLBACK")

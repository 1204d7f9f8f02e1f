"""The fleet's history: every result a collector ingests, kept in one SQLite database.

One row per result (``results``): its node, kind, time, verdict, reason and path; its findings
as a compact key list (what flapping reads, one line per finding) and whole (what the latest
result's verdict reads); its figures and counters as packed arrays whose names are kept once
in ``blobs`` (a node's figure names are the same every day; its GPUs too). Ten thousand
results a day then cost ten thousand rows, not a million.

- WAL journal: one writer, readers never blocked; SQLite's own busy timeout before "locked".
- ``PRAGMA application_id`` marks the file as ours and ``user_version`` holds the schema
  version; ``MIGRATIONS[v]`` brings a database at version v - 1 to v, each in one transaction.
  A newer, foreign or corrupt file is refused with one line (exit 2), never changed.
- Adding a result twice changes nothing: a result is known by the digest of its file's bytes
  (BLAKE2b) and by (node, kind, time).
- Retention: results older than a number of days, and the oldest beyond a size, are deleted
  when the collector ingests; the file shrinks through incremental vacuum.

A database on a network file system is not safe (SQLite's locks and WAL's shared memory need
one host); nodes write result files to a shared directory and one collector ingests them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from topodoctor.core import fileio
from topodoctor.core.errors import InputError
from topodoctor.fleet.rows import StoredRow

APP_ID = 0x54444648  # "TDFH": a topodoctor fleet history
SCHEMA_VERSION = 1
DAY_S = 86400.0
SQLITE_MAGIC = b"SQLite format 3\x00"


def _create_v1(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body TEXT NOT NULL UNIQUE)")
    db.execute(
        """CREATE TABLE results (
        id INTEGER PRIMARY KEY,
        digest BLOB NOT NULL UNIQUE,
        node TEXT NOT NULL,
        kind TEXT NOT NULL,
        measured_at REAL NOT NULL,
        time_from TEXT NOT NULL,
        state TEXT NOT NULL,
        reason TEXT NOT NULL,
        path TEXT NOT NULL,
        node_type INTEGER,
        gpus INTEGER,
        finding_keys TEXT NOT NULL,
        findings TEXT NOT NULL,
        figure_keys INTEGER,
        figure_values BLOB,
        counter_keys INTEGER,
        counter_values BLOB,
        ingested_at REAL NOT NULL,
        UNIQUE (node, kind, measured_at))"""
    )
    db.execute("CREATE INDEX results_by_node ON results (node, measured_at)")
    db.execute("CREATE INDEX results_by_time ON results (measured_at)")


# MIGRATIONS[v] brings a database at schema version v - 1 to version v.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _create_v1}


@dataclass(frozen=True)
class Retention:
    """What the store keeps: results of the last ``keep_days`` days, in at most ``max_mb`` MB
    (None: no bound of that kind)."""

    keep_days: float | None = 90.0
    max_mb: float | None = 1024.0


@dataclass(frozen=True)
class Ingested:
    """What one ingest did: results added, already there, and deleted by the retention bounds."""

    added: int
    duplicates: int
    pruned: int


def _stat_regular(path: Path) -> bool:
    """Whether ``path`` exists (as a regular file); anything else there is refused."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise InputError(f"history database {fileio.shown(path)}: {exc.strerror or type(exc).__name__}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"history database {fileio.shown(path)} is not a regular file")
    return True


class Store:
    """An open history database (use ``open_store``)."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db, self.path = db, path
        self._blob_ids: dict[str, int] = {}
        self._by_tuple: dict[tuple[Any, ...], int] = {}

    @contextlib.contextmanager
    def _sqlite(self, doing: str) -> Iterator[None]:
        with sqlite_errors(self.path, doing):
            yield

    def close(self) -> None:
        """Close the database (WAL checkpoints what it can)."""
        with contextlib.suppress(sqlite3.Error):
            self.db.close()

    def _blob(self, body: str) -> int:
        got = self._blob_ids.get(body)
        if got is None:
            got = self.db.execute("INSERT INTO blobs (body) VALUES (?)", (body,)).lastrowid
            assert got is not None
            self._blob_ids[body] = got
        return got

    def _shared(self, key: tuple[Any, ...]) -> int | None:
        """The id of a shared body (figure or counter names, GPUs, node type), by its tuple."""
        if not key:
            return None
        got = self._by_tuple.get(key)
        if got is None:
            got = self._by_tuple[key] = self._blob(json.dumps(key))
        return got

    def ingest(self, rows: Iterable[tuple[Any, ...]], retention: Retention) -> Ingested:
        """Add results (``row_of`` each) and apply the retention bounds, all in one transaction: on
        any failure nothing is added and nothing deleted."""
        now = time.time()
        with self._sqlite("adding results"):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                if not self._blob_ids:  # every name kept so far, at once: not one look-up per result
                    self._blob_ids = {body: i for i, body in self.db.execute("SELECT id, body FROM blobs")}
                before = self.db.total_changes
                shared = self._shared
                rows = [
                    (*r[:8], shared(r[8]), shared(r[9]), r[10], r[11], shared(r[12]), r[13], shared(r[14]), r[15], now)
                    for r in rows
                ]
                blobs_made = self.db.total_changes - before
                self.db.executemany(
                    "INSERT OR IGNORE INTO results (digest, node, kind, measured_at, time_from, state, reason, path, "
                    "node_type, gpus, finding_keys, findings, figure_keys, figure_values, counter_keys, "
                    "counter_values, ingested_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                added = self.db.total_changes - before - blobs_made
                pruned = self._prune(retention, now)
                self.db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self.db.execute("ROLLBACK")
                self._blob_ids.clear()
                self._by_tuple.clear()
                raise
        if pruned:
            with self._sqlite("shrinking the file"):
                self.db.execute("PRAGMA incremental_vacuum")
        return Ingested(added, len(rows) - added, pruned)

    def _prune(self, retention: Retention, now: float) -> int:
        gone = 0
        if retention.keep_days is not None:
            cur = self.db.execute("DELETE FROM results WHERE measured_at < ?", (now - retention.keep_days * DAY_S,))
            gone += max(cur.rowcount, 0)
        if retention.max_mb is not None:
            # Each round deletes the oldest rows the average row suggests; a deleted row frees a page
            # only once its page is empty, so a round that freed little doubles the next one: the
            # loop ends with the file's pages within the bound (or no rows left) in a few rounds.
            drop, last = 0, None
            while True:
                size = self._used_bytes()
                count = self.db.execute("SELECT count(*) FROM results").fetchone()[0]
                limit = retention.max_mb * 1e6
                if size <= limit or count == 0:
                    break
                want = max(1, int(count * (1.0 - limit / size)) + 1)
                stalled = last is not None and last - size < (last - limit) / 2
                drop, last = max(want, drop * 2 if stalled else want), size
                cur = self.db.execute(
                    "DELETE FROM results WHERE id IN (SELECT id FROM results ORDER BY measured_at LIMIT ?)", (drop,)
                )
                gone += max(cur.rowcount, 0)
                self._drop_unused_blobs()
        if gone:
            self._drop_unused_blobs()
        return gone

    def _drop_unused_blobs(self) -> None:
        self.db.execute(
            "DELETE FROM blobs WHERE id NOT IN (SELECT node_type FROM results WHERE node_type IS NOT NULL "
            "UNION SELECT gpus FROM results WHERE gpus IS NOT NULL "
            "UNION SELECT figure_keys FROM results WHERE figure_keys IS NOT NULL "
            "UNION SELECT counter_keys FROM results WHERE counter_keys IS NOT NULL)"
        )
        self._blob_ids.clear()
        self._by_tuple.clear()

    def _used_bytes(self) -> float:
        page = self.db.execute("PRAGMA page_size").fetchone()[0]
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        free = self.db.execute("PRAGMA freelist_count").fetchone()[0]
        return float((pages - free) * page)

    def blobs(self) -> dict[int, Any]:
        """Every shared body (figure and counter names, GPU lists, node types), decoded, by id."""
        with self._sqlite("reading"):
            return {i: json.loads(body) for i, body in self.db.execute("SELECT id, body FROM blobs")}

    def rows(self, since: float, until: float, node: str | None = None) -> Iterator[StoredRow]:
        """Every result measured from ``since`` to ``until`` (of one node, where given), by node,
        oldest first (streamed)."""
        where = "measured_at >= ? AND measured_at <= ?" + (" AND node = ?" if node is not None else "")
        args = (since, until) + ((node,) if node is not None else ())
        with self._sqlite("reading"):
            cur = self.db.execute(
                "SELECT node, kind, measured_at, time_from, state, reason, path, node_type, gpus, finding_keys, "
                f"findings, figure_keys, figure_values, counter_keys, counter_values FROM results WHERE {where} "
                "ORDER BY node, measured_at",
                args,
            )
            for row in cur:
                yield StoredRow(*row)

    def span(self) -> tuple[int, int, float | None, float | None]:
        """(results, nodes, first time, last time) in the store."""
        with self._sqlite("reading"):
            n, first, last = self.db.execute(
                "SELECT count(*), min(measured_at), max(measured_at) FROM results"
            ).fetchone()
            nodes = self.db.execute("SELECT count(DISTINCT node) FROM results").fetchone()[0]
        return int(n), int(nodes), first, last


@contextlib.contextmanager
def sqlite_errors(path: Path, doing: str) -> Iterator[None]:
    """SQLite's errors as one line each (exit 2): locked, corrupt, read-only, full, foreign."""
    try:
        yield
    except sqlite3.Error as exc:
        text = str(exc)
        where = f"history database {fileio.shown(path)}"
        if "locked" in text or "busy" in text:
            raise InputError(
                f"{where} is locked by another process (another collector?) while {doing}: nothing was changed; "
                "the result files are where they were, run again"
            ) from None
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            raise InputError(f"{where} is corrupt ({text}): keep it for inspection and start a new one") from None
        raise InputError(f"{where}: {text} while {doing}; nothing was changed") from None


def _check_magic(path: Path) -> None:
    """Refuse a file that is not SQLite before SQLite reads it (its own answer is vaguer)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            head = os.read(fd, len(SQLITE_MAGIC))
        finally:
            os.close(fd)
    except OSError as exc:
        raise InputError(f"cannot read history database {fileio.shown(path)}: {exc.strerror or exc}") from None
    if head and head != SQLITE_MAGIC[: len(head)]:
        raise InputError(f"history database {fileio.shown(path)} is not a SQLite database (not a file this made)")


def open_store(path: Path, create: bool, timeout_s: float = 10.0) -> Store:
    """The history at ``path``: made when ``create`` and absent, migrated when older; InputError
    (one line) when it is missing, not a regular file, corrupt, foreign, newer or locked."""
    exists = _stat_regular(path)
    if not exists and not create:
        raise InputError(f"no history database at {fileio.shown(path)} (give RESULT... to start one)")
    if exists and os.path.getsize(path) > 0:
        _check_magic(path)
    mode = "rwc" if create else "rw"
    with sqlite_errors(path, "opening"):
        uri = f"file:{quote(path.absolute().as_posix())}?mode={mode}"
        db = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None)
    store = Store(db, path)
    try:
        with sqlite_errors(path, "opening"):
            _prepare(db, path)
    except BaseException:
        store.close()
        raise
    return store


def _prepare(db: sqlite3.Connection, path: Path) -> None:
    app = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    shown = fileio.shown(path)
    if app != APP_ID and (app != 0 or tables):
        raise InputError(f"history database {shown} is a SQLite database of another program (application id {app})")
    if version > SCHEMA_VERSION:
        raise InputError(
            f"history database {shown} has schema version {version}; this topodoctor reads up to {SCHEMA_VERSION}"
        )
    if app == 0:  # a new file: its settings come before its first table
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        db.execute(f"PRAGMA application_id = {APP_ID}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")  # WAL stays consistent; a power loss may lose the last commit
    while version < SCHEMA_VERSION:
        db.execute("BEGIN IMMEDIATE")
        try:
            MIGRATIONS[version + 1](db)
            db.execute(f"PRAGMA user_version = {version + 1}")
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        version += 1

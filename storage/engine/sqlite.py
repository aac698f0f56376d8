"""The embedded default engine: one SQLite database (stdlib `sqlite3`) in `--dbpath`.

Layout of ``<dbpath>/bucketd.sqlite`` (WAL mode):

- record store ``<ident>``: table ``"r_<ident>"(id INTEGER PRIMARY KEY, data BLOB)``,
  a rowid table, so a RecordId is the SQLite rowid and large BSON values sit in
  overflow pages without bloating the b-tree;
- unique index store: ``"iu_<ident>"(k BLOB PRIMARY KEY, rid INTEGER) WITHOUT ROWID``;
- non-unique index store: ``"in_<ident>"(k BLOB, rid INTEGER, PRIMARY KEY(k, rid))
  WITHOUT ROWID``: the same key under many RecordIds, ordered by (key, rid);
- ``_stats(ident, count, size)``: record counts and data sizes, written in the same
  transaction as the data so they are exact after a crash.

Batches use `executemany` on cached prepared statements; scans fetch bounded chunks
and re-seek after the last row, so no SQLite statement stays open between calls.

Durability: ``synchronous=NORMAL`` in WAL mode survives a process crash (kill -9)
with every committed transaction and never corrupts the file. A commit with
``durable=True`` (`j: true`) fsyncs the WAL before returning; other commits are
fsynced by a small background thread at most `group_commit_ms` later (it touches
only a file descriptor of the WAL, never the connection). `flush()` syncs at once,
`checkpoint()` folds the WAL into the database file and returns the pages of dropped
stores to the file system (incremental auto-vacuum).

A lock file (``mongod.lock``, flock) keeps a second server off the same dbpath
(DBPathInUse, 98). The connection belongs to the thread that opened the engine.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Final

from storage import interrupt
from storage.engine.base import (
    FULL_RANGE,
    DuplicateKeyInIndex,
    IndexStore,
    KeyRange,
    RecordId,
    RecordStore,
    StorageEngine,
    check_ident,
    store_dropped,
)
from storage.errors import MongoError
from storage.files import FILE_MODE, create_private_file, make_dirs
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["SQLiteEngine", "DB_FILE", "LOCK_FILE"]

DB_FILE: Final = "bucketd.sqlite"
LOCK_FILE: Final = "mongod.lock"
_IN_CHUNK: Final = 500  # parameters per IN (...) query; below every SQLite's limit
_SCAN_FIRST: Final = 64
_SCAN_MAX_ROWS: Final = 8192
_SCAN_TARGET_BYTES: Final = 4 << 20


def _storage_error(e: sqlite3.Error) -> MongoError:
    msg = str(e)
    if isinstance(e, sqlite3.OperationalError) and "full" in msg:
        return MongoError(ErrorCode.OutOfDiskSpace, f"storage engine: {msg}")
    if isinstance(e, sqlite3.OperationalError) and msg.startswith("no such table: r_"):
        return store_dropped(msg.split(": ", 1)[1][2:])
    if isinstance(e, sqlite3.OperationalError) and msg.startswith(("no such table: iu_",
                                                                  "no such table: in_")):
        return store_dropped(msg.split(": ", 1)[1][3:])
    if isinstance(e, sqlite3.DatabaseError) and "malformed" in msg:
        return MongoError(ErrorCode.DataCorruptionDetected, f"storage engine: {msg}")
    return MongoError(ErrorCode.InternalError, f"storage engine error: {msg}")


class SQLiteRecordStore(RecordStore):
    def __init__(self, engine: SQLiteEngine, ident: str, count: int, size: int) -> None:
        self.ident = ident
        self._engine = engine
        self._count = count
        self._size = size
        t = f'"r_{ident}"'
        self._table = t
        self._sql_insert = f"INSERT INTO {t}(id, data) VALUES (?, ?)"
        self._sql_update = f"UPDATE {t} SET data = ? WHERE id = ?"
        self._sql_delete = f"DELETE FROM {t} WHERE id = ? RETURNING length(data)"
        self._sql_get = f"SELECT data FROM {t} WHERE id = ?"
        self._sql_len = f"SELECT length(data) FROM {t} WHERE id = ?"
        row = engine._q1(f"SELECT max(id) FROM {t}")
        self._next_id = (row[0] or 0) + 1 if row else 1

    def _stats_changed(self, old_count: int, old_size: int) -> None:
        eng = self._engine
        eng._dirty_stats.add(self)

        def undo() -> None:
            self._count, self._size = old_count, old_size

        eng.on_rollback(undo)

    def insert(self, datas: Sequence[bytes], *, shards: Sequence[int] | None = None
               ) -> list[RecordId]:
        eng = self._engine
        eng._require_txn()
        first = self._next_id
        rids = list(range(first, first + len(datas)))
        eng._execmany(self._sql_insert, zip(rids, datas))
        self._next_id = first + len(datas)
        old = (self._count, self._size)
        self._count += len(datas)
        self._size += sum(map(len, datas))
        self._stats_changed(*old)
        return rids

    def update(self, rid: RecordId, data: bytes, *, expected: bytes | None = None) -> None:
        # one process writes the file (its lock): the record is what the caller read
        eng = self._engine
        eng._require_txn()
        row = eng._q1(self._sql_len, (rid,))
        if row is None:
            raise KeyError(rid)
        eng._exec(self._sql_update, (data, rid))
        old = (self._count, self._size)
        self._size += len(data) - row[0]
        self._stats_changed(*old)

    def update_many(self, updates: Sequence[tuple[RecordId, bytes, bytes | None]],
                    old_sizes: Sequence[int | None] | None = None) -> None:
        # (`expected` goes unchecked, as in `update`: one process writes the file)
        rids = [rid for rid, _data, _expected in updates]
        if len(updates) < 2 or len(set(rids)) != len(rids):
            super().update_many(updates)
            return
        eng = self._engine
        eng._require_txn()
        sizes = list(old_sizes) if old_sizes is not None else [None] * len(rids)
        unknown = [rid for rid, size in zip(rids, sizes) if size is None]
        lengths = self._lengths(unknown)
        for rid in unknown:
            if rid not in lengths:
                raise KeyError(rid)
        written = eng._execmany(self._sql_update,
                                [(data, rid) for rid, data, _expected in updates])
        if written != len(rids):  # a record of a known size is gone
            found = self._lengths(rids)
            missing = [rid for rid in rids if rid not in found]
            raise KeyError(missing[0] if missing else
                           f"{written} of {len(rids)} records updated, none missing")
        old = (self._count, self._size)
        self._size += sum(len(data) for _rid, data, _expected in updates) - sum(
            lengths[rid] if size is None else size for rid, size in zip(rids, sizes))
        self._stats_changed(*old)

    def _lengths(self, rids: Sequence[RecordId]) -> dict[RecordId, int]:
        """The length of each of `rids`' records that exists."""
        lengths: dict[RecordId, int] = {}
        for i in range(0, len(rids), _IN_CHUNK):
            part = rids[i:i + _IN_CHUNK]
            sql = f"SELECT id, length(data) FROM {self._table} WHERE id IN " \
                  f"({','.join('?' * len(part))})"
            lengths.update(self._engine._qall(sql, part))
        return lengths

    def delete(self, rid: RecordId, *, expected: bytes | None = None) -> None:
        eng = self._engine
        eng._require_txn()
        row = eng._q1(self._sql_delete, (rid,))
        if row is None:
            raise KeyError(rid)
        old = (self._count, self._size)
        self._count -= 1
        self._size -= row[0]
        self._stats_changed(*old)

    def get(self, rid: RecordId) -> bytes | None:
        row = self._engine._q1(self._sql_get, (rid,))
        return None if row is None else row[0]

    def get_many(self, rids: Sequence[RecordId]) -> list[bytes | None]:
        if len(rids) == 1:
            return [self.get(rids[0])]
        found: dict[RecordId, bytes] = {}
        for i in range(0, len(rids), _IN_CHUNK):
            part = rids[i:i + _IN_CHUNK]
            sql = f"SELECT id, data FROM {self._table} WHERE id IN ({','.join('?' * len(part))})"
            found.update(self._engine._qall(sql, part))
        return [found.get(r) for r in rids]

    def scan(self, *, start: RecordId | None = None, reverse: bool = False
             ) -> Iterator[tuple[RecordId, bytes]]:
        t = self._table
        order = "DESC" if reverse else "ASC"
        op_first = "<=" if reverse else ">="
        op_next = "<" if reverse else ">"
        n = _SCAN_FIRST
        last = start
        first = True
        while True:
            interrupt.check()
            if last is None:
                sql = f"SELECT id, data FROM {t} ORDER BY id {order} LIMIT ?"
                rows = self._engine._qall(sql, (n,))
            else:
                op = op_first if first else op_next
                sql = f"SELECT id, data FROM {t} WHERE id {op} ? ORDER BY id {order} LIMIT ?"
                rows = self._engine._qall(sql, (last, n))
            first = False
            if not rows:
                return
            yield from rows
            if len(rows) < n:
                return
            last = rows[-1][0]
            avg = max(1, sum(len(r[1]) for r in rows) // len(rows))
            n = max(16, min(n * 4, _SCAN_MAX_ROWS, _SCAN_TARGET_BYTES // avg))

    def count(self) -> int:
        return self._count

    def data_size(self) -> int:
        return self._size

    def storage_size(self) -> int:
        return self._engine._table_bytes(f"r_{self.ident}", self._size + 16 * self._count)

    def truncate(self) -> None:
        eng = self._engine
        eng._require_txn()
        eng._exec(f"DELETE FROM {self._table}")
        old = (self._count, self._size)
        self._count = self._size = 0
        self._stats_changed(*old)


class SQLiteIndexStore(IndexStore):
    def __init__(self, engine: SQLiteEngine, ident: str, unique: bool) -> None:
        self.ident = ident
        self.unique = unique
        self._engine = engine
        t = f'"{"iu" if unique else "in"}_{ident}"'
        self._table = t
        self._sql_insert = (f"INSERT INTO {t}(k, rid) VALUES (?, ?)" if unique
                            else f"INSERT OR IGNORE INTO {t}(k, rid) VALUES (?, ?)")
        self._sql_delete = f"DELETE FROM {t} WHERE k = ? AND rid = ?"
        self._sql_get = f"SELECT rid FROM {t} WHERE k = ? ORDER BY rid"
        self._scan_sql: dict[tuple[Any, ...], str] = {}

    def insert(self, entries: Sequence[tuple[bytes, RecordId]]) -> None:
        eng = self._engine
        eng._require_txn()
        if not self.unique:
            eng._execmany(self._sql_insert, entries)
            return
        try:
            eng._execmany(self._sql_insert, entries)
        except sqlite3.IntegrityError:
            # A key is present (or twice in `entries`). Entries before the failing
            # one were added; redo one by one to find it and skip exact re-inserts.
            for key, rid in entries:
                row = eng._q1(self._sql_get, (key,))
                if row is None:
                    eng._exec(self._sql_insert, (key, rid))
                elif row[0] != rid:
                    raise DuplicateKeyInIndex(self.ident, key, row[0]) from None

    def delete(self, entries: Sequence[tuple[bytes, RecordId]]) -> None:
        self._engine._require_txn()
        self._engine._execmany(self._sql_delete, entries)

    def lookup(self, keys: Sequence[bytes]) -> dict[bytes, list[RecordId]]:
        out: dict[bytes, list[RecordId]] = {}
        if len(keys) == 1:  # point lookups: a cached statement
            rows = self._engine._qall(self._sql_get, (keys[0],))
            if rows:
                out[keys[0]] = [r[0] for r in rows]
            return out
        for i in range(0, len(keys), _IN_CHUNK):
            part = keys[i:i + _IN_CHUNK]
            sql = f"SELECT k, rid FROM {self._table} WHERE k IN ({','.join('?' * len(part))})"
            for k, rid in self._engine._qall(sql, part):
                out.setdefault(k, []).append(rid)
        return out

    def _sql_for(self, rng: KeyRange, reverse: bool, resume: bool, join: str = "") -> str:
        """The chunk query for a range scan (resuming after :lk/:lr); with `join`, a
        record table whose data is fetched in the same statement."""
        shape = (rng.lo is not None, rng.lo_inclusive, rng.hi is not None, rng.hi_inclusive,
                 reverse, resume, join)
        sql = self._scan_sql.get(shape)
        if sql is None:
            conds = []
            # On resume the position after the last row replaces the start bound: with
            # both, SQLite seeks on the start bound and filters (slow on hot keys).
            if rng.lo is not None and not (resume and not reverse):
                conds.append("i.k >= :lo" if rng.lo_inclusive else "i.k > :lo")
            if rng.hi is not None and not (resume and reverse):
                conds.append("i.k <= :hi" if rng.hi_inclusive else "i.k < :hi")
            if resume:
                op = "<" if reverse else ">"
                conds.append(f"i.k {op} :lk" if self.unique else f"(i.k, i.rid) {op} (:lk, :lr)")
            where = f" WHERE {' AND '.join(conds)}" if conds else ""
            direction = " DESC" if reverse else ""
            order = f"i.k{direction}" if self.unique else f"i.k{direction}, i.rid{direction}"
            if join:
                sql = (f"SELECT i.k, i.rid, r.data FROM {self._table} AS i JOIN {join} AS r "
                       f"ON r.id = i.rid{where} ORDER BY {order} LIMIT :n")
            else:
                sql = f"SELECT i.k, i.rid FROM {self._table} AS i{where} ORDER BY {order} LIMIT :n"
            self._scan_sql[shape] = sql
        return sql

    def scan(self, rng: KeyRange = FULL_RANGE, *, reverse: bool = False
             ) -> Iterator[tuple[bytes, RecordId]]:
        params: dict[str, Any] = {"lo": rng.lo, "hi": rng.hi, "n": _SCAN_FIRST}
        resume = False
        while True:
            interrupt.check()
            rows = self._engine._qall(self._sql_for(rng, reverse, resume), params)
            if not rows:
                return
            yield from rows
            if len(rows) < params["n"]:
                return
            params["lk"], params["lr"] = rows[-1]
            params["n"] = min(params["n"] * 4, _SCAN_MAX_ROWS)
            resume = True

    def count(self) -> int:
        row = self._engine._q1(f"SELECT count(*) FROM {self._table}")
        return int(row[0]) if row else 0

    def storage_size(self) -> int:
        name = self._table.strip('"')
        return self._engine._table_bytes(name, None)

    def truncate(self) -> None:
        self._engine._require_txn()
        self._engine._exec(f"DELETE FROM {self._table}")


class SQLiteEngine(StorageEngine):
    """SQLite in `dbpath` (a directory, created if missing); ``dbpath=None`` gives a
    private in-memory database (not durable; for tests)."""

    name = "sqlite"

    def __init__(self, dbpath: str | None, *, group_commit_ms: int = 100,
                 cache_mb: int = 64, page_size: int = 8192) -> None:
        super().__init__()
        self.dbpath = dbpath
        self.group_commit_ms = group_commit_ms
        self._lock_fd: int | None = None
        self._wal_fd: int | None = None
        self._unsynced = False
        self._sync_lock = threading.Lock()
        self._closed = False
        self._dirty_stats: set[SQLiteRecordStore] = set()
        self._records: dict[str, SQLiteRecordStore] = {}
        self._indexes: dict[str, SQLiteIndexStore] = {}
        self._has_dbstat = True
        if dbpath is None:
            self.is_durable = False
            self.path = ":memory:"
        else:
            self.is_durable = True
            make_dirs(dbpath)
            self._lock_dbpath(dbpath)
            self.path = os.path.join(dbpath, DB_FILE)
            # SQLite gives its -wal and -shm files the mode of the database file
            create_private_file(self.path)
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None,
                                         check_same_thread=True, cached_statements=1024)
            self._configure(cache_mb, page_size)
        except sqlite3.Error as e:
            self._release_lock()
            raise _storage_error(e) from e
        self._load_idents()
        self._flusher: threading.Thread | None = None
        self._stop = threading.Event()
        if self.is_durable:
            self._fsync_dir()
            if group_commit_ms > 0:
                self._flusher = threading.Thread(target=self._flush_loop, name="bucketd-wal-sync",
                                                 daemon=True)
                self._flusher.start()

    # --- setup ---------------------------------------------------------------------------

    def _lock_dbpath(self, dbpath: str) -> None:
        fd = os.open(os.path.join(dbpath, LOCK_FILE), os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise MongoError(
                    ErrorCode.DBPathInUse,
                    f"Unable to lock the lock file: {os.path.join(dbpath, LOCK_FILE)} "
                    f"(Resource temporarily unavailable). Another mongod instance is already "
                    f"running on the {dbpath} directory") from None
            raise
        os.fchmod(fd, FILE_MODE)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
            self._lock_fd = None

    def _configure(self, cache_mb: int, page_size: int) -> None:
        c = self._conn
        # page_size and auto_vacuum only take effect on a new file
        c.execute(f"PRAGMA page_size={int(page_size)}")
        c.execute("PRAGMA auto_vacuum=INCREMENTAL")
        if self.is_durable:
            mode = c.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise MongoError(ErrorCode.InternalError, f"cannot enable WAL mode ({mode})")
            c.execute("PRAGMA synchronous=NORMAL")
            c.execute("PRAGMA wal_autocheckpoint=4000")
            c.execute("PRAGMA journal_size_limit=67108864")
        c.execute(f"PRAGMA cache_size=-{int(cache_mb) * 1024}")
        c.execute("PRAGMA temp_store=MEMORY")
        c.execute("PRAGMA secure_delete=OFF")
        c.execute("PRAGMA foreign_keys=OFF")
        c.execute("CREATE TABLE IF NOT EXISTS _stats("
                  "ident TEXT PRIMARY KEY, count INTEGER NOT NULL, size INTEGER NOT NULL)")

    def _load_idents(self) -> None:
        stats = {r[0]: (r[1], r[2]) for r in self._qall("SELECT ident, count, size FROM _stats")}
        for (name,) in self._qall("SELECT name FROM sqlite_master WHERE type = 'table'"):
            if name.startswith("r_"):
                ident = name[2:]
                count, size = stats.get(ident, (0, 0))
                self._records[ident] = SQLiteRecordStore(self, ident, count, size)
            elif name.startswith(("iu_", "in_")):
                ident = name[3:]
                self._indexes[ident] = SQLiteIndexStore(self, ident, name.startswith("iu_"))

    def _fsync_dir(self) -> None:
        assert self.dbpath is not None
        fd = os.open(self.dbpath, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # --- SQL helpers (every statement goes through these) ----------------------------------

    def _exec(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> None:
        try:
            self._conn.execute(sql, params)
        except sqlite3.Error as e:
            raise _storage_error(e) from e

    def _execmany(self, sql: str, rows: Any) -> int:
        """The rows the statements changed. IntegrityError passes through (a unique index
        store resolves it)."""
        try:
            return self._conn.executemany(sql, rows).rowcount
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as e:
            raise _storage_error(e) from e

    def _q1(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        try:
            return self._conn.execute(sql, params).fetchone()
        except sqlite3.Error as e:
            raise _storage_error(e) from e

    def _qall(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise _storage_error(e) from e

    def _table_bytes(self, table: str, fallback: int | None) -> int:
        if self._has_dbstat:
            try:
                row = self._conn.execute(
                    "SELECT sum(pgsize) FROM dbstat WHERE name = ?", (table,)).fetchone()
                return int(row[0] or 0)
            except sqlite3.Error:
                self._has_dbstat = False
        if fallback is not None:
            return fallback
        row = self._q1(f'SELECT coalesce(sum(length(k)) + 12 * count(*), 0) FROM "{table}"')
        return int(row[0])

    # --- stores ---------------------------------------------------------------------------

    def create_record_store(self, ident: str) -> RecordStore:
        self._require_txn()
        check_ident(ident)
        if ident in self._records or ident in self._indexes:
            raise ValueError(f"ident {ident} exists")
        self._exec(f'CREATE TABLE "r_{ident}"(id INTEGER PRIMARY KEY, data BLOB NOT NULL)')
        self._exec("INSERT OR REPLACE INTO _stats(ident, count, size) VALUES (?, 0, 0)", (ident,))
        rs = SQLiteRecordStore(self, ident, 0, 0)
        self._records[ident] = rs
        self.on_rollback(lambda: self._records.pop(ident, None))
        return rs

    def drop_record_store(self, ident: str) -> None:
        self._require_txn()
        rs = self._records[ident]
        self._exec(f'DROP TABLE "r_{ident}"')
        self._exec("DELETE FROM _stats WHERE ident = ?", (ident,))
        del self._records[ident]
        self._dirty_stats.discard(rs)
        self.on_rollback(lambda: self._records.__setitem__(ident, rs))

    def record_store(self, ident: str) -> RecordStore:
        return self._records[ident]

    def create_index_store(self, ident: str, *, unique: bool) -> IndexStore:
        self._require_txn()
        check_ident(ident)
        if ident in self._records or ident in self._indexes:
            raise ValueError(f"ident {ident} exists")
        if unique:
            self._exec(f'CREATE TABLE "iu_{ident}"(k BLOB PRIMARY KEY, rid INTEGER NOT NULL) '
                       "WITHOUT ROWID")
        else:
            self._exec(f'CREATE TABLE "in_{ident}"(k BLOB NOT NULL, rid INTEGER NOT NULL, '
                       "PRIMARY KEY(k, rid)) WITHOUT ROWID")
        ix = SQLiteIndexStore(self, ident, unique)
        self._indexes[ident] = ix
        self.on_rollback(lambda: self._indexes.pop(ident, None))
        return ix

    def drop_index_store(self, ident: str) -> None:
        self._require_txn()
        ix = self._indexes[ident]
        self._exec(f"DROP TABLE {ix._table}")
        del self._indexes[ident]
        self.on_rollback(lambda: self._indexes.__setitem__(ident, ix))

    def index_store(self, ident: str) -> IndexStore:
        return self._indexes[ident]

    def list_idents(self) -> list[str]:
        return sorted([*self._records, *self._indexes])

    # --- combined reads: index entry and record in one statement ---------------------------

    def fetch_by_key(self, index: IndexStore, records: RecordStore, key: bytes
                     ) -> list[tuple[RecordId, bytes]]:
        assert isinstance(index, SQLiteIndexStore) and isinstance(records, SQLiteRecordStore)
        sql = (f"SELECT r.id, r.data FROM {index._table} AS i JOIN {records._table} AS r "
               f"ON r.id = i.rid WHERE i.k = ? ORDER BY i.rid")
        return self._qall(sql, (key,))

    def scan_with_records(self, index: IndexStore, records: RecordStore, rng: KeyRange, *,
                          reverse: bool = False) -> Iterator[tuple[bytes, RecordId, bytes]]:
        # Index entries and records change in the same transactions, so the join loses
        # no row: a chunk shorter than asked is the end.
        assert isinstance(index, SQLiteIndexStore) and isinstance(records, SQLiteRecordStore)
        params: dict[str, Any] = {"lo": rng.lo, "hi": rng.hi, "n": _SCAN_FIRST}
        resume = False
        while True:
            interrupt.check()
            rows = self._qall(index._sql_for(rng, reverse, resume, join=records._table), params)
            if not rows:
                return
            yield from rows
            if len(rows) < params["n"]:
                return
            params["lk"], params["lr"] = rows[-1][0], rows[-1][1]
            params["n"] = min(params["n"] * 4, _SCAN_MAX_ROWS)
            resume = True

    # --- transactions ----------------------------------------------------------------------

    def _txn_begin(self) -> None:
        self._exec("BEGIN")

    def _txn_commit(self, durable: bool) -> None:
        if self._dirty_stats:
            self._execmany("INSERT OR REPLACE INTO _stats(ident, count, size) VALUES (?, ?, ?)",
                           [(rs.ident, rs._count, rs._size) for rs in self._dirty_stats])
            self._dirty_stats.clear()
        self._exec("COMMIT")
        if not self.is_durable:
            return
        if durable:
            self._sync_wal()
        else:
            self._unsynced = True

    def _txn_abort(self) -> None:
        self._dirty_stats.clear()
        if self._conn.in_transaction:
            self._exec("ROLLBACK")

    def _txn_savepoint(self, level: int) -> None:
        self._exec(f"SAVEPOINT sp{level}")

    def _txn_release(self, level: int) -> None:
        self._exec(f"RELEASE sp{level}")

    def _txn_rollback_to(self, level: int) -> None:
        self._exec(f"ROLLBACK TO sp{level}")
        self._exec(f"RELEASE sp{level}")

    # --- durability ------------------------------------------------------------------------

    def _sync_wal(self) -> None:
        """fsync the WAL: every commit written so far becomes durable. Called by the
        owning thread (durable commits, flush) and by the group-commit thread."""
        with self._sync_lock:
            self._unsynced = False
            fd = self._wal_fd
            if fd is None:
                try:
                    fd = os.open(self.path + "-wal", os.O_RDONLY)
                except FileNotFoundError:
                    return
                self._wal_fd = fd
            os.fsync(fd)

    def _flush_loop(self) -> None:
        interval = self.group_commit_ms / 1000.0
        while not self._stop.wait(interval):
            if self._unsynced:
                with contextlib.suppress(OSError):
                    self._sync_wal()

    def flush(self) -> None:
        if self.is_durable:
            self._sync_wal()

    def checkpoint(self) -> None:
        if self.in_transaction:
            raise RuntimeError("checkpoint inside a transaction")
        try:  # return pages of dropped stores to the file system (executescript steps
            # the pragma to completion; execute() would free a single page)
            self._conn.executescript("PRAGMA incremental_vacuum;")
        except sqlite3.Error as e:
            raise _storage_error(e) from e
        if self.is_durable:
            self._q1("PRAGMA wal_checkpoint(TRUNCATE)")

    def stats(self) -> dict[str, object]:
        page_size = self._q1("PRAGMA page_size")[0]
        pages = self._q1("PRAGMA page_count")[0]
        free = self._q1("PRAGMA freelist_count")[0]
        return {"name": self.name, "durable": self.is_durable, "path": self.path,
                "fileSize": page_size * pages, "freeBytes": page_size * free,
                "sqliteVersion": sqlite3.sqlite_version}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        try:
            self.abort()
            if self.is_durable:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA optimize")
            self._conn.close()
        finally:
            if self._wal_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._wal_fd)
                self._wal_fd = None
            self._release_lock()

"""The server engine: the stores as tables of one PostgreSQL schema (psycopg 3), shared by
any number of bucketd processes.

Layout of schema ``<schema>`` (default ``bucketd``; created by bucketd, never by hand):

- ``bucketd_version(version)``: one row, the layout version (`SCHEMA_VERSION`). A newer
  one than this code knows stops the start; older ones are migrated at start, step by
  step, under the schema's transaction-level lock (1 -> 2: sequences, shard columns and the
  catalog version added);
- ``bucketd_stores(id, ident, kind, count, size)``: every store, its generated id, kind
  (``r`` record, ``u`` unique index, ``n`` non-unique index) and, for record stores, the
  committed record count and data size. Tables are named by the generated id, so no
  ident (nor any client string) ever becomes SQL text;
- ``bucketd_catalog_version(version)``: one row, bumped by every transaction that changes
  the catalog's records or creates or drops a store;
- record store: ``r<id>(id bigint PRIMARY KEY, data bytea, shard bigint DEFAULT 0)`` and its
  sequence ``r<id>_ids``; ``shard`` is what a caller gives per record on insert (a hash of
  a time-series bucket's meta value), for distributing the table later;
- unique index store: ``i<id>(k bytea PRIMARY KEY, rid bigint)``; non-unique:
  ``i<id>(k bytea, rid bigint, PRIMARY KEY (k, rid))``. ``bytea`` compares bytes as
  unsigned, shorter prefix first, and takes no collation, so the b-tree keeps keystring
  order whatever the database's locale.

Several processes: record ids come from the table's sequence, which steps by `_ID_BLOCK`:
one ``nextval`` reserves a block of ids for this process, so ids never collide and an
insert costs a round trip only once per block. The figures are shared: a transaction
keeps its own changes as deltas (``count()`` is the committed figure read from
``bucketd_stores`` plus them) and its commit adds them, locking the rows in id order so
that two commits never deadlock on them. A unique index is PostgreSQL's primary key, so it
holds across processes (an insert waits for the other transaction and then sees its key).
A transaction that changes the catalog locks the catalog-version row first and fails with
WriteConflict if another process moved it since this one's catalog was read
(`catalog_seen`); `Catalog.refresh_if_changed` compares the version before each command and
reloads (`reload_stores`). Serialization failures and deadlocks (40001, 40P01) become
WriteConflict, which the server retries (`server.storage_service`).

Every value is a bound parameter; batches are single statements over ``unnest`` arrays.
Scans fetch bounded chunks and re-seek after the last row, as the SQLite engine does.
Inside a transaction the connection is in pipeline mode: statements whose answer nobody
reads (savepoints, record inserts, index deletes and non-unique inserts) are queued and
sent with the next statement that is read, so a bucket update costs two round trips, not
six. An error a queued statement meets surfaces at that next read (or at COMMIT); the
pipeline is synced then, so the scope's rollback runs.

Transactions are PostgreSQL's (the connection is in autocommit mode outside them;
nested scopes are savepoints). Durability: commits run with ``synchronous_commit`` off,
so PostgreSQL's WAL writer flushes them within a few ``wal_writer_delay`` (its group
commit; a crash of bucketd loses nothing committed); a ``durable=True`` commit (`j:
true`) sets ``synchronous_commit`` on for its transaction and returns once PostgreSQL has
flushed it. ``group_commit_ms=0`` makes every commit synchronous. `flush()` forces the
WAL to disk with one synchronous empty-xid commit.

Several bucketd processes may use one schema at once: record ids come from per-table
sequences, store figures are deltas applied at commit, DDL bumps a catalog version each
process checks before a command, and each process holds a session advisory lock on its
instance tag (`instance_alive`, for the time-series catalog). A write that replaces a
record another process changed since it was read finds it changed (`expected`) and
raises WriteConflict. The storage thread holds one connection of its own (replaced when
it dies); other threads (metrics) borrow one from a small psycopg_pool pool for read-only
figures.

When the database goes away (restart, network, ``pg_terminate_backend``): the statement
that meets the dead connection raises `StorageUnavailable` (HostUnreachable, 6, a code
drivers retry), the connection is discarded, and every later statement of the same
transaction raises it at once, so the transaction can only roll back (`abort` runs its
`on_rollback` hooks: store figures, created or dropped stores; the server ended its
session and with it the PostgreSQL transaction). A read outside a transaction is asked
once more on a new connection. The next operation reconnects: an idle connection the
server ended is noticed before anything is sent (its goodbye is waiting on the socket);
attempts follow with growing pauses (50 ms doubling to 1 s) for up to `reconnect_wait_s`
(5 s) after the loss; past that, one attempt per second, the others failing at once. A
reconnection takes the schema's advisory lock again. `on_connection_event` is told of the
loss and of the reconnection once each (the server logs them).

A COMMIT sent whose answer was lost: the transaction's xid is asked with its first write
(queued, no round trip of its own); a new connection asks ``pg_xact_status(xid)``:
committed is a normal commit for the caller, aborted the retryable error. When that cannot
be learnt within the wait, `StorageUnavailable.in_doubt` says so and the next reconnection
settles it: a commit that did happen has its store figures read again (the in-process
ones were rolled back); catalog entries changed by it are not reloaded (a DDL commit in
doubt is the one case left open).
"""

from __future__ import annotations

import contextlib
import math
import re
import secrets
import select
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg_pool import ConnectionPool

from storage import interrupt
from storage.engine.base import (
    FULL_RANGE,
    DuplicateKeyInIndex,
    IndexStore,
    KeyRange,
    RecordId,
    RecordStore,
    StorageEngine,
    StorageUnavailable,
    check_ident,
    store_dropped,
    write_conflict,
)
from storage.engine.uri import redact_uri
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["PostgresEngine", "SCHEMA_VERSION", "DEFAULT_SCHEMA"]

SCHEMA_VERSION: Final = 2
DEFAULT_SCHEMA: Final = "bucketd"
_SCHEMA_RE: Final = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_LOCK_CLASS: Final = 0x6275636B  # "buck": the advisory lock space of bucketd
_INSTANCE_CLASS: Final = 0x62756369  # "buci": one lock per live process, its instance tag
_TAG_LIMIT: Final = 1 << 24
_ALIVE_CACHE_S: Final = 5.0
_SCAN_FIRST: Final = 64
_SCAN_MAX_ROWS: Final = 8192
_SCAN_TARGET_BYTES: Final = 4 << 20
_CONNECT_TIMEOUT_S: Final = 15.0
_RECONNECT_WAIT_S: Final = 5.0  # how long a command waits for a database that went away
_RETRY_FIRST_S: Final = 0.05    # first pause between connection attempts, doubling...
_RETRY_MAX_S: Final = 1.0       # ...up to this
_FIGURES_WAIT_S: Final = 2.0    # a figure for metrics does not wait long for a connection
# SQLSTATEs that end the session: admin_shutdown (pg_terminate_backend, fast shutdown),
# crash_shutdown, cannot_connect_now (starting up / shutting down), idle timeouts
_SESSION_ENDED: Final = frozenset({"57P01", "57P02", "57P03", "57P05", "25P03"})
#: record ids a process reserves from a record table's sequence at a time
_ID_BLOCK: Final = 256
_SQL_RESERVE: Final = "SELECT nextval(%s::regclass) FROM generate_series(1, %s)"


def _storage_error(e: psycopg.Error, ident: str | None = None) -> MongoError:
    msg = str(e).strip()
    if isinstance(e, pg_errors.UndefinedTable) and ident is not None:
        return store_dropped(ident)
    if isinstance(e, pg_errors.SerializationFailure | pg_errors.DeadlockDetected):
        # another process's transaction won: the operation is retried (StorageService)
        return MongoError(ErrorCode.WriteConflict, f"storage engine: {msg}")
    if isinstance(e, pg_errors.DiskFull):
        return MongoError(ErrorCode.OutOfDiskSpace, f"storage engine: {msg}")
    if isinstance(e, pg_errors.DataCorrupted | pg_errors.IndexCorrupted):
        return MongoError(ErrorCode.DataCorruptionDetected, f"storage engine: {msg}")
    return MongoError(ErrorCode.InternalError, f"storage engine error: {msg}")


class PostgresRecordStore(RecordStore):
    def __init__(self, engine: PostgresEngine, ident: str, sid: int, table: str,
                 sequence: str) -> None:
        self.ident = ident
        self.sid = sid
        self._engine = engine
        self.table = table
        self._sequence = sequence
        # ids reserved for this process: [_ids_next, _ids_end)
        self._ids_next = self._ids_end = 0
        # this transaction's changes to the shared figures (applied at commit)
        self._dcount = 0
        self._dsize = 0
        t = table
        self._sql_insert = (f"INSERT INTO {t}(id, data, shard) SELECT * FROM "
                            "unnest(%s::int8[], %s::bytea[], %s::int8[])")
        self._sql_insert_noshard = (f"INSERT INTO {t}(id, data) SELECT * FROM "
                                    "unnest(%s::int8[], %s::bytea[])")
        # the self-join's row is the version before the update: its length is the old size
        self._sql_update = (f"UPDATE {t} SET data = %s FROM {t} AS o WHERE {t}.id = %s "
                            f"AND o.id = {t}.id RETURNING octet_length(o.data)")
        self._sql_delete = f"DELETE FROM {t} WHERE id = %s RETURNING octet_length(data)"
        # Another process may have changed the row since the caller read it: the write
        # happens only if it is still what was read (PostgreSQL re-checks the condition on
        # the newest version after waiting for a concurrent writer), else WriteConflict.
        self._sql_update_if = f"UPDATE {t} SET data = %s WHERE id = %s AND data = %s RETURNING id"
        self._sql_delete_if = f"DELETE FROM {t} WHERE id = %s AND data = %s RETURNING id"
        self._sql_get = f"SELECT data FROM {t} WHERE id = %s"
        self._sql_get_many = f"SELECT id, data FROM {t} WHERE id = ANY(%s::int8[])"

    def _live(self) -> None:
        if self._engine._records.get(self.ident) is not self:
            raise store_dropped(self.ident)

    def _stats_changed(self, dcount: int, dsize: int) -> None:
        eng = self._engine
        eng._dirty_stats.add(self)
        self._dcount += dcount
        self._dsize += dsize
        serial = eng._txn_serial

        def undo() -> None:  # a savepoint rolled back (an abort has zeroed them already)
            if eng._txn_serial == serial:
                self._dcount -= dcount
                self._dsize -= dsize

        eng.on_rollback(undo)

    def _new_ids(self, n: int) -> list[RecordId]:
        """`n` increasing ids from this process's reserved block, reserving more blocks
        from the table's sequence (one round trip) when it runs out."""
        have = self._ids_end - self._ids_next
        if have < n:
            blocks = -(-(n - have) // _ID_BLOCK)
            rows = self._engine._qall(_SQL_RESERVE, (self._sequence, blocks), ident=self.ident)
            starts = sorted(r[0] for r in rows)
            ids = list(range(self._ids_next, self._ids_end))
            for start in starts[:-1]:
                ids.extend(range(start, start + _ID_BLOCK))
            self._ids_next, self._ids_end = starts[-1], starts[-1] + _ID_BLOCK
            take = n - len(ids)
            ids.extend(range(self._ids_next, self._ids_next + take))
            self._ids_next += take
            return ids
        first = self._ids_next
        self._ids_next += n
        return list(range(first, first + n))

    def insert(self, datas: Sequence[bytes], *, shards: Sequence[int] | None = None
               ) -> list[RecordId]:
        eng = self._engine
        eng._require_txn()
        rids = self._new_ids(len(datas))
        if shards is None:
            eng._exec(self._sql_insert_noshard, (rids, list(datas)), ident=self.ident)
        else:
            eng._exec(self._sql_insert, (rids, list(datas), list(shards)), ident=self.ident)
        self._stats_changed(len(datas), sum(map(len, datas)))
        return rids

    def update(self, rid: RecordId, data: bytes, *, expected: bytes | None = None) -> None:
        eng = self._engine
        eng._require_txn()
        if expected is None:
            row = eng._q1(self._sql_update, (data, rid), ident=self.ident)
            if row is None:
                raise KeyError(rid)
            old_size = row[0]
        else:
            if eng._q1(self._sql_update_if, (data, rid, expected), ident=self.ident) is None:
                raise write_conflict()
            old_size = len(expected)
        self._stats_changed(0, len(data) - old_size)

    def delete(self, rid: RecordId, *, expected: bytes | None = None) -> None:
        eng = self._engine
        eng._require_txn()
        if expected is None:
            row = eng._q1(self._sql_delete, (rid,), ident=self.ident)
            if row is None:
                raise KeyError(rid)
            old_size = row[0]
        else:
            if eng._q1(self._sql_delete_if, (rid, expected), ident=self.ident) is None:
                raise write_conflict()
            old_size = len(expected)
        self._stats_changed(-1, -old_size)

    def get(self, rid: RecordId) -> bytes | None:
        self._live()
        row = self._engine._q1(self._sql_get, (rid,), ident=self.ident)
        return None if row is None else row[0]

    def get_many(self, rids: Sequence[RecordId]) -> list[bytes | None]:
        if len(rids) == 1:
            return [self.get(rids[0])]
        self._live()
        found = dict(self._engine._qall(self._sql_get_many, (list(rids),), ident=self.ident))
        return [found.get(r) for r in rids]

    def scan(self, *, start: RecordId | None = None, reverse: bool = False
             ) -> Iterator[tuple[RecordId, bytes]]:
        t = self.table
        order = "DESC" if reverse else "ASC"
        op_first = "<=" if reverse else ">="
        op_next = "<" if reverse else ">"
        n = _SCAN_FIRST
        last = start
        first = True
        while True:
            interrupt.check()
            self._live()
            if last is None:
                rows = self._engine._qall(
                    f"SELECT id, data FROM {t} ORDER BY id {order} LIMIT %s", (n,),
                    ident=self.ident)
            else:
                op = op_first if first else op_next
                rows = self._engine._qall(
                    f"SELECT id, data FROM {t} WHERE id {op} %s ORDER BY id {order} LIMIT %s",
                    (last, n), ident=self.ident)
            first = False
            if not rows:
                return
            yield from rows
            if len(rows) < n:
                return
            last = rows[-1][0]
            avg = max(1, sum(len(r[1]) for r in rows) // len(rows))
            n = max(16, min(n * 4, _SCAN_MAX_ROWS, _SCAN_TARGET_BYTES // avg))

    def _figures(self) -> tuple[int, int]:
        """The committed count and size plus this transaction's changes."""
        self._live()
        row = self._engine._q1(self._engine._sql_figures, (self.sid,), ident=self.ident)
        if row is None:
            raise store_dropped(self.ident)
        return int(row[0]) + self._dcount, int(row[1]) + self._dsize

    def count(self) -> int:
        return self._figures()[0]

    def data_size(self) -> int:
        return self._figures()[1]

    def storage_size(self) -> int:
        return self._engine._relation_bytes(self.table, "pg_table_size")

    def truncate(self) -> None:
        eng = self._engine
        eng._require_txn()
        # the rows this transaction sees go; the figures drop by as much
        row = eng._q1(f"WITH d AS (DELETE FROM {self.table} RETURNING octet_length(data) AS n) "
                      "SELECT count(*), coalesce(sum(n), 0) FROM d", ident=self.ident)
        self._stats_changed(-int(row[0]), -int(row[1]))


class PostgresIndexStore(IndexStore):
    def __init__(self, engine: PostgresEngine, ident: str, table: str, unique: bool) -> None:
        self.ident = ident
        self.unique = unique
        self._engine = engine
        self.table = t = table
        # a unique store reads back what it added (to find duplicates); a non-unique one
        # needs no answer, so its inserts queue in the transaction's pipeline
        self._sql_insert = (f"INSERT INTO {t}(k, rid) SELECT * FROM unnest(%s::bytea[], "
                            "%s::int8[]) ON CONFLICT " +
                            ("(k) DO NOTHING RETURNING k, rid" if unique else "DO NOTHING"))
        self._sql_delete = (f"DELETE FROM {t} USING unnest(%s::bytea[], %s::int8[]) AS u(k, rid) "
                            f"WHERE {t}.k = u.k AND {t}.rid = u.rid")
        self._sql_get = f"SELECT rid FROM {t} WHERE k = %s ORDER BY rid"
        self._sql_get_many = f"SELECT k, rid FROM {t} WHERE k = ANY(%s::bytea[]) ORDER BY k, rid"
        self._scan_sql: dict[tuple[Any, ...], str] = {}

    def _live(self) -> None:
        if self._engine._indexes.get(self.ident) is not self:
            raise store_dropped(self.ident)

    def insert(self, entries: Sequence[tuple[bytes, RecordId]]) -> None:
        eng = self._engine
        eng._require_txn()
        if not entries:
            return
        keys = [k for k, _ in entries]
        rids = [r for _, r in entries]
        if not self.unique:
            eng._exec(self._sql_insert, (keys, rids), ident=self.ident)
            return
        added = eng._qall(self._sql_insert, (keys, rids), ident=self.ident)
        if len(added) == len(entries):
            return
        # Some entries were present already (or twice in `entries`): an exact
        # re-insert is a no-op, the same key under another RecordId a duplicate.
        done = set(added)
        for key, rid in entries:
            if (key, rid) in done:
                continue
            row = eng._q1(self._sql_get, (key,), ident=self.ident)
            if row is not None and row[0] != rid:
                raise DuplicateKeyInIndex(self.ident, key, row[0])

    def delete(self, entries: Sequence[tuple[bytes, RecordId]]) -> None:
        self._engine._require_txn()
        if entries:
            self._engine._exec(self._sql_delete, ([k for k, _ in entries],
                                                  [r for _, r in entries]), ident=self.ident)

    def lookup(self, keys: Sequence[bytes]) -> dict[bytes, list[RecordId]]:
        self._live()
        out: dict[bytes, list[RecordId]] = {}
        if len(keys) == 1:
            rows = self._engine._qall(self._sql_get, (keys[0],), ident=self.ident)
            if rows:
                out[keys[0]] = [r[0] for r in rows]
            return out
        for k, rid in self._engine._qall(self._sql_get_many, (list(keys),), ident=self.ident):
            out.setdefault(k, []).append(rid)
        return out

    def sql_for(self, rng: KeyRange, reverse: bool, resume: bool, join: str = "") -> str:
        """The chunk query for a range scan (resuming after lk/lr); with `join`, a record
        table whose data is fetched in the same statement."""
        shape = (rng.lo is not None, rng.lo_inclusive, rng.hi is not None, rng.hi_inclusive,
                 reverse, resume, join)
        query = self._scan_sql.get(shape)
        if query is None:
            conds = []
            # On resume the position after the last row replaces the start bound.
            if rng.lo is not None and not (resume and not reverse):
                conds.append("i.k >= %(lo)s" if rng.lo_inclusive else "i.k > %(lo)s")
            if rng.hi is not None and not (resume and reverse):
                conds.append("i.k <= %(hi)s" if rng.hi_inclusive else "i.k < %(hi)s")
            if resume:
                op = "<" if reverse else ">"
                conds.append(f"i.k {op} %(lk)s" if self.unique
                             else f"(i.k, i.rid) {op} (%(lk)s, %(lr)s)")
            where = f" WHERE {' AND '.join(conds)}" if conds else ""
            direction = " DESC" if reverse else ""
            order = f"i.k{direction}" if self.unique else f"i.k{direction}, i.rid{direction}"
            if join:
                query = (f"SELECT i.k, i.rid, r.data FROM {self.table} AS i JOIN {join} AS r "
                         f"ON r.id = i.rid{where} ORDER BY {order} LIMIT %(n)s")
            else:
                query = (f"SELECT i.k, i.rid FROM {self.table} AS i{where} ORDER BY {order} "
                         f"LIMIT %(n)s")
            self._scan_sql[shape] = query
        return query

    def scan(self, rng: KeyRange = FULL_RANGE, *, reverse: bool = False
             ) -> Iterator[tuple[bytes, RecordId]]:
        params: dict[str, Any] = {"lo": rng.lo, "hi": rng.hi, "n": _SCAN_FIRST}
        resume = False
        while True:
            interrupt.check()
            self._live()
            rows = self._engine._qall(self.sql_for(rng, reverse, resume), params,
                                      ident=self.ident)
            if not rows:
                return
            yield from rows
            if len(rows) < params["n"]:
                return
            params["lk"], params["lr"] = rows[-1]
            params["n"] = min(params["n"] * 4, _SCAN_MAX_ROWS)
            resume = True

    def count(self) -> int:
        self._live()
        row = self._engine._q1(f"SELECT count(*) FROM {self.table}", ident=self.ident)
        return int(row[0]) if row else 0

    def storage_size(self) -> int:
        return self._engine._relation_bytes(self.table, "pg_total_relation_size")

    def truncate(self) -> None:
        self._engine._require_txn()
        self._engine._exec(f"DELETE FROM {self.table}", ident=self.ident)


class PostgresEngine(StorageEngine):
    """The stores in schema `schema` of the PostgreSQL database at `uri`."""

    name = "postgresql"
    is_durable = True
    multi_process = True
    places_by_shard = True

    def __init__(self, uri: str, *, schema: str = DEFAULT_SCHEMA, group_commit_ms: int = 100,
                 connect_timeout_s: float = _CONNECT_TIMEOUT_S,
                 reconnect_wait_s: float = _RECONNECT_WAIT_S) -> None:
        super().__init__()
        if not _SCHEMA_RE.match(schema):
            raise ValueError(f"invalid PostgreSQL schema name {schema!r}")
        self.uri = uri
        self.schema = schema
        self.group_commit_ms = group_commit_ms
        self._closed = False
        self._unsynced = False
        self._dirty_stats: set[PostgresRecordStore] = set()
        self._pipeline: contextlib.ExitStack | None = None
        self._pipe: Any = None  # the psycopg Pipeline of the open transaction
        self._records: dict[str, PostgresRecordStore] = {}
        self._indexes: dict[str, PostgresIndexStore] = {}
        self._catalog_locked: int | None = None  # the version this transaction locked
        self._catalog_dirty = False
        self._txn_serial = 0  # moves at every begin and abort
        self.reconnect_wait_s = reconnect_wait_s
        #: told ("lost" | "restored" | "in doubt", what happened) once per event; the
        #: server logs it (this layer does not log)
        self.on_connection_event: Callable[[str, str], None] | None = None
        self._broken = False  # the connection is gone; an open transaction can only roll back
        self._lost_since: float | None = None  # since when no connection works
        self._retry_at = 0.0  # past the bounded wait: no new attempt before this
        self._txn_wrote = False
        self._in_doubt: int | None = None  # xid of a COMMIT whose outcome is not known yet
        # other threads (metrics) borrow a connection of their own from this pool
        self._pool = ConnectionPool(uri, min_size=0, max_size=1, open=False,
                                    name="bucketd-figures", configure=self._configure,
                                    kwargs={"autocommit": True, "application_name": "bucketd"})
        try:
            self._conn = self._connect_within(time.monotonic() + connect_timeout_s)
        except psycopg.Error as e:
            raise MongoError(ErrorCode.HostUnreachable, "cannot connect to PostgreSQL at "
                             f"{redact_uri(uri)}: {_first_line(e)}") from None
        self._pool.open(wait=False)
        self._alive: dict[int, float] = {}  # instance tag -> when last seen alive
        self._dead: set[int] = set()
        try:
            self._create_schema()
            self.reload_stores()
            self._take_instance_tag()
        except BaseException:
            self._release()
            raise

    # --- setup ---------------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        commit_mode = "off" if self.group_commit_ms > 0 else "on"
        conn.execute(f"SET synchronous_commit TO {commit_mode}")

    def _tbl(self, name: str) -> str:
        return sql.Identifier(self.schema, name).as_string(self._conn)

    def _take_instance_tag(self) -> None:
        """A tag no live process holds, held by a session advisory lock for the life of
        the connection (see `instance_alive`)."""
        for _ in range(64):
            tag = secrets.randbelow(_TAG_LIMIT - 1) + 1
            row = self._q1("SELECT pg_try_advisory_lock(%s, %s)", (_INSTANCE_CLASS, tag))
            if row and row[0]:
                self.instance_tag = tag
                return
        raise MongoError(ErrorCode.InternalError, "no free bucketd instance tag")

    def _retake_instance_tag(self) -> None:
        """After a reconnection: the tag's lock went with the old session. Another
        process that saw this one dead meanwhile may reopen its buckets; their version
        checks keep that safe."""
        if self.instance_tag is not None:
            self._q1("SELECT pg_try_advisory_lock(%s, %s)", (_INSTANCE_CLASS, self.instance_tag))

    def instance_alive(self, tag: int) -> bool:
        """Whether the process holding instance tag `tag` is connected: its session lock
        is in pg_locks. A tag seen dead stays dead (tags are drawn at random from 2**24,
        so a reused one is unlikely and only costs a write conflict); one seen alive is
        asked again after a few seconds."""
        if tag == self.instance_tag:
            return True
        if tag in self._dead:
            return False
        seen = self._alive.get(tag)
        now = time.monotonic()
        if seen is not None and now - seen < _ALIVE_CACHE_S:
            return True
        row = self._q1("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                       "AND classid = %s::int8::oid AND objid = %s::int8::oid "
                       "AND objsubid = 2 AND granted", (_INSTANCE_CLASS, tag))
        if row and row[0]:
            self._alive[tag] = now
            return True
        self._alive.pop(tag, None)
        self._dead.add(tag)
        return False

    def _create_schema(self) -> None:
        """Create (or check, or migrate) the layout, under a transaction-level lock so two
        processes starting at once do it one after the other."""
        schema = sql.Identifier(self.schema).as_string(self._conn)
        version_t, stores_t = self._tbl("bucketd_version"), self._tbl("bucketd_stores")
        self._stores_t = stores_t
        self._catver_t = self._tbl("bucketd_catalog_version")
        self._sql_figures = f"SELECT count, size FROM {stores_t} WHERE id = %s"
        with self.transaction(durable=True):
            self._exec("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_CLASS,))
            self._exec(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            self._exec(f"CREATE TABLE IF NOT EXISTS {version_t}(version integer NOT NULL)")
            self._exec(f"CREATE TABLE IF NOT EXISTS {stores_t}("
                       "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                       "ident text NOT NULL UNIQUE, kind \"char\" NOT NULL, "
                       "count bigint NOT NULL DEFAULT 0, size bigint NOT NULL DEFAULT 0)")
            row = self._q1(f"SELECT max(version) FROM {version_t}")
            version = row[0] if row else None
            if version is None:
                self._create_catalog_version()
                self._exec(f"INSERT INTO {version_t}(version) VALUES (%s)", (SCHEMA_VERSION,))
            elif version > SCHEMA_VERSION:
                raise MongoError(ErrorCode.UnsupportedFormat,
                                 f"the PostgreSQL schema {self.schema} has layout version "
                                 f"{version}; this bucketd knows versions up to "
                                 f"{SCHEMA_VERSION}: use a newer bucketd")
            elif version < SCHEMA_VERSION:
                self._migrate_1_to_2()
                self._exec(f"UPDATE {version_t} SET version = %s", (SCHEMA_VERSION,))

    def _create_catalog_version(self) -> None:
        self._exec(f"CREATE TABLE {self._catver_t}(version bigint NOT NULL)")
        self._exec(f"INSERT INTO {self._catver_t}(version) VALUES (1)")

    def _migrate_1_to_2(self) -> None:
        """Version 1 kept record ids and figures in its one process: give each record table
        a sequence past its highest id and a shard column, and add the catalog version.
        A bucketd of layout 1 still serving the schema holds its session lock: refused."""
        row = self._q1("SELECT pg_try_advisory_xact_lock(%s, hashtext(%s))",
                       (_LOCK_CLASS, self.schema))
        if not row or not row[0]:
            raise MongoError(ErrorCode.DBPathInUse,
                             f"the PostgreSQL schema {self.schema} has layout version 1 and an "
                             "older bucketd is still using it: stop it before upgrading")
        self._create_catalog_version()
        for (sid,) in self._qall(f"SELECT id FROM {self._stores_t} WHERE kind = 'r' "
                                 "ORDER BY id"):
            table, seq = self._tbl(f"r{sid}"), self._tbl(f"r{sid}_ids")
            self._exec(f"ALTER TABLE {table} ADD COLUMN shard bigint NOT NULL DEFAULT 0")
            self._exec(f"CREATE SEQUENCE {seq} INCREMENT BY {_ID_BLOCK} MINVALUE 1 "
                       f"OWNED BY {table}.id")
            self._exec(f"SELECT setval(%s::regclass, max(id) + 1, false) FROM {table} "
                       "HAVING max(id) IS NOT NULL", (seq,))

    def reload_stores(self) -> None:
        """Read the store list again (another process may have created or dropped
        stores); objects of stores that are still there are kept."""
        if self.in_transaction:
            raise RuntimeError("reload_stores inside a transaction")
        records: dict[str, PostgresRecordStore] = {}
        indexes: dict[str, PostgresIndexStore] = {}
        for sid, ident, kind in self._qall(f"SELECT id, ident, kind FROM {self._stores_t}"):
            kind = kind.decode() if isinstance(kind, bytes) else kind
            if kind == "r":
                rs = self._records.get(ident)
                if rs is None or rs.sid != sid:
                    rs = self._record_store_of(ident, sid)
                records[ident] = rs
            else:
                ix = self._indexes.get(ident)
                if ix is None or ix.table != self._tbl(f"i{sid}"):
                    ix = PostgresIndexStore(self, ident, self._tbl(f"i{sid}"), kind == "u")
                indexes[ident] = ix
        self._records, self._indexes = records, indexes

    def _record_store_of(self, ident: str, sid: int) -> PostgresRecordStore:
        return PostgresRecordStore(self, ident, sid, self._tbl(f"r{sid}"),
                                   self._tbl(f"r{sid}_ids"))

    # --- the catalog version: DDL of one process seen by the others ------------------------

    def catalog_version(self) -> int | None:
        row = self._q1(f"SELECT version FROM {self._catver_t}")
        return int(row[0]) if row else None

    def note_catalog_change(self) -> None:
        """Lock the catalog version row for this transaction (DDL of several processes
        goes one at a time) and check that this process's catalog is the latest: if
        another process changed it since, WriteConflict (the operation is retried after
        a refresh)."""
        self._require_txn()
        self._catalog_dirty = True
        if self._catalog_locked is not None:
            return
        row = self._q1(f"SELECT version FROM {self._catver_t} FOR UPDATE")
        version = int(row[0])
        if self.catalog_seen is not None and version != self.catalog_seen:
            raise MongoError(ErrorCode.WriteConflict,
                             "the catalog was changed by another bucketd process")
        self._catalog_locked = version

    # --- the connection: loss and reconnection ------------------------------------------

    def _connect(self, timeout_s: float) -> psycopg.Connection[Any]:
        conn = psycopg.Connection.connect(self.uri, autocommit=True, application_name="bucketd",
                                          connect_timeout=max(2, math.ceil(timeout_s)))
        try:
            self._configure(conn)
        except BaseException:
            conn.close()
            raise
        conn.prepared_max = 1024
        self._cur = conn.cursor(binary=True)  # statements whose rows are read
        # statements nobody reads an answer of: a cursor of their own, so that in a
        # pipeline their results never stand before the rows `_cur` waits for
        self._wcur = conn.cursor(binary=True)
        self._xcur = conn.cursor(binary=True)  # the xid asked for beside each COMMIT
        return conn

    def _connect_within(self, deadline: float) -> psycopg.Connection[Any]:
        """A new connection, asking again with growing pauses until `deadline`."""
        pause = _RETRY_FIRST_S
        while True:
            interrupt.check()  # killOp stops the wait
            try:
                return self._connect(max(0.0, deadline - time.monotonic()))
            except psycopg.Error:
                if time.monotonic() + pause >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, _RETRY_MAX_S)

    def _lost(self, e: BaseException) -> bool:
        """Did `e` end the connection (server restart, pg_terminate_backend, network)?"""
        if self._conn.broken or self._conn.closed:
            return True
        state = getattr(e, "sqlstate", None)
        if state is None:
            # not the server's answer to SQL (those carry a SQLSTATE) but the connection's
            # own state failing (e.g. a pipeline left busy by a session the server ended):
            # it cannot be trusted any more
            return isinstance(e, psycopg.OperationalError | psycopg.InterfaceError)
        return state.startswith("08") or state in _SESSION_ENDED

    def _mark_lost(self, e: BaseException) -> StorageUnavailable:
        """Discard the connection; what the statement that met `e` raises."""
        self._broken = True
        self._pipeline = None
        self._pipe = None
        with contextlib.suppress(Exception):
            self._conn.close()
        why = _first_line(e)
        if self._lost_since is None:
            self._lost_since = time.monotonic()
            self._retry_at = 0.0
            self._event("lost", f"the connection to PostgreSQL was lost: {why}")
        return StorageUnavailable(f"connection to PostgreSQL lost: {why}")

    def _event(self, kind: str, detail: str) -> None:
        if self.on_connection_event is not None:
            with contextlib.suppress(Exception):
                self.on_connection_event(kind, detail)

    def _usable(self) -> None:
        """Before a statement: inside a transaction whose connection broke, fail at once
        (it can only roll back); outside one, replace a dead connection first."""
        if self._broken:
            if self._scopes:
                raise StorageUnavailable("connection to PostgreSQL lost during the transaction")
            self._reconnect()
        elif self._pipeline is None and _hung_up(self._conn):
            # the server ended this idle session (restart, pg_terminate_backend): its
            # goodbye is waiting on the socket; a new connection before anything is sent
            self._mark_lost(psycopg.OperationalError(_goodbye(self._conn)))
            self._reconnect()

    def _reconnect(self) -> None:
        """Connect again: within `reconnect_wait_s` of the loss, with growing pauses; past
        it, one quick attempt per `_RETRY_MAX_S` (the others fail at once), so commands get
        the retryable error quickly while the database stays away."""
        now = time.monotonic()
        since = self._lost_since if self._lost_since is not None else now
        deadline = since + self.reconnect_wait_s
        if now >= deadline:
            if now < self._retry_at:
                raise StorageUnavailable("PostgreSQL is unreachable (reconnecting)")
            deadline = now + 0.001  # one attempt
        try:
            conn = self._connect_within(deadline)
        except psycopg.Error as e:
            self._retry_at = time.monotonic() + _RETRY_MAX_S
            raise StorageUnavailable(f"PostgreSQL is unreachable: {_first_line(e)}") from None
        self._conn = conn
        self._broken = False
        try:
            self._retake_instance_tag()
            self._settle_in_doubt()
        except BaseException:
            self._broken = True
            with contextlib.suppress(Exception):
                conn.close()
            raise
        down = time.monotonic() - since
        self._lost_since = None
        self._event("restored", f"reconnected to PostgreSQL after {down:.1f} s")

    def _settle_in_doubt(self) -> None:
        """After a reconnection: a COMMIT whose outcome was left unknown is looked up and
        logged; store figures and the catalog come from the database, so nothing in this
        process needs reading again."""
        xid, self._in_doubt = self._in_doubt, None
        if xid is None:
            return
        if self._xact_status(xid) == "committed":
            # store figures and the catalog are read from the database (its version)
            self._event("in doubt", f"the transaction {xid} whose COMMIT answer was lost "
                        "did commit")

    def _xact_status(self, xid: int) -> str | None:
        """'committed', 'aborted' or None (not known); waits while it is 'in progress'
        (a terminated session still finishing)."""
        for _ in range(50):
            row = self._q1("SELECT pg_xact_status(%s::text::xid8)", (str(xid),))
            status = row[0] if row else None
            if status != "in progress":
                return status
            time.sleep(0.02)
        return None

    # --- SQL helpers (every statement goes through these) ----------------------------------

    def _exec(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None, *,
              ident: str | None = None) -> None:
        self._usable()
        try:
            self._wcur.execute(query, params)
        except psycopg.Error as e:
            raise self._failed(e, ident) from e

    def _q1(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None, *,
            ident: str | None = None) -> Any:
        return self._read(query, params, ident, one=True)

    def _qall(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None, *,
              ident: str | None = None) -> list[Any]:
        rows: list[Any] = self._read(query, params, ident, one=False)
        return rows

    def _read(self, query: str, params: Sequence[Any] | dict[str, Any] | None,
              ident: str | None, *, one: bool) -> Any:
        for attempt in (1, 2):
            self._usable()
            try:
                self._cur.execute(query, params)
                return self._cur.fetchone() if one else self._cur.fetchall()
            except psycopg.Error as e:
                # a read outside a transaction is asked again once on a new connection
                again = attempt == 1 and not self._scopes and self._lost(e)
                err = self._failed(e, ident)
                if not again:
                    raise err from e
        raise AssertionError("unreachable")

    def _failed(self, e: psycopg.Error, ident: str | None) -> MongoError:
        """The MongoError for `e`; in a pipeline, after a sync: libpq skips everything
        queued after an error until one, so the rollback that follows would not run."""
        if self._lost(e):
            return self._mark_lost(e)
        if self._pipeline is not None:
            with contextlib.suppress(psycopg.Error):
                self._pipe.sync()
        return _storage_error(e, ident)

    def _relation_bytes(self, table: str, function: str) -> int:
        row = self._q1(f"SELECT {function}(%s::regclass)", (table,))
        return int(row[0] or 0) if row else 0

    # --- stores ---------------------------------------------------------------------------

    def _new_store(self, ident: str, kind: str) -> int:
        self._require_txn()
        check_ident(ident)
        if ident in self._records or ident in self._indexes:
            raise ValueError(f"ident {ident} exists")
        self.note_catalog_change()
        row = self._q1(f"INSERT INTO {self._stores_t}(ident, kind) VALUES (%s, %s) RETURNING id",
                       (ident, kind))
        return int(row[0])

    def create_record_store(self, ident: str) -> RecordStore:
        sid = self._new_store(ident, "r")
        rs = self._record_store_of(ident, sid)
        self._exec(f"CREATE TABLE {rs.table}(id bigint PRIMARY KEY, data bytea NOT NULL, "
                   "shard bigint NOT NULL DEFAULT 0)")
        self._exec(f"CREATE SEQUENCE {rs._sequence} INCREMENT BY {_ID_BLOCK} MINVALUE 1 "
                   f"OWNED BY {rs.table}.id")
        self._records[ident] = rs
        self.on_rollback(lambda: self._records.pop(ident, None))
        return rs

    def drop_record_store(self, ident: str) -> None:
        self._require_txn()
        rs = self._records[ident]
        self.note_catalog_change()
        self._exec(f"DROP TABLE {rs.table}")  # its sequence goes with it (OWNED BY)
        self._exec(f"DELETE FROM {self._stores_t} WHERE ident = %s", (ident,))
        del self._records[ident]
        self._dirty_stats.discard(rs)
        self.on_rollback(lambda: self._records.__setitem__(ident, rs))

    def record_store(self, ident: str) -> RecordStore:
        return self._records[ident]

    def create_index_store(self, ident: str, *, unique: bool) -> IndexStore:
        sid = self._new_store(ident, "u" if unique else "n")
        table = self._tbl(f"i{sid}")
        key = "k bytea PRIMARY KEY" if unique else "k bytea NOT NULL"
        pk = "" if unique else ", PRIMARY KEY (k, rid)"
        self._exec(f"CREATE TABLE {table}({key}, rid bigint NOT NULL{pk})")
        ix = PostgresIndexStore(self, ident, table, unique)
        self._indexes[ident] = ix
        self.on_rollback(lambda: self._indexes.pop(ident, None))
        return ix

    def drop_index_store(self, ident: str) -> None:
        self._require_txn()
        ix = self._indexes[ident]
        self.note_catalog_change()
        self._exec(f"DROP TABLE {ix.table}")
        self._exec(f"DELETE FROM {self._stores_t} WHERE ident = %s", (ident,))
        del self._indexes[ident]
        self.on_rollback(lambda: self._indexes.__setitem__(ident, ix))

    def index_store(self, ident: str) -> IndexStore:
        return self._indexes[ident]

    def list_idents(self) -> list[str]:
        return sorted([*self._records, *self._indexes])

    # --- combined reads: index entry and record in one statement ---------------------------

    def fetch_by_key(self, index: IndexStore, records: RecordStore, key: bytes
                     ) -> list[tuple[RecordId, bytes]]:
        assert isinstance(index, PostgresIndexStore)
        assert isinstance(records, PostgresRecordStore)
        index._live()
        records._live()
        query = (f"SELECT r.id, r.data FROM {index.table} AS i JOIN {records.table} AS r "
                 f"ON r.id = i.rid WHERE i.k = %s ORDER BY i.rid")
        return [tuple(r) for r in self._qall(query, (key,), ident=index.ident)]

    def scan_with_records(self, index: IndexStore, records: RecordStore, rng: KeyRange, *,
                          reverse: bool = False) -> Iterator[tuple[bytes, RecordId, bytes]]:
        # Index entries and records change in the same transactions, so the join loses
        # no row: a chunk shorter than asked is the end.
        assert isinstance(index, PostgresIndexStore)
        assert isinstance(records, PostgresRecordStore)
        params: dict[str, Any] = {"lo": rng.lo, "hi": rng.hi, "n": _SCAN_FIRST}
        resume = False
        while True:
            interrupt.check()
            index._live()
            records._live()
            rows = self._qall(index.sql_for(rng, reverse, resume, join=records.table), params,
                              ident=index.ident)
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
        # Inside a transaction the connection is in pipeline mode: statements whose
        # result nobody reads (savepoints, index and record writes) are queued and go out
        # with the next one that is read, in one round trip instead of one each.
        self._usable()  # a new connection now if the last one is gone
        self._txn_wrote = False
        self._txn_serial += 1
        self._pipeline = contextlib.ExitStack()
        try:
            self._pipe = self._pipeline.enter_context(self._conn.pipeline())
        except psycopg.Error as e:
            self._pipeline = None
            raise self._failed(e, None) from e
        self._exec("BEGIN")

    def _require_txn(self) -> None:
        super()._require_txn()
        if not self._txn_wrote:
            # The transaction's xid, asked with its first write (no round trip of its own:
            # the answer comes with the next read): if the connection dies with COMMIT
            # unanswered, pg_xact_status(xid) tells on a new connection what happened.
            self._txn_wrote = True
            self._usable()
            try:
                self._xcur.execute("SELECT pg_current_xact_id()::text")
            except psycopg.Error as e:
                raise self._failed(e, None) from e

    def _txn_commit(self, durable: bool) -> None:
        if self._dirty_stats:
            stores = sorted((rs for rs in self._dirty_stats if rs._dcount or rs._dsize),
                            key=lambda rs: rs.sid)
            self._dirty_stats.clear()
            if stores:
                # deltas, so that every process's changes add up; the rows are locked in
                # id order first, so two commits never wait for each other in a cycle
                sids = [rs.sid for rs in stores]
                self._exec(f"SELECT 1 FROM {self._stores_t} WHERE id = ANY(%s::int8[]) "
                           "ORDER BY id FOR UPDATE", (sids,))
                self._exec(f"UPDATE {self._stores_t} AS s SET count = s.count + u.dc, "
                           "size = s.size + u.ds FROM unnest(%s::int8[], %s::int8[], "
                           "%s::int8[]) AS u(id, dc, ds) WHERE s.id = u.id",
                           (sids, [rs._dcount for rs in stores], [rs._dsize for rs in stores]))
                for rs in stores:
                    rs._dcount = rs._dsize = 0
        bumped = None
        if self._catalog_dirty:
            row = self._q1(f"UPDATE {self._catver_t} SET version = version + 1 "
                           "RETURNING version")
            bumped = int(row[0])
        locked = self._catalog_locked
        self._catalog_locked, self._catalog_dirty = None, False
        if durable and self.group_commit_ms > 0:
            self._exec("SET LOCAL synchronous_commit TO on")
        self._usable()  # a transaction whose connection broke never sends COMMIT
        try:
            self._exec("COMMIT")
            self._end_pipeline()  # waits for the COMMIT (and raises what a queued write hit)
        except StorageUnavailable:
            if not self._txn_wrote:
                raise  # nothing to commit, nothing in doubt
            self._commit_answer_lost(durable)  # returns when it did commit
        self._unsynced = not durable and self.group_commit_ms > 0
        if bumped is not None and locked is not None and bumped == locked + 1 \
                and self.catalog_seen == locked:
            self.catalog_seen = bumped  # nobody else changed it: no refresh needed

    def _commit_answer_lost(self, durable: bool) -> None:
        """The connection died with COMMIT sent and unanswered: ask a new connection
        (within the bounded wait) whether the transaction committed. Returns if it did;
        raises StorageUnavailable if it did not, with `in_doubt` if that cannot be told
        (then the next reconnection settles it: `_settle_in_doubt`)."""
        xid: int | None = None
        with contextlib.suppress(Exception):
            row = self._xcur.fetchone()
            xid = int(row[0]) if row else None
        if xid is None:
            self._event("in doubt", "the connection to PostgreSQL was lost with a COMMIT "
                        "unanswered and the transaction's id unknown: whether it committed "
                        "cannot be told")
            raise StorageUnavailable("connection to PostgreSQL lost during COMMIT; whether "
                                     "it took effect is not known", in_doubt=True)
        try:
            self._reconnect()
        except StorageUnavailable:
            self._in_doubt = xid
            raise StorageUnavailable("connection to PostgreSQL lost during COMMIT; whether "
                                     "it took effect is not known yet", in_doubt=True) from None
        status = self._xact_status(xid)
        if status == "committed":
            self._unsynced = not durable
            if durable:
                self._flush_wal()
            return
        if status is None:
            raise StorageUnavailable("connection to PostgreSQL lost during COMMIT; whether "
                                     "it took effect is not known", in_doubt=True)
        raise StorageUnavailable("connection to PostgreSQL lost during COMMIT; the "
                                 "transaction did not commit")

    def _end_pipeline(self) -> None:
        stack, self._pipeline = self._pipeline, None
        if stack is not None:
            try:
                stack.close()
            except psycopg.Error as e:
                raise self._failed(e, None) from e

    def _txn_abort(self) -> None:
        self._txn_serial += 1
        for rs in self._dirty_stats:
            rs._dcount = rs._dsize = 0
        self._dirty_stats.clear()
        self._catalog_locked, self._catalog_dirty = None, False
        if not self._broken:
            with contextlib.suppress(MongoError):  # the error being rolled back, seen again
                self._end_pipeline()
        self._pipeline = None
        if self._broken:
            return  # the server rolled it back when the session ended
        if self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with contextlib.suppress(StorageUnavailable):  # then it ended with the session
                self._exec("ROLLBACK")

    def _txn_savepoint(self, level: int) -> None:
        self._exec(f"SAVEPOINT sp{level}")

    def _txn_release(self, level: int) -> None:
        self._exec(f"RELEASE SAVEPOINT sp{level}")

    def _txn_rollback_to(self, level: int) -> None:
        self._exec(f"ROLLBACK TO SAVEPOINT sp{level}")
        self._exec(f"RELEASE SAVEPOINT sp{level}")

    # --- durability and figures --------------------------------------------------------------

    def flush(self) -> None:
        """A synchronous commit of a transaction with an xid flushes the WAL up to its
        commit record, and with it every asynchronous commit before it."""
        if not self._unsynced or self.in_transaction:
            return
        self._flush_wal()

    def _flush_wal(self) -> None:
        self._exec("BEGIN")
        try:
            self._exec("SET LOCAL synchronous_commit TO on")
            self._exec("SELECT pg_current_xact_id()")
            self._exec("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                self._exec("ROLLBACK")
            raise
        self._unsynced = False

    def size_bytes(self) -> int:
        """Bytes of every table of the schema, with indexes and TOAST; callable from any
        thread (it borrows its own connection)."""
        with self._pool.connection(timeout=_FIGURES_WAIT_S) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r'", (self.schema,)).fetchone()
        return int(row[0]) if row else 0

    def stats(self) -> dict[str, object]:
        info = self._conn.info
        out: dict[str, object] = {"name": self.name, "durable": self.is_durable,
                                  "uri": redact_uri(self.uri), "schema": self.schema,
                                  "schemaVersion": SCHEMA_VERSION,
                                  "connected": not self._broken}
        if not self._broken:
            out.update(database=info.dbname, serverVersion=info.server_version)
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.abort()
            with contextlib.suppress(psycopg.Error, MongoError):
                self.flush()
        finally:
            self._release()

    def _release(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()  # ends the session: its advisory locks go with it
        self._pool.close()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _hung_up(conn: psycopg.Connection[Any]) -> bool:
    """An idle connection with something to read has been ended by the server (it says
    goodbye, FATAL 57P01, then closes): nothing else arrives unasked on ours."""
    try:
        return bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError, psycopg.Error):
        return True


def _goodbye(conn: psycopg.Connection[Any]) -> str:
    """The server's last words on a connection `_hung_up` found (or a generic phrase)."""
    with contextlib.suppress(Exception):
        conn.pgconn.consume_input()
        msg = conn.pgconn.error_message.decode(errors="replace").strip()
        if msg:
            return msg.splitlines()[0]
    return "the server closed the connection"

"""The storage engine contract, shaped like MongoDB's: record stores, sorted index
stores and a transaction that spans both.

Everything above this module (catalog, collections, commands) talks to an engine
only through these classes, so another engine (PostgreSQL, ...) can be added without
touching them. Engines in this package: `memory.MemoryEngine` (pure Python, for unit
tests), `sqlite.SQLiteEngine` (the embedded default, durable) and
`postgresql.PostgresEngine` (a PostgreSQL database, durable).

Record store (`RecordStore`, one per collection): RecordId (a positive int the store
assigns, increasing) -> BSON bytes. Insert, update, delete, get, and a scan in
RecordId order (either direction).

Index store (`IndexStore`, one per index): entries ``(key bytes, RecordId)`` kept in
byte order of the key, then RecordId. A unique store admits a key once (inserting a
present key under another RecordId raises `DuplicateKeyInIndex`); a non-unique store
admits the same key with many RecordIds. Keys are opaque bytes here; the catalog
layer makes them with `storage.keystring`, whose byte order is BSON order.

Scans never hold an engine cursor between items: they fetch chunks and resume after
the last item seen (like MongoDB's saveState/restoreState), so writes may happen
between two `next()` calls of a live scan; an item changed behind the scan may or may
not be seen, but a scan never fails because of it - unless its store is dropped:
then the next chunk raises MongoError QueryPlanKilled (175), as a MongoDB cursor
does when its collection goes away.

Transactions (`StorageEngine.transaction()`): all-or-nothing over every store of the
engine, catalog included. Nested use opens a savepoint: an error inside the inner
block rolls back only that block. `on_rollback`/`on_commit` register callbacks that
run when the innermost open scope rolls back, or when the outermost one commits;
layers above use them to keep in-memory caches consistent. With
``transaction(durable=True)`` the commit is on stable storage when it returns
(`j: true`); otherwise an engine that `is_durable` may lose at most the last
`group_commit_ms` of commits on power loss and nothing on a process crash.

A server engine whose database goes away raises `StorageUnavailable` (retryable) from
the statement that finds out, and from every later one of the same transaction, which
can then only roll back; the next transaction reconnects.

Threading: an engine and everything it returns belong to the thread that opened it
(the server's single storage worker thread); none of it is thread-safe.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final, TypeVar

from storage import interrupt
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

T = TypeVar("T")

__all__ = [
    "write_conflict",
    "retry_write_conflicts",
    "RecordId",
    "RecordStore",
    "IndexStore",
    "StorageEngine",
    "DuplicateKeyInIndex",
    "KeyRange",
    "FULL_RANGE",
    "check_ident",
    "store_dropped",
    "StorageUnavailable",
]

RecordId = int

_IDENT_RE: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")


def store_dropped(ident: str) -> MongoError:
    """What a scan raises when its store was dropped under it."""
    return MongoError(ErrorCode.QueryPlanKilled, f"collection dropped (store {ident})")


def write_conflict() -> MongoError:
    """What a write raises when another process changed its record since it was read
    (mongod's words for a WiredTiger write conflict); the operation retries it."""
    return MongoError(ErrorCode.WriteConflict,
                      "WriteConflict error: this operation conflicted with another "
                      "operation. Please retry your operation or multi-document transaction.")


def retry_write_conflicts(fn: Callable[[], T], *, attempts: int = 100) -> T:
    """`fn()`, run again after a WriteConflict (another process changed what it wrote;
    `fn` runs its own transaction, which the conflict rolled back), with a growing pause,
    as mongod retries an operation that hit a write conflict."""
    for attempt in range(attempts):
        try:
            return fn()
        except MongoError as e:
            if e.code != ErrorCode.WriteConflict or attempt == attempts - 1:
                raise
        time.sleep(min(0.0005 * 2 ** attempt, 0.05))
    raise AssertionError("unreachable")


class StorageUnavailable(MongoError):
    """The engine's database cannot be reached (a server engine whose connection dropped
    or whose server is away): HostUnreachable (6), a code drivers retry. Nothing of the
    transaction it ends was committed, unless `in_doubt`: a COMMIT was sent, its answer
    was lost, and whether it took effect could not be learnt in time."""

    __slots__ = ("in_doubt",)

    def __init__(self, errmsg: str, *, in_doubt: bool = False) -> None:
        super().__init__(ErrorCode.HostUnreachable, errmsg)
        self.in_doubt = in_doubt


def check_ident(ident: str) -> str:
    """Idents name stores on disk: letters, digits, '_', '.', '-' only."""
    if not _IDENT_RE.match(ident):
        raise ValueError(f"invalid storage ident {ident!r}")
    return ident


class DuplicateKeyInIndex(Exception):
    """A unique index store already holds `key` for another RecordId."""

    def __init__(self, ident: str, key: bytes, existing: RecordId) -> None:
        super().__init__(f"duplicate key in index store {ident}")
        self.ident = ident
        self.key = key
        self.existing = existing


@dataclass(frozen=True, slots=True)
class KeyRange:
    """Keys K with lo <= K (or lo < K) and K <= hi (or K < hi); None = unbounded.

    Bounds are compared as bytes with the stored key (without its RecordId)."""

    lo: bytes | None = None
    lo_inclusive: bool = True
    hi: bytes | None = None
    hi_inclusive: bool = True

    def contains(self, key: bytes) -> bool:
        if self.lo is not None and (key < self.lo or (key == self.lo and not self.lo_inclusive)):
            return False
        return not (self.hi is not None
                    and (key > self.hi or (key == self.hi and not self.hi_inclusive)))


FULL_RANGE: Final = KeyRange()


class RecordStore(ABC):
    """RecordId -> BSON bytes for one collection."""

    ident: str

    @abstractmethod
    def insert(self, datas: Sequence[bytes], *, shards: Sequence[int] | None = None
               ) -> list[RecordId]:
        """Store each record under a new RecordId (increasing) and return the ids.
        `shards`: per record, the value a distributed engine may place it by (a hash of a
        bucket's meta value); engines that do not distribute ignore it."""

    @abstractmethod
    def update(self, rid: RecordId, data: bytes, *, expected: bytes | None = None) -> None:
        """Replace the record; KeyError if there is none. `expected` is the record as the
        caller read it: an engine other processes write too (`multi_process`) raises
        WriteConflict (112) when the stored record is no longer that, so a concurrent
        change is never overwritten unseen; a single-process engine may skip the check."""

    def update_many(self, updates: Sequence[tuple[RecordId, bytes, bytes | None]],
                    old_sizes: Sequence[int | None] | None = None) -> None:
        """`update` of each (rid, data, expected); KeyError for a missing one. Engines
        write them in fewer statements where they can. `old_sizes`: the length of each
        record replaced, where the caller knows it (an engine need not read it then)."""
        for rid, data, expected in updates:
            self.update(rid, data, expected=expected)

    @abstractmethod
    def delete(self, rid: RecordId, *, expected: bytes | None = None) -> None:
        """Remove the record; KeyError if there is none. `expected` as for `update`."""

    @abstractmethod
    def get(self, rid: RecordId) -> bytes | None: ...

    @abstractmethod
    def get_many(self, rids: Sequence[RecordId]) -> list[bytes | None]:
        """The records for `rids`, in that order (None where missing)."""

    @abstractmethod
    def scan(self, *, start: RecordId | None = None, reverse: bool = False
             ) -> Iterator[tuple[RecordId, bytes]]:
        """Records in RecordId order from `start` (inclusive) on; descending if reverse."""

    @abstractmethod
    def count(self) -> int: ...

    @abstractmethod
    def data_size(self) -> int:
        """Sum of the record sizes in bytes."""

    @abstractmethod
    def storage_size(self) -> int:
        """Bytes the store occupies in the engine (an estimate where unknown)."""

    @abstractmethod
    def truncate(self) -> None:
        """Remove every record."""


class IndexStore(ABC):
    """Sorted (key bytes, RecordId) entries for one index."""

    ident: str
    unique: bool

    @abstractmethod
    def insert(self, entries: Sequence[tuple[bytes, RecordId]]) -> None:
        """Add entries. Unique store: `DuplicateKeyInIndex` if a key is present for
        another RecordId (entries before it may have been added; roll back the scope).
        Adding an entry that is already present is a no-op."""

    @abstractmethod
    def delete(self, entries: Sequence[tuple[bytes, RecordId]]) -> None:
        """Remove entries; absent ones are ignored."""

    @abstractmethod
    def lookup(self, keys: Sequence[bytes]) -> dict[bytes, list[RecordId]]:
        """For each of `keys` that is present, the RecordIds stored under it."""

    @abstractmethod
    def scan(self, rng: KeyRange = FULL_RANGE, *, reverse: bool = False
             ) -> Iterator[tuple[bytes, RecordId]]:
        """Entries with keys in `rng`, in (key, RecordId) order or its reverse."""

    @abstractmethod
    def count(self) -> int:
        """Number of entries (may cost a scan)."""

    @abstractmethod
    def storage_size(self) -> int: ...

    @abstractmethod
    def truncate(self) -> None: ...


@dataclass
class _Scope:
    rollbacks: list[Callable[[], object]] = field(default_factory=list)
    commits: list[Callable[[], None]] = field(default_factory=list)


class StorageEngine(ABC):
    """Owns the stores and the transaction. Subclasses implement the `_txn_*` hooks
    and the store factories; scope bookkeeping and callbacks live here."""

    name: str = "abstract"
    #: commits survive a process crash (and, when durable=True, power loss)
    is_durable: bool = False
    #: other processes may write the same stores at the same time (PostgreSQL): writes
    #: check that what they replace is what they read (`RecordStore.update`'s `expected`)
    multi_process: bool = False
    #: record stores place records by the `shards` values inserts give (else ignored)
    places_by_shard: bool = False
    #: a `multi_process` engine's tag of this process (24 bits), unique among the live
    #: processes on the storage (`instance_alive`); None for single-process engines
    instance_tag: int | None = None

    def __init__(self) -> None:
        self._scopes: list[_Scope] = []
        self._durable_requested = False
        #: outermost transactions committed so far (an operation that failed before its
        #: first commit may be run again)
        self.commits = 0
        #: the catalog version the catalog above was last loaded at (engines shared by
        #: several processes; see `catalog_version`)
        self.catalog_seen: int | None = None

    def instance_alive(self, tag: int) -> bool:
        """Whether a process with instance tag `tag` is using the storage now (never, on
        a single-process engine: everything stored is this process's)."""
        return False

    # --- stores ---------------------------------------------------------------------

    @abstractmethod
    def create_record_store(self, ident: str) -> RecordStore: ...

    @abstractmethod
    def drop_record_store(self, ident: str) -> None: ...

    @abstractmethod
    def record_store(self, ident: str) -> RecordStore:
        """KeyError if there is no such store."""

    @abstractmethod
    def create_index_store(self, ident: str, *, unique: bool) -> IndexStore: ...

    @abstractmethod
    def drop_index_store(self, ident: str) -> None: ...

    @abstractmethod
    def index_store(self, ident: str) -> IndexStore:
        """KeyError if there is no such store."""

    @abstractmethod
    def list_idents(self) -> list[str]:
        """Idents of every record and index store."""

    # --- several processes on one database (engines that allow it) -----------------------

    def catalog_version(self) -> int | None:
        """A number that moves whenever any process commits a change to the catalog's
        records or creates or drops a store; None where only this process writes."""
        return None

    def note_catalog_change(self) -> None:  # noqa: B027 - optional hook
        """The open transaction changes the catalog (called before the change): a shared
        engine serialises such transactions and raises WriteConflict when another
        process changed the catalog since `catalog_seen`."""

    def reload_stores(self) -> None:  # noqa: B027 - optional hook
        """Read the list of stores again (outside a transaction), keeping the objects of
        stores that are still there."""

    def has_record_store(self, ident: str) -> bool:
        try:
            self.record_store(ident)
        except KeyError:
            return False
        return True

    # --- combined index + record reads (one round trip where the engine can) -------------

    def fetch_by_key(self, index: IndexStore, records: RecordStore, key: bytes
                     ) -> list[tuple[RecordId, bytes]]:
        """The records whose entry in `index` has exactly `key`, in RecordId order."""
        rids = index.lookup([key]).get(key, [])
        return [(r, d) for r, d in zip(rids, records.get_many(rids)) if d is not None]

    def scan_with_records(self, index: IndexStore, records: RecordStore, rng: KeyRange, *,
                          reverse: bool = False) -> Iterator[tuple[bytes, RecordId, bytes]]:
        """(key, RecordId, record) for the entries of `index` in `rng`, in index order;
        entries whose record is gone are skipped."""
        batch: list[tuple[bytes, RecordId]] = []
        size = 16
        for entry in index.scan(rng, reverse=reverse):
            batch.append(entry)
            if len(batch) >= size:
                yield from self._join(batch, records)
                batch = []
                size = min(size * 4, 1024)
        if batch:
            yield from self._join(batch, records)

    @staticmethod
    def _join(batch: list[tuple[bytes, RecordId]], records: RecordStore
              ) -> Iterator[tuple[bytes, RecordId, bytes]]:
        interrupt.check()
        for (key, rid), data in zip(batch, records.get_many([r for _, r in batch])):
            if data is not None:
                yield key, rid, data

    # --- durability and lifetime ----------------------------------------------------------

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Make every committed transaction durable now (fsync)."""

    def checkpoint(self) -> None:  # noqa: B027 - optional hook
        """Fold the log into the main data files (may be slow)."""

    @abstractmethod
    def close(self) -> None: ...

    def stats(self) -> dict[str, object]:
        """Engine-level figures for serverStatus-like reports."""
        return {"name": self.name, "durable": self.is_durable}

    # --- transactions -------------------------------------------------------------------

    @property
    def in_transaction(self) -> bool:
        return bool(self._scopes)

    @contextmanager
    def transaction(self, *, durable: bool = False) -> Iterator[None]:
        """All-or-nothing block; nests as a savepoint inside an open transaction."""
        if not self._scopes:
            self.begin()
            try:
                yield
            except BaseException:
                self.abort()
                raise
            self.commit(durable=durable)
        else:
            if durable:
                self._durable_requested = True
            self._push_savepoint()
            try:
                yield
            except BaseException:
                self._rollback_savepoint()
                raise
            self._release_savepoint()

    def begin(self) -> None:
        if self._scopes:
            raise RuntimeError("transaction already open")
        self._txn_begin()
        self._scopes = [_Scope()]
        self._durable_requested = False

    def commit(self, *, durable: bool = False) -> None:
        if len(self._scopes) != 1:
            raise RuntimeError("commit outside the outermost transaction scope")
        durable = durable or self._durable_requested
        try:
            self._txn_commit(durable)
        except BaseException:
            self.abort()
            raise
        scope = self._scopes.pop()
        self.commits += 1
        for fn in scope.commits:
            fn()

    def abort(self) -> None:
        if not self._scopes:
            return
        try:
            self._txn_abort()
        finally:
            scopes, self._scopes = self._scopes, []
            for scope in reversed(scopes):
                for fn in reversed(scope.rollbacks):
                    fn()

    def on_rollback(self, fn: Callable[[], object]) -> None:
        """Run `fn` if the innermost open scope rolls back (no-op outside a txn)."""
        if self._scopes:
            self._scopes[-1].rollbacks.append(fn)

    def on_commit(self, fn: Callable[[], None]) -> None:
        """Run `fn` after the outermost commit (at once outside a transaction)."""
        if self._scopes:
            self._scopes[-1].commits.append(fn)
        else:
            fn()

    def _push_savepoint(self) -> None:
        self._txn_savepoint(len(self._scopes))
        self._scopes.append(_Scope())

    def _release_savepoint(self) -> None:
        scope = self._scopes.pop()
        self._txn_release(len(self._scopes))
        parent = self._scopes[-1]
        parent.rollbacks.extend(scope.rollbacks)
        parent.commits.extend(scope.commits)

    def _rollback_savepoint(self) -> None:
        scope = self._scopes.pop()
        try:
            self._txn_rollback_to(len(self._scopes))
        finally:
            for fn in reversed(scope.rollbacks):
                fn()

    @abstractmethod
    def _txn_begin(self) -> None: ...

    @abstractmethod
    def _txn_commit(self, durable: bool) -> None: ...

    @abstractmethod
    def _txn_abort(self) -> None: ...

    @abstractmethod
    def _txn_savepoint(self, level: int) -> None: ...

    @abstractmethod
    def _txn_release(self, level: int) -> None: ...

    @abstractmethod
    def _txn_rollback_to(self, level: int) -> None: ...

    def _require_txn(self) -> None:
        if not self._scopes:
            raise RuntimeError("writes need an open transaction (engine.transaction())")

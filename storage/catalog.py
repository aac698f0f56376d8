"""The catalog: databases, collections (name, UUID, options, info) and their indexes,
stored in the engine next to the data so that both change in one transaction.

`Catalog` is storage's entry point for the server::

    catalog = Catalog.open("/data/db", compile_filter=query.compile_partial_filter)
    coll = catalog.get_or_create_collection("test", "c")     # implicit creation
    result = coll.insert_many([{"_id": 1, "a": 1}])
    catalog.close()

Every method is synchronous and must be called from the thread that opened the
catalog (the server's storage worker). Each call is one transaction; wrap several in
``with catalog.transaction(durable=...):`` to make them one (inner calls then become
savepoints, so a failing call still leaves the others' writes in place).

Persistence: the engine record store ``_catalog`` holds one BSON document per
namespace (``{ns, db, name, uuid, kind, options, info, ident, indexes: [{spec, ident,
multikey, multikeyPaths}]}``); it is read once at open. A database exists while it
holds a namespace (MongoDB's rule).

Kinds of namespace: ``"collection"`` (a record store plus indexes), ``"view"`` and
``"timeseries"`` (catalog entries without storage; the time-series view points at its
``system.buckets.<name>`` collection through `options`/`info`, which storage keeps as
given).
"""

from __future__ import annotations

import copy
import re
import uuid as uuid_mod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final

from bson.binary import Binary

from storage import bsonutil
from storage.catalog_entries import CollectionEntry, IndexEntry, UnreadableEntry
from storage.collection import Collection
from storage.engine import StorageEngine, open_engine
from storage.engine.base import IndexStore, RecordId, RecordStore
from storage.errors import MongoError
from storage.index_usage import IndexUsage
from storage.indexes import (
    KeyGenerator,
    PartialFilterCompiler,
    id_index_spec,
)
from storage.vocabulary.error_codes import ErrorCode

__all__ = [
    "Catalog",
    "DatabaseStats",
    "validate_db_name",
    "validate_collection_name",
    "CATALOG_IDENT",
    "CatalogChange",
]

CATALOG_IDENT: Final = "_catalog"
KINDS: Final = ("collection", "view", "timeseries")
_MAX_NS_LEN: Final = 255
_BAD_DB_CHARS: Final = re.compile(r'[/\\. "$\x00]')
# system collections a client may create or write (MongoDB's legal system namespaces)
_LEGAL_SYSTEM: Final = frozenset({"system.views", "system.js", "system.profile",
                                  "system.users", "system.roles", "system.version"})


def validate_db_name(db: str) -> None:
    """InvalidNamespace (73) unless `db` is a legal database name."""
    if not db or len(db) >= 64 or _BAD_DB_CHARS.search(db):
        raise MongoError(ErrorCode.InvalidNamespace, f"Invalid database name: '{db}'")


def validate_collection_name(db: str, name: str, *, for_create: bool = True) -> None:
    """InvalidNamespace (73) unless `name` is a legal collection name in `db`."""
    ns = f"{db}.{name}"
    if not name or "\x00" in name or name.startswith(".") or ".." in name or (
            "$" in name and name != "oplog.$main"):
        raise MongoError(ErrorCode.InvalidNamespace, f"Invalid collection name: {name}")
    if len(ns.encode()) > _MAX_NS_LEN:
        raise MongoError(ErrorCode.InvalidNamespace,
                         f"Fully qualified namespace is too long. Namespace: {ns} Max: "
                         f"{_MAX_NS_LEN}")
    if for_create and name.startswith("system.") and name not in _LEGAL_SYSTEM \
            and not name.startswith("system.buckets."):
        raise MongoError(ErrorCode.InvalidNamespace, f"Invalid system namespace: {ns}")


@dataclass(frozen=True)
class DatabaseStats:
    """dbStats figures (bytes, unscaled)."""

    db: str
    collections: int
    views: int
    objects: int
    data_size: int
    storage_size: int
    indexes: int
    index_size: int

    @property
    def avg_obj_size(self) -> float:
        return self.data_size / self.objects if self.objects else 0.0

    @property
    def total_size(self) -> int:
        return self.storage_size + self.index_size


@dataclass(frozen=True)
class CatalogChange:
    """What a `Catalog.refresh` found changed by another process: the namespaces whose
    entry appeared, went or changed (old and new names of a rename), and the UUIDs and
    namespaces of those that are gone (a namespace may be in both: dropped and created
    again)."""

    namespaces: frozenset[str]
    dropped: frozenset[bytes]
    dropped_namespaces: frozenset[str]


@dataclass
class _IndexRuntime:
    generator: KeyGenerator
    store: IndexStore
    filter: Callable[[Mapping[str, Any]], bool] | None
    directions: tuple[int, ...] = field(default=())


def _idents_in(data: bytes) -> tuple[str, ...]:
    """The record store and index idents a damaged catalog record still names, if its
    BSON reads at all."""
    try:
        doc = bsonutil.decode(data)
    except Exception:
        return ()
    found = [doc.get("ident")]
    indexes = doc.get("indexes")
    if isinstance(indexes, list):
        found += [ix.get("ident") for ix in indexes if isinstance(ix, dict)]
    return tuple(i for i in found if type(i) is str)


class Catalog:
    """Databases and collections over one engine. See the module docstring."""

    def __init__(self, engine: StorageEngine, *,
                 compile_filter: PartialFilterCompiler | None = None) -> None:
        self.engine = engine
        self.compile_filter = compile_filter
        self._entries: dict[bytes, CollectionEntry] = {}  # uuid bytes -> entry
        self._by_ns: dict[str, bytes] = {}
        self._runtime: dict[str, _IndexRuntime] = {}  # index ident -> runtime
        self._collections: dict[bytes, Collection] = {}  # uuid -> handle
        self.index_usage = IndexUsage()  # $indexStats' accesses
        #: catalog records that did not read as entries (reported at start-up, kept)
        self.unreadable: list[UnreadableEntry] = []
        self._refresh_listeners: list[Callable[[CatalogChange], None]] = []
        self._load()

    @classmethod
    def open(cls, dbpath: str | None = None, *, engine: str = "sqlite",
             compile_filter: PartialFilterCompiler | None = None,
             **engine_options: Any) -> Catalog:
        """Open (or create) the store: ``engine="sqlite"`` needs `dbpath`;
        ``engine="memory"`` keeps everything in this process."""
        eng = open_engine(engine, dbpath, **engine_options)
        try:
            return cls(eng, compile_filter=compile_filter)
        except BaseException:
            eng.close()
            raise

    # --- lifetime ----------------------------------------------------------------------

    def close(self) -> None:
        self.engine.close()

    def flush(self) -> None:
        """fsync every committed write (the group-commit thread does it within
        `group_commit_ms` anyway)."""
        self.engine.flush()

    def checkpoint(self) -> None:
        self.engine.checkpoint()

    @contextmanager
    def transaction(self, *, durable: bool = False) -> Iterator[None]:
        """One all-or-nothing unit; ``durable=True`` is ``j: true``."""
        with self.engine.transaction(durable=durable):
            yield

    # --- loading and persistence ----------------------------------------------------------

    def _catalog_store(self) -> RecordStore:
        return self.engine.record_store(CATALOG_IDENT)

    def _load(self) -> None:
        if not self.engine.has_record_store(CATALOG_IDENT):
            try:
                with self.engine.transaction(durable=True):
                    self.engine.create_record_store(CATALOG_IDENT)
            except MongoError:  # another process starting at once made it first
                self.engine.reload_stores()
                if not self.engine.has_record_store(CATALOG_IDENT):
                    raise
        version = self.engine.catalog_version()  # before reading: a later change reloads
        known = self._read_entries()
        self.engine.catalog_seen = version
        orphans = [i for i in self.engine.list_idents() if i not in known]
        if orphans and not self.unreadable:  # cannot happen with transactional DDL; tidy up if it ever does
            with self.engine.transaction():
                for ident in orphans:
                    try:
                        self.engine.drop_record_store(ident)
                    except KeyError:
                        self.engine.drop_index_store(ident)

    def _read_entries(self) -> set[str]:
        """Read every catalog record into the (empty) maps; the idents they name."""
        known: set[str] = {CATALOG_IDENT}
        for rid, data in self._catalog_store().scan():
            try:
                entry = CollectionEntry.from_doc(bsonutil.decode(data), rid)
                if entry.ns in self._by_ns:
                    raise ValueError(f"{entry.ns} is named by another entry too")
            except Exception as exc:  # any damage: this entry is reported, the rest serve
                self.unreadable.append(UnreadableEntry(rid, f"{type(exc).__name__}: {exc}",
                                                       _idents_in(data)))
                continue
            self._entries[bytes(entry.uuid)] = entry
            self._by_ns[entry.ns] = bytes(entry.uuid)
            if entry.ident:
                known.add(entry.ident)
                if not self.engine.has_record_store(entry.ident):
                    raise MongoError(ErrorCode.DataCorruptionDetected,
                                     f"record store {entry.ident} of {entry.ns} is missing")
            known.update(ix.ident for ix in entry.indexes)
        for bad in self.unreadable:  # what it may own is kept for a repair
            known.update(bad.idents)
        return known

    # --- several processes on one database ---------------------------------------------------

    def add_refresh_listener(self, fn: Callable[[CatalogChange], None]) -> None:
        """Call `fn(change)` after each `refresh` that found a change (storage thread):
        caches derived from the catalog (open buckets, ...) forget what it names."""
        self._refresh_listeners.append(fn)

    def refresh_if_changed(self) -> CatalogChange | None:
        """One cheap look at the engine's catalog version (engines shared by several
        processes); when another process moved it, `refresh`. Outside transactions
        only (a session's open transaction keeps the catalog it started with)."""
        eng = self.engine
        if eng.catalog_seen is None or eng.in_transaction:
            return None
        version = eng.catalog_version()
        if version is None or version == eng.catalog_seen:
            return None
        change = self.refresh()
        eng.catalog_seen = version
        return change

    def refresh(self) -> CatalogChange:
        """Read the stores and the catalog records again, as another process left them.
        Handles of collections that are still there stay valid (and see the new
        entry); those of dropped ones fail as after a local drop. Listeners are told."""
        self.engine.reload_stores()
        old = self._entries
        self._entries, self._by_ns, self.unreadable = {}, {}, []
        self._read_entries()
        new = self._entries
        dropped = frozenset(u for u in old if u not in new)
        namespaces = frozenset(e.ns for u in old.keys() | new.keys()
                               if old.get(u) != new.get(u)
                               for e in (old.get(u), new.get(u)) if e is not None)
        for uuid in dropped:
            self._collections.pop(uuid, None)
        live = {ix.ident for e in new.values() for ix in e.indexes}
        for ident in [i for i in self._runtime if i not in live]:
            del self._runtime[ident]
        change = CatalogChange(namespaces, dropped, frozenset(old[u].ns for u in dropped))
        if namespaces:
            for fn in self._refresh_listeners:
                fn(change)
        return change

    def drop_unreadable(self, rid: RecordId) -> UnreadableEntry:
        """Remove an unreadable catalog record and the record stores it appeared to own:
        the repair for an entry no command could have written. KeyError if `rid` is not
        one of `unreadable`."""
        found = [b for b in self.unreadable if b.catalog_rid == rid]
        if not found:
            raise KeyError(rid)
        bad = found[0]
        with self.engine.transaction(durable=True):
            self._catalog_store().delete(rid)
            live = {e.ident for e in self._entries.values()} | {
                ix.ident for e in self._entries.values() for ix in e.indexes}
            for ident in bad.idents:
                if ident in live:
                    continue
                if self.engine.has_record_store(ident):
                    self.engine.drop_record_store(ident)
                elif ident in self.engine.list_idents():
                    self.engine.drop_index_store(ident)
        self.unreadable.remove(bad)
        return bad

    def _swap(self, old: CollectionEntry | None, new: CollectionEntry | None
              ) -> CollectionEntry | None:
        """Replace `old` by `new` in memory and in ``_catalog`` (inside a transaction),
        undone on rollback. Returns `new` with its catalog RecordId."""
        eng = self.engine
        eng.note_catalog_change()
        store = self._catalog_store()
        if new is not None:
            data = bsonutil.encode(new.to_doc())
            if old is not None:
                store.update(old.catalog_rid, data)
                new = replace(new, catalog_rid=old.catalog_rid)
            else:
                new = replace(new, catalog_rid=store.insert([data])[0])
        elif old is not None:
            store.delete(old.catalog_rid)
        self._install(old, new)
        eng.on_rollback(lambda: self._install(new, old))
        return new

    def _install(self, old: CollectionEntry | None, new: CollectionEntry | None) -> None:
        if old is not None:
            self._entries.pop(bytes(old.uuid), None)
            if self._by_ns.get(old.ns) == bytes(old.uuid):
                del self._by_ns[old.ns]
        if new is not None:
            self._entries[bytes(new.uuid)] = new
            self._by_ns[new.ns] = bytes(new.uuid)

    def _entry_by_uuid(self, uuid: bytes) -> CollectionEntry:
        try:
            return self._entries[uuid]
        except KeyError:
            raise MongoError(ErrorCode.NamespaceNotFound,
                             "collection was dropped or renamed away") from None

    def _index_runtime(self, ix: IndexEntry) -> _IndexRuntime:
        rt = self._runtime.get(ix.ident)
        if rt is None:
            flt = None
            if ix.spec.partial_filter is not None:
                if self.compile_filter is None:
                    raise MongoError(ErrorCode.NotImplemented,
                                     f"index {ix.name} has a partialFilterExpression and no "
                                     f"filter compiler is configured")
                flt = self.compile_filter(copy.deepcopy(ix.spec.partial_filter))
            rt = _IndexRuntime(KeyGenerator(ix.spec), self.engine.index_store(ix.ident), flt,
                               ix.spec.directions)
            self._runtime[ix.ident] = rt
        return rt

    # --- databases --------------------------------------------------------------------------

    def list_databases(self) -> list[str]:
        return sorted({e.db for e in self._entries.values()})

    def database_exists(self, db: str) -> bool:
        return any(e.db == db for e in self._entries.values())

    def drop_database(self, db: str) -> list[str]:
        """Drop every namespace of `db`; returns their names."""
        names = [e.name for e in self.list_collections(db)]
        with self.engine.transaction():
            for name in names:
                self.drop_collection(db, name)
        return names

    def database_stats(self, db: str) -> DatabaseStats:
        colls = views = objects = data = storage = nidx = idx_size = 0
        for entry in self.list_collections(db):
            if entry.ident is None:
                views += 1
                continue
            colls += 1
            coll = self.collection_by_uuid(bytes(entry.uuid))
            st = coll.stats()
            objects += st.count
            data += st.size
            storage += st.storage_size
            nidx += st.nindexes
            idx_size += st.total_index_size
        return DatabaseStats(db, colls, views, objects, data, storage, nidx, idx_size)

    def ttl_indexes(self) -> list[tuple[str, str, str]]:
        """(db, collection, index name) of every TTL index, for the TTL monitor (which
        calls `Collection.delete_expired`)."""
        return sorted((e.db, e.name, ix.name) for e in self._entries.values()
                      for ix in e.indexes if ix.spec.is_ttl)

    # --- namespaces ---------------------------------------------------------------------------

    def list_collections(self, db: str) -> list[CollectionEntry]:
        """Every namespace of `db` (collections, views, time-series), by name."""
        return sorted((e for e in self._entries.values() if e.db == db), key=lambda e: e.name)

    def entry(self, db: str, name: str) -> CollectionEntry | None:
        uuid = self._by_ns.get(f"{db}.{name}")
        return None if uuid is None else self._entries[uuid]

    def get_collection(self, db: str, name: str) -> Collection | None:
        """The `Collection` for `db.name`, or None if there is none (or it is a view)."""
        entry = self.entry(db, name)
        if entry is None or entry.ident is None:
            return None
        return self.collection_by_uuid(bytes(entry.uuid))

    def collection_by_uuid(self, uuid: bytes) -> Collection:
        """The `Collection` with this UUID (NamespaceNotFound if dropped)."""
        coll = self._collections.get(uuid)
        if coll is None:
            self._entry_by_uuid(uuid)
            coll = Collection(self, uuid)
            self._collections[uuid] = coll
        return coll

    def create_collection(self, db: str, name: str, options: Mapping[str, Any] | None = None,
                          *, kind: str = "collection", info: Mapping[str, Any] | None = None,
                          id_index: bool = True, validate_name: bool = True) -> CollectionEntry:
        """A new namespace (NamespaceExists 48 if taken). Collections get a record
        store and, unless ``id_index=False``, the ``_id_`` index."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")
        if validate_name:
            validate_db_name(db)
            validate_collection_name(db, name)
        if f"{db}.{name}" in self._by_ns:
            raise MongoError(ErrorCode.NamespaceExists, f"Collection {db}.{name} already exists.")
        if not self.database_exists(db):
            for other in self.list_databases():
                if other.lower() == db.lower():
                    raise MongoError(ErrorCode.DatabaseDifferCase,
                                     f"db already exists with different case already have: "
                                     f"[{other}] trying to create [{db}]")
        uid = uuid_mod.uuid4()
        with self.engine.transaction():
            ident = None
            indexes: tuple[IndexEntry, ...] = ()
            if kind == "collection":
                ident = f"coll-{uid.hex}"
                self.engine.create_record_store(ident)
                if id_index:
                    ix_ident = f"index-{uuid_mod.uuid4().hex}"
                    self.engine.create_index_store(ix_ident, unique=True)
                    spec = id_index_spec((options or {}).get("collation"))
                    indexes = (IndexEntry(spec, ix_ident, False, (frozenset(),)),)
            entry = CollectionEntry(db, name, Binary(uid.bytes, 4), kind, dict(options or {}),
                                    dict(info or {}), ident, indexes)
            new = self._swap(None, entry)
        assert new is not None
        return new

    def get_or_create_collection(self, db: str, name: str) -> Collection:
        """The collection, created with default options if missing (implicit creation
        by writes). CommandNotSupportedOnView (166) for a view."""
        entry = self.entry(db, name)
        if entry is None:
            entry = self.create_collection(db, name)
        if entry.ident is None:
            raise MongoError(ErrorCode.CommandNotSupportedOnView,
                             f"Namespace {entry.ns} is a view, not a collection")
        return self.collection_by_uuid(bytes(entry.uuid))

    def drop_collection(self, db: str, name: str) -> bool:
        """Drop the namespace with its data and indexes; False if there was none."""
        entry = self.entry(db, name)
        if entry is None:
            return False
        with self.engine.transaction():
            if entry.ident is not None:
                self.engine.drop_record_store(entry.ident)
            for ix in entry.indexes:
                self.engine.drop_index_store(ix.ident)
                self._forget_runtime(ix.ident)
            self._swap(entry, None)
        return True

    def _forget_runtime(self, ident: str) -> None:
        rt = self._runtime.pop(ident, None)
        if rt is not None:
            self.engine.on_rollback(lambda: self._runtime.setdefault(ident, rt))

    def _forget_on_rollback(self, ident: str) -> None:
        self.engine.on_rollback(lambda: self._runtime.pop(ident, None))

    def rename_collection(self, db: str, name: str, to_db: str, to_name: str, *,
                          drop_target: bool = False) -> None:
        """MongoDB's renameCollection (within or across databases). Data and indexes
        move with the collection; the UUID stays."""
        entry = self.entry(db, name)
        if entry is None:
            raise MongoError(ErrorCode.NamespaceNotFound,
                             f"Source collection {db}.{name} does not exist")
        if (db, name) == (to_db, to_name):
            raise MongoError(ErrorCode.IllegalOperation, "Can't rename a collection to itself")
        validate_db_name(to_db)
        validate_collection_name(to_db, to_name)
        target = self.entry(to_db, to_name)
        with self.engine.transaction():
            if target is not None:
                if not drop_target:
                    raise MongoError(ErrorCode.NamespaceExists, "target namespace exists")
                self.drop_collection(to_db, to_name)
            self._swap(entry, replace(entry, db=to_db, name=to_name))

    def set_options(self, db: str, name: str, *, options: Mapping[str, Any] | None = None,
                    info: Mapping[str, Any] | None = None) -> CollectionEntry:
        """Replace a namespace's options and/or info (collMod)."""
        entry = self.entry(db, name)
        if entry is None:
            raise MongoError(ErrorCode.NamespaceNotFound, f"ns does not exist: {db}.{name}")
        new = replace(entry,
                      options=dict(options) if options is not None else entry.options,
                      info=dict(info) if info is not None else entry.info)
        with self.engine.transaction():
            out = self._swap(entry, new)
        assert out is not None
        return out

    def _update_entry(self, old: CollectionEntry, new: CollectionEntry) -> CollectionEntry:
        """Used by Collection (index changes, multikey flags); caller holds a txn."""
        out = self._swap(old, new)
        assert out is not None
        return out

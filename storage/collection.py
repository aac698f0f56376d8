"""One collection: documents by RecordId plus every index kept in step, each
operation one transaction (a savepoint when the caller already holds one).

Get a `Collection` from the `Catalog` (``catalog.get_collection(db, name)`` or
``catalog.get_or_create_collection``). Documents go in as dicts (optionally with their
BSON bytes already encoded) and come out as BSON bytes with their RecordId; decode
with ``storage.bsonutil.decode``.

Writes
    `insert_many(docs, ordered=...)` -> `InsertResult` (per-document RecordId or error;
    ordered stops at the first error, earlier documents stay written; unordered goes on),
    `update(rid, new_doc)`, `delete(rid)`, `truncate()`, `delete_expired(ttl_index, now)`. Errors are MongoErrors with
    MongoDB's codes: DuplicateKey 11000 (message ``E11000 duplicate key error collection:
    db.c index: a_1 dup key: { a: 1 }``, extra fields ``keyPattern`` and ``keyValue``),
    BSONObjectTooLarge 10334, CannotIndexParallelArrays 171.

Reads
    `get(rid)`, `get_many(rids)`, `find_id(value)`, `scan(reverse=...)` (RecordId order),
    `index_scan(name, bounds, reverse=...)` (index order; bounds as in `storage.bounds`),
    `index_entries(...)` (RecordIds and key bytes without fetching), `count()`.
    Scans are lazy and may interleave with writes (see `storage.engine.base`); an index
    scan over a multikey index returns each document once.

Indexes and upkeep
    `create_indexes(specs)`, `drop_indexes(target)`, `list_indexes()`, `index(name)`,
    `stats()`, `validate()`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import uuid as uuid_mod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

import bson.errors
from bson.datetime_ms import DatetimeMS

from storage import bsonutil
from storage.bounds import IndexBounds, Interval, plan_ranges
from storage.bson_order import values_equal
from storage.bsontext import to_mongo_string
from storage.catalog_entries import CollectionEntry, IndexEntry
from storage.clustered import clustered_index_name, clustered_list_index, is_clustered
from storage.collection_results import (
    CollectionStats,
    CreateIndexesResult,
    IndexKeys,
    InsertResult,
    Replacement,
    ScanStats,
    ValidateResult,
)
from storage.engine.base import DuplicateKeyInIndex, KeyRange, RecordId, RecordStore
from storage.errors import MongoError
from storage.indexes import (
    ID_INDEX_NAME,
    MAX_INDEXES,
    IndexSpec,
    KeySet,
    compare_index_specs,
    is_id_key_pattern,
    validate_index_spec,
)
from storage.keystring import UNDEFINED, encode_value
from storage.vocabulary.error_codes import ErrorCode

if TYPE_CHECKING:
    from storage.catalog import Catalog, _IndexRuntime

__all__ = ["Collection"]

_BUILD_CHUNK: Final = 10_000
# the source of `Collection.write_stamp`: one sequence for all handles, so a new handle's
# stamp never equals one an old handle had
_STAMPS: Final = itertools.count(1)
_EMPTY_KEYS: Final = KeySet([], ())


class _DuplicateSeen(Exception):
    """An optimistic batch write met a duplicate key; redo it carefully."""


def _inserted_keys(entry: CollectionEntry, keys: list[list[KeySet]],
                   rids: Sequence[RecordId | None]) -> list[IndexKeys | None]:
    """Per document of an `insert_many` batch: the keys it went in with (`keys[j][i]`:
    document i's in index j), None for one not inserted."""
    idents = tuple(ix.ident for ix in entry.indexes)
    return [None if rid is None else
            IndexKeys(idents, tuple(tuple(kb for kb, _ in col[i].entries) for col in keys))
            for i, rid in enumerate(rids)]


@functools.lru_cache(maxsize=64)
def _single_keys(fields: int) -> KeySet:
    """What `_note_multikey` reads of a document's single key, not multikey, in an index
    of `fields` fields (the entries are not read)."""
    return KeySet([], (frozenset(),) * fields, False)


def _new_version(u: Replacement) -> Mapping[str, Any]:
    """The new version of an update, decoded (a caller giving its keys may not have)."""
    if u.new_keys is not None and u.encoded is not None:
        return bsonutil.decode(u.encoded)
    return u.new_doc


def _replacement(new_doc: Mapping[str, Any], encoded: bytes | None) -> bytes:
    """The bytes stored for a replacing version: BSONObjectTooLarge past the limit."""
    raw = encoded if encoded is not None else bsonutil.encode(new_doc)
    if len(raw) > bsonutil.MAX_BSON_SIZE:
        raise MongoError(ErrorCode.BSONObjectTooLarge,
                         f"Resulting document after update is larger than "
                         f"{bsonutil.MAX_BSON_SIZE}")
    return raw


def _key_value(spec: IndexSpec, values: Sequence[Any]) -> dict[str, Any]:
    return {f: (None if v is UNDEFINED else v) for f, v in zip(spec.fields, values)}


class Collection:
    """A handle on one collection; stays valid across renames, fails with
    NamespaceNotFound once the collection is dropped."""

    def __init__(self, catalog: Catalog, uuid: bytes) -> None:
        self._catalog = catalog
        self._uuid = uuid
        self._write_stamp = next(_STAMPS)

    @property
    def write_stamp(self) -> int:
        """Changes (to a value never seen before) when a write through this handle begins
        (insert, update, delete, truncate), committed or not: a reader that saw the same
        stamp twice knows no such write happened in between."""
        return self._write_stamp

    def _stamp(self) -> None:
        self._write_stamp = next(_STAMPS)

    # --- identity -----------------------------------------------------------------------

    @property
    def entry(self) -> CollectionEntry:
        return self._catalog._entry_by_uuid(self._uuid)

    @property
    def db(self) -> str:
        return self.entry.db

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def ns(self) -> str:
        return self.entry.ns

    @property
    def uuid(self) -> bytes:
        return self._uuid

    @property
    def options(self) -> dict[str, Any]:
        return self.entry.options

    def _rs(self) -> RecordStore:
        entry = self.entry
        assert entry.ident is not None
        return self._catalog.engine.record_store(entry.ident)

    def _runtimes(self, entry: CollectionEntry) -> list[_IndexRuntime]:
        return [self._catalog._index_runtime(ix) for ix in entry.indexes]

    @staticmethod
    def _keys(rt: _IndexRuntime, doc: Mapping[str, Any]) -> KeySet:
        if rt.filter is not None and not rt.filter(doc):
            return _EMPTY_KEYS
        return rt.generator.keys(doc)

    def index_key(self, name: str, doc: Mapping[str, Any]) -> bytes | None:
        """The key `doc` has in index `name` when it has exactly one (None: several, as
        for arrays, or none, as outside a partial index)."""
        for ix in self.entry.indexes:
            if ix.name == name:
                keys = self._keys(self._catalog._index_runtime(ix), doc)
                return keys.entries[0][0] if len(keys.entries) == 1 else None
        raise KeyError(name)

    def _dup_error(self, ix: IndexEntry, values: Sequence[Any]) -> MongoError:
        kv = {f: v for f, v in zip(ix.spec.fields, values)}
        return MongoError(
            ErrorCode.DuplicateKey,
            f"E11000 duplicate key error collection: {self.ns} index: {ix.name} dup key: "
            f"{to_mongo_string(kv)}",
            keyPattern=dict(ix.spec.key), keyValue=_key_value(ix.spec, values))

    # --- reads --------------------------------------------------------------------------------

    def count(self) -> int:
        return self._rs().count()

    def data_size(self) -> int:
        return self._rs().data_size()

    def get(self, rid: RecordId) -> bytes | None:
        return self._rs().get(rid)

    def get_many(self, rids: Sequence[RecordId]) -> list[bytes | None]:
        return self._rs().get_many(rids)

    def scan(self, *, reverse: bool = False, start: RecordId | None = None
             ) -> Iterator[tuple[RecordId, bytes]]:
        """Every document in RecordId (insertion) order, MongoDB's natural order."""
        return self._rs().scan(start=start, reverse=reverse)

    def find_id(self, value: Any) -> tuple[RecordId, bytes] | None:
        """The document whose ``_id`` equals `value` (BSON equality), if any."""
        entry = self.entry
        ix = entry.index(ID_INDEX_NAME)
        if ix is None:
            for rid, raw in self.scan():
                if values_equal(bsonutil.decode(raw).get("_id"), value):
                    return rid, raw
            return None
        store = self._catalog._index_runtime(ix).store
        found = self._catalog.engine.fetch_by_key(store, self._rs(), encode_value(value))
        return found[0] if found else None

    def record_ids(self, values: Sequence[Any]) -> list[RecordId | None]:
        """The RecordId of the document whose ``_id`` equals each value (None where
        none), looked up together in the ``_id`` index."""
        ix = self.entry.index(ID_INDEX_NAME)
        if ix is None:
            return [None if (found := self.find_id(v)) is None else found[0] for v in values]
        keys = [encode_value(v) for v in values]
        by_key = self._catalog._index_runtime(ix).store.lookup(keys)
        return [rids[0] if (rids := by_key.get(k)) else None for k in keys]

    def index(self, name: str) -> IndexEntry | None:
        return self.entry.index(name)

    def indexes_with_key(self, key: Mapping[str, Any]) -> list[IndexEntry]:
        """Indexes whose key pattern equals `key` (for ``hint`` by key pattern)."""
        return [ix for ix in self.entry.indexes if list(ix.spec.key) == list(key)
                and all(values_equal(ix.spec.key[k], key[k]) for k in key)]

    def _require_index(self, name: str) -> IndexEntry:
        ix = self.entry.index(name)
        if ix is None:
            raise MongoError(ErrorCode.IndexNotFound, f"index not found with name [{name}]")
        return ix

    def note_index_use(self, name: str) -> None:
        """A query plan reads index `name` (`$indexStats` counts it)."""
        ix = self.entry.index(name)
        if ix is not None:
            self._catalog.index_usage.record(ix.ident)

    def index_entries(self, name: str, bounds: IndexBounds | None = None, *,
                      reverse: bool = False, stats: ScanStats | None = None
                      ) -> Iterator[tuple[RecordId, bytes]]:
        """(RecordId, key bytes) in index order within `bounds` (None: whole index),
        each RecordId once even on a multikey index."""
        ix = self._require_index(name)
        rt = self._catalog._index_runtime(ix)
        if bounds is None:
            ranges, flt = [KeyRange()], None
        else:
            ranges, flt = plan_ranges(bounds, ix.spec.directions)
        seen: set[RecordId] | None = set() if ix.multikey else None
        for rng in (reversed(ranges) if reverse else ranges):
            for key, rid in rt.store.scan(rng, reverse=reverse):
                if stats is not None:
                    stats.keys_examined += 1
                if flt is not None and not flt(key):
                    continue
                if seen is not None:
                    if rid in seen:
                        if stats is not None:
                            stats.dups_dropped += 1
                        continue
                    seen.add(rid)
                yield rid, key

    def index_scan(self, name: str, bounds: IndexBounds | None = None, *,
                   reverse: bool = False, stats: ScanStats | None = None
                   ) -> Iterator[tuple[RecordId, bytes]]:
        """(RecordId, document bytes) in index order within `bounds`."""
        ix = self._require_index(name)
        ranges, flt = ([KeyRange()], None) if bounds is None else plan_ranges(
            bounds, ix.spec.directions)
        if flt is None and not ix.multikey:
            # exact ranges: read keys and documents together
            engine = self._catalog.engine
            store = self._catalog._index_runtime(ix).store
            rs = self._rs()
            for rng in (reversed(ranges) if reverse else ranges):
                for _key, rid, raw in engine.scan_with_records(store, rs, rng, reverse=reverse):
                    if stats is not None:
                        stats.keys_examined += 1
                        stats.docs_examined += 1
                    yield rid, raw
            return
        rs = self._rs()
        batch: list[RecordId] = []
        size = 16
        for rid, _key in self.index_entries(name, bounds, reverse=reverse, stats=stats):
            batch.append(rid)
            if len(batch) >= size:
                yield from self._fetch(rs, batch, stats)
                batch = []
                size = min(size * 4, 1024)
        if batch:
            yield from self._fetch(rs, batch, stats)

    def index_scan_range(self, name: str, rng: KeyRange
                         ) -> Iterator[tuple[RecordId, bytes]] | None:
        """(RecordId, document bytes) in index order of the keys in `rng`, a range the
        caller built (as `plan_ranges` would); None when the index is multikey (a
        document may have several keys there: use `index_scan`)."""
        ix = self._require_index(name)
        if ix.multikey:
            return None
        store = self._catalog._index_runtime(ix).store
        return ((rid, raw) for _key, rid, raw in
                self._catalog.engine.scan_with_records(store, self._rs(), rng))

    @staticmethod
    def _fetch(rs: RecordStore, rids: list[RecordId], stats: ScanStats | None
               ) -> Iterator[tuple[RecordId, bytes]]:
        for rid, raw in zip(rids, rs.get_many(rids)):
            if raw is not None:  # deleted since the key was read
                if stats is not None:
                    stats.docs_examined += 1
                yield rid, raw

    # --- writes --------------------------------------------------------------------------------

    @property
    def places_by_shard(self) -> bool:
        """Whether the engine places records by the `shards` `insert_many` is given (the
        caller need not compute them otherwise)."""
        return self._catalog.engine.places_by_shard

    def insert_many(self, docs: Sequence[Mapping[str, Any]], *, ordered: bool = True,
                    encoded: Sequence[bytes] | None = None, durable: bool = False,
                    shards: Sequence[int] | None = None,
                    return_keys: bool = False,
                    known_keys: Sequence[IndexKeys | None] | None = None) -> InsertResult:
        """Insert a batch in one transaction, maintaining every index.

        `encoded` (optional) are the documents' BSON bytes, to save re-encoding. The
        caller has already put ``_id`` first (generating it when missing). A document
        that fails (too large, duplicate key, unindexable) is reported in `errors`;
        ordered inserts stop there, unordered ones skip it. `shards` (optional), per
        document, is the value a distributing engine places it by. With `return_keys`,
        `InsertResult.keys` tells each inserted document's index keys. `known_keys`
        (optional), per document, its keys when the caller made them, as for
        `Replacement.new_keys` (the document is then not keyed, and may be empty when
        `encoded` is given)."""
        entry = self.entry
        n = len(docs)
        result = InsertResult([None] * n)
        raws: list[bytes] = [b""] * n
        failed: dict[int, MongoError] = {}
        for i, doc in enumerate(docs):
            try:
                raw = encoded[i] if encoded is not None else bsonutil.encode(doc)
            except (bson.errors.InvalidDocument, TypeError, ValueError, OverflowError) as e:
                failed[i] = MongoError(ErrorCode.BadValue, f"cannot encode document: {e}")
                continue
            if len(raw) > bsonutil.MAX_BSON_SIZE:
                failed[i] = MongoError(ErrorCode.BSONObjectTooLarge,
                                       f"object to insert too large. size in bytes: {len(raw)},"
                                       f" max size: {bsonutil.MAX_BSON_SIZE}")
            raws[i] = raw
        runtimes = self._runtimes(entry)
        nix = len(runtimes)
        todo = [i for i in range(n) if i not in failed] if failed else range(n)
        keys, keygen_error = self._batch_keys(entry, runtimes, docs, todo, known_keys)
        if not failed and not keygen_error:
            # Optimistic path: write everything; a unique index store refuses a
            # duplicate, which rolls this attempt back and takes the careful path.
            try:
                rids = self._write_batch(entry, runtimes, keys, list(range(n)), raws, durable,
                                         shards=shards)
            except _DuplicateSeen:
                pass
            else:
                result.record_ids[:] = rids
                if return_keys:
                    result.keys = _inserted_keys(entry, keys, rids)
                return result
        unique = [j for j, ix in enumerate(entry.indexes) if ix.spec.unique]
        if unique and known_keys is not None:
            # a duplicate key error names the key's values: key every document
            docs = [bsonutil.decode(raws[i]) if known_keys[i] is not None and i not in failed
                    else doc for i, doc in enumerate(docs)]
            keys, keygen_error = self._batch_keys(entry, runtimes, docs, todo, None)
        existing: dict[int, dict[bytes, list[RecordId]]] = {}
        for j in unique:
            wanted = list({kb for ks in keys[j] for kb, _ in ks.entries})
            existing[j] = runtimes[j].store.lookup(wanted) if wanted else {}
        seen: dict[int, set[bytes]] = {j: set() for j in unique}
        accepted: list[int] = []
        for i in range(n):
            err = failed.get(i) if failed else None
            if err is None:
                bad_j, bad_err = keygen_error.get(i, (nix, None)) if keygen_error else (nix, None)
                for j in unique:
                    if j >= bad_j:
                        break
                    ex, sn = existing[j], seen[j]
                    for kb, values in keys[j][i].entries:
                        if kb in sn or (ex and kb in ex):
                            err = self._dup_error(entry.indexes[j], values)
                            break
                    if err is not None:
                        break
                if err is None and bad_err is not None:
                    err = bad_err
            if err is not None:
                result.errors.append((i, err))
                if ordered:
                    break
                continue
            accepted.append(i)
            for j in unique:
                entries = keys[j][i].entries
                if len(entries) == 1:
                    seen[j].add(entries[0][0])
                else:
                    seen[j].update(kb for kb, _ in entries)
        if not accepted:
            return result
        rids = self._write_batch(entry, runtimes, keys, accepted, raws, durable,
                                 optimistic=False, shards=shards)
        for i, rid in zip(accepted, rids):
            result.record_ids[i] = rid
        if return_keys:
            result.keys = _inserted_keys(entry, keys, result.record_ids)
        return result

    def _batch_keys(self, entry: CollectionEntry, runtimes: list[_IndexRuntime],
                    docs: Sequence[Mapping[str, Any]], todo: Sequence[int],
                    known_keys: Sequence[IndexKeys | None] | None
                    ) -> tuple[list[list[KeySet]], dict[int, tuple[int, MongoError]]]:
        """The keys of documents `todo` of an `insert_many` batch (`keys[j][i]`: document
        i's for index j), made or taken from `known_keys`, and the documents that cannot
        be keyed (by position: the index and the error)."""
        keys: list[list[KeySet]] = [[_EMPTY_KEYS] * len(docs) for _ in runtimes]
        keygen_error: dict[int, tuple[int, MongoError]] = {}
        idents = tuple(ix.ident for ix in entry.indexes)
        for j, rt in enumerate(runtimes):
            col = keys[j]
            gen = rt.generator.keys
            flt = rt.filter
            paths = _single_keys(len(entry.indexes[j].spec.fields)).multikey_paths
            for i in todo:
                if keygen_error and i in keygen_error:
                    continue
                known = known_keys[i] if known_keys is not None else None
                if known is not None and known.indexes == idents:
                    col[i] = KeySet([(kb, ()) for kb in known.keys[j]], paths, False)
                    continue
                doc = docs[i]
                try:
                    if flt is None or flt(doc):
                        col[i] = gen(doc)
                except MongoError as e:
                    keygen_error[i] = (j, e)
        return keys, keygen_error

    def _write_batch(self, entry: CollectionEntry, runtimes: list[_IndexRuntime],
                     keys: list[list[KeySet]], accepted: list[int], raws: list[bytes],
                     durable: bool, *, optimistic: bool = True,
                     shards: Sequence[int] | None = None) -> list[RecordId]:
        """Write documents `accepted` and their keys in one transaction (scope)."""
        self._stamp()
        with self._catalog.engine.transaction(durable=durable):
            rids = self._rs().insert([raws[i] for i in accepted], shards=None if shards is None
                                     else [shards[i] for i in accepted])
            for j, rt in enumerate(runtimes):
                col = keys[j]
                entries = [(kb, rid) for i, rid in zip(accepted, rids) for kb, _ in col[i].entries]
                if entries:
                    try:
                        rt.store.insert(entries)
                    except DuplicateKeyInIndex as e:
                        if optimistic:
                            raise _DuplicateSeen from None
                        # not expected after the careful checks
                        raise self._dup_error(entry.indexes[j], self._values_for(
                            col, accepted, e.key)) from None
            self._note_multikey(entry, [[col[i] for i in accepted if col[i].is_multikey]
                                        for col in keys])
        return rids

    @staticmethod
    def _values_for(col: list[KeySet], accepted: list[int], key: bytes) -> tuple[Any, ...]:
        for i in accepted:
            for kb, values in col[i].entries:
                if kb == key:
                    return values
        return ()

    def insert_one(self, doc: Mapping[str, Any], *, encoded: bytes | None = None,
                   durable: bool = False) -> RecordId:
        """Insert one document; raises its MongoError."""
        res = self.insert_many([doc], encoded=None if encoded is None else [encoded],
                               durable=durable)
        if res.errors:
            raise res.errors[0][1]
        rid = res.record_ids[0]
        assert rid is not None
        return rid

    def _note_multikey(self, entry: CollectionEntry, keysets: list[list[KeySet]]) -> None:
        """Mark indexes multikey (with their multikey paths) when new keys call for it;
        the change is persisted in the caller's transaction. `keysets[j]`: key sets for
        index j (only the multikey ones matter)."""
        if not any(keysets):
            return
        changed = False
        new_indexes = []
        for ix, sets in zip(entry.indexes, keysets):
            if not sets or (ix.multikey_paths and not any(ks.is_multikey for ks in sets)):
                new_indexes.append(ix)  # no new key, or none multikey with paths recorded
                continue
            flag = ix.multikey
            paths = [set(p) for p in ix.multikey_paths] or [set() for _ in ix.spec.fields]
            for ks in sets:
                if ks.is_multikey:
                    flag = True
                    for p, extra in zip(paths, ks.multikey_paths):
                        p |= extra
            new_paths = tuple(frozenset(p) for p in paths)
            if flag != ix.multikey or new_paths != ix.multikey_paths:
                changed = True
                ix = replace(ix, multikey=flag, multikey_paths=new_paths)
            new_indexes.append(ix)
        if changed:
            self._catalog._update_entry(entry, replace(entry, indexes=tuple(new_indexes)))

    def update(self, rid: RecordId, new_doc: Mapping[str, Any], *, encoded: bytes | None = None,
               old_doc: Mapping[str, Any] | None = None, expected: bytes | None = None,
               durable: bool = False, old_keys: IndexKeys | None = None,
               savepoint: bool = True) -> IndexKeys:
        """Replace the document at `rid` (KeyError if none), re-indexing what changed;
        returns the new version's keys. `old_doc`, when the caller has it decoded, saves a
        read; `expected` is the stored bytes it was decoded from: WriteConflict when
        another process changed them since (see `RecordStore.update`). `old_keys`, what
        the update that stored the current version returned, saves computing its keys
        (unless the indexes changed since: then they come from `old_doc`). Without
        `savepoint`, inside a transaction the caller undoes whole when anything in it
        fails, the update's record and index changes go in without a savepoint of their
        own."""
        return self.update_many(
            [Replacement(rid, new_doc, encoded, old_doc, old_keys, expected)],
            durable=durable, savepoint=savepoint)[0]

    def update_many(self, updates: Sequence[Replacement], *, durable: bool = False,
                    savepoint: bool = True) -> list[IndexKeys]:
        """`update` of several documents, their index entries and records written
        together (one statement per store where the engine can). Returns each new
        version's keys; KeyError for a missing record. A unique index's new keys are
        checked against storage as it was before the call (a key another of these
        documents gives up is still taken) and against each other."""
        if not updates:
            return []
        self._stamp()
        entry = self.entry
        rs = self._rs()
        idents = tuple(ix.ident for ix in entry.indexes)
        runtimes = self._runtimes(entry)
        removed: list[list[tuple[bytes, RecordId]]] = [[] for _ in runtimes]
        added: list[list[tuple[bytes, RecordId]]] = [[] for _ in runtimes]
        records: list[tuple[RecordId, bytes, bytes | None]] = []
        new_sets: list[list[KeySet]] = [[] for _ in runtimes]
        out = []
        for u in updates:
            old_keys = u.old_keys if u.old_keys is not None \
                and u.old_keys.indexes == idents else None
            old_doc, expected = u.old_doc, u.expected
            if old_doc is None and old_keys is None:
                raw_old = rs.get(u.rid)
                if raw_old is None:
                    raise KeyError(u.rid)
                old_doc = bsonutil.decode(raw_old)
                expected = raw_old
            records.append((u.rid, _replacement(u.new_doc, u.encoded), expected))
            given = u.new_keys.keys if u.new_keys is not None \
                and u.new_keys.indexes == idents else None
            changes, sets, kept = self._index_changes(entry, runtimes, u, old_doc, old_keys,
                                                      given)
            for i, (_rt, gone, new) in enumerate(changes):
                removed[i].extend(gone)
                added[i].extend(new)
                new_sets[i].extend(sets[i])
            out.append(IndexKeys(idents, kept))
        for ix, rt, keys in zip(entry.indexes, runtimes, added):
            # two of these documents taking one key (each was checked against storage)
            if ix.spec.unique and len({kb for kb, _rid in keys}) != len(keys):
                seen: set[bytes] = set()
                for kb, rid in keys:
                    if kb in seen:
                        dup = next(u for u in updates if u.rid == rid)
                        raise self._dup_error(ix, dict(self._keys(rt, _new_version(dup)).entries)[kb])
                    seen.add(kb)
        engine = self._catalog.engine
        with engine.transaction(durable=durable) if savepoint or not engine.in_transaction \
                else contextlib.nullcontext():
            for rt, gone, new in zip(runtimes, removed, added):
                if gone:
                    rt.store.delete(gone)
                if new:
                    rt.store.insert(new)
            rs.update_many(records, [u.old_size for u in updates])
            self._note_multikey(entry, new_sets)
        return out

    def _index_changes(self, entry: CollectionEntry, runtimes: list[_IndexRuntime],
                       u: Replacement, old_doc: Mapping[str, Any] | None,
                       old_keys: IndexKeys | None, given: tuple[tuple[bytes, ...], ...] | None
                       ) -> tuple[list[tuple[_IndexRuntime, list[tuple[bytes, RecordId]],
                                             list[tuple[bytes, RecordId]]]],
                                  list[list[KeySet]], tuple[tuple[bytes, ...], ...]]:
        """What replacing `old_doc` (or the version `old_keys` were made of) by the new
        version of `u` changes in each index: (runtime, entries removed, entries added),
        the new key sets (for multikey), and the new keys per index, made from `u.new_doc`
        or `given` (the caller's: single keys, none multikey). DuplicateKey where a unique
        index would take a key another record holds."""
        changes: list[tuple[_IndexRuntime, list[tuple[bytes, RecordId]],
                            list[tuple[bytes, RecordId]]]] = []
        new_sets: list[list[KeySet]] = []
        kept: list[tuple[bytes, ...]] = []
        rid = u.rid
        for i, (ix, rt) in enumerate(zip(entry.indexes, runtimes)):
            if given is not None and old_keys is not None and given[i] == old_keys.keys[i]:
                changes.append((rt, [], []))  # the same keys (the `_id` index's, mostly)
                new_sets.append([])
                kept.append(given[i])
                continue
            if old_keys is not None:
                old = set(old_keys.keys[i])
            else:
                assert old_doc is not None
                old = {kb for kb, _ in self._keys(rt, old_doc).entries}
            if given is not None:
                new_keys = given[i]
                new_ks = _single_keys(len(ix.spec.fields))
            else:
                new_ks = self._keys(rt, u.new_doc)
                new_keys = tuple(kb for kb, _ in new_ks.entries)
            new_sets.append([new_ks])
            kept.append(new_keys)
            members = new_keys if len(new_keys) < 8 else set(new_keys)
            removed = [(kb, rid) for kb in old if kb not in members]
            added = [kb for kb in new_keys if kb not in old]
            if ix.spec.unique and added:
                found = rt.store.lookup(added)
                for kb in added:
                    if any(r != rid for r in found.get(kb, ())):
                        # the error names the key's values: the new version keyed again
                        values = dict(self._keys(rt, _new_version(u)).entries)[kb]
                        raise self._dup_error(ix, values)
            changes.append((rt, removed, [(kb, rid) for kb in added]))
        return changes, new_sets, tuple(kept)

    def delete(self, rid: RecordId, *, old_doc: Mapping[str, Any] | None = None,
               expected: bytes | None = None, durable: bool = False) -> bool:
        """Remove the document at `rid` and its index entries; False if none. `old_doc`
        and `expected` as for `update`."""
        self._stamp()
        entry = self.entry
        rs = self._rs()
        if old_doc is None:
            raw_old = rs.get(rid)
            if raw_old is None:
                return False
            old_doc = bsonutil.decode(raw_old)
            expected = raw_old
        with self._catalog.engine.transaction(durable=durable):
            for rt in self._runtimes(entry):
                entries = [(kb, rid) for kb, _ in self._keys(rt, old_doc).entries]
                if entries:
                    rt.store.delete(entries)
            rs.delete(rid, expected=expected)
        return True

    def truncate(self, *, durable: bool = False) -> int:
        """Remove every document (indexes and their specs stay); returns how many."""
        self._stamp()
        entry = self.entry
        rs = self._rs()
        n = rs.count()
        with self._catalog.engine.transaction(durable=durable):
            rs.truncate()
            for rt in self._runtimes(entry):
                rt.store.truncate()
        return n

    def delete_expired(self, index_name: str, now_ms: int, *, batch: int = 10_000) -> int:
        """TTL: delete the documents whose indexed date (the earliest, for an array) is
        more than the index's ``expireAfterSeconds`` before `now_ms` (ms since the
        epoch). Values that are not dates never expire. Deletes in transactions of at
        most `batch` documents; returns how many were deleted."""
        ix = self._require_index(index_name)
        if not ix.spec.is_ttl:
            raise MongoError(ErrorCode.InvalidOptions, f"index {index_name} is not a TTL index")
        try:
            expire_ms = int(float(str(ix.spec.expire_after_seconds)) * 1000)
        except (TypeError, ValueError):
            return 0
        cutoff = DatetimeMS(max(-(2**63), now_ms - expire_ms))
        bounds = [[Interval(DatetimeMS(-(2**63)), True, cutoff, False)]]
        deleted = 0
        while True:
            rids = [rid for rid, _ in itertools.islice(self.index_entries(index_name, bounds),
                                                       batch)]
            if not rids:
                return deleted
            rs = self._rs()
            with self._catalog.engine.transaction():
                for rid, raw in zip(rids, rs.get_many(rids)):
                    if raw is not None and self.delete(rid, old_doc=bsonutil.decode(raw)):
                        deleted += 1
            if len(rids) < batch:
                return deleted

    # --- indexes ---------------------------------------------------------------------------------

    @staticmethod
    def _counted(entry: CollectionEntry) -> int:
        """How many indexes clients are told of: a clustered collection's `_id_` index
        store is the collection itself to them, no index (mongod's index catalog holds no
        entry for the cluster key)."""
        n = len(entry.indexes)
        return n - 1 if is_clustered(entry.options) and entry.index(ID_INDEX_NAME) else n

    def list_indexes(self) -> list[dict[str, Any]]:
        """The index specs as listIndexes returns them, in creation order (a clustered
        collection's `_id` index in its clustered form, or hidden: `storage.clustered`)."""
        return [spec for spec, _ix in self.listed_indexes()]

    def listed_indexes(self) -> list[tuple[dict[str, Any], IndexEntry]]:
        """(spec as listIndexes shows it, the index) of each index listIndexes shows."""
        out = []
        clustered = is_clustered(self.options)
        for ix in self.entry.indexes:
            if clustered and ix.name == ID_INDEX_NAME:
                shown = clustered_list_index(self.options)
                if shown is not None:
                    out.append((shown, ix))
                continue
            out.append((dict(ix.spec.document), ix))
        return out

    def _clustered_create_specs(self, specs: list[IndexSpec]) -> list[IndexSpec]:
        """The validated specs left to build once the `clustered` option is dealt with: on
        the cluster key of a clustered collection it names the existing index (skipped),
        anywhere else it is refused (6243700)."""
        out = []
        for spec in specs:
            if "clustered" in spec.document:
                if is_clustered(self.options) and is_id_key_pattern(spec.key):
                    continue
                raise MongoError(6243700, "Cannot create index with option 'clustered' on a "
                                 "key that is not the collection's cluster key")
            out.append(spec)
        return out

    def create_indexes(self, specs: Sequence[Mapping[str, Any]]) -> CreateIndexesResult:
        """Validate and build `specs` (all or nothing). Specs identical to an existing
        index are skipped; conflicts raise IndexOptionsConflict (85) or
        IndexKeySpecsConflict (86); a unique index over duplicate data raises
        DuplicateKey (11000)."""
        entry = self.entry
        before = self._counted(entry)
        default = entry.options.get("collation")
        validated = self._clustered_create_specs(
            [validate_index_spec(s, compile_filter=self._catalog.compile_filter,
                                 default_collation=default) for s in specs])
        current: list[IndexSpec] = [ix.spec for ix in entry.indexes]
        to_build: list[IndexSpec] = []
        for spec in validated:
            if self._check_conflicts(spec, current):
                continue
            to_build.append(spec)
            current.append(spec)
        if before + len(to_build) > MAX_INDEXES:
            raise MongoError(ErrorCode.CannotCreateIndex,
                             f"add index fails, too many indexes for {self.ns} "
                             f"key:{to_mongo_string(to_build[-1].key)}")
        if not to_build:
            return CreateIndexesResult([], before, before)
        with self._catalog.engine.transaction():
            new_entries = self._build_indexes(entry, to_build)
            self._catalog._update_entry(entry, replace(entry,
                                                       indexes=entry.indexes + new_entries))
        return CreateIndexesResult([s.name for s in to_build], before, before + len(to_build))

    def _check_conflicts(self, spec: IndexSpec, current: list[IndexSpec]) -> bool:
        """True if an identical index exists; raises on a conflict."""
        shown = to_mongo_string(spec.document)
        for other in current:
            if other.name != spec.name:
                continue
            cmp = compare_index_specs(spec, other)
            if cmp == "identical":
                return True
            if cmp == "different":
                raise MongoError(ErrorCode.IndexKeySpecsConflict,
                                 f"An existing index has the same name as the requested index. "
                                 f"Requested index: {shown}, existing index: "
                                 f"{to_mongo_string(other.document)}")
            raise MongoError(ErrorCode.IndexOptionsConflict,
                             f"An equivalent index already exists with the same name but "
                             f"different options. Requested index: {shown}, existing index: "
                             f"{to_mongo_string(other.document)}")
        for other in current:
            cmp = compare_index_specs(spec, other)
            if cmp == "equivalent":
                raise MongoError(ErrorCode.IndexOptionsConflict,
                                 f"An equivalent index already exists with a different name and "
                                 f"options. Requested index: {shown}, existing index: "
                                 f"{to_mongo_string(other.document)}")
            if cmp == "identical":
                raise MongoError(ErrorCode.IndexOptionsConflict,
                                 f"Index already exists with a different name: {other.name}")
        return False

    def _build_indexes(self, entry: CollectionEntry, specs: list[IndexSpec]
                       ) -> tuple[IndexEntry, ...]:
        engine = self._catalog.engine
        new = []
        for spec in specs:
            ident = f"index-{uuid_mod.uuid4().hex}"
            engine.create_index_store(ident, unique=spec.unique)
            new.append(IndexEntry(spec, ident, False, tuple(frozenset() for _ in spec.fields)))
        runtimes = [self._catalog._index_runtime(ix) for ix in new]
        for ix in new:
            self._catalog._forget_on_rollback(ix.ident)
            self._catalog.index_usage.built(ix.ident)
        pending: list[list[tuple[bytes, RecordId]]] = [[] for _ in new]
        values: list[dict[bytes, tuple[Any, ...]]] = [{} for _ in new]
        multikey = [False] * len(new)
        paths: list[list[set[int]]] = [[set() for _ in s.fields] for s in specs]

        def flush(j: int) -> None:
            try:
                runtimes[j].store.insert(pending[j])
            except DuplicateKeyInIndex as e:
                err = self._dup_error(new[j], values[j].get(e.key, ()))
                raise self._build_failed(err) from None
            pending[j].clear()
            values[j].clear()

        for rid, raw in self._rs().scan():
            doc = bsonutil.decode(raw)
            for j, rt in enumerate(runtimes):
                try:
                    ks = self._keys(rt, doc)
                except MongoError as e:
                    raise self._build_failed(e) from None
                if ks.is_multikey:
                    multikey[j] = True
                    for p, extra in zip(paths[j], ks.multikey_paths):
                        p |= extra
                for kb, vals in ks.entries:
                    pending[j].append((kb, rid))
                    if new[j].spec.unique:
                        values[j][kb] = vals
                if len(pending[j]) >= _BUILD_CHUNK:
                    flush(j)
        for j in range(len(new)):
            if pending[j]:
                flush(j)
        return tuple(replace(ix, multikey=multikey[j],
                             multikey_paths=tuple(frozenset(p) for p in paths[j]))
                     for j, ix in enumerate(new))

    def _build_failed(self, err: MongoError) -> MongoError:
        build = uuid_mod.uuid4()
        coll_uuid = uuid_mod.UUID(bytes=self._uuid)
        return MongoError(err.code, f"Index build failed: {build}: Collection {self.ns} "
                                    f"( {coll_uuid} ) :: caused by :: {err.errmsg}", **err.extra)

    def drop_indexes(self, target: str | Sequence[str] | Mapping[str, Any]) -> int:
        """dropIndexes: ``"*"`` (all but ``_id_``), a name, a list of names, or a key
        pattern. Returns the number of indexes before (nIndexesWas)."""
        entry = self.entry
        before = self._counted(entry)
        if isinstance(target, str):
            names = ([ix.name for ix in entry.indexes if ix.name != ID_INDEX_NAME]
                     if target == "*" else [target])
        elif isinstance(target, Mapping):
            found = self.indexes_with_key(target)
            if not found:
                raise MongoError(ErrorCode.IndexNotFound,
                                 f"can't find index with key: {to_mongo_string(dict(target))}")
            if len(found) > 1:
                raise MongoError(ErrorCode.AmbiguousIndexKeyPattern,
                                 f"{len(found)} indexes found for key: "
                                 f"{to_mongo_string(dict(target))}, identify by name instead. "
                                 f"Conflicting indexes: "
                                 f"{', '.join(to_mongo_string(ix.spec.document) for ix in found)}")
            names = [found[0].name]
        else:
            names = list(target)
        clustered_name = clustered_index_name(self.options)
        if clustered_name is not None and isinstance(target, Mapping) and names == [ID_INDEX_NAME]:
            names = [clustered_name]
        for name in names:
            if name == clustered_name:
                raise MongoError(5979800, "It is illegal to drop the clusteredIndex")
            if name == ID_INDEX_NAME and clustered_name is not None:
                raise MongoError(ErrorCode.IndexNotFound, f"index not found with name [{name}]")
            if name == ID_INDEX_NAME:
                raise MongoError(ErrorCode.InvalidOptions, "cannot drop _id index")
            if entry.index(name) is None:
                raise MongoError(ErrorCode.IndexNotFound, f"index not found with name [{name}]")
        if names:
            with self._catalog.engine.transaction():
                for name in names:
                    ix = entry.index(name)
                    assert ix is not None
                    self._catalog.engine.drop_index_store(ix.ident)
                    self._catalog._forget_runtime(ix.ident)
                kept = tuple(ix for ix in entry.indexes if ix.name not in names)
                self._catalog._update_entry(entry, replace(entry, indexes=kept))
        return before

    # --- stats and validation ------------------------------------------------------------------------

    def stats(self) -> CollectionStats:
        entry = self.entry
        rs = self._rs()
        hidden = ID_INDEX_NAME if is_clustered(entry.options) else None
        sizes = {ix.name: self._catalog._index_runtime(ix).store.storage_size()
                 for ix in entry.indexes if ix.name != hidden}
        return CollectionStats(entry.ns, rs.count(), rs.data_size(), rs.storage_size(),
                               len(sizes), sum(sizes.values()), sizes)

    def validate(self) -> ValidateResult:
        """Check every document decodes and every index holds exactly the entries its
        documents produce (MongoDB's validate, foreground, full)."""
        entry = self.entry
        rs = self._rs()
        runtimes = self._runtimes(entry)
        errors: list[str] = []
        warnings: list[str] = []
        expected: list[set[int]] = [set() for _ in runtimes]
        keygen_failures = [0] * len(runtimes)
        n_records = n_invalid = 0
        for rid, raw in rs.scan():
            n_records += 1
            try:
                doc = bsonutil.decode(raw)
            except Exception:  # any decoding failure is corruption
                n_invalid += 1
                errors.append(f"Detected one or more invalid documents (RecordId {rid})")
                continue
            for j, rt in enumerate(runtimes):
                try:
                    for kb, _ in self._keys(rt, doc).entries:
                        expected[j].add(hash((kb, rid)))
                except MongoError:
                    keygen_failures[j] += 1
        keys_per_index: dict[str, int] = {}
        details: dict[str, dict[str, Any]] = {}
        for j, (ix, rt) in enumerate(zip(entry.indexes, runtimes)):
            want = expected[j]
            extra = n_keys = 0
            for kb, rid in rt.store.scan():
                n_keys += 1
                h = hash((kb, rid))
                if h in want:
                    want.discard(h)
                else:
                    extra += 1
            missing = len(want)
            ok = extra == 0 and missing == 0 and keygen_failures[j] == 0
            if not (ix.name == ID_INDEX_NAME and is_clustered(entry.options)):
                keys_per_index[ix.name] = n_keys  # (checked all the same)
                details[ix.name] = {"valid": ok}
            if extra:
                errors.append(f"Index {ix.name} has {extra} entries that match no document")
            if missing:
                errors.append(f"Index {ix.name} is missing {missing} entries for documents")
            if keygen_failures[j]:
                errors.append(f"Index {ix.name}: {keygen_failures[j]} documents cannot be "
                              f"indexed")
        if rs.count() != n_records:
            errors.append(f"Collection count {rs.count()} does not match the {n_records} "
                          f"records found")
        return ValidateResult(entry.ns, not errors, errors, warnings, n_records, n_invalid,
                              keys_per_index, details)

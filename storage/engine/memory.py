"""A pure-Python engine that keeps everything in memory: the reference implementation
of the contract in `base`, and the fast engine of unit tests.

Record stores are a dict plus a sorted id list; index stores a sorted list of
``(key, rid)`` tuples. Every write registers its undo with the transaction scope, so
abort and savepoint rollback are exact. Nothing survives `close()`.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterator, Sequence

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

__all__ = ["MemoryEngine"]

_CHUNK = 256
_MAX_RID = 1 << 64


class MemoryRecordStore(RecordStore):
    def __init__(self, engine: MemoryEngine, ident: str) -> None:
        self.ident = ident
        self._engine = engine
        self._data: dict[RecordId, bytes] = {}
        self._ids: list[RecordId] = []
        self._next_id = 1
        self._size = 0
        self.dropped = False

    def insert(self, datas: Sequence[bytes], *, shards: Sequence[int] | None = None
               ) -> list[RecordId]:
        self._engine._require_txn()
        first = self._next_id
        rids = list(range(first, first + len(datas)))
        self._next_id += len(datas)
        added = 0
        for rid, data in zip(rids, datas):
            self._data[rid] = bytes(data)
            added += len(data)
        self._ids.extend(rids)  # always above every present id
        self._size += added

        def undo() -> None:
            for rid in rids:
                del self._data[rid]
            i = bisect.bisect_left(self._ids, first)
            del self._ids[i:i + len(rids)]
            self._size -= added

        self._engine.on_rollback(undo)
        return rids

    def update(self, rid: RecordId, data: bytes) -> None:
        self._engine._require_txn()
        old = self._data[rid]
        self._data[rid] = bytes(data)
        self._size += len(data) - len(old)

        def undo() -> None:
            self._size -= len(self._data[rid]) - len(old)
            self._data[rid] = old

        self._engine.on_rollback(undo)

    def delete(self, rid: RecordId) -> None:
        self._engine._require_txn()
        old = self._data.pop(rid)
        i = bisect.bisect_left(self._ids, rid)
        del self._ids[i]
        self._size -= len(old)

        def undo() -> None:
            self._data[rid] = old
            bisect.insort(self._ids, rid)
            self._size += len(old)

        self._engine.on_rollback(undo)

    def get(self, rid: RecordId) -> bytes | None:
        return self._data.get(rid)

    def get_many(self, rids: Sequence[RecordId]) -> list[bytes | None]:
        return [self._data.get(r) for r in rids]

    def scan(self, *, start: RecordId | None = None, reverse: bool = False
             ) -> Iterator[tuple[RecordId, bytes]]:
        if not reverse:
            pos = bisect.bisect_left(self._ids, start) if start is not None else 0
            while True:
                if self.dropped:
                    raise store_dropped(self.ident)
                interrupt.check()
                ids = self._ids
                chunk = ids[pos:pos + _CHUNK]
                if not chunk:
                    return
                for rid in chunk:
                    data = self._data.get(rid)
                    if data is not None:
                        yield rid, data
                pos = bisect.bisect_right(ids, chunk[-1])
        else:
            end = bisect.bisect_right(self._ids, start) if start is not None else len(self._ids)
            while True:
                if self.dropped:
                    raise store_dropped(self.ident)
                interrupt.check()
                ids = self._ids
                chunk = ids[max(0, end - _CHUNK):end]
                if not chunk:
                    return
                for rid in reversed(chunk):
                    data = self._data.get(rid)
                    if data is not None:
                        yield rid, data
                end = bisect.bisect_left(ids, chunk[0])

    def count(self) -> int:
        return len(self._data)

    def data_size(self) -> int:
        return self._size

    def storage_size(self) -> int:
        return self._size + 16 * len(self._data)

    def truncate(self) -> None:
        self._engine._require_txn()
        data, ids, size = self._data, self._ids, self._size
        self._data, self._ids, self._size = {}, [], 0

        def undo() -> None:
            self._data, self._ids, self._size = data, ids, size

        self._engine.on_rollback(undo)


class MemoryIndexStore(IndexStore):
    def __init__(self, engine: MemoryEngine, ident: str, unique: bool) -> None:
        self.ident = ident
        self.unique = unique
        self._engine = engine
        self._entries: list[tuple[bytes, RecordId]] = []
        self.dropped = False

    def _find_key(self, key: bytes) -> int:
        return bisect.bisect_left(self._entries, (key, -1))

    def insert(self, entries: Sequence[tuple[bytes, RecordId]]) -> None:
        self._engine._require_txn()
        lst = self._entries
        for key, rid in entries:
            i = self._find_key(key)
            if self.unique and i < len(lst) and lst[i][0] == key:
                if lst[i][1] == rid:
                    continue
                raise DuplicateKeyInIndex(self.ident, key, lst[i][1])
            entry = (key, rid)
            j = bisect.bisect_left(lst, entry, lo=i)
            if j < len(lst) and lst[j] == entry:
                continue
            lst.insert(j, entry)
            self._engine.on_rollback(functools.partial(self._remove, entry))

    def _remove(self, entry: tuple[bytes, RecordId]) -> None:
        i = bisect.bisect_left(self._entries, entry)
        if i < len(self._entries) and self._entries[i] == entry:
            del self._entries[i]

    def delete(self, entries: Sequence[tuple[bytes, RecordId]]) -> None:
        self._engine._require_txn()
        for entry in entries:
            entry = (entry[0], entry[1])
            i = bisect.bisect_left(self._entries, entry)
            if i < len(self._entries) and self._entries[i] == entry:
                del self._entries[i]
                self._engine.on_rollback(functools.partial(bisect.insort, self._entries, entry))

    def lookup(self, keys: Sequence[bytes]) -> dict[bytes, list[RecordId]]:
        out: dict[bytes, list[RecordId]] = {}
        lst = self._entries
        for key in keys:
            i = self._find_key(key)
            while i < len(lst) and lst[i][0] == key:
                out.setdefault(key, []).append(lst[i][1])
                i += 1
        return out

    def scan(self, rng: KeyRange = FULL_RANGE, *, reverse: bool = False
             ) -> Iterator[tuple[bytes, RecordId]]:
        lst = self._entries
        lo, hi = rng.lo, rng.hi
        if not reverse:
            pos = 0 if lo is None else bisect.bisect_left(lst, (lo, -1))
            while pos < len(lst):
                if self.dropped:
                    raise store_dropped(self.ident)
                entry = lst[pos]
                key = entry[0]
                if lo is not None and key == lo and not rng.lo_inclusive:
                    pos = bisect.bisect_right(lst, (lo, _MAX_RID))
                    continue
                if hi is not None and (key > hi or (key == hi and not rng.hi_inclusive)):
                    return
                yield entry
                lst = self._entries  # re-seek: tolerate writes (and truncate) meanwhile
                pos = bisect.bisect_right(lst, entry)
        else:
            pos = len(lst) - 1 if hi is None else bisect.bisect_right(lst, (hi, _MAX_RID)) - 1
            while pos >= 0:
                if self.dropped:
                    raise store_dropped(self.ident)
                entry = lst[pos]
                key = entry[0]
                if hi is not None and key == hi and not rng.hi_inclusive:
                    pos = bisect.bisect_left(lst, (hi, -1)) - 1
                    continue
                if lo is not None and (key < lo or (key == lo and not rng.lo_inclusive)):
                    return
                yield entry
                lst = self._entries
                pos = bisect.bisect_left(lst, entry) - 1

    def count(self) -> int:
        return len(self._entries)

    def storage_size(self) -> int:
        return sum(len(k) + 8 for k, _ in self._entries)

    def truncate(self) -> None:
        self._engine._require_txn()
        old, self._entries = self._entries, []

        def undo() -> None:
            self._entries = old

        self._engine.on_rollback(undo)


class MemoryEngine(StorageEngine):
    name = "memory"
    is_durable = False

    def __init__(self) -> None:
        super().__init__()
        self._records: dict[str, MemoryRecordStore] = {}
        self._indexes: dict[str, MemoryIndexStore] = {}

    def create_record_store(self, ident: str) -> RecordStore:
        self._require_txn()
        check_ident(ident)
        if ident in self._records or ident in self._indexes:
            raise ValueError(f"ident {ident} exists")
        rs = MemoryRecordStore(self, ident)
        self._records[ident] = rs
        self.on_rollback(lambda: self._records.pop(ident, None))
        return rs

    def drop_record_store(self, ident: str) -> None:
        self._require_txn()
        rs = self._records.pop(ident)
        rs.dropped = True

        def undo() -> None:
            rs.dropped = False
            self._records[ident] = rs

        self.on_rollback(undo)

    def record_store(self, ident: str) -> RecordStore:
        return self._records[ident]

    def create_index_store(self, ident: str, *, unique: bool) -> IndexStore:
        self._require_txn()
        check_ident(ident)
        if ident in self._records or ident in self._indexes:
            raise ValueError(f"ident {ident} exists")
        ix = MemoryIndexStore(self, ident, unique)
        self._indexes[ident] = ix
        self.on_rollback(lambda: self._indexes.pop(ident, None))
        return ix

    def drop_index_store(self, ident: str) -> None:
        self._require_txn()
        ix = self._indexes.pop(ident)
        ix.dropped = True

        def undo() -> None:
            ix.dropped = False
            self._indexes[ident] = ix

        self.on_rollback(undo)

    def index_store(self, ident: str) -> IndexStore:
        return self._indexes[ident]

    def list_idents(self) -> list[str]:
        return sorted([*self._records, *self._indexes])

    def close(self) -> None:
        self.abort()

    def _txn_begin(self) -> None:
        pass

    def _txn_commit(self, durable: bool) -> None:
        pass

    def _txn_abort(self) -> None:
        pass

    def _txn_savepoint(self, level: int) -> None:
        pass

    def _txn_release(self, level: int) -> None:
        pass

    def _txn_rollback_to(self, level: int) -> None:
        pass

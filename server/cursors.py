"""Open cursors: batches for find/aggregate/list* replies, getMore, killCursors, timeouts.

A cursor wraps an iterator of documents. Iterators that read storage must be advanced
on the storage thread, so each cursor carries the `run` function that executes a
batch fetch where it belongs. Documents are encoded once, when batched, into
`RawBSONDocument`s: their size decides the batch (16 MiB per reply, as mongod: a document
that does not fit opens the next one) and the reply encoder copies their bytes.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import bson
from bson import Int64
from bson.raw_bson import DEFAULT_RAW_BSON_OPTIONS, RawBSONDocument

from storage.bsonutil import encode
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from .auth.principals import UserName
from .operations import CURRENT_OP

__all__ = ["Cursor", "CursorManager", "DEFAULT_FIRST_BATCH", "Lookahead", "Runner"]

Runner = Callable[[Callable[[], Any]], Awaitable[Any]]
# Raises unless the caller may use this cursor (getMore) or kill it (killCursors).
CursorCheck = Callable[["Cursor"], None]

DEFAULT_FIRST_BATCH = 101
# Replies stay under the 16 MiB document limit with room for the envelope.
MAX_BATCH_BYTES = 16 * 1024 * 1024 - 16 * 1024


async def run_inline(fn: Callable[[], Any]) -> Any:
    return fn()


@dataclass(slots=True)
class Cursor:
    id: int
    ns: str
    source: Lookahead
    run: Runner
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    conn_id: int | None = None
    exhausted: bool = False
    in_use: bool = False
    returned: int = 0
    on_close: Callable[[], None] | None = None
    # With --auth: the user who opened it and what opening it required (auth.cursor_access).
    owner: UserName | None = None
    originating: object | None = None
    # what currentOp shows of it: the command that opened it, when, how many batches
    originating_command: dict[str, Any] | None = None
    created_wall: float = field(default_factory=time.time)
    last_used_wall: float = field(default_factory=time.time)
    batches: int = 1


def _raw(doc: Any) -> RawBSONDocument:
    if isinstance(doc, RawBSONDocument):
        return doc
    return RawBSONDocument(encode(doc))


# Documents encoded together: one call of the C encoder costs about a microsecond
# whatever the document, so small documents are encoded in runs of up to this many.
_RUN_MAX: Final = 256


class Lookahead(Iterator[Any]):
    """A cursor's documents, with those taken ahead and not sent put back in front
    (`take_batch` encodes a run of documents at once, then puts back those past the
    batch's byte bound)."""

    __slots__ = ("_ahead", "_source")

    def __init__(self, source: Iterator[Any]) -> None:
        self._source = source
        self._ahead: deque[Any] = deque()

    @classmethod
    def of(cls, source: Iterator[Any]) -> Lookahead:
        return source if isinstance(source, Lookahead) else cls(source)

    def __iter__(self) -> Lookahead:
        return self

    def __next__(self) -> Any:
        if self._ahead:
            return self._ahead.popleft()
        return next(self._source)

    def take(self, n: int) -> list[Any]:
        """Up to `n` documents (fewer at the end). What the source raises propagates, as
        it would from the document that raised it."""
        return list(itertools.islice(self, n))

    def put_back(self, docs: list[Any]) -> None:
        self._ahead.extendleft(reversed(docs))


def _encode_run(docs: list[Any]) -> list[RawBSONDocument]:
    """`_raw` of each document; the plain dicts among them encoded together, in one call
    (as elements of an array, so each with its `_id` put first here, as encoding a
    top-level document does)."""
    plain: list[dict[str, Any]] = []
    where: list[int] = []
    for i, d in enumerate(docs):
        if type(d) is dict:
            if "_id" in d and next(iter(d)) != "_id":
                d = {"_id": d["_id"], **d}
            plain.append(d)
            where.append(i)
    if len(plain) < 2:
        return [_raw(d) for d in docs]
    try:
        encoded = bson.decode(encode({"d": plain}), DEFAULT_RAW_BSON_OPTIONS)["d"]
    except Exception:  # the document that fails raises as it does alone
        return [_raw(d) for d in docs]
    out: list[RawBSONDocument | None] = [None] * len(docs)
    for i, raw in zip(where, encoded):
        out[i] = raw
    return [_raw(d) if r is None else r for d, r in zip(docs, out)]


def first_batch_limit(batch_size: int | None) -> int:
    return DEFAULT_FIRST_BATCH if batch_size is None else batch_size


def take_batch(source: Lookahead, limit: int | None, max_bytes: int = MAX_BATCH_BYTES
               ) -> tuple[list[RawBSONDocument], bool]:
    """Up to `limit` documents (None: only the byte bound) that fit in `max_bytes` together,
    the first whatever its size (mongod's haveSpaceForNext); (batch, exhausted). They are
    encoded in runs; those that do not fit go back to `source` for the next batch."""
    batch: list[RawBSONDocument] = []
    size = 0
    run = 16
    while limit is None or len(batch) < limit:
        want = run if limit is None else min(run, limit - len(batch))
        if batch:  # no more than the documents seen so far say still fit
            want = min(want, (max_bytes - size) * len(batch) // size + 1)
        docs = source.take(want)
        raws = _encode_run(docs)
        for k, raw in enumerate(raws):
            n = len(raw.raw)
            if batch and size + n > max_bytes:
                source.put_back(raws[k:])
                return batch, False
            batch.append(raw)
            size += n
        if len(docs) < want:
            return batch, True
        run = min(run * 2, _RUN_MAX)
    return batch, False


class CursorManager:
    def __init__(self) -> None:
        self._cursors: dict[int, Cursor] = {}

    def __len__(self) -> int:
        return len(self._cursors)

    async def first_batch(self, ns: str, source: Iterator[Any], *, batch_size: int | None,
                          single_batch: bool = False, run: Runner = run_inline,
                          conn_id: int | None = None,
                          on_close: Callable[[], None] | None = None) -> dict[str, Any]:
        """Run the first batch and open a cursor if more remain: the `cursor` reply field."""
        limit = first_batch_limit(batch_size)
        source = Lookahead.of(source)
        batch, exhausted = await run(lambda: take_batch(source, limit))
        return self.adopt(ns, source, batch, exhausted, single_batch=single_batch, run=run,
                          conn_id=conn_id, on_close=on_close)

    def adopt(self, ns: str, source: Iterator[Any], batch: list[RawBSONDocument],
              exhausted: bool, *, single_batch: bool = False, run: Runner = run_inline,
              conn_id: int | None = None,
              on_close: Callable[[], None] | None = None) -> dict[str, Any]:
        """Open a cursor for a first batch already taken (on the storage thread, in the
        same hop as the query itself): the `cursor` reply field."""
        cursor_id = 0
        if exhausted or single_batch:
            if on_close is not None:
                on_close()
        else:
            cursor_id = self._new_id()
            op = CURRENT_OP.get()
            self._cursors[cursor_id] = Cursor(
                cursor_id, ns, Lookahead.of(source), run, conn_id=conn_id, returned=len(batch),
                on_close=on_close, originating_command=op.command if op is not None else None)
        return {"firstBatch": batch, "id": Int64(cursor_id), "ns": ns}

    def get(self, cursor_id: int) -> Cursor | None:
        return self._cursors.get(cursor_id)

    def __iter__(self) -> Iterator[Cursor]:
        return iter(list(self._cursors.values()))

    async def get_more(self, cursor_id: int, ns: str, batch_size: int | None,
                       check: CursorCheck | None = None) -> dict[str, Any]:
        """The next batch. `check` (with --auth) runs before the namespace is compared,
        as mongod authorizes before it validates the namespace; a refusal leaves the
        cursor open."""
        cursor = self._cursors.get(cursor_id)
        if cursor is None:
            raise MongoError(ErrorCode.CursorNotFound, f"cursor id {cursor_id} not found")
        if check is not None:
            check(cursor)
        if cursor.ns != ns:
            raise MongoError(ErrorCode.Unauthorized,
                             f"Requested getMore on namespace '{ns}', but cursor belongs to a "
                             f"different namespace {cursor.ns}")
        if cursor.in_use:
            raise MongoError(ErrorCode.CursorInUse, f"Cursor id {cursor_id} is already in use")
        cursor.in_use = True
        op = CURRENT_OP.get()
        if op is not None:
            op.cursor = cursor
        try:
            batch, exhausted = await cursor.run(lambda: take_batch(cursor.source, batch_size))
        except BaseException:
            self._close(cursor_id)
            raise
        finally:
            cursor.in_use = False
        cursor.last_used = time.monotonic()
        cursor.last_used_wall = time.time()
        cursor.returned += len(batch)
        cursor.batches += 1
        next_id = cursor_id
        if exhausted:
            self._close(cursor_id)
            next_id = 0
        return {"nextBatch": batch, "id": Int64(next_id), "ns": ns}

    def kill(self, ns: str, ids: list[int], check: CursorCheck | None = None
             ) -> dict[str, list[Int64]]:
        """Close these cursors of `ns`. `check` (with --auth) is run first on every one
        that exists, whatever its namespace, and a refusal fails the whole command before
        any is closed (mongod authorizes each id before killing any)."""
        if check is not None:
            for cid in ids:
                cursor = self._cursors.get(cid)
                if cursor is not None:
                    check(cursor)
        killed: list[Int64] = []
        not_found: list[Int64] = []
        for cid in ids:
            cursor = self._cursors.get(cid)
            if cursor is None or cursor.ns != ns:
                not_found.append(Int64(cid))
            else:
                self._close(cid)
                killed.append(Int64(cid))
        return {"cursorsKilled": killed, "cursorsNotFound": not_found, "cursorsAlive": [],
                "cursorsUnknown": []}

    def reap(self, idle_seconds: float) -> int:
        """Close cursors idle for longer than `idle_seconds`; returns how many."""
        now = time.monotonic()
        stale = [c.id for c in self._cursors.values()
                 if not c.in_use and now - c.last_used > idle_seconds]
        for cid in stale:
            self._close(cid)
        return len(stale)

    def close_all(self) -> None:
        for cid in list(self._cursors):
            self._close(cid)

    def close_for_namespace(self, ns_prefix: str) -> None:
        for cid, c in list(self._cursors.items()):
            if c.ns == ns_prefix or c.ns.startswith(ns_prefix + "."):
                self._close(cid)

    def _close(self, cursor_id: int) -> None:
        cursor = self._cursors.pop(cursor_id, None)
        if cursor is not None and cursor.on_close is not None:
            with contextlib.suppress(Exception):  # closing must never fail a command
                cursor.on_close()

    def _new_id(self) -> int:
        for _ in itertools.count():
            cid = secrets.randbits(63)
            if cid and cid not in self._cursors:
                return cid
        raise AssertionError("unreachable")

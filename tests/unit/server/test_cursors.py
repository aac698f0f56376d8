"""`server.cursors` on its own: batching by count and by bytes, the first-batch default,
and the cursor manager's life cycle (open, getMore, kill, reap, close by namespace) with
MongoDB's errors (CursorNotFound 43, CursorInUse 143, Unauthorized 13 for a getMore on
another namespace)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import bson
import pytest
from bson import Int64
from bson.raw_bson import RawBSONDocument
from hypothesis import given, settings
from hypothesis import strategies as st

from server.cursors import (
    DEFAULT_FIRST_BATCH,
    MAX_BATCH_BYTES,
    CursorManager,
    Lookahead,
    first_batch_limit,
    take_batch,
)
from storage.errors import MongoError

NS = "db.c"


def docs(n: int, pad: int = 0) -> Iterator[dict[str, Any]]:
    return ({"_id": i, "pad": "x" * pad} for i in range(n))


def ids(batch: list[RawBSONDocument]) -> list[int]:
    return [d["_id"] for d in batch]


def size_of(doc: dict[str, Any]) -> int:
    return len(bson.encode(doc))


class Closes:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


# -- take_batch ---------------------------------------------------------------------------------
def test_count_bound_takes_exactly_limit_and_leaves_the_rest() -> None:
    source = docs(10)
    batch, exhausted = take_batch(Lookahead(source), 3)
    assert ids(batch) == [0, 1, 2]
    assert exhausted is False
    assert next(source)["_id"] == 3  # nothing was read ahead


def test_short_source_is_exhausted_in_one_batch() -> None:
    batch, exhausted = take_batch(Lookahead(docs(2)), 5)
    assert ids(batch) == [0, 1]
    assert exhausted is True


def test_batch_exactly_as_long_as_the_source_is_not_yet_known_exhausted() -> None:
    # The end is found only by asking for one more: the next batch is empty and final.
    source = Lookahead(docs(3))
    assert take_batch(source, 3) == (take_batch(Lookahead(docs(3)), 3)[0], False)
    assert take_batch(source, 3) == ([], True)


def test_limit_zero_reads_nothing() -> None:
    source = docs(3)
    assert take_batch(Lookahead(source), 0) == ([], False)
    assert next(source)["_id"] == 0


_VALUE = st.one_of(st.integers(-5, 5), st.text(max_size=30), st.none(),
                   st.lists(st.integers(0, 3), max_size=3))


@st.composite
def _documents(draw: st.DrawFn) -> list[Any]:
    """Plain dicts (`_id` first, later or absent), SON, and raw documents."""
    out: list[Any] = []
    for k in range(draw(st.integers(0, 60))):
        fields = {f"f{j}": draw(_VALUE) for j in range(draw(st.integers(0, 3)))}
        where = draw(st.sampled_from(["first", "last", "none"]))
        doc = {"_id": k, **fields} if where == "first" else \
            {**fields, "_id": k} if where == "last" else fields
        kind = draw(st.integers(0, 9))
        out.append(RawBSONDocument(bson.encode(doc)) if kind == 0 else
                   bson.SON(doc) if kind == 1 else doc)
    return out


@settings(max_examples=200, deadline=None)
@given(_documents(), st.one_of(st.none(), st.integers(1, 40)), st.integers(1, 600))
def test_runs_encode_as_one_by_one(documents: list[Any], limit: int | None,
                                   max_bytes: int) -> None:
    """Batch after batch, the bytes of each document encoded alone, bound by count and by
    bytes (the first document whatever its size) at the same documents."""
    alone = [d if isinstance(d, RawBSONDocument) else bson.encode(d) for d in documents]
    alone = [d.raw if isinstance(d, RawBSONDocument) else d for d in alone]
    source, at = Lookahead(iter(documents)), 0
    while True:
        got, exhausted = take_batch(source, limit, max_bytes)
        want: list[bytes] = []
        while at < len(alone) and (limit is None or len(want) < limit) and (
                not want or sum(map(len, want)) + len(alone[at]) <= max_bytes):
            want.append(alone[at])
            at += 1
        assert [d.raw for d in got] == want
        if exhausted:
            assert at == len(alone)
            break


def test_documents_past_the_byte_bound_wait_for_the_next_batch() -> None:
    source = Lookahead(docs(100, pad=100))
    first, exhausted = take_batch(source, None, max_bytes=10 * size_of(next(docs(1, 100))))
    assert ids(first) == list(range(10)) and not exhausted
    rest, exhausted = take_batch(source, None)
    assert ids(rest) == list(range(10, 100)) and exhausted


def test_an_unencodable_document_raises_as_alone() -> None:
    bad = [{"_id": 0}, {"_id": 1, "x": object()}]
    with pytest.raises(bson.errors.InvalidDocument):
        take_batch(Lookahead(iter(bad)), None)


def test_documents_are_encoded_once_and_raw_ones_pass_through() -> None:
    raw = RawBSONDocument(bson.encode({"_id": "raw"}))
    plain = {"_id": 7, "a": [1, {"b": 2}]}
    batch, _ = take_batch(Lookahead(iter([raw, plain])), None)
    assert batch[0] is raw
    assert isinstance(batch[1], RawBSONDocument)
    assert batch[1].raw == bson.encode(plain)


def test_byte_bound_alone_stops_a_batch_that_fills_it_exactly() -> None:
    one = size_of(next(docs(1, pad=100)))
    source = Lookahead(docs(10, pad=100))
    batch, exhausted = take_batch(source, None, max_bytes=3 * one)
    assert ids(batch) == [0, 1, 2]
    assert sum(len(d.raw) for d in batch) == 3 * one
    assert exhausted is False
    assert next(source)["_id"] == 3


def test_count_bound_wins_when_it_comes_first() -> None:
    batch, _ = take_batch(Lookahead(docs(10, pad=100)), 2, max_bytes=1 << 20)
    assert ids(batch) == [0, 1]


def test_a_document_larger_than_the_byte_bound_still_goes_alone() -> None:
    source = Lookahead(docs(3, pad=1000))
    batch, exhausted = take_batch(source, None, max_bytes=10)
    assert ids(batch) == [0]
    assert exhausted is False
    assert next(source)["_id"] == 1


def test_a_batch_of_several_documents_never_passes_the_byte_bound() -> None:
    """mongod adds a document only when it still fits (FindCommon::haveSpaceForNext) and
    keeps it for the next batch."""
    one = size_of(next(docs(1, pad=100)))
    bound = one * 5 // 2  # room for two and a half documents
    source = Lookahead(docs(10, pad=100))
    batch, _ = take_batch(source, None, max_bytes=bound)
    assert sum(len(d.raw) for d in batch) <= bound
    assert ids(batch) == [0, 1]
    second, _ = take_batch(source, None, max_bytes=bound)
    assert ids(second) == [2, 3]  # the document that did not fit opens the next batch


def test_max_batch_bytes_leaves_room_for_the_reply_envelope() -> None:
    assert 15 * 1024 * 1024 < MAX_BATCH_BYTES < 16 * 1024 * 1024


def test_first_batch_limit() -> None:
    assert first_batch_limit(None) == DEFAULT_FIRST_BATCH == 101
    assert first_batch_limit(0) == 0
    assert first_batch_limit(7) == 7


# -- CursorManager: first batch -----------------------------------------------------------------
async def test_exhausted_first_batch_opens_no_cursor_and_closes_the_source() -> None:
    mgr = CursorManager()
    closes = Closes()
    reply = await mgr.first_batch(NS, docs(3), batch_size=None, on_close=closes)
    assert ids(reply["firstBatch"]) == [0, 1, 2]
    assert reply["id"] == 0 and isinstance(reply["id"], Int64)
    assert reply["ns"] == NS
    assert len(mgr) == 0
    assert closes.calls == 1


async def test_default_first_batch_is_101_and_leaves_a_cursor_open() -> None:
    mgr = CursorManager()
    closes = Closes()
    reply = await mgr.first_batch(NS, docs(250), batch_size=None, on_close=closes)
    assert len(reply["firstBatch"]) == 101
    assert isinstance(reply["id"], Int64) and 0 < reply["id"] < 2**63
    assert len(mgr) == 1
    assert closes.calls == 0


async def test_batch_size_zero_opens_a_cursor_with_an_empty_first_batch() -> None:
    mgr = CursorManager()
    reply = await mgr.first_batch(NS, docs(5), batch_size=0)
    assert reply["firstBatch"] == []
    assert reply["id"] != 0
    more = await mgr.get_more(reply["id"], NS, None)
    assert ids(more["nextBatch"]) == [0, 1, 2, 3, 4]  # nothing was lost to the empty batch


async def test_single_batch_closes_even_with_documents_left() -> None:
    mgr = CursorManager()
    closes = Closes()
    reply = await mgr.first_batch(NS, docs(10), batch_size=4, single_batch=True,
                                  on_close=closes)
    assert ids(reply["firstBatch"]) == [0, 1, 2, 3]
    assert reply["id"] == 0
    assert len(mgr) == 0
    assert closes.calls == 1


async def test_the_runner_takes_every_batch() -> None:
    calls: list[str] = []

    async def run(fn: Any) -> Any:
        calls.append("run")
        return fn()

    mgr = CursorManager()
    reply = await mgr.first_batch(NS, docs(5), batch_size=2, run=run)
    await mgr.get_more(reply["id"], NS, 2)
    await mgr.get_more(reply["id"], NS, 2)
    assert calls == ["run", "run", "run"]


async def test_cursor_ids_are_distinct_positive_63_bit() -> None:
    mgr = CursorManager()
    got = set()
    for _ in range(200):
        reply = await mgr.first_batch(NS, docs(5), batch_size=1)
        got.add(int(reply["id"]))
    assert len(got) == 200 == len(mgr)
    assert all(0 < cid < 2**63 for cid in got)


# -- getMore ------------------------------------------------------------------------------------
async def test_get_more_walks_to_the_end_then_the_cursor_is_gone() -> None:
    mgr = CursorManager()
    closes = Closes()
    first = await mgr.first_batch(NS, docs(5), batch_size=2, on_close=closes)
    cid = first["id"]
    second = await mgr.get_more(cid, NS, 2)
    assert ids(second["nextBatch"]) == [2, 3]
    assert second["id"] == cid and second["ns"] == NS
    third = await mgr.get_more(cid, NS, 2)
    assert ids(third["nextBatch"]) == [4]
    assert third["id"] == 0 and isinstance(third["id"], Int64)
    assert len(mgr) == 0
    assert closes.calls == 1
    with pytest.raises(MongoError) as err:
        await mgr.get_more(cid, NS, 2)
    assert (err.value.code, err.value.code_name) == (43, "CursorNotFound")
    assert str(int(cid)) in err.value.errmsg


async def test_get_more_without_batch_size_returns_the_rest() -> None:
    mgr = CursorManager()
    first = await mgr.first_batch(NS, docs(500), batch_size=1)
    rest = await mgr.get_more(first["id"], NS, None)
    assert ids(rest["nextBatch"]) == list(range(1, 500))
    assert rest["id"] == 0


async def test_get_more_on_an_unknown_id() -> None:
    mgr = CursorManager()
    with pytest.raises(MongoError) as err:
        await mgr.get_more(12345, NS, None)
    assert err.value.code == 43
    assert err.value.to_reply() == {"ok": 0.0, "errmsg": "cursor id 12345 not found",
                                    "code": 43, "codeName": "CursorNotFound"}


async def test_get_more_on_another_namespace_is_refused_and_keeps_the_cursor() -> None:
    mgr = CursorManager()
    first = await mgr.first_batch(NS, docs(5), batch_size=2)
    with pytest.raises(MongoError) as err:
        await mgr.get_more(first["id"], "db.other", 2)
    assert (err.value.code, err.value.code_name) == (13, "Unauthorized")
    assert len(mgr) == 1
    more = await mgr.get_more(first["id"], NS, 2)
    assert ids(more["nextBatch"]) == [2, 3]  # the refused getMore consumed nothing


async def test_a_cursor_busy_in_a_get_more_refuses_a_second_one() -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow_run(fn: Any) -> Any:
        entered.set()
        await release.wait()
        return fn()

    slow = CursorManager()
    opened = slow.adopt(NS, docs(6), [], False, run=slow_run)
    busy = asyncio.create_task(slow.get_more(opened["id"], NS, 2))
    await asyncio.wait_for(entered.wait(), 2)
    with pytest.raises(MongoError) as err:
        await asyncio.wait_for(slow.get_more(opened["id"], NS, 2), 2)
    assert (err.value.code, err.value.code_name) == (143, "CursorInUse")
    assert slow.reap(0.0) == 0  # a cursor in use is never reaped
    release.set()
    done = await asyncio.wait_for(busy, 2)
    assert ids(done["nextBatch"]) == [0, 1]
    again = await slow.get_more(opened["id"], NS, 2)  # free again afterwards
    assert ids(again["nextBatch"]) == [2, 3]


async def test_a_failing_source_closes_its_cursor() -> None:
    def broken() -> Iterator[dict[str, Any]]:
        yield {"_id": 0}
        yield {"_id": 1}
        raise MongoError(2, "storage went away")

    mgr = CursorManager()
    closes = Closes()
    first = await mgr.first_batch(NS, broken(), batch_size=1, on_close=closes)
    with pytest.raises(MongoError) as err:
        await mgr.get_more(first["id"], NS, 5)
    assert err.value.code == 2
    assert len(mgr) == 0
    assert closes.calls == 1
    with pytest.raises(MongoError) as gone:
        await mgr.get_more(first["id"], NS, 5)
    assert gone.value.code == 43


# -- killCursors, reaping, closing --------------------------------------------------------------
async def test_kill_reports_killed_and_not_found() -> None:
    mgr = CursorManager()
    closes = Closes()
    a = (await mgr.first_batch(NS, docs(5), batch_size=1, on_close=closes))["id"]
    b = (await mgr.first_batch(NS, docs(5), batch_size=1, on_close=closes))["id"]
    out = mgr.kill(NS, [int(a), 999, int(b)])
    assert out == {"cursorsKilled": [Int64(a), Int64(b)], "cursorsNotFound": [Int64(999)],
                   "cursorsAlive": [], "cursorsUnknown": []}
    assert all(isinstance(x, Int64) for x in out["cursorsKilled"] + out["cursorsNotFound"])
    assert len(mgr) == 0
    assert closes.calls == 2
    with pytest.raises(MongoError) as err:
        await mgr.get_more(a, NS, 1)
    assert err.value.code == 43
    assert mgr.kill(NS, [int(a)])["cursorsNotFound"] == [Int64(a)]  # killing twice


async def test_kill_on_another_namespace_does_not_kill() -> None:
    mgr = CursorManager()
    cid = (await mgr.first_batch(NS, docs(5), batch_size=1))["id"]
    out = mgr.kill("db.other", [int(cid)])
    assert out["cursorsKilled"] == [] and out["cursorsNotFound"] == [Int64(cid)]
    assert len(mgr) == 1


async def test_reap_closes_idle_cursors_only() -> None:
    mgr = CursorManager()
    closes = Closes()
    old = (await mgr.first_batch(NS, docs(5), batch_size=1, on_close=closes))["id"]
    fresh = (await mgr.first_batch(NS, docs(5), batch_size=1, on_close=closes))["id"]
    used = (await mgr.first_batch(NS, docs(5), batch_size=1, on_close=closes))["id"]
    mgr._cursors[int(old)].last_used -= 120.0
    mgr._cursors[int(used)].last_used -= 120.0
    await mgr.get_more(used, NS, 1)  # a getMore makes it fresh again
    assert mgr.reap(60.0) == 1
    assert closes.calls == 1
    assert len(mgr) == 2
    with pytest.raises(MongoError) as err:
        await mgr.get_more(old, NS, 1)
    assert err.value.code == 43
    assert ids((await mgr.get_more(fresh, NS, 1))["nextBatch"]) == [1]
    assert mgr.reap(60.0) == 0


async def test_close_for_namespace_matches_whole_names() -> None:
    mgr = CursorManager()
    opened = {}
    for ns in ("db.c", "db.c.sub", "db.cc", "db2.c", "dbx.c", "db.$cmd.listIndexes.c"):
        opened[ns] = (await mgr.first_batch(ns, docs(3), batch_size=1))["id"]
    mgr.close_for_namespace("db.c")
    alive = {ns for ns, cid in opened.items() if int(cid) in mgr._cursors}
    assert alive == {"db.cc", "db2.c", "dbx.c", "db.$cmd.listIndexes.c"}
    mgr.close_for_namespace("db")  # a dropped database takes all of its cursors
    alive = {ns for ns, cid in opened.items() if int(cid) in mgr._cursors}
    assert alive == {"db2.c", "dbx.c"}


async def test_close_all_runs_every_close_even_when_one_fails() -> None:
    mgr = CursorManager()
    closes = Closes()

    def failing() -> None:
        closes.calls += 100
        raise RuntimeError("close failed")

    await mgr.first_batch(NS, docs(3), batch_size=1, on_close=failing)
    await mgr.first_batch(NS, docs(3), batch_size=1, on_close=closes)
    mgr.close_all()
    assert len(mgr) == 0
    assert closes.calls == 101

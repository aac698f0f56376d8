"""The native write path against the Python reference, through the whole catalog.

The same batches go into two catalogs as document sequences (`RawDocuments`, what the wire
hands over): one scans them natively and keeps native bucket state (columns, control.min/
max and schema in the core, `bucket_state`), the other decodes them and keeps the
reference's. Both must write byte-identical bucket documents, refuse the same measurements
with the same codes and messages, and count the same statistics: for hypothesis batches
over every BSON type (objects and arrays too, which hand a bucket's columns over to the
reference), object metas in different field orders, missing fields, type changes, times
out of order and before 1970 or after 2038, every rollover reason under small limits,
ordered and unordered batches with bad measurements mixed in, and decoded batches (Python
dicts) interleaved, which hand a native bucket over to the reference mid-life.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import bson
import pytest
from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from storage.bsonutil import decode, encode
from storage.errors import MongoError
from storage.timeseries import native_scan
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.constants import TimeseriesParameters
from storage.timeseries.native_columns import NativeColumns
from storage.timeseries.options import parse_timeseries_options
from storage.timeseries.pending_writes import DeferredBucketWrites
from storage.vocabulary.error_codes import ErrorCode

from . import strategies as gen
from .helpers import FakeStore, sequence

pytestmark = pytest.mark.skipif(not BucketCatalog()._measurements.scan,
                                reason="native core not built")

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
T0 = 1_700_000_000_000

PARAMS = {
    "default": None,
    # sizes decide: a small max size, large-measurement threshold and min count
    "size": TimeseriesParameters(timeseriesBucketMaxSize=400, timeseriesBucketMinCount=2,
                                 timeseriesLargeMeasurementThreshold=12),
    "count": TimeseriesParameters(timeseriesBucketMaxCount=4),
}


def run(batches: list[tuple[list[dict[str, Any]], bool, bool]], native: bool,
        params: TimeseriesParameters | None, *, restart: bool = False) -> dict[str, Any]:
    """Every batch (documents, ordered, as a sequence) into one catalog: what it wrote,
    refused and counted, and how many native buckets it had. With `restart`, each batch
    goes into a new catalog over the same store (a restarted server: every series that
    continues reopens a stored bucket)."""
    cat = BucketCatalog(params, id_seed=7)
    cat._measurements.scan = native
    store = FakeStore()
    refused = []
    changes = []
    native_buckets = 0
    stats: dict[str, int] = {}
    for k, (docs, ordered, raw) in enumerate(batches):
        if restart and k:
            for name, n in asdict(cat.execution_stats("c")).items():
                stats[name] = stats.get(name, 0) + n
            cat = BucketCatalog(params, id_seed=7 + 100_000 * k)
            cat._measurements.scan = native
        measurements: Any = sequence(docs) if raw else [dict(d) for d in docs]
        r = cat.insert_batch("c", OPTS, measurements, store, ordered=ordered)
        refused.append([(i, e.code, str(e)) for i, e in r.errors])
        # the DocDiff of each write: which columns changed and from which byte
        changes.append({str(w.bucket_id): [(c.name, c.is_new, c.diff.offset, c.diff.data)
                                           for c in w.column_changes] for w in r.writes})
        native_buckets += sum(isinstance(b.columns, NativeColumns) or b.control is not None
                              for b in cat.open_buckets("c"))
        store.apply(cat, r)
    for name, n in asdict(cat.execution_stats("c")).items():
        stats[name] = stats.get(name, 0) + n
    return {"docs": store.docs.get("c", {}), "refused": refused, "changes": changes,
            "stats": stats,
            "open": sorted(str(b.bucket_id) for b in cat.open_buckets("c")),
            "native_buckets": native_buckets}


def check(batches: list[tuple[list[dict[str, Any]], bool, bool]],
          params: TimeseriesParameters | None, *, restart: bool = False) -> dict[str, Any]:
    got = run(batches, True, params, restart=restart)
    want = run(batches, False, params, restart=restart)
    assert want["native_buckets"] == 0
    native_buckets = got.pop("native_buckets")
    want.pop("native_buckets")
    assert got["refused"] == want["refused"]
    assert got["changes"] == want["changes"]
    assert got["stats"] == want["stats"]
    assert got["open"] == want["open"]
    assert got["docs"].keys() == want["docs"].keys()
    for oid, doc in want["docs"].items():
        assert got["docs"][oid] == doc, (bson.decode(got["docs"][oid]), bson.decode(doc))
    got["native_buckets"] = native_buckets
    return got


# -- hypothesis batches --------------------------------------------------------------------

_METAS = [None, "a", 7, {"h": "x", "r": 1}, {"r": 1, "h": "x"}, [1, {"b": 2, "a": 1}]]
_FLAT = st.one_of(st.floats(allow_nan=False), st.integers(-(2**31), 2**31 - 1),
                  st.integers(-(2**63), 2**63 - 1).map(Int64), st.sampled_from(["s", "t" * 20]),
                  st.booleans(), st.none(), gen.DATE)


@st.composite
def _doc(draw: st.DrawFn, k: int, nested: bool) -> dict[str, Any]:
    """A measurement with an `_id`: steady fields (the TSBS shape), now and then a missing
    one, another type, a nested value, a bad time."""
    doc: dict[str, Any] = {"_id": ObjectId(k.to_bytes(12, "big"))}
    kind = draw(st.integers(0, 19))
    if kind == 0:
        doc.update(draw(gen.measurement(_METAS[1:])))
        doc.setdefault("_id", ObjectId(k.to_bytes(12, "big")))
        if not nested:
            doc = {n: v for n, v in doc.items() if type(v) not in (dict, list) or n == "m"}
        return doc
    doc["t"] = DatetimeMS(T0 + 1000 * draw(st.integers(-30, 4000)))
    meta = draw(st.sampled_from(_METAS))
    if meta is not None:
        doc["m"] = draw(gen.shuffled(meta))
    for name in ("usage", "idle", "load"):
        if draw(st.integers(0, 9)):
            doc[name] = draw(st.floats(0, 100, allow_nan=False)) if kind > 3 else draw(_FLAT)
    if kind == 1 and nested:
        doc["tags"] = draw(gen.VALUE)
    return doc


@st.composite
def _batches(draw: st.DrawFn, nested: bool) -> list[tuple[list[dict[str, Any]], bool, bool]]:
    out = []
    k = 0
    for _ in range(draw(st.integers(1, 5))):
        docs = []
        for _ in range(draw(st.integers(1, 25))):
            docs.append(draw(_doc(k, nested)))
            k += 1
        out.append((docs, draw(st.booleans()), draw(st.integers(0, 5)) > 0))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_batches(nested=False), st.sampled_from(sorted(PARAMS)))
def test_flat_measurements_write_the_same_buckets(batches, params) -> None:
    got = check(batches, PARAMS[params])
    event(f"native buckets: {min(got['native_buckets'], 3)}")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_batches(nested=True), st.sampled_from(sorted(PARAMS)))
def test_any_measurements_write_the_same_buckets(batches, params) -> None:
    check(batches, PARAMS[params])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_batches(nested=False), st.sampled_from(sorted(PARAMS)))
def test_buckets_reopened_after_a_restart_write_the_same(batches, params) -> None:
    got = check(batches, PARAMS[params], restart=True)
    event(f"native buckets: {min(got['native_buckets'], 3)}")


def run_pending(batches: list[tuple[list[dict[str, Any]], bool, bool]], native: bool,
                params: TimeseriesParameters | None, flush_after: set[int]
                ) -> tuple[dict[str, Any], int]:
    """Every batch into one catalog over real storage, its writes pending in a group
    commit flushed after the batches `flush_after` (as the server's): what storage holds
    at the end, what was refused and counted, and how many buckets were reopened from a
    pending write's native state (`rehydrate_pending`)."""
    from query.match import compile_filter
    from storage.catalog import Catalog
    from storage.timeseries import default_index_spec, staging
    from storage.timeseries.stored_buckets import StoredBuckets

    cat = Catalog.open(engine="memory", compile_filter=lambda s: compile_filter(s).matches)
    with cat.transaction():
        cat.create_collection("db", "system.buckets.c", {})
        buckets = cat.get_collection("db", "system.buckets.c")
        buckets.create_indexes([default_index_spec(OPTS)])
    catalog = BucketCatalog(params, id_seed=7)
    catalog._measurements.scan = native
    pending = DeferredBucketWrites()
    source = StoredBuckets(buckets, OPTS, pending, lambda: pending.flush(cat))
    from_state = 0
    real = staging.rehydrate_pending

    def counted(*args: Any) -> Any:
        nonlocal from_state
        from_state += 1
        return real(*args)

    staging.rehydrate_pending = counted  # type: ignore[assignment]
    refused = []
    try:
        for k, (docs, ordered, raw) in enumerate(batches):
            measurements: Any = sequence(docs) if raw else [dict(d) for d in docs]
            r = catalog.insert_batch("db.c", OPTS, measurements, source, ordered=ordered)
            refused.append([(i, e.code, str(e)) for i, e in r.errors])
            pending.add("db", "system.buckets.c", r.writes)
            catalog.commit(r)
            if k in flush_after:
                pending.flush(cat)
    finally:
        staging.rehydrate_pending = real  # type: ignore[assignment]
    pending.flush(cat)
    stored = {raw[9:21]: raw for _rid, raw in buckets.scan()}
    valid = buckets.validate()
    assert valid.valid, valid.errors
    cat.close()
    return {"docs": stored, "refused": refused,
            "stats": asdict(catalog.execution_stats("db.c"))}, from_state


@st.composite
def _drifting_batches(draw: st.DrawFn) -> list[tuple[list[dict[str, Any]], bool, bool]]:
    """Two writers of the same series taking turns, one ahead of the other by up to two
    bucket spans: each turn that crosses a span boundary reopens buckets by time going
    backward and forward, mostly while their documents are still pending."""
    step = draw(st.integers(100, 2000))     # seconds each writer moves per batch
    lead = draw(st.integers(0, 7200))       # seconds writer B is ahead of writer A
    out = []
    k = 0
    for b in range(draw(st.integers(2, 10))):
        base = T0 + 1000 * ((b // 2) * step + (lead if b % 2 else 0))
        docs = []
        for _ in range(draw(st.integers(1, 12))):
            doc = draw(_doc(k, False))
            if type(doc.get("t")) is DatetimeMS:
                doc["t"] = DatetimeMS(base + 1000 * draw(st.integers(0, step)))
                if draw(st.integers(0, 9)):
                    doc["m"] = "a"  # mostly one series
            docs.append(doc)
            k += 1
        out.append((docs, draw(st.booleans()), draw(st.integers(0, 9)) > 0))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_drifting_batches(), st.sampled_from(sorted(PARAMS)),
       st.sets(st.integers(0, 9), max_size=3))
def test_buckets_reopened_from_pending_writes_write_the_same(batches, params, flush_after
                                                             ) -> None:
    """Times back and forth across bucket spans reopen buckets whose documents are still
    pending: the native catalog reopens them from the state they are built from, the
    reference from their documents, and storage ends up holding the same bytes."""
    got, from_state = run_pending(batches, True, PARAMS[params], flush_after)
    want, none = run_pending(batches, False, PARAMS[params], flush_after)
    assert none == 0
    assert got["refused"] == want["refused"]
    assert got["stats"] == want["stats"]
    assert got["docs"].keys() == want["docs"].keys()
    for oid, doc in want["docs"].items():
        assert got["docs"][oid] == doc, (bson.decode(got["docs"][oid]), bson.decode(doc))
    event(f"reopened from a pending write's state: {min(from_state, 3)}")


# -- chosen cases --------------------------------------------------------------------------

def _tsbs(n: int, hosts: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"_id": ObjectId((start + i).to_bytes(12, "big")),
             "t": DatetimeMS(T0 + 10_000 * ((start + i) // hosts)),
             "m": {"hostname": f"host_{i % hosts}", "region": "eu-west-1"},
             "usage_user": Int64((start + i) * 7 % 100), "usage_system": (i % 13) / 4}
            for i in range(n)]


def test_tsbs_batches_stay_native_and_match() -> None:
    batches = [(_tsbs(200, 10, s), True, True) for s in range(0, 2000, 200)]
    got = check(batches, None)
    # every batch leaves its ten buckets open and native
    assert got["native_buckets"] == 10 * len(batches)


def test_the_group_commit_builds_each_bucket_once_from_its_latest_write() -> None:
    """Batches pending together, as between two group commits: a native bucket's document
    is built only when read, from the bucket as its latest write left it, and is the
    reference's; a superseded write of the bucket refuses to build instead of giving the
    later bytes; a written document's bytes are dropped and built again alike."""
    native, reference = BucketCatalog(None, id_seed=7), BucketCatalog(None, id_seed=7)
    reference._measurements.scan = False
    pending = DeferredBucketWrites()
    first: list[Any] = []
    last: list[Any] = []
    want: dict[ObjectId, bytes] = {}
    for s in range(0, 600, 200):
        docs = _tsbs(200, 10, s)
        r = native.insert_batch("c", OPTS, sequence(docs), None, ordered=True)
        assert all(w._document is None for w in r.writes)  # nothing built yet
        first, last = first or r.writes, r.writes
        pending.add("db", "system.buckets.c", r.writes)
        native.commit(r)
        rr = reference.insert_batch("c", OPTS, [dict(d) for d in docs], None, ordered=True)
        want.update((w.bucket_id, w.document) for w in rr.writes)
        reference.commit(rr)
    assert len(want) == 10
    for oid, doc in want.items():
        w = pending.write("db", "system.buckets.c", oid)
        assert w is not None and w.document == doc
    with pytest.raises(MongoError) as err:
        first[0].document  # noqa: B018
    assert err.value.code == ErrorCode.InternalError
    latest = last[0]
    assert latest.known_size == len(latest.document)
    latest.release_document()
    assert latest._document is None and latest.document == want[latest.bucket_id]


def test_reopened_buckets_stay_native_and_match() -> None:
    """A restarted server's scanned batches reopen the stored buckets into the native core
    (as the reference reopens them into its own state), and write the same bytes."""
    batches = [(_tsbs(200, 10, s), True, True) for s in range(0, 1000, 200)]
    got = check(batches, None, restart=True)
    assert got["stats"]["numBucketsReopened"] == 10 * (len(batches) - 1)
    assert got["native_buckets"] == 10 * len(batches)


def test_an_object_field_hands_the_columns_over_and_keeps_control_native() -> None:
    docs = _tsbs(20, 2)
    docs[5]["tags"] = {"rack": 1, "row": [1, 2]}
    got = check([(docs[:4], True, True), (docs[4:], True, True), (_tsbs(10, 2, 20), True, True)],
                None)
    assert got["native_buckets"] > 0


def test_decoded_batches_hand_native_buckets_over() -> None:
    batches = [(_tsbs(40, 4, 0), True, True), (_tsbs(40, 4, 40), True, False),
               (_tsbs(40, 4, 80), False, True)]
    check(batches, PARAMS["count"])


def test_out_of_order_and_old_dates() -> None:
    docs = _tsbs(60, 3)
    docs.reverse()
    old = [{**d, "t": DatetimeMS(-(10**12) + i * 1000)} for i, d in enumerate(_tsbs(30, 3, 60))]
    late = [{**d, "t": DatetimeMS(2**31 * 1000 + i)} for i, d in enumerate(_tsbs(30, 3, 90))]
    check([(docs, True, True), (old, False, True), (late, True, True), (docs[:5], True, True)],
          None)


def test_bad_measurements_mixed_in_ordered_and_unordered() -> None:
    for ordered in (True, False):
        docs = _tsbs(30, 3)
        docs[4]["t"] = "yesterday"
        del docs[9]["t"]
        docs[17]["t"] = Int64(5)
        got = check([(docs, ordered, True)], None)
        assert [i for i, _c, _m in got["refused"][0]] == ([4] if ordered else [4, 9, 17])


def test_the_native_documents_decode_to_the_measurements() -> None:
    """Not only equal to the reference: the buckets hold what was inserted."""
    from storage.timeseries.unpack import BucketSpec, unpack_bucket
    docs = _tsbs(50, 5)
    cat = BucketCatalog(id_seed=1)
    store = FakeStore()
    store.apply(cat, cat.insert_batch("c", OPTS, sequence(docs), store))
    spec = BucketSpec("t", "m")
    out = [d for raw in store.docs["c"].values() for d in unpack_bucket(bson.decode(raw), spec)]
    assert sorted(out, key=lambda d: d["_id"]) == sorted(
        [decode(encode(d)) for d in docs], key=lambda d: d["_id"])


def test_a_batch_scanned_ahead_is_not_scanned_again(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _tsbs(300, 10)
    raw = sequence(docs)
    ahead = native_scan.prescan(raw.buffer, OPTS, True, offsets=raw.offsets)
    assert ahead is not None and ahead.batch is not None
    plain, fresh = BucketCatalog(id_seed=7), BucketCatalog(id_seed=7)
    want = plain.insert_batch("c", OPTS, sequence(docs), None, ordered=True)
    calls = []
    real = native_scan.scan
    monkeypatch.setattr(native_scan, "scan", lambda *a, **k: calls.append(a) or real(*a, **k))
    got = fresh.insert_batch("c", OPTS, raw, None, ordered=True, prescanned=ahead)
    assert calls == []
    assert [(w.bucket_id, w.document) for w in got.writes] == \
        [(w.bucket_id, w.document) for w in want.writes]
    fresh.commit(got)
    # scanned for other options (here: unordered) it is scanned again
    again = fresh.insert_batch("c", OPTS, sequence(_tsbs(300, 10, 300)), None, ordered=False,
                               prescanned=ahead)
    assert len(calls) == 1 and again.num_inserted == 300

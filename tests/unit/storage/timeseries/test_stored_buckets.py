"""Reopening queries answered from storage plus pending bucket writes, by a direct index
scan (`storage.timeseries.stored_buckets.StoredBuckets`), against MongoDB's query run by
the query planner and matcher after a flush: the same bucket reopened for every measurement, so the
same bucket documents and the same catalog statistics, with fewer flushes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import bson
import pytest
from bson import Int64
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from query.executor import FindSpec, candidates, prepare_find
from storage.bsonutil import decode
from storage.catalog import Catalog
from storage.indexes import IndexSpec, KeyGenerator
from storage.timeseries import (
    ReopeningQuery,
    TimeseriesParameters,
    default_index_spec,
    parse_timeseries_options,
    stored_buckets,
)
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.pending_writes import DeferredBucketWrites
from storage.timeseries.stored_buckets import StoredBuckets, _IndexFacts
from storage.timeseries.write_batch import BucketWrite
from storage.vocabulary.missing import MISSING

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
T0 = 1_699_999_980_000  # on a minute: measurement times can equal a bucket's min time
# metas whose equality is identity, and some whose is not (1 == 1.0 == Int64(1))
METAS: list[Any] = ["a", "b", {"x": "a", "y": True}, 1, 1.0, Int64(1), None, ["a", "b"],
                    "MISSING"]


class _Service:
    """What StoredBuckets needs of TimeseriesService: the pending writes and a flush."""

    def __init__(self, cat: Catalog) -> None:
        self.cat = cat
        self.deferred = DeferredBucketWrites()
        self.flushes = 0

    def flush_deferred(self, *, durable: bool = False) -> None:
        if self.deferred:
            self.flushes += 1
            self.deferred.flush(self.cat, durable=durable)


def _planned_candidates(source: StoredBuckets, index: str, query: ReopeningQuery
                        ) -> tuple[Callable[[Any], bool], Iterator[tuple[int, bytes]], bool]:
    """The reference for `StoredBuckets._stored_candidates`: MongoDB's reopening query
    run by the query planner and matcher."""
    prepared = prepare_find(source.buckets, FindSpec(filter=query.filter(), hint=index))
    return prepared.matcher.matches, candidates(source.buckets, prepared.plan), False


def _run(batches: list[list[dict[str, Any]]], flush_after: set[int], overlay: bool,
         max_count: int) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    from query.match import compile_filter

    cat = Catalog.open(engine="memory", compile_filter=lambda s: compile_filter(s).matches)
    with cat.transaction():
        cat.create_collection("db", "system.buckets.c", {})
        buckets = cat.get_collection("db", "system.buckets.c")
        buckets.create_indexes([default_index_spec(OPTS)])
    catalog = BucketCatalog(TimeseriesParameters(timeseriesBucketMaxCount=max_count),
                            id_seed=7)
    service = _Service(cat)
    source = StoredBuckets(buckets, OPTS, service.deferred, service.flush_deferred)
    saved = stored_buckets._identity_meta
    if not overlay:  # the reference: flush, then the planned query
        stored_buckets._identity_meta = lambda meta: False  # type: ignore[assignment]
        source._stored_candidates = partial(_planned_candidates, source)  # type: ignore[method-assign]
    try:
        for i, docs in enumerate(batches):
            result = catalog.insert_batch("db.c", OPTS, docs, source, ordered=False)
            assert not result.errors
            service.deferred.add("db", "system.buckets.c", result.writes)
            catalog.commit(result)
            if i in flush_after:
                service.flush_deferred()
    finally:
        stored_buckets._identity_meta = saved
    flushes = service.flushes
    service.flush_deferred()
    stored = sorted((decode(raw) for _rid, raw in buckets.scan()),
                    key=lambda d: d["_id"].binary)
    check = buckets.validate()
    assert check.valid, check.errors
    stats = catalog.collection_stats("db.c")
    cat.close()
    return stored, stats, flushes


def _doc(n: int, meta: Any, minutes: int) -> dict[str, Any]:
    d: dict[str, Any] = {"_id": n, "t": DatetimeMS(T0 + 60_000 * minutes), "v": Int64(n)}
    if meta != "MISSING":
        d["m"] = meta
    return d


def _split_writers(n_batches: int, metas: list[Any]) -> list[list[dict[str, Any]]]:
    """Two writers, one live and one backfilling an hour earlier, batches interleaved."""
    batches = []
    for b in range(n_batches):
        start = 120 + 5 * (b // 2) if b % 2 == 0 else 5 * (b // 2)
        batches.append([_doc(b * 100 + i, metas[i % len(metas)], start + i // len(metas))
                        for i in range(4 * len(metas))])
    return batches


@pytest.mark.parametrize("flush_after", [set(), {1}, {1, 4}, {2, 5, 8}])
def test_backfilling_beside_a_live_writer_needs_no_flush_per_batch(flush_after: set[int]
                                                                    ) -> None:
    batches = _split_writers(12, ["a", "b", {"x": "a", "y": True}])
    stored, stats, flushes = _run(batches, flush_after, True, 1000)
    expected, expected_stats, expected_flushes = _run(batches, flush_after, False, 1000)
    assert stats["numBucketsQueried"] > 0
    assert stored == expected
    assert stats == expected_stats
    assert flushes == len(flush_after) < expected_flushes
    assert sum(b["control"]["count"] for b in stored) == 12 * 12


def test_equal_index_keys_go_in_record_order() -> None:
    # X and Y hold one measurement each at minute 10 (Y split off by a schema change), so
    # both have the key (meta, 10, 10). X is stored, Y pending: a flush would give Y the
    # higher record id, so the query reopens X, whose schema takes the measurement.
    batches = [[_doc(1, "a", 10)], [{**_doc(2, "a", 10), "v": "text"}], [_doc(3, "a", 100)],
               [_doc(4, "a", 20)]]
    stored, stats, flushes = _run(batches, {0}, True, 1000)
    assert (stored, stats) == _run(batches, {0}, False, 1000)[:2]
    assert flushes == 1
    assert stats["numBucketsReopened"] == 1
    assert [b["control"]["count"] for b in stored] == [2, 1, 1]


@pytest.mark.parametrize("metas", [[1, 1.0, Int64(1)], [1.0, Int64(1), 1],
                                   [{"x": 1}, {"x": 1.0}], [[1.0], [1]]])
def test_metas_equal_to_other_series_flush_first(metas: list[Any]) -> None:
    batches = _split_writers(8, metas)
    stored, stats, flushes = _run(batches, set(), True, 1000)
    assert flushes > 0
    assert (stored, stats) == _run(batches, set(), False, 1000)[:2]


def test_a_pending_array_meta_holding_the_value_is_another_series() -> None:
    # The query for "a" at minute 20 meets the ["a", "b"] bucket (minute 5) first in its
    # "a" key, but its meta is not equal to "a": the "a" bucket of minute 10 reopens.
    batches = [[_doc(1, ["a", "b"], 5), _doc(2, "a", 10)], [_doc(3, "a", 100)],
               [_doc(4, "a", 20)]]
    stored, stats, flushes = _run(batches, set(), True, 1000)
    assert (stored, stats) == _run(batches, set(), False, 1000)[:2]
    assert flushes == 0
    assert stats["numBucketsReopened"] == 1
    assert [(b["meta"], b["control"]["count"]) for b in stored] == [
        (["a", "b"], 1), ("a", 2), ("a", 1)]


_batch = st.lists(st.tuples(st.sampled_from(range(len(METAS))), st.integers(0, 240)),
                  min_size=1, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(_batch, min_size=1, max_size=8),
       flush_after=st.sets(st.integers(0, 7), max_size=3),
       max_count=st.sampled_from([2, 3, 1000]))
def test_same_buckets_as_querying_after_a_flush(batches: list[list[tuple[int, int]]],
                                                flush_after: set[int], max_count: int) -> None:
    docs = [[_doc(b * 100 + i, METAS[mi], minutes) for i, (mi, minutes) in enumerate(batch)]
            for b, batch in enumerate(batches)]
    stored, stats, _ = _run(docs, flush_after, True, max_count)
    expected, expected_stats, _ = _run(docs, flush_after, False, max_count)
    assert stored == expected
    assert stats == expected_stats


# --- the reopening query's key range, built directly -------------------------------------

@pytest.mark.parametrize("meta", ["a", "", {"x": "a", "y": True}, {"b": {"c": [1, "x"]}},
                                  Int64(5), 2.5, None, "MISSING", DatetimeMS(-5), True])
@pytest.mark.parametrize("directions", [(1, 1, 1), (-1, 1, 1), (1, -1, 1), (-1, -1, -1)])
@pytest.mark.parametrize("time_ms", [T0, 0, -(2**63) + 3600_000, 2**63 - 1, -1])
def test_direct_range_is_the_planned_range(meta: Any, directions: tuple[int, ...],
                                           time_ms: int) -> None:
    from storage.bounds import Interval, plan_ranges
    from storage.vocabulary.missing import MISSING

    q = ReopeningQuery("t", MISSING if meta == "MISSING" else meta, time_ms, 3600, 1000,
                       1 << 20)
    fields = ["meta", "control.min.t", "control.max.t"]
    got = stored_buckets._reopening_range(None if meta == "MISSING" else meta, q, fields,
                                          directions)
    planned, flt = plan_ranges(
        [[Interval.point(None if meta == "MISSING" else meta)],
         [Interval(DatetimeMS(q.min_time_gt_ms), False, DatetimeMS(time_ms), True)],
         [Interval.all()]], directions)
    assert flt is None
    if got is None:  # left to the planner: only where it finds nothing to scan
        assert time_ms - 3600_000 < -(2**63) or planned == []
    else:
        assert [got] == planned


_field_names = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                       min_size=1, max_size=3)
_meta_values = st.recursive(
    st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=4), st.integers(-2**63, 2**63 - 1).map(Int64),
              st.integers(-2**31, 2**31 - 1), st.floats(allow_nan=False), st.booleans(),
              st.none(), st.integers(-2**62, 2**62).map(DatetimeMS)),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(_field_names, inner, max_size=3),
    max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_field_names, _meta_values, max_size=4),
       st.sampled_from([(1, 1, 1), (-1, 1, 1)]))
def test_a_document_meta_keeps_its_keystring_by_series(meta: dict[str, Any],
                                                       directions: tuple[int, ...]) -> None:
    """The keystring a series' document meta keeps is that of the meta as the query
    holds it (normalized), so the range built from it is the range built from the meta."""
    from storage.keystring import encode_value
    from storage.timeseries.metadata import document_meta_keystring, normalize_meta, series_key

    normalized = normalize_meta(meta)
    kept = document_meta_keystring(series_key(normalized))
    assert kept == encode_value(normalized)
    # a meta value that is not a document keeps none
    for value in meta.values():
        assert document_meta_keystring(series_key(normalize_meta(value))) is None or \
            type(value) is dict
    q = ReopeningQuery("t", normalized, T0, 3600, 1000, 1 << 20)
    fields = ["meta", "control.min.t", "control.max.t"]
    assert stored_buckets._reopening_range(normalized, q, fields, directions,
                                           meta_keystring=kept) == \
        stored_buckets._reopening_range(normalized, q, fields, directions)


def test_direct_range_without_meta_field_and_other_indexes() -> None:
    q = ReopeningQuery("t", "a", T0, 3600, 1000, 1 << 20)
    assert stored_buckets._reopening_range("a", q, ["control.min.t"], [1]) is not None
    assert stored_buckets._reopening_range("a", q, ["meta", "control.max.t"], [1, 1]) is None


# --- series storage holds no bucket of: no query --------------------------------------------

def _scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from storage.collection import Collection

    calls: list[int] = []
    real = Collection.index_scan_range

    def counted(self: Collection, name: str, rng: Any) -> Any:
        calls.append(1)
        return real(self, name, rng)

    monkeypatch.setattr(Collection, "index_scan_range", counted)
    return calls


def test_new_series_of_a_fresh_collection_are_not_queried(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    scans = _scans(monkeypatch)
    # 50 series, each first seen in its own batch after earlier ones were flushed, then
    # each written back in time, before the start of its stored bucket
    batches = [[_doc(i, f"s{i}", 60)] for i in range(50)] + [
        [_doc(100 + i, f"s{i}", 30) for i in range(50)]]
    stored, stats, _ = _run(batches, set(range(0, 50, 7)), True, 1000)
    assert (stored, stats) == _run(batches, set(range(0, 50, 7)), False, 1000)[:2]
    # counted as failed queries all the same, but none asked anything of storage: the
    # first measurements' series were absent, the backward ones' buckets start later
    assert stats["numBucketQueriesFailed"] == 100
    assert len(scans) == 0


def test_backfill_scans_only_where_a_stored_bucket_may_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    scans = _scans(monkeypatch)
    cat, _buckets, catalog, service, source = _catalog_and_source()
    _insert(catalog, service, source, [_doc(1, "a", 120)])
    # back to minute 30: a query for starts in (-30, 30], and the only stored start is
    # 120: not scanned
    stats = _insert(catalog, service, source, [_doc(2, "a", 30)])
    assert len(scans) == 0 and stats["numBucketQueriesFailed"] == 2
    catalog.clear("db.c")  # forgotten: only a query finds the buckets again
    # minute 130: starts in (70, 130], where 120 is: scanned, and reopened
    stats = _insert(catalog, service, source, [_doc(3, "a", 130)])
    assert len(scans) == 1 and stats["numBucketsReopened"] == 1
    catalog.clear("db.c")
    # minute 100: starts in (40, 100]; neither 30 nor 120 is there, but the stored starts
    # are known only as their bounds, [30, 120]: scanned, nothing found
    stats = _insert(catalog, service, source, [_doc(4, "a", 100)])
    assert len(scans) == 2 and stats["numBucketQueriesFailed"] == 3
    cat.close()


def _catalog_and_source(collation: dict[str, Any] | None = None
                        ) -> tuple[Catalog, Any, BucketCatalog, _Service, StoredBuckets]:
    from query.match import compile_filter

    cat = Catalog.open(engine="memory", compile_filter=lambda s: compile_filter(s).matches)
    with cat.transaction():
        cat.create_collection("db", "system.buckets.c",
                              {} if collation is None else {"collation": collation})
        buckets = cat.get_collection("db", "system.buckets.c")
        spec = dict(default_index_spec(OPTS))
        if collation is not None:
            spec["collation"] = collation
        buckets.create_indexes([spec])
    service = _Service(cat)
    return (cat, buckets, BucketCatalog(id_seed=7), service,
            StoredBuckets(buckets, OPTS, service.deferred, service.flush_deferred))


def _insert(catalog: BucketCatalog, service: _Service, source: StoredBuckets,
            docs: list[dict[str, Any]]) -> dict[str, Any]:
    result = catalog.insert_batch("db.c", OPTS, docs, source, ordered=False)
    service.deferred.add("db", "system.buckets.c", result.writes)
    catalog.commit(result)
    service.flush_deferred()
    return catalog.collection_stats("db.c")


def test_a_collated_collection_reopens_by_the_collation_keys() -> None:
    # the index keys the meta's strings by their collation keys (strength 2: "abc" ==
    # "ABC"), and so does the query's range: a stored bucket of the series is found
    cat, _buckets, catalog, service, source = _catalog_and_source(
        {"locale": "en", "strength": 2})
    _insert(catalog, service, source, [_doc(i, "abc", 60 + i) for i in range(3)])
    catalog.clear("db.c")  # forgotten: only a query finds the bucket again
    found = source.find_reopening_candidate(
        "db.c", ReopeningQuery("t", "abc", T0 + 62 * 60_000, 3600, 1000, 1 << 20))
    assert isinstance(found, tuple) and found[0]["meta"] == "abc"
    assert _insert(catalog, service, source, [_doc(3, "abc", 63)])["numBucketsReopened"] == 1
    # "ABC" is another series, but equal under the collation: MongoDB's query finds the
    # "abc" bucket, which the catalog refuses (its meta is not the series')
    catalog.clear("db.c")
    found = source.find_reopening_candidate(
        "db.c", ReopeningQuery("t", "ABC", T0 + 64 * 60_000, 3600, 1000, 1 << 20))
    assert isinstance(found, tuple) and found[0]["meta"] == "abc"
    stats = _insert(catalog, service, source, [_doc(4, "ABC", 64)])
    assert stats["numBucketReopeningsFailed"] == 1 and stats["numBucketsReopened"] == 1
    cat.close()


def test_a_write_beside_the_catalog_ends_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    scans = _scans(monkeypatch)
    cat, buckets, catalog, service, source = _catalog_and_source()
    _insert(catalog, service, source, [_doc(1, "a", 60)])
    assert len(scans) == 0
    # a bucket of series "b" written beside the catalog (as a raw write would), then a
    # measurement of "b" for its time: the query runs and reopens it
    other = BucketCatalog(id_seed=99)
    result = other.insert_batch("db.c", OPTS, [_doc(2, "b", 60)], None)
    with cat.transaction():
        for w in result.writes:
            doc = decode(w.document)
            buckets.insert_many([doc], encoded=[w.document])
    stats = _insert(catalog, service, source, [_doc(3, "b", 61)])
    assert len(scans) == 1
    assert stats["numBucketsReopened"] == 1
    cat.close()


def test_a_collection_holding_buckets_is_queried(monkeypatch: pytest.MonkeyPatch) -> None:
    cat, buckets, catalog, service, source = _catalog_and_source()
    _insert(catalog, service, source, [_doc(1, "a", 60)])
    # a new catalog (a restart) on the same storage: every new series is queried
    scans = _scans(monkeypatch)
    catalog2 = BucketCatalog(id_seed=8)
    source2 = StoredBuckets(buckets, OPTS, service.deferred, service.flush_deferred)
    from storage.timeseries import absent_series

    absent_series._MEMOS.clear()
    stats = _insert(catalog2, service, source2, [_doc(2, "a", 61), _doc(3, "z", 61)])
    assert len(scans) == 2
    assert stats["numBucketsReopened"] == 1
    cat.close()


def test_the_raw_look_reads_a_leading_object_id_only() -> None:
    import bson
    from bson import ObjectId

    oid = ObjectId()
    assert stored_buckets._leading_oid(bson.encode({"_id": oid, "control": {}})) == oid
    # (top-level bson.encode moves _id first: the document built as an embedded one)
    later = bson.encode({"": {"control": {}, "_id": oid}})[6:-1]
    assert stored_buckets._leading_oid(later) is None
    assert stored_buckets._leading_oid(bson.encode({"_id": "x"})) is None


def test_candidates_ruled_out_by_size_are_not_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    cat, _buckets, catalog, service, source = _catalog_and_source()
    _insert(catalog, service, source, [_doc(i, "a", 60 + i) for i in range(3)])
    catalog.clear("db.c")  # forgotten: only a query finds the bucket again
    decoded: list[bytes] = []
    real = stored_buckets.decode
    monkeypatch.setattr(stored_buckets, "decode", lambda raw: decoded.append(raw) or real(raw))
    q = ReopeningQuery("t", "a", T0 + 62 * 60_000, 3600, 1000, 100)  # max size 100 bytes
    assert source.find_reopening_candidate("db.c", q) is None
    assert decoded == []
    q = ReopeningQuery("t", "a", T0 + 62 * 60_000, 3600, 1000, 1 << 20)
    found = source.find_reopening_candidate("db.c", q)
    assert found is not None and found[0]["control"]["count"] == 3 and len(decoded) == 1
    cat.close()


def test_a_pending_candidate_is_returned_as_its_write_undecoded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # X and Y, both at minute 10 (Y split off by a schema change), pending: the query at
    # minute 20 ranks both by their views, and returns the one it reopens as its write
    cat, _buckets, catalog, service, source = _catalog_and_source()
    for docs in ([_doc(1, "a", 10)], [{**_doc(2, "a", 10), "v": "text"}]):
        result = catalog.insert_batch("db.c", OPTS, docs, source, ordered=False)
        service.deferred.add("db", "system.buckets.c", result.writes)
        catalog.commit(result)  # pending, not flushed
    decoded: list[bytes] = []
    monkeypatch.setattr(stored_buckets, "decode",
                        lambda raw: decoded.append(raw) or decode(raw))
    q = ReopeningQuery("t", "a", T0 + 20 * 60_000, 3600, 1000, 1 << 20)
    found = source.find_reopening_candidate("db.c", q)
    assert isinstance(found, BucketWrite) and service.flushes == 0
    assert decoded == []
    assert decode(found.document)["control"]["count"] == 1
    cat.close()


def test_pending_buckets_out_of_the_time_range_are_not_looked_at(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cat, _buckets, catalog, service, source = _catalog_and_source()
    result = catalog.insert_batch("db.c", OPTS, [_doc(i, "a", i) for i in range(3)], source,
                                  ordered=False)
    service.deferred.add("db", "system.buckets.c", result.writes)
    catalog.commit(result)  # pending, not flushed
    looked_at: list[Any] = []
    real = ReopeningQuery.matches
    monkeypatch.setattr(ReopeningQuery, "matches",
                        lambda self, bucket, size=None, **kw: looked_at.append(bucket)
                        or real(self, bucket, size, **kw))
    # the bucket starts at minute 0: a query at minute 200 keeps starts in (140, 200]
    q = ReopeningQuery("t", "a", T0 + 200 * 60_000, 3600, 1000, 1 << 20)
    assert source.find_reopening_candidate("db.c", q) is None
    assert looked_at == [] and service.flushes == 0
    q = ReopeningQuery("t", "a", T0 + 30 * 60_000, 3600, 1000, 1 << 20)
    found = source.find_reopening_candidate("db.c", q)
    assert isinstance(found, BucketWrite) and looked_at
    assert decode(found.document)["control"]["count"] == 3
    cat.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(-10**12, 10**12), st.integers(-10**12, 10**12),
                          st.booleans()), min_size=1, max_size=6),
       st.sampled_from(["a", {"x": "a", "y": True}, "MISSING"]))
def test_candidates_rank_as_their_index_keys(times: list[tuple[int, int, bool]],
                                             meta: Any) -> None:
    """Ranking the reopening candidates of one series without encoding their meta value
    orders them as their whole keys in the index do, and finds the same ones unordered
    (several keys)."""
    cat, buckets, _catalog, _service, source = _catalog_and_source()
    index = source._index()
    assert index is not None
    q = ReopeningQuery("t", MISSING if meta == "MISSING" else meta, T0, 3600, 1000, 1 << 20)
    views = []
    for lo, hi, as_array in times:
        view: dict[str, Any] = {"_id": 1, "control": {
            "min": {"t": DatetimeMS(lo)},
            "max": {"t": [DatetimeMS(hi), DatetimeMS(lo)] if as_array else DatetimeMS(hi)}}}
        if meta != "MISSING":
            view["meta"] = meta
        views.append(view)
    whole = [buckets.index_key(index, v) for v in views]
    ranked = [source._rank_key(index, v, q) for v in views]
    assert [w is None for w in whole] == [r is None for r in ranked]
    known = [i for i, w in enumerate(whole) if w is not None]
    assert sorted(known, key=lambda i: whole[i]) == sorted(known, key=lambda i: ranked[i])
    cat.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(-10**12, 10**12), st.integers(-10**12, 10**12),
                          st.booleans()), min_size=1, max_size=6),
       st.tuples(st.sampled_from([1, -1]), st.sampled_from([1, -1]), st.sampled_from([1, -1])),
       st.sampled_from([("min",), ("min", "max"), ("max", "min")]))
def test_candidates_rank_by_their_time_bounds_as_by_their_keys(
        times: list[tuple[int, int, bool]], directions: tuple[int, int, int],
        bounds: tuple[str, ...]) -> None:
    """Where the reopening index keys only the time bounds after the meta, the candidate
    chosen by its bounds in milliseconds is the one of the least key (record order
    among equal keys); a bound that is not a date leaves the choice to the keys."""
    key = {"meta": directions[0], **{f"control.{b}.t": d for b, d in zip(bounds, directions[1:])}}
    spec = IndexSpec.from_document({"v": 2, "name": "x", "key": key})
    facts = _IndexFacts.of(spec, "t")
    assert facts.bounds_rank is not None
    cat, _buckets, _catalog, _service, source = _catalog_and_source()
    views = [{"_id": i, "meta": "a", "control": {"min": {"t": DatetimeMS(lo)},
                                                 "max": {"t": DatetimeMS(hi)}}}
             for i, (lo, hi, _) in enumerate(times)]
    ranked: list[Any] = [(v, bson.encode(v), (0, i)) for i, v in enumerate(views)]
    gen = KeyGenerator(spec)
    least = min(range(len(views)), key=lambda i: (gen.keys(views[i]).entries[0][0], i))
    chosen = source._first_by_bounds(ranked, facts.bounds_rank, "t")
    assert chosen is not None and chosen[0]["_id"] == least
    # a bound that is not a date
    views[-1]["control"]["max"]["t"] = times[-1][0]
    assert source._first_by_bounds(ranked, facts.bounds_rank, "t") is None
    cat.close()


def test_only_time_bounds_after_the_meta_rank_by_milliseconds() -> None:
    def rank(key: dict[str, Any]) -> Any:
        spec = IndexSpec.from_document({"v": 2, "name": "x", "key": key})
        return _IndexFacts.of(spec, "t").bounds_rank
    assert rank({"meta": 1, "control.min.t": -1, "control.max.t": 1}) == ((0, -1), (1, 1))
    assert rank({"meta": 1, "control.max.t": 1}) == ((1, 1),)
    assert rank({"meta": 1, "control.min.t": 1, "_id": 1}) is None
    assert rank({"meta.x": 1, "control.min.t": 1}) is None
    assert rank({"control.min.t": 1, "meta": 1}) is None

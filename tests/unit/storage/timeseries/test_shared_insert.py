"""Time-series inserts when other processes write the same buckets collection
(`storage.timeseries.shared_insert`): two bucket catalogs over one storage stand for two
bucketd processes on one PostgreSQL database. Neither appends to the other's buckets,
and a bucket another process changed is never overwritten: the write conflicts, the
batch is staged again, and every measurement ends up stored exactly once."""

from __future__ import annotations

from typing import Any

from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from query.match import compile_filter
from storage.bsonutil import decode
from storage.catalog import Catalog
from storage.collection import Collection
from storage.timeseries import TimeseriesParameters, default_index_spec, parse_timeseries_options
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.bucket_rewrite import rebuild_bucket
from storage.timeseries.shared_insert import insert_shared
from storage.timeseries.unpack import BucketSpec, unpack_bucket

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
SPEC = BucketSpec("t", "m")
T0 = 1_700_000_000_000


def _storage(live: set[int] | None = None) -> tuple[Catalog, Collection]:
    """The shared storage; the processes whose instance tags are in `live` (default: 1
    and 2) are alive."""
    cat = Catalog.open(engine="memory", compile_filter=lambda s: compile_filter(s).matches)
    alive = {1, 2} if live is None else live
    cat.engine.instance_alive = alive.__contains__  # type: ignore[method-assign]
    with cat.transaction():
        cat.create_collection("db", "system.buckets.c", {})
        buckets = cat.get_collection("db", "system.buckets.c")
        assert buckets is not None
        buckets.create_indexes([default_index_spec(OPTS)])
    return cat, buckets


def _process(tag: int, max_count: int = 1000, seed: int | None = None) -> BucketCatalog:
    """The catalog of the process with instance tag `tag`; `seed` sets its bucket id
    counter (to make two processes' ids meet)."""
    return BucketCatalog(TimeseriesParameters(timeseriesBucketMaxCount=max_count),
                         id_seed=seed, id_tag=tag, check_versions=True)


def _insert(proc: BucketCatalog, cat: Catalog, buckets: Collection,
            docs: list[dict[str, Any]]) -> None:
    result = insert_shared(proc, cat, buckets, "db.c", OPTS, docs, ordered=True,
                           durable=False)
    assert not result.errors


def _stored(buckets: Collection) -> list[tuple[Any, int, int]]:
    """Every stored measurement as (meta, time, value), sorted."""
    out = []
    for _rid, raw in buckets.scan():
        for m in unpack_bucket(decode(raw), SPEC):
            out.append((m["m"], int(m["t"]), m["v"]))
    return sorted(out)


def _docs(meta: str, start: int, n: int) -> list[dict[str, Any]]:
    return [{"t": DatetimeMS(T0 + (start + i) * 1000), "m": meta, "v": start + i}
            for i in range(n)]


def _delete_measurements(buckets: Collection, keep: Any) -> None:
    """Another process deletes measurements: every bucket rewritten without those
    `keep` refuses (deleted when left empty), as a time-series delete does."""
    with buckets._catalog.transaction():
        for rid, raw in list(buckets.scan()):
            doc = decode(raw)
            ms = list(unpack_bucket(doc, SPEC))
            kept = [m for m in ms if keep(m)]
            if len(kept) == len(ms):
                continue
            if not kept:
                buckets.delete(rid, old_doc=doc, expected=raw)
                continue
            data = rebuild_bucket(doc["_id"], kept, OPTS,
                                  min_time_ms=int(doc["control"]["min"]["t"]))
            buckets.update(rid, decode(data), encoded=data, old_doc=doc, expected=raw)


def test_processes_never_append_to_each_others_buckets() -> None:
    cat, buckets = _storage()
    a, b = _process(1), _process(2)
    _insert(a, cat, buckets, _docs("x", 0, 5))
    _insert(b, cat, buckets, _docs("x", 5, 5))   # would reopen a's bucket by query
    _insert(a, cat, buckets, _docs("x", 10, 5))
    _insert(b, cat, buckets, _docs("x", 15, 5))
    assert buckets.count() == 2
    assert _stored(buckets) == [("x", T0 + i * 1000, i) for i in range(20)]


def test_a_restarted_process_reopens_what_a_dead_one_left_open() -> None:
    live = {1, 2}
    cat, buckets = _storage(live)
    a, b = _process(1), _process(2)
    _insert(a, cat, buckets, _docs("x", 0, 3))
    _insert(b, cat, buckets, _docs("y", 0, 3))
    live.discard(1)  # a stops; a2 takes its place
    a2 = _process(3)
    live.add(3)
    _insert(a2, cat, buckets, _docs("x", 3, 3))   # into a's bucket
    _insert(a2, cat, buckets, _docs("y", 3, 3))   # not into b's: b is alive
    assert buckets.count() == 3
    assert _stored(buckets) == sorted(_stored_of("x", 6) + _stored_of("y", 6))


def test_a_bucket_changed_by_another_process_is_not_overwritten() -> None:
    cat, buckets = _storage()
    a = _process(1)
    _insert(a, cat, buckets, _docs("x", 0, 5))
    # another process deletes the measurement with v == 2 from a's open bucket
    _delete_measurements(buckets, lambda m: m["v"] != 2)
    before = a.collection_stats("db.c")["numCommits"]
    _insert(a, cat, buckets, _docs("x", 5, 5))
    # without the check, a would write its bucket back with v == 2 in it
    assert _stored(buckets) == [("x", T0 + i * 1000, i) for i in range(10) if i != 2]
    assert buckets.count() == 1  # the batch went into the bucket as it is now, reopened
    assert a.collection_stats("db.c")["numCommits"] == before + 1


def test_a_bucket_id_taken_by_another_process_is_drawn_again() -> None:
    cat, buckets = _storage()
    a, b = _process(1, seed=7), _process(2, seed=7)  # b's first bucket id is a's
    _insert(a, cat, buckets, _docs("x", 0, 2))
    _insert(b, cat, buckets, _docs("y", 0, 2))
    assert buckets.count() == 2
    assert _stored(buckets) == sorted(_stored_of("x", 2) + _stored_of("y", 2))


def _stored_of(meta: str, n: int) -> list[tuple[Any, int, int]]:
    return [(meta, T0 + i * 1000, i) for i in range(n)]


def test_a_bucket_deleted_by_another_process_is_not_written_back() -> None:
    cat, buckets = _storage()
    a = _process(1)
    _insert(a, cat, buckets, _docs("x", 0, 3))
    _delete_measurements(buckets, lambda m: False)
    _insert(a, cat, buckets, _docs("x", 3, 3))
    assert _stored(buckets) == [("x", T0 + i * 1000, i) for i in range(3, 6)]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "delete"]), st.sampled_from("xyz"),
                          st.integers(1, 6)), min_size=1, max_size=25),
       st.integers(2, 8))
def test_interleaved_processes_store_each_measurement_once(
        steps: list[tuple[str, str, int]], max_count: int) -> None:
    """Two processes insert batches of shared meta values while a third deletes, now and
    then, the measurements of one meta value whose value is a multiple of n (n = 1:
    all of them, so whole buckets go): what is stored is exactly what was inserted minus
    what was deleted."""
    cat, buckets = _storage()
    procs = {"a": _process(1, max_count), "b": _process(2, max_count)}
    expected: list[tuple[Any, int, int]] = []
    clock = 0
    for who, meta, n in steps:
        if who == "delete":
            def gone(m: Any, meta: str = meta, n: int = n) -> bool:
                return bool(m[0] == meta and m[2] % n == 0)

            _delete_measurements(buckets, lambda m: not gone((m["m"], 0, m["v"])))
            expected = [e for e in expected if not gone(e)]
            continue
        docs = _docs(meta, clock, n)
        clock += n
        _insert(procs[who], cat, buckets, docs)
        expected += [(meta, int(d["t"]), d["v"]) for d in docs]
    assert _stored(buckets) == sorted(expected)

"""Time-series collections end to end through pymongo: create rules, the bucket documents
themselves, reads through unpacking, writes, indexes, collMod, TTL and statistics.

Bucket expectations follow MongoDB's documentation and jstests (jstests/core/timeseries/):
`_id` time = control.min.<time> rounded down by bucketRoundingSeconds; a bucket holds at
most 1000 measurements; meta subfields are normalised (sorted).
"""

from __future__ import annotations

import datetime as dt
import struct
import time

import pymongo
import pytest
from bson import ObjectId
from bson.binary import Binary
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.datetime_ms import DatetimeMS
from pymongo.errors import BulkWriteError, OperationFailure

from storage.bsoncolumn import decompress

UTC = dt.UTC
T0 = dt.datetime(2024, 5, 1, 12, 0, 0)
MS_CODEC: CodecOptions = CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS)


@pytest.fixture
def db(client: pymongo.MongoClient, request: pytest.FixtureRequest):
    name = "ts_" + request.node.name[:40].replace("[", "_").replace("]", "").replace("-", "_")
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)


def buckets(db, name: str = "m") -> list[dict]:
    return list(db.get_collection(f"system.buckets.{name}", codec_options=MS_CODEC)
                .find().sort("control.min.t", 1))


def column(bucket: dict, field: str) -> list:
    import bson

    col = bucket["data"][field]
    assert isinstance(col, Binary) and col.subtype == 7
    return list(bson.decode(decompress(bytes(col)), MS_CODEC).values())


def oid_seconds(oid: ObjectId) -> int:
    return struct.unpack(">i", oid.binary[:4])[0]


# --- create ----------------------------------------------------------------------------------

@pytest.mark.parametrize("ts,extra,code", [
    ({}, {}, 40414),                                                    # no timeField
    ({"timeField": "t", "metaField": "t"}, {}, 72),                     # meta == time
    ({"timeField": "t", "metaField": "_id"}, {}, 72),                   # meta is _id
    ({"timeField": "t", "granularity": "days"}, {}, 2),                 # unknown granularity
    ({"timeField": "t", "granularity": "seconds", "bucketRoundingSeconds": 60}, {}, 72),
    ({"timeField": "t", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 30}, {}, 72),
    ({"timeField": "t", "bucketMaxSpanSeconds": 31536001,
      "bucketRoundingSeconds": 31536001}, {}, 2),
    ({"timeField": 5}, {}, 14),                                         # wrong type
    ({"timeField": "t", "bogus": 1}, {}, 40415),                        # unknown field
    ({"timeField": "t"}, {"expireAfterSeconds": -1}, 72),
])
def test_create_validation(db, ts, extra, code) -> None:
    with pytest.raises(OperationFailure) as exc:
        db.command("create", "bad", timeseries=ts, **extra)
    assert exc.value.code == code
    assert "bad" not in db.list_collection_names()


def test_create_list_and_drop(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "host",
                                          "granularity": "minutes"}, expireAfterSeconds=3600)
    db.command("create", "m", timeseries={"timeField": "t", "metaField": "host",
                                          "granularity": "minutes"}, expireAfterSeconds=3600)
    with pytest.raises(OperationFailure) as exc:
        db.command("create", "m", timeseries={"timeField": "t", "granularity": "hours"})
    assert exc.value.code == 48
    infos = {c["name"]: c for c in db.list_collections()}
    assert infos["m"]["type"] == "timeseries"
    assert infos["m"]["options"]["timeseries"] == {
        "timeField": "t", "metaField": "host", "granularity": "minutes",
        "bucketMaxSpanSeconds": 86400}
    assert infos["m"]["options"]["expireAfterSeconds"] == 3600
    b = infos["system.buckets.m"]
    assert b["type"] == "collection" and b["options"]["clusteredIndex"] is True
    assert "$jsonSchema" in b["options"]["validator"]
    # the default index on {meta, time}, shown in the user's terms
    assert [ix["key"] for ix in db.m.list_indexes()] == [{"host": 1, "t": 1}]
    db.m.drop()
    assert "m" not in db.list_collection_names()
    assert "system.buckets.m" not in db.list_collection_names()


# --- bucket documents -------------------------------------------------------------------------

def test_buckets_per_meta_and_control_fields(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "host"})
    docs = [{"t": T0 + dt.timedelta(seconds=i), "host": f"h{i % 3}", "v": i, "x": i / 2}
            for i in range(30)]
    db.m.insert_many(docs)
    bs = buckets(db)
    assert len(bs) == 3
    assert sorted(b["meta"] for b in bs) == ["h0", "h1", "h2"]
    for b in bs:
        ctl = b["control"]
        assert ctl["version"] == 2 and ctl["count"] == 10
        times = column(b, "t")
        assert times == sorted(times) and len(times) == 10
        # control.min.t is the first time rounded down to the minute (granularity seconds)
        first = int(times[0])
        assert int(ctl["min"]["t"]) == first - first % 60_000
        assert int(ctl["max"]["t"]) == int(times[-1])
        assert oid_seconds(b["_id"]) == int(ctl["min"]["t"]) // 1000
        vs = column(b, "v")
        assert ctl["min"]["v"] == min(vs) and ctl["max"]["v"] == max(vs)
        assert "host" not in b["data"]
    assert db.m.count_documents({}) == 30
    got = db.m.find_one({"v": 7}, {"_id": 0})
    assert got == {"t": T0 + dt.timedelta(seconds=7), "host": "h1", "v": 7, "x": 3.5}


@pytest.mark.parametrize("options,rounding", [
    ({"granularity": "seconds"}, 60),
    ({"granularity": "minutes"}, 3600),
    ({"granularity": "hours"}, 86400),
    ({"bucketMaxSpanSeconds": 900, "bucketRoundingSeconds": 900}, 900),
])
def test_rounding_by_granularity(db, options, rounding) -> None:
    db.create_collection("m", timeseries={"timeField": "t", **options})
    t = dt.datetime(2024, 5, 1, 13, 47, 29, 250000)
    db.m.insert_one({"t": t, "v": 1})
    (b,) = buckets(db)
    ms = int(DatetimeMS(t.replace(tzinfo=UTC)))
    assert int(b["control"]["min"]["t"]) == ms - ms % (rounding * 1000)
    assert "meta" not in b


def test_bucket_fills_to_1000(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "s"})
    docs = [{"t": T0 + dt.timedelta(milliseconds=i), "s": 1, "v": i} for i in range(1001)]
    db.m.insert_many(docs)
    bs = buckets(db)
    assert [b["control"]["count"] for b in bs] == [1000, 1]
    stats = db.command("collStats", "m")["timeseries"]
    assert stats["numBucketsClosedDueToCount"] == 1


def test_span_overflow_opens_new_bucket(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "s"})
    db.m.insert_one({"t": T0, "s": 1})
    db.m.insert_one({"t": T0 + dt.timedelta(hours=2), "s": 1})
    bs = buckets(db)
    assert len(bs) == 2
    assert db.command("collStats", "m")["timeseries"]["numBucketsClosedDueToTimeForward"] == 1


def test_out_of_order_measurement(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "s"})
    db.m.insert_many([{"t": T0 + dt.timedelta(seconds=30), "s": 1, "v": 1}])
    db.m.insert_many([{"t": T0 + dt.timedelta(seconds=10), "s": 1, "v": 2}])
    bs = buckets(db)
    assert sum(b["control"]["count"] for b in bs) == 2
    # either a second bucket (archived) or one unsorted v3 bucket, never lost data
    assert sorted(v for b in bs for v in column(b, "v")) == [1, 2]
    assert all(b["control"]["version"] in (2, 3) for b in bs)
    got = [d["v"] for d in db.m.find().sort("t", 1)]
    assert got == [2, 1]


def test_extended_range_dates(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t"})
    early = dt.datetime(1960, 1, 1)
    late = dt.datetime(2040, 6, 1)
    db.m.insert_many([{"t": early, "v": "early"}, {"t": late, "v": "late"}])
    bs = buckets(db)
    assert len(bs) == 2
    for b in bs:
        secs = int(b["control"]["min"]["t"]) // 1000
        # the ObjectId carries the time's low 32 bits; outside 1970..2038 it wraps
        assert struct.unpack(">I", b["_id"].binary[:4])[0] == secs & 0xFFFFFFFF
    vals = [d["v"] for d in db.m.find().sort("t", 1)]
    assert vals == ["early", "late"]
    assert db.m.count_documents({"t": {"$lt": dt.datetime(1970, 1, 1)}}) == 1


def test_object_meta_field_order_normalised(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "tags"})
    db.m.insert_many([{"t": T0, "tags": {"a": 1, "b": 2}, "v": 1},
                      {"t": T0 + dt.timedelta(seconds=1), "tags": {"b": 2, "a": 1}, "v": 2}])
    (b,) = buckets(db)
    assert list(b["meta"]) == ["a", "b"] and b["control"]["count"] == 2


def test_missing_fields_and_mixed_types(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t"})
    docs = [{"t": T0, "a": 1}, {"t": T0 + dt.timedelta(seconds=1), "b": "x"},
            {"t": T0 + dt.timedelta(seconds=2), "a": 2.5, "b": "y"},
            {"t": T0 + dt.timedelta(seconds=3), "a": "str"}]
    db.m.insert_many(docs)
    got = list(db.m.find({}, {"_id": 0}).sort("t", 1))
    assert got == [{k: v for k, v in d.items() if k != "_id"} for d in docs]
    assert db.m.count_documents({"a": {"$type": "string"}}) == 1


def test_non_date_time_values_are_write_errors(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t"})
    with pytest.raises(BulkWriteError) as exc:
        db.m.insert_many([{"t": T0, "v": 1}, {"t": "yesterday", "v": 2}, {"v": 3},
                          {"t": T0, "v": 4}], ordered=False)
    details = exc.value.details
    assert details["nInserted"] == 2
    assert sorted(e["index"] for e in details["writeErrors"]) == [1, 2]
    assert all(e["code"] == 2 for e in details["writeErrors"])
    assert sorted(d["v"] for d in db.m.find()) == [1, 4]


# --- reads -----------------------------------------------------------------------------------

def _series(db) -> list[dict]:
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "s"})
    docs = [{"t": T0 + dt.timedelta(seconds=15 * i), "s": f"s{i % 2}", "v": i}
            for i in range(40)]
    db.m.insert_many(docs)
    return docs


def test_queries_on_time_and_meta(db) -> None:
    docs = _series(db)
    lo, hi = T0 + dt.timedelta(minutes=2), T0 + dt.timedelta(minutes=5)
    got = [d["v"] for d in db.m.find({"t": {"$gte": lo, "$lt": hi}, "s": "s1"}).sort("t", 1)]
    assert got == [d["v"] for d in docs if lo <= d["t"] < hi and d["s"] == "s1"]
    assert [d["v"] for d in db.m.find().sort("t", -1).limit(3)] == [39, 38, 37]
    assert db.m.distinct("s") == ["s0", "s1"]
    plan = db.command("explain", {"aggregate": "m", "pipeline": [{"$match": {"s": "s0"}}],
                                  "cursor": {}})
    assert "$_internalUnpackBucket" in plan["stages"][1]
    # the measurement predicate on the metaField became a bucket-level predicate on meta
    assert plan["stages"][0]["$cursor"]["queryPlanner"]["parsedQuery"] == {"meta": "s0"}


def test_group_by_date_trunc_and_windows(db) -> None:
    docs = _series(db)
    out = list(db.m.aggregate([
        {"$group": {"_id": {"$dateTrunc": {"date": "$t", "unit": "minute"}},
                    "avg": {"$avg": "$v"}, "n": {"$count": {}}}},
        {"$sort": {"_id": 1}}]))
    by_minute: dict = {}
    for d in docs:
        by_minute.setdefault(d["t"].replace(second=0), []).append(d["v"])
    assert [(o["_id"], o["avg"], o["n"]) for o in out] == [
        (k, sum(v) / len(v), len(v)) for k, v in sorted(by_minute.items())]
    win = list(db.m.aggregate([
        {"$match": {"s": "s0"}},
        {"$setWindowFields": {"sortBy": {"t": 1},
                              "output": {"running": {"$sum": "$v",
                                                     "window": {"documents": ["unbounded",
                                                                              "current"]}}}}},
        {"$project": {"_id": 0, "v": 1, "running": 1}}]))
    evens = [d["v"] for d in docs if d["s"] == "s0"]
    assert [w["running"] for w in win] == [sum(evens[:i + 1]) for i in range(len(evens))]
    dens = list(db.m.aggregate([
        {"$match": {"s": "s1", "v": {"$lte": 5}}},
        {"$densify": {"field": "t", "range": {"step": 15, "unit": "second", "bounds": "full"}}},
        {"$fill": {"sortBy": {"t": 1}, "output": {"v": {"method": "linear"}}}},
        {"$project": {"_id": 0, "t": 1, "v": 1}}]))
    assert [d["v"] for d in dens] == [1, 2, 3, 4, 5]


# --- writes ----------------------------------------------------------------------------------

def test_delete_and_update_measurements(db) -> None:
    _series(db)
    assert db.m.delete_many({"s": "s0"}).deleted_count == 20  # meta-only: whole buckets
    assert db.m.count_documents({}) == 20
    assert db.m.delete_many({"v": {"$lt": 10}}).deleted_count == 5
    assert db.m.count_documents({}) == 15
    res = db.m.update_many({"v": {"$gte": 35}}, {"$set": {"flag": True}})
    assert (res.matched_count, res.modified_count) == (3, 3)
    assert sorted(d["v"] for d in db.m.find({"flag": True})) == [35, 37, 39]
    assert db.m.count_documents({}) == 15
    db.m.update_one({"v": 11}, {"$inc": {"v": 100}})
    assert db.m.count_documents({"v": 111}) == 1
    for b in buckets(db):
        assert b["control"]["count"] == len(column(b, "t"))


def test_raw_data_and_direct_bucket_reads(db) -> None:
    _series(db)
    raw = list(db.m.find({}, rawData=True)) if False else list(
        db.command("find", "m", rawData=True)["cursor"]["firstBatch"])
    assert raw and all("control" in b for b in raw)
    direct = list(db["system.buckets.m"].aggregate([
        {"$_internalUnpackBucket": {"timeField": "t", "metaField": "s",
                                    "bucketMaxSpanSeconds": 3600}},
        {"$count": "n"}]))
    assert direct == [{"n": 40}]
    with pytest.raises(OperationFailure) as exc:
        list(db["system.buckets.m"].aggregate([{"$_internalUnpackBucket": {"metaField": "s"}}]))
    assert exc.value.code == 5346508
    with pytest.raises(OperationFailure) as exc:
        list(db["system.buckets.m"].aggregate([{"$_internalUnpackBucket": "x"}]))
    assert exc.value.code == 5346500


# --- indexes and collMod ----------------------------------------------------------------------

def test_indexes_translated(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "tags"})
    db.m.create_index([("tags.host", 1), ("t", -1)])
    db.m.create_index("v")
    keys = [ix["key"] for ix in db.m.list_indexes()]
    assert {"tags.host": 1, "t": -1} in keys and {"v": 1} in keys
    raw_keys = [ix["key"] for ix in db["system.buckets.m"].list_indexes()]
    assert {"meta.host": 1, "control.max.t": -1, "control.min.t": -1} in raw_keys
    with pytest.raises(OperationFailure):
        db.m.create_index("v", unique=True)
    with pytest.raises(OperationFailure):
        db.m.create_index([("v", "text")])
    db.command("collMod", "m", index={"keyPattern": {"v": 1}, "hidden": True})
    hidden = [ix for ix in db.m.list_indexes() if ix["key"] == {"v": 1}]
    assert hidden and hidden[0].get("hidden") is True


def test_index_entries_follow_every_bucket_update(db) -> None:
    """Buckets extended batch after batch (and reopened after a time-backward insert)
    keep every index entry right: validate agrees, and index scans find what a
    collection scan finds."""
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "tags"})
    db.m.create_index([("tags.host", 1), ("t", -1)])
    db.m.create_index("v")
    db["system.buckets.m"].create_index("control.count")   # a direct index on buckets
    for batch in range(6):
        start = T0 + dt.timedelta(minutes=0 if batch == 3 else 10 * batch)  # 3: backward
        db.m.insert_many([{"t": start + dt.timedelta(seconds=i), "tags": {"host": h},
                           "v": batch * 100 + i} for i in range(20) for h in ("a", "b")])
    result = db.command("validate", "m")
    assert result["valid"], result
    assert result["keysPerIndex"]
    nbuckets = db["system.buckets.m"].count_documents({})
    assert set(result["keysPerIndex"].values()) == {nbuckets}
    for host in ("a", "b"):
        q = {"tags.host": host, "t": {"$gte": T0 + dt.timedelta(minutes=20)}}
        assert len(list(db.m.find(q).hint([("tags.host", 1), ("t", -1)]))) == \
            len([m for m in db.m.find() if m["tags"]["host"] == host
                 and m["t"] >= T0 + dt.timedelta(minutes=20)]) == 60
    assert len(list(db.m.find({"v": {"$gte": 500}}).hint("v_1"))) == 40
    counts = [b["control"]["count"] for b in db["system.buckets.m"].find()]
    assert sorted(b["control"]["count"] for b in
                  db["system.buckets.m"].find().hint("control.count_1")) == sorted(counts)


def test_coll_mod_rules(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t", "granularity": "seconds"})
    db.command("collMod", "m", timeseries={"granularity": "minutes"})
    opts = db.m.options()["timeseries"]
    assert opts["granularity"] == "minutes" and opts["bucketMaxSpanSeconds"] == 86400
    with pytest.raises(OperationFailure) as exc:
        db.command("collMod", "m", timeseries={"granularity": "seconds"})
    assert exc.value.code == 72
    db.command("collMod", "m", expireAfterSeconds=60)
    assert db.m.options()["expireAfterSeconds"] == 60
    db.command("collMod", "m", expireAfterSeconds="off")
    assert "expireAfterSeconds" not in db.m.options()


def test_ttl_deletes_expired_buckets(tmp_path) -> None:
    from ..conftest import start_server

    proc = start_server(tmp_path, "--setParameter", "ttlMonitorSleepSecs=1")
    try:
        with pymongo.MongoClient(proc.uri) as c:
            db = c.ttl
            db.create_collection("m", timeseries={"timeField": "t"}, expireAfterSeconds=3600)
            now = dt.datetime.now(UTC).replace(tzinfo=None)
            db.m.insert_many([{"t": now - dt.timedelta(days=3), "v": "old"},
                              {"t": now, "v": "new"}])
            deadline = time.time() + 20
            while time.time() < deadline and db.m.count_documents({}) != 1:
                time.sleep(0.3)
            assert [d["v"] for d in db.m.find()] == ["new"]
    finally:
        proc.stop()


def test_statistics(client, db) -> None:
    _series(db)
    stats = db.command("collStats", "m")["timeseries"]
    assert stats["bucketsNs"] == f"{db.name}.system.buckets.m"
    assert stats["bucketCount"] == 2 and stats["numMeasurementsCommitted"] == 40
    assert stats["numBucketInserts"] == 2 and stats["avgBucketSize"] > 0
    cs = list(db.m.aggregate([{"$collStats": {"storageStats": {}}}]))
    assert cs[0]["storageStats"]["timeseries"]["bucketCount"] == 2
    catalog = client.admin.command("serverStatus")["bucketCatalog"]
    assert catalog["numOpenBuckets"] >= 2


@pytest.mark.parametrize("meta, collation", [
    (1, None),
    # the buckets index keys the string meta by its collation key: the query finds it
    ("host_a", {"locale": "en", "strength": 2}),
])
def test_restart_continues_into_reopened_buckets(tmp_path, meta, collation) -> None:
    from ..conftest import start_server

    proc = start_server(tmp_path)
    with pymongo.MongoClient(proc.uri) as c:
        c.r.create_collection("m", timeseries={"timeField": "t", "metaField": "s"},
                              **({} if collation is None else {"collation": collation}))
        c.r.m.insert_many([{"t": T0 + dt.timedelta(seconds=i), "s": meta, "v": i}
                           for i in range(10)])
    proc.stop()
    proc = start_server(tmp_path)
    try:
        with pymongo.MongoClient(proc.uri) as c:
            c.r.m.insert_many([{"t": T0 + dt.timedelta(seconds=10 + i), "s": meta,
                                "v": 10 + i} for i in range(10)])
            bs = list(c.r["system.buckets.m"].find())
            assert len(bs) == 1 and bs[0]["control"]["count"] == 20  # reopened, not a new one
            assert [d["v"] for d in c.r.m.find().sort("t", 1)] == list(range(20))
            stats = c.r.command("collStats", "m")["timeseries"]
            assert stats["numBucketsReopened"] + stats.get("numBucketsFetched", 0) >= 1
    finally:
        proc.stop()


def test_a_collation_is_the_buckets_collection_and_index_collation_too(db) -> None:
    # as MongoDB: the buckets collection takes the time-series collection's collation
    # (its options in CollectionOptions order), and so does the default index
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "s"},
                         collation={"locale": "en", "strength": 2}, expireAfterSeconds=60)
    info = db.command("listCollections", filter={"name": "system.buckets.m"})
    options = info["cursor"]["firstBatch"][0]["options"]
    assert list(options) == ["validator", "collation", "clusteredIndex",
                             "expireAfterSeconds", "timeseries"]
    assert options["collation"]["locale"] == "en" and options["collation"]["strength"] == 2
    [index] = db["system.buckets.m"].list_indexes()
    assert index["collation"] == options["collation"]
    db.command("collMod", "m", expireAfterSeconds=120)
    info = db.command("listCollections", filter={"name": "system.buckets.m"})
    assert info["cursor"]["firstBatch"][0]["options"]["collation"] == options["collation"]
    # the meta compares under the collation through the time-series collection
    db.m.insert_many([{"t": T0, "s": "Host_A", "v": 1}, {"t": T0, "s": "host_b", "v": 2}])
    assert [d["v"] for d in db.m.find({"s": "host_a"})] == [1]


def test_direct_writes_to_the_buckets_collection(db) -> None:
    # the buckets collection carries MongoDB's $jsonSchema validator, which the buckets
    # bucketd writes satisfy: direct writes of valid buckets go through
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "s"})
    db.m.insert_many([{"t": dt.datetime(2026, 1, 1, 0, i), "s": i % 2, "v": i}
                      for i in range(4)])
    raw = db["system.buckets.m"]
    assert "$jsonSchema" in db.command("listCollections", filter={
        "name": "system.buckets.m"})["cursor"]["firstBatch"][0]["options"]["validator"]
    result = raw.update_many({"meta": 1}, {"$set": {"meta": 3}})
    assert result.modified_count == 1
    assert sorted(d["s"] for d in db.m.find()) == [0, 0, 3, 3]
    assert raw.delete_many({"meta": 3}).deleted_count == 1
    assert db.m.count_documents({}) == 2

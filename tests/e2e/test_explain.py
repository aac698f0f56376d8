"""explain as mongod shows it, with counters equal to the work done: find, count,
distinct, aggregate, update, delete and findAndModify, on ordinary collections and on
time-series collections (the buckets collection's plan, `$_internalUnpackBucket` with its
`eventFilter`), through pymongo and mongosh.

Every expected count is computed from the data the test wrote, never copied from a run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pymongo
import pytest

from storage import native

from .mongosh_util import run_mongosh
from .node_driver import run_node

T0 = dt.datetime(2024, 6, 1)
HOSTS = 4
PER_HOST = 50


@pytest.fixture
def db(client: pymongo.MongoClient) -> Iterator[Any]:
    client.drop_database("explain_e2e")
    d = client.explain_e2e
    d.plain.insert_many([{"_id": i, "v": i, "g": i % 5} for i in range(200)])
    d.plain.create_index("v")
    d.create_collection("ts", timeseries={"timeField": "t", "metaField": "host"})
    # one insert per host: each host's measurements share a bucket
    for h in range(HOSTS):
        d.ts.insert_many([{"t": T0 + dt.timedelta(minutes=i), "host": f"h{h}", "v": i}
                          for i in range(PER_HOST)])
    yield d
    client.drop_database("explain_e2e")


def _stage(tree: dict[str, Any], name: str) -> dict[str, Any] | None:
    while tree is not None:
        if tree.get("stage") == name:
            return tree
        tree = tree.get("inputStage")  # type: ignore[assignment]
    return None


def _find_explain(db: Any, body: dict[str, Any], verbosity: str = "executionStats"
                  ) -> dict[str, Any]:
    return db.command("explain", body, verbosity=verbosity)


# --- ordinary collections ---------------------------------------------------------------------

def test_index_scan_counts_the_keys_and_documents_it_examined(db: Any) -> None:
    out = _find_explain(db, {"find": "plain", "filter": {"v": {"$gte": 150}, "g": 0}})
    stats = out["executionStats"]
    matching = [i for i in range(150, 200) if i % 5 == 0]
    assert stats["nReturned"] == len(matching)
    assert stats["totalKeysExamined"] == 50      # v in [150, 200)
    assert stats["totalDocsExamined"] == 50
    ixscan = _stage(stats["executionStages"], "IXSCAN")
    assert ixscan is not None and ixscan["keysExamined"] == 50 and ixscan["nReturned"] == 50
    fetch = _stage(stats["executionStages"], "FETCH")
    assert fetch is not None and fetch["nReturned"] == len(matching)
    assert fetch["docsExamined"] == 50
    plan = out["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "FETCH" and plan["inputStage"]["indexName"] == "v_1"
    assert "keysExamined" not in plan["inputStage"]   # planner output has no counters


def test_collection_scan_with_sort_skip_and_limit(db: Any) -> None:
    out = _find_explain(db, {"find": "plain", "filter": {"g": 1}, "sort": {"g": -1},
                             "skip": 3, "limit": 5, "projection": {"v": 1}})
    stats = out["executionStats"]
    assert stats["nReturned"] == 5
    assert stats["totalKeysExamined"] == 0
    assert stats["totalDocsExamined"] == 200
    top = stats["executionStages"]
    assert top["stage"] == "PROJECTION_DEFAULT" and top["nReturned"] == 5
    sort = _stage(top, "SORT")
    assert sort is not None and sort["limitAmount"] == 8 and sort["nReturned"] == 8
    coll = _stage(top, "COLLSCAN")
    assert coll is not None and coll["nReturned"] == 40 and coll["docsExamined"] == 200


def test_limit_stops_the_scan_early(db: Any) -> None:
    stats = _find_explain(db, {"find": "plain", "filter": {}, "limit": 7})["executionStats"]
    assert stats["nReturned"] == 7
    assert stats["totalDocsExamined"] == 7


def test_query_planner_verbosity_does_not_run(db: Any) -> None:
    out = _find_explain(db, {"find": "plain", "filter": {"v": 3}}, "queryPlanner")
    assert "executionStats" not in out
    assert out["queryPlanner"]["winningPlan"]["inputStage"]["stage"] == "IXSCAN"


def test_all_plans_execution(db: Any) -> None:
    stats = _find_explain(db, {"find": "plain", "filter": {"v": 3}},
                          "allPlansExecution")["executionStats"]
    assert stats["nReturned"] == 1 and stats["allPlansExecution"] == []


def test_pymongo_cursor_explain(db: Any) -> None:
    stats = db.plain.find({"v": {"$lt": 10}}).explain()["executionStats"]
    assert (stats["nReturned"], stats["totalKeysExamined"]) == (10, 10)


def test_aggregate_on_a_collection(db: Any) -> None:
    out = db.command("explain", {"aggregate": "plain",
                                 "pipeline": [{"$match": {"v": {"$lt": 20}}},
                                              {"$group": {"_id": "$g", "n": {"$sum": 1}}}],
                                 "cursor": {}}, verbosity="executionStats")
    cursor, group = out["stages"]
    stats = cursor["$cursor"]["executionStats"]
    assert (stats["nReturned"], stats["totalKeysExamined"]) == (20, 20)
    assert cursor["nReturned"] == 20
    assert group["nReturned"] == 5 and "$group" in group


# --- time series ------------------------------------------------------------------------------

def _ts_explain(db: Any, pipeline: list[Any], verbosity: str = "executionStats"
                ) -> list[dict[str, Any]]:
    out = db.command("explain", {"aggregate": "ts", "pipeline": pipeline, "cursor": {}},
                     verbosity=verbosity)
    return out["stages"]


def test_find_on_time_series_reads_the_buckets(db: Any) -> None:
    out = db.command("explain", {"find": "ts", "filter": {"host": "h1", "v": {"$gte": 40}}},
                     verbosity="executionStats")
    cursor, unpack = out["stages"][0], out["stages"][1]
    qp = cursor["$cursor"]["queryPlanner"]
    assert qp["namespace"] == "explain_e2e.system.buckets.ts"
    # the meta predicate became a bucket-level one; the default index serves it
    scan = _stage(qp["winningPlan"], "IXSCAN")
    assert scan is not None and scan["keyPattern"] == {"meta": 1, "control.min.t": 1,
                                                       "control.max.t": 1}
    assert unpack["$_internalUnpackBucket"]["eventFilter"] == {"host": "h1",
                                                               "v": {"$gte": 40}}
    assert unpack["nReturned"] == PER_HOST - 40 == db.ts.count_documents(
        {"host": "h1", "v": {"$gte": 40}})
    stats = cursor["$cursor"]["executionStats"]
    buckets_of_h1 = db["system.buckets.ts"].count_documents({"meta": "h1"})
    assert stats["nReturned"] == buckets_of_h1 == unpack["nBucketsUnpacked"]
    assert stats["totalDocsExamined"] == buckets_of_h1
    assert stats["totalKeysExamined"] >= buckets_of_h1


def test_time_series_without_a_filter_scans_every_bucket(db: Any) -> None:
    cursor, unpack, group = _ts_explain(db, [{"$group": {"_id": "$host",
                                                         "m": {"$max": "$v"}}}])
    buckets = db["system.buckets.ts"].count_documents({})
    stats = cursor["$cursor"]["executionStats"]
    assert stats["totalDocsExamined"] == buckets and stats["totalKeysExamined"] == 0
    assert _stage(cursor["$cursor"]["queryPlanner"]["winningPlan"], "COLLSCAN") is not None
    assert group["$group"]["_id"] == "$host"
    # the columnar $group (or block processing) folded the unpacking and the $group
    assert unpack["$_internalUnpackBucket"]["bucketdPath"] in ("general", "columnarGroup",
                                                               "blockGroup")
    if unpack["$_internalUnpackBucket"]["bucketdPath"] == "general":
        assert unpack["nReturned"] == HOSTS * PER_HOST and group["nReturned"] == HOSTS


def test_buckets_outside_the_range_are_skipped_and_counted(db: Any) -> None:
    # v runs 0..PER_HOST-1 in each host's bucket: none reaches PER_HOST
    cursor, unpack = _ts_explain(db, [{"$match": {"v": {"$gte": PER_HOST}}}])
    buckets = db["system.buckets.ts"].count_documents({})
    assert unpack["bucketdBucketsSkipped"] == buckets
    assert unpack["nBucketsUnpacked"] == 0 and unpack["nReturned"] == 0
    assert cursor["$cursor"]["executionStats"]["totalDocsExamined"] == buckets


@pytest.mark.skipif(not native.AVAILABLE, reason="block processing is the native core's")
def test_block_processing_names_its_stage_and_counts(db: Any) -> None:
    # a bucket whose control.max.v is below the filter's bound: skipped before decoding
    db.ts.insert_many([{"t": T0 + dt.timedelta(minutes=i), "host": "low", "v": i}
                       for i in range(5)])
    pipeline = [{"$match": {"v": {"$gte": 10}, "t": {"$lt": T0 + dt.timedelta(minutes=45)}}},
                {"$group": {"_id": "$host", "m": {"$max": "$v"}, "n": {"$count": {}}}},
                {"$sort": {"_id": 1}}]
    cursor, unpack, *_rest = _ts_explain(db, pipeline)
    assert unpack["$_internalUnpackBucket"]["bucketdPath"] == "blockGroup"
    block = unpack["bucketdBlockProcessing"]
    buckets = db["system.buckets.ts"].count_documents({})
    rows = db.ts.count_documents(pipeline[0]["$match"])
    assert rows == HOSTS * 35
    assert block == {"stage": "block_group", "bucketsScanned": buckets,
                     "bucketsSkippedByControl": 1,
                     "columnsDecoded": 2 * (buckets - 1),  # the time column and v
                     "rowsPassingFilter": rows}
    assert unpack["bucketdBucketsSkipped"] == 1
    assert cursor["$cursor"]["executionStats"]["totalDocsExamined"] == buckets
    got = list(db.ts.aggregate(pipeline))
    assert got == [{"_id": f"h{h}", "m": 44, "n": 35} for h in range(HOSTS)]


@pytest.mark.skipif(not native.AVAILABLE, reason="block processing is the native core's")
def test_block_processing_takes_standard_deviations(db: Any) -> None:
    # the same documents in a plain collection: the generic $group answers there
    db.copy.insert_many(db.ts.find({}, {"_id": 0}))
    db.ts.insert_one({"t": T0, "host": "h0", "v": 2.5})
    db.copy.insert_one({"t": T0, "host": "h0", "v": 2.5})
    pipeline = [{"$group": {"_id": {"h": "$host",
                                    "hour": {"$dateTrunc": {"date": "$t", "unit": "hour"}}},
                            "pop": {"$stdDevPop": "$v"}, "samp": {"$stdDevSamp": "$v"}}},
                {"$sort": {"_id.h": -1, "_id.hour": 1}}]
    _cursor, unpack, *_rest = _ts_explain(db, pipeline)
    assert unpack["$_internalUnpackBucket"]["bucketdPath"] == "blockGroup"
    got = list(db.ts.aggregate(pipeline))
    assert got == list(db.copy.aggregate(pipeline))
    assert [g["_id"]["h"] for g in got] == [f"h{h}" for h in reversed(range(HOSTS))]
    assert isinstance(got[0]["pop"], float) and got[0]["pop"] > 0


@pytest.mark.skipif(not native.AVAILABLE, reason="block processing is the native core's")
def test_block_processing_groups_by_date_strings(db: Any) -> None:
    db.copy.insert_many(db.ts.find({}, {"_id": 0}))
    pipeline = [{"$match": {"$or": [{"v": {"$lt": 5}}, {"v": {"$gte": 40}}],
                            "v": {"$in": [1, 2, 3, 20, 41, 45]}}},
                {"$group": {"_id": {"h": "$host", "d": {"$dateToString": {
                    "date": "$t", "format": "%Y-%m-%d %H:%M"}}}, "n": {"$count": {}}}},
                {"$sort": {"_id.h": 1, "_id.d": 1}}]
    _cursor, unpack, *_rest = _ts_explain(db, pipeline)
    assert unpack["$_internalUnpackBucket"]["bucketdPath"] == "blockGroup"
    got = list(db.ts.aggregate(pipeline))
    assert got == list(db.copy.aggregate(pipeline))
    assert len(got) == HOSTS * 5 and got[0]["_id"] == {"h": "h0", "d": "2024-06-01 00:01"}


@pytest.mark.skipif(not native.AVAILABLE, reason="block processing is the native core's")
def test_block_processing_keeps_top_and_bottom_rows(db: Any) -> None:
    db.copy.insert_many(db.ts.find({}, {"_id": 0}))
    pipeline = [{"$group": {"_id": "$host",
                            "last": {"$top": {"sortBy": {"t": -1}, "output": ["$t", "$v"]}},
                            "low": {"$bottomN": {"n": 2, "sortBy": {"v": -1}, "output": "$v"}}}},
                {"$sort": {"_id": 1}}]
    _cursor, unpack, *_rest = _ts_explain(db, pipeline)
    assert unpack["$_internalUnpackBucket"]["bucketdPath"] == "blockGroup"
    got = list(db.ts.aggregate(pipeline))
    assert got == list(db.copy.aggregate(pipeline))
    last = T0 + dt.timedelta(minutes=PER_HOST - 1)
    assert got[0] == {"_id": "h0", "last": [last, PER_HOST - 1], "low": [1, 0]}


def test_time_series_general_path_counts_every_stage(db: Any) -> None:
    stages = _ts_explain(db, [{"$match": {"v": {"$lt": 10}}},
                              {"$project": {"v": 1, "_id": 0}},
                              {"$sort": {"v": -1}},
                              {"$limit": 25}])
    cursor, unpack, project, sort = stages    # $limit went into the $sort, as in mongod
    assert unpack["nReturned"] == HOSTS * 10
    assert project["nReturned"] == HOSTS * 10
    assert sort["nReturned"] == 25
    assert cursor["$cursor"]["executionStats"]["nReturned"] == \
        db["system.buckets.ts"].count_documents({})


def test_time_series_query_planner_verbosity(db: Any) -> None:
    cursor, unpack = _ts_explain(db, [{"$match": {"host": "h2"}}], "queryPlanner")
    assert "executionStats" not in cursor["$cursor"] and "nReturned" not in unpack
    assert cursor["$cursor"]["queryPlanner"]["parsedQuery"] == {"meta": "h2"}


@pytest.mark.mongosh
def test_mongosh_explain_execution_stats(db: Any, uri: str) -> None:
    out, _ = run_mongosh(uri, """
const d = db.getSiblingDB('explain_e2e');
const e = d.plain.find({v: {$lt: 30}}).explain('executionStats').executionStats;
const t = d.ts.find({host: 'h0'}).explain('executionStats').stages;
print(EJSON.stringify({n: e.nReturned, keys: e.totalKeysExamined,
                       ts: t[1].nReturned, ns: t[0].$cursor.queryPlanner.namespace},
                      {relaxed: true}));
""")
    assert out == {"n": 30, "keys": 30, "ts": PER_HOST,
                   "ns": "explain_e2e.system.buckets.ts"}


# --- count, distinct and writes ---------------------------------------------------------------

def test_count_and_distinct(db: Any) -> None:
    stats = db.command("explain", {"count": "plain", "query": {"v": {"$lt": 12}}},
                       verbosity="executionStats")["executionStats"]
    assert (stats["totalKeysExamined"], stats["nReturned"]) == (12, 12)
    out = db.command("explain", {"count": "ts", "query": {"host": "h3"}},
                     verbosity="executionStats")
    _cursor, unpack, count = out["stages"]
    assert unpack["nReturned"] == PER_HOST and count["nReturned"] == 1
    assert "$count" in count
    out = db.command("explain", {"distinct": "ts", "key": "host", "query": {"v": 0}},
                     verbosity="executionStats")
    assert out["stages"][1]["nReturned"] == HOSTS


def test_update_and_delete_write_nothing(db: Any) -> None:
    before = list(db.plain.find().sort("_id", 1))
    out = db.command("explain", {"update": "plain", "updates": [
        {"q": {"v": {"$lt": 10}}, "u": {"$set": {"g": 1}}, "multi": True}]},
        verbosity="executionStats")
    update = out["executionStats"]["executionStages"]
    already = sum(1 for d in before if d["v"] < 10 and d["g"] == 1)
    assert update["stage"] == "UPDATE"
    assert (update["nMatched"], update["nWouldModify"]) == (10, 10 - already)
    assert out["queryPlanner"]["winningPlan"]["inputStage"]["stage"] == "FETCH"
    out = db.command("explain", {"delete": "plain", "deletes": [
        {"q": {"g": 2}, "limit": 0}]}, verbosity="executionStats")
    assert out["executionStats"]["executionStages"]["nWouldDelete"] == 40
    out = db.command("explain", {"findAndModify": "plain", "query": {"g": 3},
                                 "sort": {"v": -1}, "remove": True},
                     verbosity="executionStats")
    stages = out["executionStats"]["executionStages"]
    assert stages["stage"] == "DELETE" and stages["nWouldDelete"] == 1
    assert list(db.plain.find().sort("_id", 1)) == before


def test_time_series_writes_explain_ts_modify(db: Any) -> None:
    before = db.ts.count_documents({})
    out = db.command("explain", {"delete": "ts", "deletes": [
        {"q": {"host": "h0", "v": {"$gte": 45}}, "limit": 0}]}, verbosity="executionStats")
    ts_modify = out["executionStats"]["executionStages"]
    assert ts_modify["stage"] == "TS_MODIFY" and ts_modify["opType"] == "deleteMany"
    assert ts_modify["bucketFilter"] == {"meta": "h0"}   # the meta predicate, on buckets
    assert ts_modify["residualFilter"] == {"host": "h0", "v": {"$gte": 45}}
    assert ts_modify["nMeasurementsDeleted"] == 5
    assert ts_modify["nBucketsUnpacked"] == db["system.buckets.ts"].count_documents(
        {"meta": "h0"})
    assert out["queryPlanner"]["namespace"] == "explain_e2e.system.buckets.ts"
    out = db.command("explain", {"update": "ts", "updates": [
        {"q": {"host": "h1"}, "u": {"$set": {"v": -1}}, "multi": False}]},
        verbosity="executionStats")
    ts_modify = out["executionStats"]["executionStages"]
    assert ts_modify["opType"] == "updateOne"
    assert (ts_modify["nMeasurementsMatched"], ts_modify["nMeasurementsUpdated"]) == (1, 1)
    assert db.ts.count_documents({}) == before
    assert db.ts.count_documents({"v": -1}) == 0


@pytest.mark.mongosh
def test_node_driver_explain(db: Any, uri: str) -> None:
    out = run_node(uri, """
const d = client.db('explain_e2e');
const e = await d.collection('plain').find({v: {$gte: 190}}).explain('executionStats');
const t = await d.collection('ts').find({host: 'h2', v: {$lt: 5}}).explain('executionStats');
return {n: e.executionStats.nReturned, keys: e.executionStats.totalKeysExamined,
        ts: t.stages[1].nReturned, filter: t.stages[1].$_internalUnpackBucket.eventFilter};
""")
    assert out == {"n": 10, "keys": 10, "ts": 5, "filter": {"host": "h2", "v": {"$lt": 5}}}


def test_clustered_collection_scans_by_id_without_keys(db: Any) -> None:
    db.create_collection("clu", clusteredIndex={"key": {"_id": 1}, "unique": True})
    db.clu.insert_many([{"_id": i, "v": i} for i in range(100)])
    stats = _find_explain(db, {"find": "clu", "filter": {"_id": {"$gte": 90}}}
                          )["executionStats"]
    top = stats["executionStages"]
    assert top["stage"] == "CLUSTERED_IXSCAN" and top["nReturned"] == 10
    assert stats["totalKeysExamined"] == 0 and stats["totalDocsExamined"] == top["docsExamined"]
    assert stats["totalDocsExamined"] >= 10

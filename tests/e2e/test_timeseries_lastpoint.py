"""Last point per series on time-series views (query/timeseries/lastpoint.py).

Every pipeline runs twice: as written (the last-point path when it fits) and behind a
leading `{$skip: 0}`, which changes no result but sends the pipeline through the full
unpacking path. Both answers must be the same documents, in the same order."""

from __future__ import annotations

import datetime as dt

import pymongo
import pytest
from bson import Int64
from bson.codec_options import CodecOptions, DatetimeConversion

T0 = dt.datetime(2024, 1, 1)
MS = CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS)


@pytest.fixture(scope="module")
def coll(uri: str):
    client: pymongo.MongoClient = pymongo.MongoClient(uri)
    db = client.get_database("ts_lastpoint", codec_options=MS)
    client.drop_database("ts_lastpoint")
    db.create_collection("cpu", timeseries={"timeField": "t", "metaField": "tags",
                                            "granularity": "seconds"})
    docs = []
    for h in range(6):
        tags = {"host": f"h{h % 4}", "rack": h % 2, "dc": "x" if h < 3 else "y"}
        n = 500 + 300 * h          # several buckets per series (span 1 h, 10 s apart)
        for i in range(n):
            docs.append({"t": T0 + dt.timedelta(seconds=10 * i), "tags": tags,
                         "v": (i * 7 + h) % 101, "w": float(i % 13) / 4})
        # two measurements at the series' latest time: ties must keep the scan order
        docs.append({"t": T0 + dt.timedelta(seconds=10 * (n - 1)), "tags": tags,
                     "v": -h, "w": None})
    # an out-of-order insert makes a v3 bucket; a series without the sort field
    docs.append({"t": T0 + dt.timedelta(seconds=5), "tags": {"host": "h1", "rack": 1,
                                                            "dc": "x"}, "v": 999})
    docs.append({"t": T0 + dt.timedelta(seconds=7), "tags": {"dc": "z"}, "v": 5})
    for i in range(0, len(docs), 700):
        db.cpu.insert_many(docs[i:i + 700], ordered=False)
    yield db.cpu
    client.drop_database("ts_lastpoint")
    client.close()


PIPELINES = [
    [{"$sort": {"tags.host": 1, "t": -1}},
     {"$group": {"_id": "$tags.host", "last": {"$first": "$$ROOT"}}}],
    [{"$sort": {"tags.host": -1, "tags.rack": 1, "t": -1}},
     {"$group": {"_id": {"h": "$tags.host", "r": "$tags.rack"}, "v": {"$first": "$v"},
                 "t": {"$first": "$t"}}}, {"$sort": {"_id.h": 1, "_id.r": -1}}],
    [{"$match": {"tags.dc": "x"}}, {"$sort": {"tags": 1, "t": -1}},
     {"$group": {"_id": "$tags", "w": {"$first": "$w"}}}],
    [{"$sort": {"tags.dc": 1, "t": -1}},
     {"$group": {"_id": None, "first": {"$first": "$$ROOT"}}}],
    [{"$sort": {"tags.host": 1, "t": -1}},
     {"$group": {"_id": "$tags.host", "v": {"$first": "$v"}}},
     {"$project": {"v2": {"$multiply": ["$v", 2]}}}, {"$sort": {"v2": 1, "_id": 1}}],
    # shapes the last-point path must leave alone (same answers either way)
    [{"$match": {"v": {"$gt": 50}}}, {"$sort": {"tags.host": 1, "t": -1}},
     {"$group": {"_id": "$tags.host", "v": {"$first": "$v"}}}],
    [{"$sort": {"tags.host": 1, "t": -1}},
     {"$group": {"_id": "$tags.host", "v": {"$last": "$v"}}}],
    [{"$sort": {"tags.host": 1, "t": 1}},
     {"$group": {"_id": "$tags.host", "v": {"$first": "$v"}}}],
    [{"$sort": {"tags.host": 1, "t": -1}},
     {"$group": {"_id": "$v", "h": {"$first": "$tags.host"}}}],
]


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[str(i) for i in range(len(PIPELINES))])
def test_lastpoint_matches_the_full_scan(coll, pipeline) -> None:
    fast = list(coll.aggregate(pipeline))
    full = list(coll.aggregate([{"$skip": 0}, *pipeline]))
    assert fast == full
    assert fast  # every pipeline here has results


def test_lastpoint_answers_ties_and_latest_values(coll) -> None:
    got = {d["_id"]: d["last"] for d in coll.aggregate(PIPELINES[0])}
    assert set(got) == {"h0", "h1", "h2", "h3", None}
    # h0 is shared by series 0 and 4; series 4 (2,300 points) ends later
    assert got["h0"]["tags"] == {"host": "h0", "rack": 0, "dc": "y"}
    assert got["h0"]["t"].as_datetime().replace(tzinfo=None) == T0 + dt.timedelta(seconds=16990)
    # of the two measurements at the latest time the one inserted first comes first
    assert got["h0"]["v"] == (1699 * 7 + 4) % 101


def test_which_pipelines_take_the_last_point_path() -> None:
    from query.timeseries.lastpoint import eligible
    from storage.timeseries.options import parse_timeseries_options

    opts = parse_timeseries_options({"timeField": "t", "metaField": "tags"})
    taken = [eligible(p, opts) is not None for p in PIPELINES]
    assert taken == [True] * 5 + [False] * 4


def test_numerically_equal_metas_and_no_index(uri: str) -> None:
    # without a $match the latest buckets come from the default index's keys, where
    # {h: 1}, {h: 1.0} and {h: Int64(1)} are one key: the group they all fall in
    client: pymongo.MongoClient = pymongo.MongoClient(uri)
    db = client.get_database("ts_lastpoint_eq", codec_options=MS)
    client.drop_database(db.name)
    db.create_collection("c", timeseries={"timeField": "t", "metaField": "m"})
    metas = [{"h": 1}, {"h": 1.0}, {"h": Int64(1)}, {"h": 2}]
    for k, meta in enumerate(metas):
        db.c.insert_many([{"t": T0 + dt.timedelta(minutes=i + 7 * k), "m": meta, "v": i + k}
                          for i in range(30)])
    pipelines = [
        [{"$sort": {"m": 1, "t": -1}}, {"$group": {"_id": "$m", "v": {"$first": "$v"},
                                                  "t": {"$first": "$t"}}},
         {"$sort": {"_id.h": 1}}],
        [{"$sort": {"m.h": 1, "t": -1}}, {"$group": {"_id": "$m.h", "last": {"$first": "$$ROOT"}}},
         {"$sort": {"_id": 1}}],
    ]
    try:
        for dropped in (False, True):
            if dropped:
                db["system.buckets.c"].drop_indexes()
            for pipeline in pipelines:
                fast = list(db.c.aggregate(pipeline))
                assert fast == list(db.c.aggregate([{"$skip": 0}, *pipeline]))
                assert [d.get("v", d.get("last", {}).get("v")) for d in fast] == [29 + 2, 29 + 3]
    finally:
        client.drop_database(db.name)
        client.close()

"""Finds on a time-series collection whose filter compares measurement fields with numbers
go through the columnar pre-filter (`storage.timeseries.row_filter`); through pymongo
they must return what an ordinary collection holding the same documents returns."""

from __future__ import annotations

import datetime as dt
import math
import random

import bson
import pymongo
import pytest
from bson import Int64

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)

FILTERS = [
    {"x": {"$gt": 5}}, {"x": {"$gte": 5.5}}, {"x": {"$lt": -0.5}}, {"x": {"$lte": 0}},
    {"x": 3}, {"x": {"$eq": 3.0}}, {"y": {"$gt": 2**53}}, {"y": {"$lt": 1}},
    {"x": {"$gt": 0, "$lt": 10}, "y": {"$gte": 0.25}}, {"z": {"$gt": 0.5}},
    {"z": {"$lte": -0.0}}, {"x": {"$gt": 1e300}}, {"x": {"$lt": -1e300}},
    {"x": {"$gt": 5}, "s": {"$exists": False}},     # not all numeric: the full path
]


@pytest.fixture(scope="module")
def colls(uri: str):
    client: pymongo.MongoClient = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
    name = "ts_row_filter"
    client.drop_database(name)
    db = client[name]
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    rnd = random.Random(11)
    docs = []
    for i in range(3000):
        doc: dict = {"_id": i, "t": T0 + dt.timedelta(seconds=rnd.randint(0, 6 * 3600)),
                     "m": f"h{i % 4}"}
        if rnd.random() < 0.9:
            doc["x"] = rnd.choice([rnd.randint(-20, 20), Int64(rnd.randint(-9, 9))])
        if rnd.random() < 0.8:
            doc["y"] = rnd.choice([Int64(2**53 + 1), Int64(2**53), Int64(-1), Int64(7)])
        if rnd.random() < 0.8:
            doc["z"] = rnd.choice([rnd.uniform(-1, 1), -0.0, math.nan, math.inf])
        if i % 250 == 0:
            doc["s"] = "text"
        docs.append(doc)
    db.ts.insert_many(docs[:2000])
    db.ts.insert_many(docs[2000:])
    db.plain.insert_many(docs)
    yield db
    client.drop_database(name)
    client.close()


def _canon(docs) -> list[bytes]:  # type: ignore[no-untyped-def]
    return sorted(bson.encode(dict(sorted(d.items()))) for d in docs)


@pytest.mark.parametrize("flt", FILTERS, ids=[str(f) for f in FILTERS])
@pytest.mark.parametrize("projection", [None, {"_id": 1, "t": 1}])
def test_find_matches_an_ordinary_collection(colls, flt, projection) -> None:
    want = _canon(colls.plain.find(flt, projection))
    assert _canon(colls.ts.find(flt, projection)) == want
    assert colls.ts.count_documents(flt) == len(want)


# -- one series, a time window and a threshold (TSBS high-cpu-1): the pre-filter also
# evaluates the time conditions and leaves the meta ones to once a bucket; measurements
# carry pymongo's ObjectId _id (a column the numeric decoder does not read)

HOSTS = [f"host_{i}" for i in range(4)]


@pytest.fixture(scope="module")
def series(uri: str):
    client: pymongo.MongoClient = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
    name = "ts_row_filter_series"
    client.drop_database(name)
    db = client[name]
    db.create_collection("ts", timeseries={"timeField": "time", "metaField": "tags",
                                           "granularity": "seconds"})
    rnd = random.Random(17)
    docs = []
    for k in range(2400):
        host = HOSTS[k % 4]
        doc: dict = {"time": T0 + dt.timedelta(seconds=10 * (k // 4)),
                     "tags": {"hostname": host, "region": f"r{k % 4 // 2}"}}
        if rnd.random() < 0.95:
            doc["usage_user"] = Int64(rnd.randint(0, 100))
        doc["usage_system"] = rnd.choice([rnd.uniform(0, 100), math.nan, 95.5, 90.0])
        doc["usage_idle"] = rnd.randint(0, 100)
        docs.append(doc)
    for i in range(0, len(docs), 500):
        db.ts.insert_many([dict(d) for d in docs[i:i + 500]])  # pymongo adds ObjectId _ids
    db.ts.create_index([("tags.hostname", 1), ("time", 1)])
    db.plain.insert_many(list(db.ts.find()))
    yield db
    client.drop_database(name)
    client.close()


def _window(minutes: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


SERIES_FILTERS = [
    {"tags.hostname": "host_1", "time": {"$gte": _window(7), "$lt": _window(55)},
     "usage_user": {"$gt": 90}},
    {"tags.hostname": "host_2", "time": {"$gt": _window(0), "$lte": _window(100)},
     "usage_system": {"$gt": 90}},
    {"tags.hostname": {"$in": ["host_0", "host_3"]}, "time": {"$lt": _window(30)},
     "usage_system": {"$lte": 90.0}},
    {"tags": {"hostname": "host_1", "region": "r0"}, "time": _window(20),
     "usage_idle": {"$gte": 0}},
    {"tags.region": "r1", "time": {"$ne": _window(10)}, "usage_user": {"$lt": 5}},
    {"tags.hostname": "host_3", "time": {"$gte": _window(10)}, "usage_user": 50},
    {"time": {"$gte": _window(60)}, "usage_user": {"$gte": 99}, "usage_idle": {"$lt": 50}},
    {"tags.hostname": "host_0", "usage_system": {"$gte": 95.5}},
    {"tags.hostname": "host_2", "time": {"$gte": _window(3), "$lt": _window(9)}},
    {"time": {"$lte": _window(2)}},
    # time and meta conditions inside operators: the full filter
    {"$or": [{"time": {"$lt": _window(5)}}, {"tags.hostname": "host_2"}],
     "usage_user": {"$gt": 95}},
    {"$nor": [{"tags.hostname": "host_1"}, {"time": {"$gte": _window(30)}}],
     "usage_user": {"$gt": 80}},
    {"tags.hostname": "host_1", "time": {"$not": {"$gte": _window(30)}},
     "usage_user": {"$gt": 80}},
]


def _ordered(docs) -> list[bytes]:  # type: ignore[no-untyped-def]
    return [bson.encode(dict(sorted(d.items()))) for d in docs]  # (NaN != NaN in a dict)


@pytest.mark.parametrize("flt", SERIES_FILTERS, ids=[str(f) for f in SERIES_FILTERS])
def test_one_series_window_threshold_matches_an_ordinary_collection(series, flt) -> None:
    pipeline = [{"$match": flt}, {"$sort": {"time": 1, "tags.hostname": 1}}]
    want = _ordered(series.plain.aggregate(pipeline))
    got = list(series.ts.aggregate(pipeline))
    assert _ordered(got) == want
    assert all(type(d["_id"]) is bson.ObjectId for d in got)
    assert _ordered(series.ts.find(flt, sort=[("time", 1), ("tags.hostname", 1)])) == want
    assert series.ts.count_documents(flt) == len(want)


def test_high_cpu_shape_finds_rows(series) -> None:
    # the first filter is the benchmark's shape: it must select some rows, not vacuously
    got = list(series.ts.aggregate([{"$match": SERIES_FILTERS[0]}, {"$sort": {"time": 1}}]))
    assert 0 < len(got) < 100
    assert [d["time"] for d in got] == sorted(d["time"] for d in got)
    assert {d["tags"]["hostname"] for d in got} == {"host_1"}

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

"""The columnar `$group` of time-series aggregations, through pymongo against the server.

Each pipeline runs twice: as given (`[$match] $group ...` takes the columnar path) and with
a `{$skip: 0}` put before the `$group`, which the columnar path does not recognise, so the
generic path answers. Both replies must be the same BSON bytes.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import sys
from pathlib import Path

import pymongo
import pytest
from bson import Int64
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # bench/query.py must not shadow query
from tsbs import FIELDS, START, measurements

RAW: CodecOptions = CodecOptions(document_class=RawBSONDocument)
T0 = dt.datetime(2024, 5, 1, 12, 0, 0)


@pytest.fixture(scope="module")
def db(uri: str):
    client: pymongo.MongoClient = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
    name = "ts_columnar_group"
    client.drop_database(name)
    d = client[name]
    d.create_collection("cpu", timeseries={"timeField": "time", "metaField": "tags"})
    d.cpu.insert_many(list(measurements(3000, hosts=20)))
    d.create_collection("mixed", timeseries={"timeField": "t", "metaField": "m"})
    rnd = random.Random(5)
    docs = []
    for i in range(2000):
        doc: dict = {"t": T0 + dt.timedelta(seconds=rnd.randint(0, 4 * 3600))}
        if i % 7:
            doc["m"] = {"host": f"h{i % 5}", "n": i % 3}
        if rnd.random() < 0.9:
            doc["x"] = rnd.choice([rnd.randint(-5, 50), Int64(rnd.randint(0, 9)),
                                   rnd.uniform(-1, 1), math.nan, None, True])
        if rnd.random() < 0.8:
            doc["y"] = rnd.choice([2**31 - 1, 2**62, 0.25])
        if i % 100 == 0:
            doc["s"] = "text"
        docs.append(doc)
    d.mixed.insert_many(docs[:1500])
    d.mixed.insert_many(docs[1500:])  # some land in older buckets: v3 buckets
    yield d
    client.drop_database(name)
    client.close()


def both(coll, pipeline: list) -> tuple[list[bytes], list[bytes]]:
    c = coll.with_options(codec_options=RAW)
    at = 1 if pipeline and "$match" in pipeline[0] else 0
    forced = [*pipeline[:at], {"$skip": 0}, *pipeline[at:]]
    fast = [d.raw for d in c.aggregate(pipeline)]
    slow = [d.raw for d in c.aggregate(forced)]
    return fast, slow


def _trunc(field: str, unit: str, **kw) -> dict:
    return {"$dateTrunc": {"date": f"${field}", "unit": unit, **kw}}


F = FIELDS[0]
T1 = START + dt.timedelta(hours=1)
T12 = START + dt.timedelta(hours=12)

CPU_PIPELINES = [
    # the bench's queries
    [{"$match": {"tags.hostname": "host_7", "time": {"$gte": START, "$lt": T12}}},
     {"$group": {"_id": _trunc("time", "minute"), "max": {"$max": f"${F}"}}},
     {"$sort": {"_id": 1}}],
    [{"$match": {"time": {"$gte": START, "$lt": T1}}},
     {"$group": {"_id": "$tags.hostname", "max": {"$max": f"${F}"}}},
     {"$match": {"max": {"$gt": 90}}}],
    [{"$match": {"time": {"$gte": START, "$lt": START + dt.timedelta(hours=24)}}},
     {"$group": {"_id": {"h": "$tags.hostname", "t": _trunc("time", "hour")},
                 **{k: {"$avg": f"${k}"} for k in FIELDS}}}],
    # more
    [{"$group": {"_id": "$tags.region", "n": {"$count": {}}, "s": {"$sum": f"${F}"},
                 "first": {"$first": f"${F}"}, "last": {"$last": "$time"}}}],
    [{"$group": {"_id": None, "min": {"$min": f"${F}"}, "one": {"$sum": 1}}}],
]

MIXED_PIPELINES = [
    [{"$group": {"_id": "$m.host", "a": {"$avg": "$x"}, "s": {"$sum": "$x"},
                 "mx": {"$max": "$x"}, "mn": {"$min": "$x"}, "f": {"$first": "$x"},
                 "l": {"$last": "$x"}, "sy": {"$sum": "$y"}, "my": {"$max": "$y"}}}],
    [{"$match": {"m.n": {"$ne": 1}, "t": {"$gt": T0 + dt.timedelta(minutes=30)}}},
     {"$group": {"_id": {"h": "$m.host", "b": _trunc("t", "minute", binSize=20)},
                 "s": {"$sum": "$y"}, "c": {"$count": {}}}},
     {"$sort": {"c": -1, "_id.b": 1}}],
    [{"$group": {"_id": "$m", "s": {"$sum": "$y"}}}],
    [{"$match": {"m": {"$exists": False}}},
     {"$group": {"_id": _trunc("t", "day"), "y": {"$avg": "$y"}}}],
]

DECLINED = [  # the columnar path declines these: the generic one answers both runs
    [{"$group": {"_id": "$m.host", "s": {"$max": "$s"}}}],                          # strings
    [{"$group": {"_id": _trunc("t", "hour", timezone="America/New_York"),
                 "s": {"$sum": "$y"}}}],                                               # timezone
    [{"$group": {"_id": "$m.host", "p": {"$push": "$y"}}}],                         # $push
    [{"$match": {"x": {"$gt": 0}}}, {"$group": {"_id": None, "s": {"$sum": "$x"}}}],  # data field
]


@pytest.mark.parametrize("pipeline", CPU_PIPELINES, ids=[str(i) for i in range(len(CPU_PIPELINES))])
def test_tsbs_queries(db, pipeline):
    fast, slow = both(db.cpu, pipeline)
    assert fast == slow
    assert fast  # the queries select something


@pytest.mark.parametrize("pipeline", MIXED_PIPELINES + DECLINED,
                         ids=[str(i) for i in range(len(MIXED_PIPELINES + DECLINED))])
def test_mixed_types(db, pipeline):
    fast, slow = both(db.mixed, pipeline)
    assert fast == slow
    assert fast


def test_results_make_sense(db):
    # an independent check of one answer: counts per host add up to the collection
    docs = list(db.mixed.aggregate([{"$group": {"_id": "$m.host", "c": {"$count": {}}}}]))
    assert sum(d["c"] for d in docs) == 2000
    assert {d["_id"] for d in docs} == {None, "h0", "h1", "h2", "h3", "h4"}

"""The columnar `$group` over time-series buckets against the generic pipeline.

Differential: random measurements go through the real bucket catalog (v2 buckets, v3 when
later batches arrive out of order, some turned into v1 buckets); every pipeline shape runs
through `plan_group` + `group_buckets` and through the generic pipeline over the unpacked
measurements; the results must be the same BSON bytes (which checks value types too).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from bson import Int64
from bson.datetime_ms import DatetimeMS

from query.context import PipelineContext
from query.pipeline import compile_pipeline
from query.timeseries.columnar_group import group_buckets, plan_group
from storage.bsonutil import decode, encode
from storage.timeseries import BucketCatalog, BucketSpec, TimeseriesOptions, unpack_bucket
from storage.timeseries.constants import TimeseriesParameters

OPTS = TimeseriesOptions("time", "tags")
T0 = 1_714_564_800_000  # 2024-05-01T12:00:00Z
MIN = 60_000
HOUR = 3_600_000
LIMIT = 100 * 2**20

METAS = [{"h": "a", "dc": 1}, {"h": "b", "dc": 1}, {"h": "c", "dc": 2}, {"h": 1},
         {"h": 1.0}, {"dc": 3}, None]


def _value(rnd: random.Random, kind: str):
    r = rnd.random()
    if kind == "i32":
        return rnd.choice([rnd.randint(-50, 100), 2**31 - rnd.randint(1, 5), -(2**31)])
    if kind == "i64":
        return Int64(rnd.choice([rnd.randint(-50, 100), 2**62 + rnd.randint(0, 9)]))
    if kind == "d":
        if r < 0.05:
            return rnd.choice([math.nan, math.inf, -math.inf, -0.0, 0.0, 1e300])
        return round(rnd.uniform(-100, 100), rnd.choice([0, 2, 7]))
    if kind == "mix":
        return rnd.choice([rnd.randint(0, 9), Int64(rnd.randint(0, 9)), float(rnd.randint(0, 9)),
                           True, False, DatetimeMS(T0 + rnd.randint(0, 9)), 5, 5.0])
    if kind == "nul":
        return None if r < 0.2 else rnd.randint(0, 5)
    if kind == "s":
        return rnd.choice(["x", "y", 3])
    if kind == "big":
        return Int64(2**60 + 1) if r < 0.5 else 1.5
    raise AssertionError(kind)


KINDS = ["i32", "i64", "d", "mix", "nul"]


def _measurements(rnd: random.Random, n: int, kinds: list[str], start: int, span: int
                  ) -> list[dict]:
    out = []
    for _ in range(n):
        m: dict = {"time": DatetimeMS(start + rnd.randint(0, span))}
        meta = rnd.choice(METAS)
        if meta is not None:
            m["tags"] = meta
        for k in kinds:
            if rnd.random() < 0.85:
                m[k] = _value(rnd, k)
        out.append(m)
    return out


def _to_v1(bucket: dict) -> dict:
    """The same measurements as a version 1 bucket ({"0": v, ...} objects)."""
    rows = list(unpack_bucket(bucket, BucketSpec("time", "tags", frozenset({"tags"}))))
    data: dict = {}
    for i, m in enumerate(rows):
        for k, v in m.items():
            data.setdefault(k, {})[str(i)] = v
    control = {**bucket["control"], "version": 1}
    control.pop("count", None)
    out = {"_id": bucket["_id"], "control": control, "data": data}
    if "meta" in bucket:
        out["meta"] = bucket["meta"]
    return out


def build_buckets(seed: int, kinds: list[str], *, batches: int = 4, per_batch: int = 150,
                  v1_every: int = 0) -> list[dict]:
    """Buckets as stored after `batches` insert batches, in insertion order."""
    rnd = random.Random(seed)
    catalog = BucketCatalog(TimeseriesParameters(timeseriesBucketMaxCount=40))
    stored: dict = {}
    for b in range(batches):
        # odd batches go back into the last hour: buckets appended out of order become v3
        docs = _measurements(rnd, per_batch, kinds, T0, 3 * HOUR) if b % 2 == 0 else \
            _measurements(rnd, per_batch // 4, kinds, T0 + 2 * HOUR + 30 * MIN, 30 * MIN)
        result = catalog.insert_batch("db.c", OPTS, docs, None, ordered=True)
        assert not result.errors
        for w in result.writes:
            stored[w.bucket_id] = w.document
        catalog.commit(result)
    buckets = [decode(d) for d in stored.values()]
    if v1_every:
        buckets = [_to_v1(bk) if i % v1_every == 0 else bk for i, bk in enumerate(buckets)]
    return buckets


def generic(stages: list, buckets: list[dict]) -> list[bytes]:
    ms = [m for bk in buckets for m in unpack_bucket(bk, BucketSpec("time", "tags"))]
    return [encode(d) for d in compile_pipeline(stages, PipelineContext()).run(ms)]


def columnar(stages: list, buckets: list[dict]) -> list[bytes] | None:
    ctx = PipelineContext()
    plan = plan_group(stages, OPTS, ctx)
    assert plan is not None, "shape should be supported"
    docs = group_buckets(plan, buckets, variables={}, memory_limit=LIMIT)
    if docs is None:
        return None
    return [encode(d) for d in compile_pipeline(plan.rest, ctx).run(docs)]


def _trunc(unit: str, **kw) -> dict:
    return {"$dateTrunc": {"date": "$time", "unit": unit, **kw}}


IDS = [
    None, "x", "$tags", "$tags.h", "$tags.dc", "$tags.nope",
    _trunc("minute"), _trunc("minute", binSize=7), _trunc("hour"), _trunc("day"),
    _trunc("second", binSize=Int64(90)), _trunc("millisecond", binSize=250),
    {"h": "$tags.h", "t": _trunc("minute", binSize=15)}, {"h": "$tags.nope"},
    {"a": "$tags.nope", "t": _trunc("hour")}, {"k": 1, "m": {"dc": "$tags.dc"}},
    {"$dateToString": {"date": "$time"}},
    {"h": "$tags.h", "d": {"$dateToString": {"date": "$time", "format": "%Y/%m/%d %H:%M",
                                               "timezone": "UTC"}}},
]

MATCHES = [
    None, {},
    {"time": {"$gte": DatetimeMS(T0 + 20 * MIN), "$lt": DatetimeMS(T0 + 150 * MIN)}},
    {"tags.h": "a"},
    {"tags.dc": {"$in": [1, 3]}, "time": {"$gt": DatetimeMS(T0 + 30 * MIN)}},
    {"$and": [{"tags": {"$exists": False}}, {"time": {"$lte": DatetimeMS(T0 + 2 * HOUR)}}]},
    {"time": {"$gte": DatetimeMS(T0 + 10 * HOUR)}},  # nothing matches
]


def _accs(fields: list[str]) -> dict:
    out: dict = {"n": {"$count": {}}, "one": {"$sum": 1}, "half": {"$sum": 0.5},
                 "cl": {"$avg": Int64(3)}, "nil": {"$sum": "x"}, "tmin": {"$min": "$time"},
                 "tlast": {"$last": "$time"}}
    for f in fields:
        for op in ("$sum", "$avg", "$min", "$max", "$first", "$last", "$stdDevPop",
                   "$stdDevSamp"):
            out[f"{f}_{op[1:]}"] = {op: f"${f}"}
    out["absent"] = {"$max": "$nosuchfield"}
    return out


@pytest.fixture(scope="module")
def data() -> dict[int, list[dict]]:
    return {seed: build_buckets(seed, KINDS, v1_every=3 if seed % 2 else 0)
            for seed in range(4)}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gid", IDS, ids=[str(i) for i in range(len(IDS))])
def test_same_as_generic_by_id(data, seed, gid):
    stages = [{"$match": MATCHES[2]} if seed % 2 else {"$match": {}},
              {"$group": {"_id": gid, **_accs(KINDS)}}]
    fast = columnar(stages, data[seed])
    assert fast is not None
    assert fast == generic(stages, data[seed])


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("match", MATCHES, ids=[str(i) for i in range(len(MATCHES))])
def test_same_as_generic_by_match(data, seed, match):
    head = [] if match is None else [{"$match": match}]
    stages = [*head, {"$group": {"_id": {"h": "$tags.h", "t": _trunc("hour")},
                                 **_accs(["d", "i64"])}}, {"$sort": {"d_max": -1}}]
    fast = columnar(stages, data[seed])
    assert fast is not None
    assert fast == generic(stages, data[seed])


@pytest.mark.parametrize("rest", [
    [{"$sort": {"_id": 1}}],
    [{"$match": {"m": {"$gt": 50}}}],
    [{"$project": {"_id": 0, "m": 1}}, {"$limit": 2}],
])
def test_rest_of_pipeline(data, rest):
    stages = [{"$group": {"_id": "$tags.h", "m": {"$max": "$d"}}}, *rest]
    assert columnar(stages, data[1]) == generic(stages, data[1])


def test_sum_overflows_like_generic():
    # int32 sums widen to int64, int64 sums past 2**63 become doubles
    buckets = build_buckets(7, ["i32", "i64"], batches=2, per_batch=200)
    stages = [{"$group": {"_id": None, "a": {"$sum": "$i32"}, "b": {"$sum": "$i64"},
                          "c": {"$avg": "$i64"}}}]
    fast = columnar(stages, buckets)
    assert fast == generic(stages, buckets)
    doc = decode(fast[0])
    assert type(doc["a"]) is Int64 and type(doc["b"]) is float


def test_many_groups_and_long_groups_sum_the_same():
    # long groups take the scalar summation, many short ones the vectorized one
    buckets = build_buckets(11, ["d"], batches=6, per_batch=300)
    for gid in (None, _trunc("second")):
        stages = [{"$group": {"_id": gid, "s": {"$sum": "$d"}, "a": {"$avg": "$d"}}}]
        assert columnar(stages, buckets) == generic(stages, buckets)


def test_chunks_fold_like_one_pass(monkeypatch):
    import query.timeseries.columnar_group as tg

    buckets = build_buckets(3, KINDS, batches=3)
    stages = [{"$group": {"_id": "$tags.h", **_accs(KINDS)}}]
    whole = columnar(stages, buckets)
    monkeypatch.setattr(tg, "_CHUNK_ROWS", 50)
    assert columnar(stages, buckets) == whole == generic(stages, buckets)


@pytest.mark.parametrize("stages", [
    [{"$group": {"_id": None, "p": {"$push": "$d"}}}],
    [{"$group": {"_id": None, "s": {"$stdDevPop": 5}}}],
    [{"$group": {"_id": _trunc("hour", timezone="Europe/Paris"), "m": {"$max": "$d"}}}],
    [{"$group": {"_id": _trunc("week"), "m": {"$max": "$d"}}}],
    # strings that do not name bins one to one, or not in UTC
    [{"$group": {"_id": {"$dateToString": {"date": "$time", "format": "%H:%M"}}}}],
    [{"$group": {"_id": {"$dateToString": {"date": "$time", "format": "%d/%m/%Y"}}}}],
    [{"$group": {"_id": {"$dateToString": {"date": "$time", "format": "%Y-%m-%d %%"}}}}],
    [{"$group": {"_id": {"$dateToString": {"date": "$time", "timezone": "+01:00"}}}}],
    [{"$group": {"_id": "$time", "m": {"$max": "$d"}}}],
    [{"$group": {"_id": "$d", "m": {"$max": "$d"}}}],
    [{"$group": {"_id": None, "m": {"$max": "$tags.dc"}}}],
    [{"$group": {"_id": None, "m": {"$max": {"$add": ["$d", 1]}}}}],
    [{"$match": {"d": {"$gt": "5"}}}, {"$group": {"_id": None, "m": {"$max": "$d"}}}],
    [{"$match": {"d": {"$gt": math.nan}}}, {"$group": {"_id": None, "m": {"$max": "$d"}}}],
    [{"$match": {"d": {"$exists": True}}}, {"$group": {"_id": None, "m": {"$max": "$d"}}}],
    [{"$match": {"$or": [{"tags.h": "a"}, {"tags.h": "b"}]}},
     {"$group": {"_id": None, "m": {"$max": "$d"}}}],
    [{"$sort": {"time": 1}}, {"$group": {"_id": None, "m": {"$first": "$d"}}}],
    [{"$match": {"time": {"$in": [DatetimeMS(T0)]}}},
     {"$group": {"_id": None, "m": {"$max": "$d"}}}],
])
def test_unsupported_shapes_decline(stages):
    assert plan_group(stages, OPTS, PipelineContext()) is None


def test_row_comparisons_are_left_to_block_processing():
    buckets = build_buckets(5, ["d"], batches=1)
    stages = [{"$match": {"d": {"$gt": 5}}}, {"$group": {"_id": None, "m": {"$max": "$d"}}}]
    plan = plan_group(stages, OPTS, PipelineContext())
    assert plan is not None and plan.row_preds == [("d", "$gt", 5)]
    assert group_buckets(plan, buckets, variables={}, memory_limit=LIMIT) is None


@pytest.mark.parametrize("field", ["s", "big"])
def test_unsupported_data_declines(field):
    buckets = build_buckets(5, ["d", field], batches=1)
    stages = [{"$group": {"_id": "$tags.h", "m": {"$max": f"${field}"}}}]
    plan = plan_group(stages, OPTS, PipelineContext())
    assert plan is not None
    assert group_buckets(plan, buckets, variables={}, memory_limit=LIMIT) is None


def test_too_many_groups_declines():
    buckets = build_buckets(5, ["d"], batches=1)
    stages = [{"$group": {"_id": _trunc("millisecond"), "m": {"$max": "$d"}}}]
    plan = plan_group(stages, OPTS, PipelineContext())
    assert group_buckets(plan, buckets, variables={}, memory_limit=10_000) is None
    assert group_buckets(plan, buckets, variables={}, memory_limit=LIMIT) is not None


def test_min_max_ties_keep_the_first_value():
    # 5 and 5.0 (and NaN beside numbers): the generic accumulator keeps the first seen
    buckets = build_buckets(2, ["mix", "d"], batches=2)
    stages = [{"$group": {"_id": {"$dateTrunc": {"date": "$time", "unit": "minute"}},
                          "a": {"$max": "$mix"}, "b": {"$min": "$mix"}, "c": {"$min": "$d"},
                          "e": {"$max": "$d"}}}]
    fast = columnar(stages, buckets)
    assert fast == generic(stages, buckets)
    types = {type(decode(d)["a"]) for d in fast}
    assert len(types) > 1  # mixed result types were exercised


def test_v1_buckets_are_read():
    buckets = build_buckets(1, ["d", "i32"], batches=1, v1_every=1)
    assert all(bk["control"]["version"] == 1 for bk in buckets)
    stages = [{"$group": {"_id": "$tags.h", "s": {"$sum": "$i32"}, "m": {"$min": "$d"}}}]
    assert columnar(stages, buckets) == generic(stages, buckets)


def test_v3_buckets_are_exercised(data):
    assert any(bk["control"]["version"] == 3 for bk in data[0])
    assert any(bk["control"]["version"] == 1 for bk in data[1])


def test_empty_input_gives_no_groups():
    stages = [{"$group": {"_id": None, "n": {"$count": {}}}}]
    assert columnar(stages, []) == generic(stages, []) == []


def test_compensated_summation_matches_scalar():
    from query.timeseries.columnar_group import _add_doubles, _compensated

    class St:
        fsum = 0.0
        fcomp = 0.0
        count = 0

    rnd = np.random.default_rng(3)
    vals = rnd.normal(0, 1e10, 500) * rnd.choice([1.0, 1e-10, 1e15], 500)
    starts = np.array([0, 100, 101, 400])
    counts = np.array([100, 1, 299, 100])
    s = np.zeros(4)
    c = np.zeros(4)
    _compensated(vals, starts, counts, s, c)
    for k in range(4):
        st = St()
        _add_doubles(st, vals[starts[k]:starts[k] + counts[k]].tolist())
        assert (st.fsum, st.fcomp) == (s[k], c[k])


@pytest.mark.parametrize("op", ["$gt", "$gte", "$lt", "$lte", "$eq"])
def test_time_conditions_at_bucket_edges(data, op):
    # cuts at, just after and inside bucket bounds: rows are filtered one by one, or whole
    # buckets pass on their control.min/max
    buckets = data[0]
    ms = [m for bk in buckets for m in unpack_bucket(bk, BucketSpec("time", "tags"))]
    edges = sorted({int(bk["control"][k]["time"]) for bk in buckets for k in ("min", "max")})
    rnd = random.Random(op)
    cuts = [c + d for c in rnd.sample(edges, 6) for d in (0, 1, -1)]
    ctx = PipelineContext()
    for cut in cuts:
        stages = [{"$match": {"time": {op: DatetimeMS(cut)}}},
                  {"$group": {"_id": _trunc("hour"), "n": {"$count": {}}, "m": {"$max": "$d"}}}]
        expected = [encode(d) for d in compile_pipeline(stages, ctx).run(ms)]
        assert columnar(stages, buckets) == expected, cut


@pytest.mark.parametrize("op", ["$gt", "$gte", "$lt", "$lte", "$eq"])
def test_time_conditions_on_rows_at_the_bounds(op):
    # the first row sits on control.min (a whole minute), the last on control.max
    catalog = BucketCatalog(TimeseriesParameters())
    docs = [{"time": DatetimeMS(T0 + k * 10_000), "tags": {"h": "a"}, "d": float(k)}
            for k in range(30)]
    result = catalog.insert_batch("db.c", OPTS, docs, None)
    buckets = [decode(w.document) for w in result.writes]
    assert len(buckets) == 1
    for cut in (T0, T0 + 290_000):
        stages = [{"$match": {"time": {op: DatetimeMS(cut)}}},
                  {"$group": {"_id": "$tags.h", "n": {"$count": {}}, "s": {"$sum": "$d"}}}]
        assert columnar(stages, buckets) == generic(stages, buckets), cut

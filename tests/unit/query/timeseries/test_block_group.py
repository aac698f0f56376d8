"""Block processing (the native core's `$group` fold) against the generic pipeline.

Differential: hypothesis generates measurements (types mixed within a field, missing
fields, nulls, NaN and infinities, int32/int64/double/decimal/bool/date, times before
1970) that go through the real bucket catalog (v2 buckets, v3 when a later batch goes
back in time), and pipelines of the supported shapes; the stored buckets' bytes go
through `group_raw` and the decoded buckets through the generic pipeline: the results
must be the same BSON bytes (value and type). Block processing may decline only where
the data hold what it leaves to Python (a decimal, NaN in a filtered field).
"""

from __future__ import annotations

import gc
import itertools
import math

import pytest
from bson import Decimal128, Int64
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from query.context import PipelineContext
from query.pipeline import compile_pipeline
from query.timeseries.block_group import _core_group, group_raw
from query.timeseries.columnar_group import _Groups, plan_group
from query.timeseries.group_order import fused_sort
from query.timeseries.scan import MetaGate
from storage import native
from storage.bsonutil import decode, encode
from storage.timeseries import BucketCatalog
from storage.timeseries.constants import TimeseriesParameters
from tests.unit.query.timeseries.test_columnar_group import (
    IDS,
    LIMIT,
    MATCHES,
    METAS,
    OPTS,
    T0,
    _to_v1,
    generic,
)

pytestmark = pytest.mark.skipif(not native.AVAILABLE, reason="the native core is not built")

HOUR = 3_600_000
FIELDS = ["a", "b"]


def stored(batches: list[list[dict]], max_count: int = 7) -> list[bytes]:
    """The buckets' bytes as stored after inserting `batches`, in insertion order."""
    catalog = BucketCatalog(TimeseriesParameters(timeseriesBucketMaxCount=max_count))
    out: dict = {}
    for docs in batches:
        result = catalog.insert_batch("db.c", OPTS, docs, None, ordered=True)
        assert not result.errors
        for w in result.writes:
            out[w.bucket_id] = w.document
        catalog.commit(result)
    return list(out.values())


def native_group(stages: list, raws: list[bytes], batch: int = 3) -> list[bytes] | None:
    """As the columnar path runs block processing: a leading `$sort` fused when it can be."""
    ctx = PipelineContext()
    plan = plan_group(stages, OPTS, ctx)
    assert plan is not None, "shape should be supported"
    sort = fused_sort(plan.group.spec["_id"], plan.rest, None)
    docs = group_raw([raws[i:i + batch] for i in range(0, len(raws), batch)], plan,
                     _Groups(plan, {}, LIMIT), {}, sort)
    if docs is None:
        return None
    rest = plan.rest[1:] if sort is not None else plan.rest
    return [encode(d) for d in compile_pipeline(rest, ctx).run(docs)]


# ---------------------------------------------------------------- generated data

values = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Int64),
    st.integers(-5, 5).map(Int64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, -0.0, 1e16, 2.0**53 + 2, 3.0]),
    st.booleans(),
    st.none(),
    st.integers(-(2**40), 2**40).map(DatetimeMS),
    st.sampled_from([Decimal128("1.5"), Decimal128("NaN")]),
)


@st.composite
def measurement(draw: st.DrawFn, base: int) -> dict:
    m: dict = {"time": DatetimeMS(base + draw(st.integers(0, 3 * HOUR)))}
    meta = draw(st.sampled_from(METAS))
    if meta is not None:
        m["tags"] = meta
    for f in FIELDS:
        if draw(st.booleans()):
            m[f] = draw(values)
    return m


@st.composite
def dataset(draw: st.DrawFn) -> list[list[dict]]:
    base = draw(st.sampled_from([T0, -10 * 365 * 86_400_000]))  # 2024, 1960
    first = draw(st.lists(measurement(base), max_size=40))
    late = draw(st.lists(measurement(base), max_size=10))  # back in time: v3 buckets
    return [first, late]


numbers = st.one_of(st.integers(-10, 10), st.integers(-10, 10).map(Int64),
                    st.floats(-10, 10, allow_nan=False))
comparisons = st.dictionaries(st.sampled_from(["$gt", "$gte", "$lt", "$lte", "$eq"]),
                              numbers, min_size=1)
row_match = st.one_of(
    st.fixed_dictionaries({FIELDS[0]: st.one_of(
        comparisons, st.fixed_dictionaries({"$in": st.lists(numbers, max_size=4)}))}),
    st.fixed_dictionaries({"$or": st.lists(
        st.dictionaries(st.sampled_from(FIELDS), comparisons, min_size=1),
        min_size=1, max_size=3)}))
accumulator = st.one_of(
    st.builds(lambda op, arg: {op: arg},
              st.sampled_from(["$sum", "$avg", "$min", "$max", "$first", "$last",
                               "$stdDevPop", "$stdDevSamp"]),
              st.sampled_from(["$a", "$b", "$time", "$nope"])),
    st.builds(lambda op, arg: {op: arg}, st.sampled_from(["$sum", "$avg"]),
              st.sampled_from([1, Int64(2), 0.5, None, "x", True])),
    st.just({"$count": {}}),
    st.builds(lambda op, key, d, out, n: {op: {"sortBy": {key: d}, "output": out,
                                                **({"n": n} if op.endswith("N") else {})}},
              st.sampled_from(["$top", "$bottom", "$topN", "$bottomN"]),
              st.sampled_from(["a", "b", "time", "nope"]), st.sampled_from([1, -1]),
              st.sampled_from(["$a", "$time", ["$b", "$a"], ["$nope"]]),
              st.integers(1, 4)))
accumulators = st.dictionaries(st.sampled_from(["p", "q", "r", "s", "t"]), accumulator,
                               min_size=1, max_size=4)


@st.composite
def pipeline(draw: st.DrawFn) -> list:
    match = draw(st.one_of(st.sampled_from(MATCHES), row_match))
    stages: list = [{"$match": match}] if match is not None else []
    stages.append({"$group": {"_id": draw(st.sampled_from(IDS + NESTED_IDS)),
                              **draw(accumulators)}})
    if draw(st.booleans()):
        stages.append({"$sort": draw(st.sampled_from(SORTS))})
        if draw(st.booleans()):
            stages.append({"$limit": draw(st.integers(1, 5))})
    return stages


# a bin inside a document of the _id, and the bin twice
NESTED_IDS = [{"m": {"h": "$tags.h", "t": {"$dateTrunc": {"date": "$time", "unit": "hour"}}}},
              {"t": {"$dateTrunc": {"date": "$time", "unit": "minute"}}, "h": "$tags.h",
               "d": {"$dateTrunc": {"date": "$time", "unit": "minute"}}},
              {"t": {"$dateTrunc": {"date": "$time", "unit": "hour"}},
               "s": {"$dateToString": {"date": "$time", "format": "%Y-%m-%dT%H"}}}]

# fused into the fold where each key reaches the bin or a per-meta part of the _id
SORTS = [{"_id": 1}, {"_id": -1}, {"_id.h": -1, "_id.t": 1}, {"_id.t": -1, "_id.h": 1},
         {"_id.m.t": -1, "_id.m.h": 1}, {"_id.m.h": -1}, {"_id.s": 1, "_id.t": -1},
         {"_id.d": -1},
         {"_id.m.dc": -1}, {"_id.a": 1, "_id.t": -1}, {"_id.k": 1}, {"_id.nope": 1},
         {"p": 1, "_id": 1}]


def _may_decline(stages: list, batches: list[list[dict]]) -> bool:
    """Whether the data hold what block processing leaves to Python."""
    match = stages[0].get("$match") or {} if "$match" in stages[0] else {}
    branches = [match, *match.get("$or", [])]
    filtered = {f for f in FIELDS if any(f in b for b in branches)}
    for docs in batches:
        for m in docs:
            for f in FIELDS:
                v = m.get(f)
                if type(v) is Decimal128:
                    return True
                if f in filtered and type(v) is float and math.isnan(v):
                    return True
    return False


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dataset(), pipeline())
def test_same_as_generic(batches: list[list[dict]], stages: list) -> None:
    raws = stored(batches)
    fast = native_group(stages, raws)
    event("declined" if fast is None else "answered")
    if fast is None:
        assert _may_decline(stages, batches)
        return
    assert fast == generic(stages, [decode(r) for r in raws])


# ---------------------------------------------------------------- fixed cases

def _tsbs(n: int) -> list[list[dict]]:
    docs = [{"time": DatetimeMS(T0 + 10_000 * (i // 3)), "tags": {"h": f"h{i % 3}"},
             "u": Int64(i % 97), "v": (i % 89) / 4} for i in range(n)]
    return [docs]


def test_tsbs_shapes_are_answered_and_equal() -> None:
    raws = stored(_tsbs(3000), max_count=100)
    t = DatetimeMS(T0 + 600_000)
    shapes = [
        [{"$match": {"tags.h": "h1", "time": {"$gte": t}}},
         {"$group": {"_id": {"$dateTrunc": {"date": "$time", "unit": "minute"}},
                     "m": {"$max": "$u"}}}, {"$sort": {"_id": 1}}],
        [{"$match": {"time": {"$gte": t}}},
         {"$group": {"_id": {"h": "$tags.h",
                             "t": {"$dateTrunc": {"date": "$time", "unit": "hour"}}},
                     "mean": {"$avg": "$v"}, "n": {"$count": {}}}}],
        [{"$match": {"u": {"$gt": 90}, "v": {"$lte": 20.5}}},
         {"$group": {"_id": "$tags.h", "first": {"$first": "$time"},
                     "last": {"$last": "$u"}, "s": {"$sum": "$v"}}}],
    ]
    for stages in shapes:
        fast = native_group(stages, raws, batch=5)
        assert fast is not None
        assert fast == generic(stages, [decode(r) for r in raws])
        assert fast  # the shapes select rows: the comparison is not of empty results


def test_top_and_bottom_keep_the_generic_rows() -> None:
    # u repeats every 97 rows: ties on the sort key, broken by arrival
    raws = stored(_tsbs(1200), max_count=50)
    for d in (1, -1):
        accs = {"t": {"$top": {"sortBy": {"u": d}, "output": ["$time", "$v"]}},
                "b": {"$bottom": {"sortBy": {"u": d}, "output": "$time"}},
                "tn": {"$topN": {"n": 3, "sortBy": {"v": d}, "output": "$time"}},
                "bn": {"$bottomN": {"n": 4, "sortBy": {"time": d}, "output": ["$u"]}}}
        for gid in ("$tags.h", {"$dateTrunc": {"date": "$time", "unit": "hour"}}):
            stages = [{"$group": {"_id": gid, **accs}}]
            fast = native_group(stages, raws, batch=4)
            assert fast is not None
            assert fast == generic(stages, [decode(r) for r in raws])


def test_batches_fold_like_one_pass() -> None:
    raws = stored(_tsbs(600), max_count=10)
    stages = [{"$group": {"_id": "$tags.h", "s": {"$sum": "$v"}, "f": {"$first": "$u"}}}]
    assert native_group(stages, raws, batch=1) == native_group(stages, raws, batch=1000)


@pytest.mark.parametrize("what", ["decimal", "string", "v1", "nan filter"])
def test_declines(what: str) -> None:
    docs = _tsbs(30)[0]
    stages = [{"$group": {"_id": None, "m": {"$max": "$u"}}}]
    if what == "decimal":
        docs[4]["u"] = Decimal128("2")
    elif what == "string":
        docs[4]["u"] = "2"
    elif what == "nan filter":
        docs[4]["u"] = math.nan
        stages = [{"$match": {"u": {"$lt": 3}}}, *stages]
    raws = stored([docs], max_count=100)
    if what == "v1":
        raws = [encode(_to_v1(decode(raws[0])))]
    assert native_group(stages, raws) is None


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_decline_in_any_batch_declines_the_whole_fold(where: str) -> None:
    # a batch is folded while the next is read: its decline surfaces a call later
    docs = _tsbs(300)[0]
    docs[{"first": 0, "middle": 150, "last": -1}[where]]["u"] = Decimal128("2")
    raws = stored([docs], max_count=10)
    assert len(raws) > 10
    stages = [{"$group": {"_id": "$tags.h", "m": {"$max": "$u"}}}]
    assert native_group(stages, raws, batch=2) is None


def test_a_fold_dropped_with_a_batch_in_flight_waits_for_it() -> None:
    raws = stored(_tsbs(3000), max_count=10)
    plan = plan_group([{"$group": {"_id": "$tags.h", "s": {"$sum": "$u"}}}], OPTS,
                      PipelineContext())
    assert plan is not None
    counter = itertools.count()

    def classify(_meta: bytes | None) -> int:
        return next(counter) % 3

    for _ in range(20):
        fold = _core_group(plan)
        batch = list(raws)
        fold.feed(batch, classify)
        del fold, batch  # the bytes outlive the pool's reading of them
        gc.collect()
    fold = _core_group(plan)
    fold.feed(raws, classify)
    assert sum(fold.groups_per_meta()) == 3  # one group a host, whatever the meta order


def test_too_many_groups_declines() -> None:
    raws = stored(_tsbs(300))
    stages = [{"$group": {"_id": {"$dateTrunc": {"date": "$time", "unit": "millisecond"}},
                          "n": {"$count": {}}}}]
    plan = plan_group(stages, OPTS, PipelineContext())
    assert plan is not None
    assert group_raw([raws], plan, _Groups(plan, {}, 2_000), {}) is None
    assert group_raw([raws], plan, _Groups(plan, {}, LIMIT), {}) is not None


def test_meta_gate_rejects_by_the_meta_conditions_alone() -> None:
    raws = stored(_tsbs(30), max_count=100)
    by_host = {decode(r)["meta"]["h"]: r for r in raws}
    gate = MetaGate({"$and": [{"meta.h": {"$in": ["h0", "h2"]}},
                              {"control.max.time": {"$gte": DatetimeMS(0)}}]})
    assert gate.active
    assert [gate.passes(by_host[h]) for h in ("h0", "h1", "h2")] == [True, False, True]
    assert len(gate.seen) == 3
    assert gate.passes(b"\x05\x00\x00\x00")  # malformed: left to the full path
    assert not MetaGate({"control.max.time": {"$gte": DatetimeMS(0)}}).active


@pytest.mark.parametrize(("id_spec", "sort", "fused"), [
    ("$tags.h", {"_id": -1}, True),
    ({"$dateTrunc": {"date": "$time", "unit": "minute"}}, {"_id": 1}, True),
    ({"h": "$tags.h", "t": {"$dateTrunc": {"date": "$time", "unit": "minute"}}},
     {"_id.h": 1, "_id.t": -1}, True),
    ({"h": "$tags.h", "t": {"$dateTrunc": {"date": "$time", "unit": "minute"}}},
     {"_id": 1}, False),  # the whole _id holds the bin and a per-meta part
    ({"t": {"$dateTrunc": {"date": "$time", "unit": "minute"}}}, {"_id.t.x": 1}, False),
    ("$tags.h", {"n": 1}, False),  # an accumulator's value
])
def test_which_sorts_are_fused(id_spec: object, sort: dict, fused: bool) -> None:
    stages = [{"$group": {"_id": id_spec, "n": {"$count": {}}}}, {"$sort": sort}]
    plan = plan_group(stages, OPTS, PipelineContext())
    assert plan is not None
    assert (fused_sort(plan.group.spec["_id"], plan.rest, None) is not None) is fused
    raws = stored(_tsbs(900), max_count=50)
    got = native_group(stages, raws)
    assert got is not None and len(got) > 2
    assert got == generic(stages, [decode(r) for r in raws])

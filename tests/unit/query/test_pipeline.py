"""Pipeline compilation: MongoDB's error codes for malformed stages, positional rules,
explain output, stage registration, and the memory limit / spill behaviour of $group, $sort
and $setWindowFields."""

from __future__ import annotations

import random
from typing import Any

import pytest
from bson import Int64
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from query.context import PipelineContext
from query.pipeline import compile_pipeline, resolve_let_variables
from query.stages import Stage, register_stage
from storage.errors import MongoError

pytest.importorskip("query.sort", reason="needs the query.sort module (query-match branch)")


def run(stages: Any, docs: list[dict], ctx: PipelineContext | None = None) -> list[dict]:
    return list(compile_pipeline(stages, ctx).run(docs))


BAD = [
    # Pipeline shape (aggregate command / Pipeline::parse)
    ("not a list", 14), ([1], 14), ([{}], 40323), ([{"$match": {}, "$limit": 1}], 40323),
    ([{"$foo": {}}], 40324),
    ([{"$limit": 1}, {"$documents": []}], 40602), ([{"$out": "x"}, {"$limit": 1}], 40601),
    ([{"$facet": {"a": [{"$out": "x"}]}}], 40600),
    ([{"$lookup": {"from": "x", "pipeline": [{"$merge": "y"}], "as": "a"}}], 51047),
    ([{"$unionWith": {"coll": "x", "pipeline": [{"$out": "y"}]}}], 31441),
    # $match, $project, $addFields, $set, $unset
    ([{"$match": 1}], 15959), ([{"$project": 1}], 15969), ([{"$project": {}}], 51272),
    ([{"$addFields": 1}], 40272), ([{"$set": []}], 40272), ([{"$addFields": {"$a": 1}}], 16410),
    ([{"$addFields": {"a": 1, "a.b": 1}}], 31250), ([{"$unset": 1}], 31002),
    ([{"$unset": []}], 31119), ([{"$unset": [1]}], 31120),
    # $limit, $skip, $count, $sample
    ([{"$limit": 0}], 15958), ([{"$limit": -1}], 5107201), ([{"$limit": "a"}], 5107201),
    ([{"$limit": 1.5}], 5107201), ([{"$skip": -1}], 5107200), ([{"$skip": "a"}], 5107200),
    ([{"$count": 1}], 40156), ([{"$count": ""}], 40157), ([{"$count": "$a"}], 40158),
    ([{"$count": "a.b"}], 40160), ([{"$sample": 1}], 28745), ([{"$sample": {}}], 28749),
    ([{"$sample": {"size": "a"}}], 28746), ([{"$sample": {"size": -1}}], 28747),
    ([{"$sample": {"size": 1, "x": 1}}], 28748),
    # $sort, $unwind, $sortByCount
    ([{"$sort": 1}], 15973), ([{"$sort": {}}], 15976), ([{"$unwind": 1}], 15981),
    ([{"$unwind": "a"}], 28818), ([{"$unwind": {}}], 28812), ([{"$unwind": {"path": 1}}], 28808),
    ([{"$unwind": {"path": "$a", "preserveNullAndEmptyArrays": 1}}], 28809),
    ([{"$unwind": {"path": "$a", "includeArrayIndex": "$i"}}], 28822),
    ([{"$unwind": {"path": "$a", "includeArrayIndex": 1}}], 28810),
    ([{"$unwind": {"path": "$a", "x": 1}}], 28811),
    ([{"$sortByCount": 1}], 40149), ([{"$sortByCount": "a"}], 40148),
    ([{"$sortByCount": {"a": 1}}], 40147),
    # $group
    ([{"$group": 1}], 15947), ([{"$group": {}}], 15955),
    # $replaceRoot / $replaceWith
    ([{"$replaceRoot": 1}], 40229), ([{"$replaceRoot": {}}], 40231),
    ([{"$replaceRoot": {"newRoot": "$a", "x": 1}}], 40415),
    # $bucket / $bucketAuto
    ([{"$bucket": 1}], 40201), ([{"$bucket": {"groupBy": "$a"}}], 40198),
    ([{"$bucket": {"groupBy": "$a", "boundaries": 1}}], 40200),
    ([{"$bucket": {"groupBy": "$a", "boundaries": [1]}}], 40192),
    ([{"$bucket": {"groupBy": "$a", "boundaries": [1, "a"]}}], 40193),
    ([{"$bucket": {"groupBy": "$a", "boundaries": [2, 1]}}], 40194),
    ([{"$bucket": {"groupBy": "$a", "boundaries": [1, 2], "default": "$x"}}], 40195),
    ([{"$bucket": {"groupBy": "$a", "boundaries": [1, 3], "default": 2}}], 40199),
    ([{"$bucket": {"groupBy": "$a", "boundaries": [1, 2], "output": 1}}], 40196),
    ([{"$bucket": {"groupBy": "$a", "boundaries": [1, 2], "x": 1}}], 40197),
    ([{"$bucket": {"groupBy": "a", "boundaries": [1, 2]}}], 40202),
    ([{"$bucketAuto": 1}], 40240), ([{"$bucketAuto": {"groupBy": "$a"}}], 40246),
    ([{"$bucketAuto": {"groupBy": "$a", "buckets": "x"}}], 40241),
    ([{"$bucketAuto": {"groupBy": "$a", "buckets": 1.5}}], 40242),
    ([{"$bucketAuto": {"groupBy": "$a", "buckets": 0}}], 40243),
    ([{"$bucketAuto": {"groupBy": "$a", "buckets": 1, "output": 1}}], 40244),
    ([{"$bucketAuto": {"groupBy": "$a", "buckets": 1, "x": 1}}], 40245),
    ([{"$bucketAuto": {"groupBy": "$a", "buckets": 1, "granularity": "R7"}}], 40257),
    ([{"$bucketAuto": {"groupBy": "$a", "buckets": 1, "granularity": 1}}], 40261),
    ([{"$bucketAuto": {"groupBy": "a", "buckets": 1}}], 40239),
    # $facet
    ([{"$facet": {}}], 40169), ([{"$facet": {"a": 1}}], 40170), ([{"$facet": {"a": [1]}}], 40171),
    # $lookup / $unionWith
    ([{"$lookup": {"from": "x", "localField": "a", "foreignField": "b"}}], 9),
    ([{"$lookup": {"from": "x", "localField": "a", "as": "c"}}], 9),
    ([{"$lookup": {"from": "x", "as": "c"}}], 9),
    ([{"$lookup": {"from": "x", "as": "c", "pipeline": [], "foo": 1}}], 9),
    ([{"$lookup": {"from": 1, "localField": "a", "foreignField": "b", "as": "c"}}], 40321),
    ([{"$lookup": {"from": "x", "let": {"A": 1}, "pipeline": [], "as": "c"}}], 16867),
    ([{"$unionWith": 1}], 9), ([{"$unionWith": {"coll": "a", "x": 1}}], 40415),
    # $out / $merge
    ([{"$out": 1}], 16990), ([{"$out": {"db": "a"}}], 40414),
    ([{"$merge": {"on": "_id"}}], 40414), ([{"$merge": {"into": "a", "whenMatched": "x"}}], 2),
    ([{"$merge": {"into": "a", "whenNotMatched": "x"}}], 2),
    # $densify / $fill
    ([{"$densify": {"field": "a"}}], 40414),
    ([{"$densify": {"field": "a", "range": {"step": 0, "bounds": "full"}}}], 5733401),
    ([{"$densify": {"field": "a", "range": {"step": 1, "bounds": "x"}}}], 5946802),
    ([{"$densify": {"field": "a", "range": {"step": 1, "bounds": [1]}}}], 5733403),
    ([{"$densify": {"field": "a", "range": {"step": 1, "bounds": [1, DatetimeMS(0)]}}}],
     5733406),
    ([{"$densify": {"field": "a", "range": {"step": 1, "unit": "day", "bounds": [1, 2]}}}],
     5733409),
    ([{"$densify": {"field": "a", "range": {"step": 1,
                                            "bounds": [DatetimeMS(0), DatetimeMS(1)]}}}],
     5733410),
    ([{"$fill": 1}], 6315901), ([{"$fill": {"output": {}}}], 6050203),
    ([{"$fill": {"output": {"a": {"method": "x"}}}}], 6050202),
    ([{"$fill": {"output": {"a": {"value": 1, "method": "locf"}}}}], 6050200),
    ([{"$fill": {"partitionBy": "$a", "partitionByFields": ["a"],
                 "output": {"a": {"value": 1}}}}], 6050204),
    # $redact, refused and server-provided stages
    ([{"$geoNear": {}}], 238), ([{"$collStats": {}}], 238), ([{"$indexStats": 1}], 28803),
    ([{"$graphLookup": {}}], 238), ([{"$search": {}}], 238),
]


@pytest.mark.parametrize("stages,code", BAD, ids=[str(b[0])[:70] for b in BAD])
def test_malformed_pipelines(stages: Any, code: int) -> None:
    with pytest.raises(MongoError) as e:
        compile_pipeline(stages, PipelineContext())
    assert e.value.code == code, e.value


def test_error_messages_and_code_names() -> None:
    with pytest.raises(MongoError) as e:
        compile_pipeline([{"$foo": 1}])
    assert e.value.errmsg == "Unrecognized pipeline stage name: '$foo'"
    assert e.value.code_name == "Location40324"
    with pytest.raises(MongoError) as e:
        compile_pipeline([{"$group": {}}])
    assert e.value.errmsg == "a group specification must include an _id"
    with pytest.raises(MongoError) as e:
        compile_pipeline([{"$match": {}, "$sort": {}}])
    assert e.value.errmsg == "A pipeline stage specification object must contain exactly one " \
                             "field."


def test_explain_describes_stages() -> None:
    p = compile_pipeline([{"$match": {"a": 1}}, {"$sort": {"b": -1}}, {"$limit": 5},
                          {"$unwind": "$c"}, {"$sortByCount": "$c"}, {"$project": {"c": 1}}])
    assert p.explain() == [
        {"$match": {"a": 1}},
        {"$sort": {"sortKey": {"b": -1}, "limit": Int64(5)}},
        {"$unwind": {"path": "$c"}},
        {"$group": {"_id": "$c", "count": {"$sum": 1}}},
        {"$sort": {"sortKey": {"count": -1}}},
        {"$project": {"c": 1}}]


def test_sort_limit_coalescing_is_a_stable_top_k() -> None:
    docs = [{"k": i % 3, "i": i} for i in range(30)]
    out = run([{"$sort": {"k": 1}}, {"$limit": 4}], docs)
    assert [o["i"] for o in out] == [0, 3, 6, 9]


def test_register_external_stage() -> None:
    class Double(Stage):
        name = "$_testDouble"

        def __init__(self, spec: Any) -> None:
            self.spec = spec

        def run(self, docs: Any, env: Any) -> Any:
            for doc in docs:
                yield doc
                yield doc

    register_stage("$_testDouble", lambda spec, ctx: Double(spec), first_only=True)
    assert run([{"$_testDouble": {}}, {"$count": "n"}], [{"a": 1}]) == [{"n": 2}]
    with pytest.raises(MongoError) as e:
        compile_pipeline([{"$limit": 1}, {"$_testDouble": {}}])
    assert e.value.code == 40602


def test_variables_now_and_let() -> None:
    ctx = PipelineContext(now=DatetimeMS(1_000), variables={"target": 2})
    assert run([{"$match": {"$expr": {"$eq": ["$a", "$$target"]}}},
                {"$set": {"t": "$$NOW"}}], [{"a": 1}, {"a": 2}], ctx) == \
        [{"a": 2, "t": DatetimeMS(1_000)}]
    assert resolve_let_variables({"x": {"$add": [1, 2]}, "n": "$$NOW"}, ctx) == \
        {"x": 3, "n": DatetimeMS(1_000)}
    with pytest.raises(MongoError) as e:
        resolve_let_variables({"Bad": 1}, ctx)
    assert e.value.code == 16867


def test_provided_source_stages() -> None:
    ctx = PipelineContext(coll_stats=lambda spec: [{"ns": "db.c", "spec": spec}])
    assert run([{"$collStats": {"count": {}}}], [], ctx) == [{"ns": "db.c",
                                                              "spec": {"count": {}}}]


# ---------------------------------------------------------------- memory limit and spilling

def _docs(n: int, seed: int = 1) -> list[dict]:
    rnd = random.Random(seed)
    return [{"_id": i, "k": rnd.randrange(50), "v": rnd.random(), "pad": "x" * 50}
            for i in range(n)]


def test_sort_over_memory_limit_without_disk_use_fails_with_292() -> None:
    ctx = PipelineContext(memory_limit_bytes=20_000, allow_disk_use=False)
    with pytest.raises(MongoError) as e:
        run([{"$sort": {"v": 1}}], _docs(2000), ctx)
    assert e.value.code == 292 and e.value.code_name == "QueryExceededMemoryLimitNoDiskUseAllowed"
    assert e.value.errmsg == "Sort exceeded memory limit of 20000 bytes, but did not opt in to " \
                             "external sorting."


def test_sort_spills_and_matches_in_memory(tmp_path: Any) -> None:
    docs = _docs(3000)
    small = PipelineContext(memory_limit_bytes=20_000, allow_disk_use=True, temp_dir=str(tmp_path))
    spilled = run([{"$sort": {"k": 1, "v": -1}}], docs, small)
    in_memory = run([{"$sort": {"k": 1, "v": -1}}], docs)
    assert spilled == in_memory
    assert [(o["k"], -o["v"]) for o in spilled] == sorted((o["k"], -o["v"]) for o in docs)
    assert list(tmp_path.iterdir()) == []      # spill files are removed


def test_group_over_memory_limit_fails_or_spills(tmp_path: Any) -> None:
    docs = [{"k": i, "v": i % 7} for i in range(5000)]
    spec = [{"$group": {"_id": "$k", "s": {"$sum": "$v"}, "p": {"$push": "$v"}}}]
    with pytest.raises(MongoError) as e:
        run(spec, docs, PipelineContext(memory_limit_bytes=50_000))
    assert e.value.code == 292
    assert e.value.errmsg.startswith("Exceeded memory limit for $group")
    spilled = run(spec, docs, PipelineContext(memory_limit_bytes=50_000, allow_disk_use=True,
                                              temp_dir=str(tmp_path)))
    assert sorted(spilled, key=lambda o: o["_id"]) == \
        sorted(run(spec, docs), key=lambda o: o["_id"])
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=25, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 30), st.integers(-5, 5)), max_size=400),
       limit=st.integers(2_000, 20_000))
def test_spilled_group_equals_in_memory(rows: list, limit: int) -> None:
    docs = [{"k": k, "v": v, "_id": i} for i, (k, v) in enumerate(rows)]
    spec = [{"$group": {"_id": "$k", "s": {"$sum": "$v"}, "n": {"$count": {}},
                        "f": {"$first": "$_id"}}}]
    got = run(spec, docs, PipelineContext(memory_limit_bytes=limit, allow_disk_use=True))
    want = run(spec, docs)
    got_sorted = sorted(got, key=lambda o: o["_id"])
    want_sorted = sorted(want, key=lambda o: o["_id"])
    # $first is order-dependent: a spilled partition keeps input order within itself.
    assert [(o["_id"], o["s"], o["n"]) for o in got_sorted] == \
        [(o["_id"], o["s"], o["n"]) for o in want_sorted]


def test_set_window_fields_spills_its_sort(tmp_path: Any) -> None:
    docs = _docs(2000)
    spec = [{"$setWindowFields": {"partitionBy": "$k", "sortBy": {"v": 1},
                                  "output": {"r": {"$documentNumber": {}}}}}]
    small = PipelineContext(memory_limit_bytes=20_000, allow_disk_use=True,
                            temp_dir=str(tmp_path))
    assert run(spec, docs, small) == run(spec, docs)
    with pytest.raises(MongoError) as e:
        run(spec, docs, PipelineContext(memory_limit_bytes=20_000))
    assert e.value.code == 292


def test_streaming_stages_are_lazy() -> None:
    def endless() -> Any:
        i = 0
        while True:
            yield {"i": i}
            i += 1
    out = compile_pipeline([{"$match": {"i": {"$gte": 5}}}, {"$set": {"j": 1}}, {"$limit": 3}]
                           ).run(endless())
    assert [o["i"] for o in out] == [5, 6, 7]

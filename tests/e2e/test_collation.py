"""Collations through real clients: every read and write operation with a `collation`
(English case-insensitive, German phonebook, French backwards accents, numericOrdering,
alternate shifted), invalid collations refused with mongod's codes and nothing written,
and mongosh.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymongo
import pytest
from pymongo import DeleteMany, DeleteOne, InsertOne, UpdateMany, UpdateOne
from pymongo.collation import Collation
from pymongo.errors import BulkWriteError, OperationFailure

from .mongosh_util import run_mongosh
from .node_driver import run_node

CI = {"locale": "en", "strength": 2}          # case-insensitive
PHONEBOOK = {"locale": "de@collation=phonebook"}
NAMES = ["apple", "Apple", "APPLE", "banana", "Banana", "cherry"]


@pytest.fixture
def coll(client: pymongo.MongoClient, request: pytest.FixtureRequest) -> Iterator[Any]:
    c = client.collation_e2e[request.node.originalname[:60]]
    c.drop()
    c.insert_many([{"_id": i, "name": n, "n": i} for i, n in enumerate(NAMES)])
    yield c
    c.drop()


def _ids(docs: Any) -> list[Any]:
    return [d["_id"] for d in docs]


# --- reads ---------------------------------------------------------------------------------

def test_find_equality_and_ranges(coll: Any) -> None:
    assert _ids(coll.find({"name": "apple"}, sort=[("_id", 1)])) == [0]
    assert _ids(coll.find({"name": "apple"}, sort=[("_id", 1)], collation=CI)) == [0, 1, 2]
    assert _ids(coll.find({"name": {"$ne": "APPLE"}}, collation=CI).sort("_id")) == [3, 4, 5]
    assert _ids(coll.find({"name": {"$in": ["BANANA", "Cherry"]}}, collation=CI)
                .sort("_id")) == [3, 4, 5]
    assert _ids(coll.find({"name": {"$nin": ["BANANA", "Cherry"]}}, collation=CI)
                .sort("_id")) == [0, 1, 2]
    # simple order: "B..." < "a..."; case-insensitively "apple" < "BANANA" < "cherry"
    assert _ids(coll.find({"name": {"$lt": "BANANA"}}, collation=CI).sort("_id")) == [0, 1, 2]
    assert _ids(coll.find({"name": {"$lt": "BANANA"}}).sort("_id")) == [1, 2]
    assert _ids(coll.find({"name": {"$gte": "Banana", "$lte": "BANANA"}}, collation=CI)
                .sort("_id")) == [3, 4]
    assert _ids(coll.find({"name": {"$gt": "banana"}}, collation=CI)) == [5]


def test_find_sort_with_collation(client: pymongo.MongoClient) -> None:
    c = client.collation_e2e.sorting
    c.drop()
    c.insert_many([{"_id": i, "s": s} for i, s in enumerate(["b", "B", "a", "A", "c"])])
    assert [d["s"] for d in c.find(sort=[("s", 1)])] == ["A", "B", "a", "b", "c"]
    got = [d["s"] for d in c.find(sort=[("s", 1), ("_id", 1)],
                                  collation={"locale": "en", "caseFirst": "upper"})]
    assert got == ["A", "a", "B", "b", "c"]
    got = [d["s"] for d in c.find(sort=[("s", -1), ("_id", 1)], collation={"locale": "en"})]
    assert got == ["c", "B", "b", "A", "a"]
    c.drop()


def test_german_phonebook(client: pymongo.MongoClient) -> None:
    c = client.collation_e2e.phonebook
    c.drop()
    c.insert_many([{"_id": i, "w": w} for i, w in enumerate(["Affe", "Ärger", "Alpha", "Bär"])])
    assert [d["w"] for d in c.find(sort=[("w", 1)], collation=PHONEBOOK)] == \
        ["Ärger", "Affe", "Alpha", "Bär"]
    assert [d["w"] for d in c.find(sort=[("w", 1)], collation={"locale": "de"})] == \
        ["Affe", "Alpha", "Ärger", "Bär"]
    # phonebook: Ä sorts as AE, before "Af"
    assert [d["w"] for d in c.find({"w": {"$lt": "Af"}}, collation=PHONEBOOK)] == ["Ärger"]
    c.drop()


def test_french_backwards_accents(client: pymongo.MongoClient) -> None:
    c = client.collation_e2e.french
    c.drop()
    words = ["cote", "côte", "coté", "côté"]
    c.insert_many([{"_id": i, "w": w} for i, w in enumerate(words)])
    assert [d["w"] for d in c.find(sort=[("w", 1)], collation={"locale": "fr"})] == \
        ["cote", "coté", "côte", "côté"]
    assert [d["w"] for d in c.find(sort=[("w", 1)], collation={"locale": "fr_CA"})] == \
        ["cote", "côte", "coté", "côté"]
    assert [d["w"] for d in c.find(sort=[("w", 1)],
                                   collation={"locale": "fr", "backwards": True})] == \
        ["cote", "côte", "coté", "côté"]
    c.drop()


def test_numeric_ordering_and_alternate_shifted(client: pymongo.MongoClient) -> None:
    c = client.collation_e2e.numeric
    c.drop()
    c.insert_many([{"_id": i, "v": v} for i, v in enumerate(["10", "9", "100", "2"])])
    num = {"locale": "en", "numericOrdering": True}
    assert [d["v"] for d in c.find(sort=[("v", 1)], collation=num)] == ["2", "9", "10", "100"]
    assert [d["v"] for d in c.find(sort=[("v", 1)])] == ["10", "100", "2", "9"]
    assert [d["v"] for d in c.find({"v": {"$gt": "9"}}, collation=num).sort("_id")] == \
        ["10", "100"]
    c.drop()
    c.insert_many([{"_id": 1, "v": "black-bird"}, {"_id": 2, "v": "black bird"},
                   {"_id": 3, "v": "blackbird"}])
    shifted = {"locale": "en", "alternate": "shifted"}
    assert _ids(c.find({"v": "blackbird"}, collation=shifted).sort("_id")) == [1, 2, 3]
    assert _ids(c.find({"v": "blackbird"},
                       collation={**shifted, "maxVariable": "space"}).sort("_id")) == [2, 3]
    assert _ids(c.find({"v": "blackbird"})) == [3]
    c.drop()


def test_count_and_distinct(coll: Any) -> None:
    assert coll.count_documents({"name": "apple"}) == 1
    assert coll.count_documents({"name": "apple"}, collation=CI) == 3
    db = coll.database
    assert db.command("count", coll.name, query={"name": "BANANA"}, collation=CI)["n"] == 2
    assert sorted(coll.distinct("name")) == sorted(NAMES)
    got = coll.distinct("name", collation=CI)
    assert got == ["apple", "banana", "cherry"]   # the first met of each, collation order
    assert coll.distinct("n", {"name": "APPLE"}, collation=CI) == [0, 1, 2]


def test_aggregate(coll: Any) -> None:
    pipe = [{"$match": {"name": "apple"}}, {"$count": "c"}]
    assert list(coll.aggregate(pipe)) == [{"c": 1}]
    assert list(coll.aggregate(pipe, collation=CI)) == [{"c": 3}]
    grouped = list(coll.aggregate([{"$sort": {"_id": 1}},
                                   {"$group": {"_id": "$name", "c": {"$sum": 1},
                                               "top": {"$max": "$name"}}},
                                   {"$sort": {"_id": 1}}], collation=CI))
    assert [(g["_id"], g["c"]) for g in grouped] == [("apple", 3), ("banana", 2), ("cherry", 1)]
    assert len(list(coll.aggregate([{"$group": {"_id": "$name"}}]))) == 6
    # expressions: $eq/$cmp/$in compare strings by the collation
    out = list(coll.aggregate([{"$match": {"_id": 1}},
                               {"$project": {"eq": {"$eq": ["$name", "APPLE"]},
                                             "cmp": {"$cmp": ["$name", "aPPLE"]},
                                             "in": {"$in": ["$name", ["APPLE"]]}}}],
                              collation=CI))
    assert out == [{"_id": 1, "eq": True, "cmp": 0, "in": True}]
    out = list(coll.aggregate([{"$match": {"_id": 1}},
                               {"$project": {"eq": {"$eq": ["$name", "APPLE"]}}}]))
    assert out == [{"_id": 1, "eq": False}]
    # $min/$max over strings that differ only in case: the first met wins ties
    mm = list(coll.aggregate([{"$match": {"name": "apple"}}, {"$sort": {"_id": 1}},
                              {"$group": {"_id": None, "mn": {"$min": "$name"}}}],
                             collation=CI))
    assert mm == [{"_id": None, "mn": "apple"}]


def test_array_and_set_expressions(coll: Any) -> None:
    proj = {"$project": {
        "idx": {"$indexOfArray": [["x", "APPLE"], "$name"]},
        "union": {"$setUnion": [["a", "A"], ["b"]]},
        "eq": {"$setEquals": [["a", "B"], ["A", "b"]]},
        "sorted": {"$sortArray": {"input": ["b", "A", "a", "C"], "sortBy": 1}}}}
    got = list(coll.aggregate([{"$match": {"_id": 0}}, proj], collation=CI))
    assert got == [{"_id": 0, "idx": 1, "union": ["a", "b"], "eq": True,
                    "sorted": ["A", "a", "b", "C"]}]
    got = list(coll.aggregate([{"$match": {"_id": 0}}, proj]))
    assert got == [{"_id": 0, "idx": -1, "union": ["A", "a", "b"], "eq": False,
                    "sorted": ["A", "C", "a", "b"]}]


def test_lookup_uses_the_collation(coll: Any) -> None:
    other = coll.database[coll.name + "_fruit"]
    other.drop()
    other.insert_many([{"_id": "x", "fruit": "APPLE"}, {"_id": "y", "fruit": "Cherry"}])
    pipe = [{"$lookup": {"from": coll.name, "localField": "fruit", "foreignField": "name",
                         "as": "m"}},
            {"$project": {"m": "$m._id"}}]
    got = list(other.aggregate(pipe, collation=CI))
    assert got == [{"_id": "x", "m": [0, 1, 2]}, {"_id": "y", "m": [5]}]
    got = list(other.aggregate(pipe))
    assert got == [{"_id": "x", "m": [2]}, {"_id": "y", "m": []}]
    other.drop()


# --- writes --------------------------------------------------------------------------------

def test_update_and_delete(coll: Any) -> None:
    r = coll.update_many({"name": "APPLE"}, {"$set": {"hit": True}}, collation=CI)
    assert r.matched_count == 3
    assert coll.update_many({"name": "BANANA"}, {"$set": {"x": 1}}).matched_count == 0
    r = coll.delete_many({"name": "banana"}, collation=CI)
    assert r.deleted_count == 2
    assert coll.delete_one({"name": "CHERRY"}, collation=CI).deleted_count == 1
    assert coll.count_documents({}) == 3


def test_find_and_modify(coll: Any) -> None:
    doc = coll.find_one_and_update({"name": "BANANA"}, {"$set": {"seen": 1}},
                                   sort=[("_id", -1)], collation=CI)
    assert doc["_id"] == 4
    assert coll.find_one_and_update({"name": "BANANA"}, {"$set": {"seen": 1}}) is None
    doc = coll.find_one_and_delete({"name": "CHERRY"}, collation=CI)
    assert doc["_id"] == 5
    # the sort uses the collation too: case-insensitively equal names, then _id
    doc = coll.find_one_and_delete({}, sort=[("name", -1), ("_id", 1)], collation=CI)
    assert doc["_id"] == 3


def test_bulk_write_collection_level(coll: Any) -> None:
    r = coll.bulk_write([UpdateMany({"name": "APPLE"}, {"$set": {"k": 1}}, collation=CI),
                         DeleteOne({"name": "CHERRY"}, collation=CI),
                         DeleteMany({"name": "BANANA"})])
    assert (r.matched_count, r.deleted_count) == (3, 1)
    assert coll.count_documents({"k": 1}) == 3


def test_bulk_write_command(client: pymongo.MongoClient, coll: Any) -> None:
    if not hasattr(client, "bulk_write"):
        pytest.skip("pymongo without client.bulk_write")
    from pymongo import DeleteMany as CDeleteMany
    from pymongo import UpdateMany as CUpdateMany
    ns = coll.full_name
    r = client.bulk_write([CUpdateMany(namespace=ns, filter={"name": "APPLE"},
                                       update={"$set": {"k": 1}}, collation=CI),
                           CDeleteMany(namespace=ns, filter={"name": "banana"},
                                       collation=CI)])
    assert (r.matched_count, r.deleted_count) == (3, 2)


# --- refusals ------------------------------------------------------------------------------

@pytest.mark.parametrize(("collation", "code"), [
    ({"locale": "xx_NOPE"}, 2),
    ({"locale": "en", "strength": 9}, 51024),
    ({"locale": "en", "strength": 0}, 9),
    ({"locale": "en", "caseFirst": "sideways"}, 2),
    ({"locale": "en", "bogus": 1}, 40415),
    ({"locale": "en", "caseLevel": "yes"}, 14),
    ({"locale": "simple", "strength": 2}, 9),
    ({"strength": 2}, 40414),
])
def test_invalid_collations_write_nothing(coll: Any, collation: dict[str, Any],
                                          code: int) -> None:
    before = list(coll.find().sort("_id"))
    for op in (lambda: list(coll.find({}, collation=collation)),
               lambda: list(coll.aggregate([], collation=collation)),
               lambda: coll.count_documents({}, collation=collation),
               lambda: coll.distinct("name", collation=collation),
               lambda: coll.update_many({}, {"$set": {"z": 1}}, collation=collation),
               lambda: coll.delete_many({}, collation=collation),
               lambda: coll.find_one_and_delete({}, collation=collation)):
        with pytest.raises(OperationFailure) as e:
            op()
        assert e.value.code == code, e.value.details
    with pytest.raises(BulkWriteError) as be:
        coll.bulk_write([InsertOne({"_id": 99}),
                         UpdateOne({}, {"$set": {"z": 1}}, collation=collation)])
    assert be.value.details["writeErrors"][0]["code"] == code
    coll.delete_one({"_id": 99})
    assert list(coll.find().sort("_id")) == before


def test_invalid_locale_message(coll: Any) -> None:
    with pytest.raises(OperationFailure) as e:
        coll.find_one({}, collation={"locale": "EN"})
    assert e.value.code == 2
    assert "Field 'locale' is invalid in: { locale: \"EN\" }. Did you mean 'en'?" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        coll.database.command("find", coll.name, collation="en")
    assert e.value.code == 14


def test_simple_and_empty_collations_are_simple(coll: Any) -> None:
    assert coll.count_documents({"name": "apple"}, collation={"locale": "simple"}) == 1
    assert coll.database.command("count", coll.name, query={"name": "apple"},
                                 collation={})["n"] == 1


def test_pymongo_collation_object(coll: Any) -> None:
    c = Collation(locale="en", strength=1)
    assert coll.count_documents({"name": "ÀPPLE"}, collation=c) == 3


@pytest.mark.mongosh
def test_mongosh(uri: str, coll: Any) -> None:
    script = f"""
const c = db.getSiblingDB('collation_e2e').getCollection('{coll.name}');
const ci = {{locale: 'en', strength: 2}};
const found = c.find({{name: 'APPLE'}}).collation(ci).sort({{_id: 1}}).toArray().map(d => d._id);
const agg = c.aggregate([{{$group: {{_id: '$name'}}}}], {{collation: ci}}).toArray().length;
const upd = c.updateMany({{name: 'banana'}}, {{$set: {{b: 1}}}}, {{collation: ci}}).matchedCount;
let code = null;
try {{ c.find().collation({{locale: 'en', strength: 0}}).toArray(); }} catch (e) {{ code = e.code; }}
print(EJSON.stringify({{found, agg, upd, code}}));
"""
    result, _ = run_mongosh(uri, script)
    assert result == {"found": [0, 1, 2], "agg": 3, "upd": 2, "code": 9}


# --- collection default --------------------------------------------------------------------

NORMALISED_CI = {"locale": "en", "caseLevel": False, "caseFirst": "off", "strength": 2,
                 "numericOrdering": False, "alternate": "non-ignorable",
                 "maxVariable": "punct", "normalization": False, "backwards": False,
                 "version": "57.1"}


@pytest.fixture
def ci_coll(client: pymongo.MongoClient) -> Iterator[Any]:
    db = client.collation_e2e
    db.drop_collection("ci_default")
    c = db.create_collection("ci_default", collation=CI)
    c.insert_many([{"_id": i, "name": n} for i, n in enumerate(NAMES)])
    yield c
    db.drop_collection("ci_default")


def test_create_shows_normalised_default(ci_coll: Any) -> None:
    info = next(ci_coll.database.list_collections(filter={"name": "ci_default"}))
    assert info["options"] == {"collation": NORMALISED_CI}
    db = ci_coll.database
    db.drop_collection("plain_simple")
    db.create_collection("plain_simple", collation={"locale": "simple"})
    info = next(db.list_collections(filter={"name": "plain_simple"}))
    assert info["options"] == {}
    db.drop_collection("plain_simple")


def test_operations_use_the_default(ci_coll: Any) -> None:
    assert ci_coll.count_documents({"name": "APPLE"}) == 3
    assert _ids(ci_coll.find({"name": "banana"}).sort("_id")) == [3, 4]
    assert ci_coll.distinct("name") == ["apple", "banana", "cherry"]
    assert len(list(ci_coll.aggregate([{"$group": {"_id": "$name"}}]))) == 3
    # an explicit collation (here simple) replaces the default
    assert ci_coll.count_documents({"name": "APPLE"}, collation={"locale": "simple"}) == 1
    assert ci_coll.update_many({"name": "CHERRY"}, {"$set": {"c": 1}}).matched_count == 1
    assert ci_coll.delete_many({"name": "Banana"}).deleted_count == 2


@pytest.mark.parametrize(("body", "code"), [
    ({"collation": {"locale": "nope"}}, 2),
    ({"collation": {"locale": "en", "strength": 7}}, 51024),
    ({"collation": {"strength": 2}}, 40414),
    ({"collation": "en"}, 14),
    ({"collation": {"locale": "en", "x": 1}, "timeseries": {"timeField": "t"}}, 40415),
])
def test_create_refusals_create_nothing(client: pymongo.MongoClient, body: dict[str, Any],
                                        code: int) -> None:
    db = client.collation_e2e
    db.drop_collection("refused")
    with pytest.raises(OperationFailure) as e:
        db.command({"create": "refused", **body})
    assert e.value.code == code
    assert "refused" not in db.list_collection_names()


# --- indexes -------------------------------------------------------------------------------

def _stages(plan: dict[str, Any]) -> list[str]:
    out = []
    while plan:
        out.append(plan["stage"])
        plan = plan.get("inputStage")
    return out


def _winning(cursor: Any) -> list[str]:
    return _stages(cursor.explain()["queryPlanner"]["winningPlan"])


def test_collated_index_used_only_with_its_collation(coll: Any) -> None:
    coll.create_index("name", name="name_ci", collation=CI)
    spec = next(ix for ix in coll.list_indexes() if ix["name"] == "name_ci")
    assert spec["collation"] == NORMALISED_CI
    q = {"name": "APPLE"}
    assert "IXSCAN" in _winning(coll.find(q).collation(CI))
    assert _ids(coll.find(q).collation(CI).sort("_id")) == [0, 1, 2]
    assert "IXSCAN" not in _winning(coll.find(q))
    assert "IXSCAN" not in _winning(coll.find(q).collation({"locale": "fr"}))
    assert _ids(coll.find(q)) == [2]
    # ranges and $in over the collation keys
    assert _ids(coll.find({"name": {"$gte": "B", "$lt": "C"}}).collation(CI).sort("_id")) == \
        [3, 4]
    assert "IXSCAN" in _winning(coll.find({"name": {"$gte": "B", "$lt": "C"}}).collation(CI))
    assert _ids(coll.find({"name": {"$in": ["BANANA", "cherrY"]}}).collation(CI)
                .sort("_id")) == [3, 4, 5]
    # a regex is not collation-aware: the whole string range is scanned and filtered
    assert _ids(coll.find({"name": {"$regex": "^A"}}).collation(CI).sort("_id")) == [1, 2]
    # non-string values keep working through the collated index
    coll.insert_one({"_id": 10, "name": 7})
    assert _ids(coll.find({"name": 7}).collation(CI)) == [10]
    # the index gives the collation's order for a sort
    got = [d["name"] for d in coll.find({"name": {"$type": "string"}},
                                        sort=[("name", 1), ("_id", 1)]).collation(CI)]
    assert got == ["apple", "Apple", "APPLE", "banana", "Banana", "cherry"]
    # hinted, an index of another collation is scanned whole; results stay right
    assert _ids(coll.find(q).hint("name_ci")) == [2]
    assert "IXSCAN" in _winning(coll.find(q).hint("name_ci"))
    assert _ids(coll.find(q).hint("_id_").collation(CI).sort("_id")) == [0, 1, 2]
    # two indexes on one key with different collations may coexist
    coll.create_index("name", name="name_simple")
    assert "IXSCAN" in _winning(coll.find(q))
    assert _ids(coll.find(q)) == [2]


def test_unique_collated_index(coll: Any) -> None:
    coll.delete_many({"_id": {"$in": [1, 2, 4]}})
    coll.create_index("name", unique=True, name="u_ci", collation=CI)
    with pytest.raises(pymongo.errors.DuplicateKeyError):
        coll.insert_one({"_id": 20, "name": "APPLE"})
    assert coll.count_documents({"_id": 20}) == 0


def test_default_collation_indexes(ci_coll: Any) -> None:
    ci_coll.create_index("name")
    specs = {ix["name"]: ix for ix in ci_coll.list_indexes()}
    assert specs["_id_"]["collation"] == NORMALISED_CI
    assert specs["name_1"]["collation"] == NORMALISED_CI
    assert "IXSCAN" in _winning(ci_coll.find({"name": "APPLE"}))
    assert "IXSCAN" not in _winning(ci_coll.find({"name": "APPLE"})
                                    .collation({"locale": "simple"}))


def test_invalid_index_collation_creates_nothing(coll: Any) -> None:
    with pytest.raises(OperationFailure) as e:
        coll.create_index("name", collation={"locale": "en", "strength": 0})
    assert e.value.code == 9
    assert [ix["name"] for ix in coll.list_indexes()] == ["_id_"]


# --- views ---------------------------------------------------------------------------------

def test_views_have_their_own_default(coll: Any) -> None:
    db = coll.database
    for v in ("v_ci", "v_plain", "v_ci2", "v_bad"):
        db.drop_collection(v)
    db.command("create", "v_ci", viewOn=coll.name, pipeline=[], collation=CI)
    db.command("create", "v_plain", viewOn=coll.name, pipeline=[])
    info = {c["name"]: c for c in db.list_collections(filter={"type": "view"})}
    assert info["v_ci"]["options"] == {"viewOn": coll.name, "pipeline": [],
                                       "collation": NORMALISED_CI}
    assert "collation" not in info["v_plain"]["options"]
    assert db.v_ci.count_documents({"name": "APPLE"}) == 3
    assert _ids(db.v_ci.find({"name": "banana"}).sort("_id")) == [3, 4]
    assert db.v_ci.distinct("name") == ["apple", "banana", "cherry"]
    assert db.v_plain.count_documents({"name": "APPLE"}) == 1
    # the same collation may be repeated; another one is refused (167)
    assert db.v_ci.count_documents({"name": "APPLE"}, collation=CI) == 3
    for op in (lambda: db.v_ci.count_documents({}, collation={"locale": "simple"}),
               lambda: list(db.v_plain.find({}, collation=CI)),
               lambda: list(db.v_plain.aggregate([], collation=CI)),
               lambda: db.v_plain.distinct("name", collation=CI)):
        with pytest.raises(OperationFailure) as e:
            op()
        assert e.value.code == 167
    # a view on a view must have its collation
    with pytest.raises(OperationFailure) as e:
        db.command("create", "v_bad", viewOn="v_ci", pipeline=[])
    assert e.value.code == 167
    assert "has conflicting collation with view collation_e2e.v_ci" in str(e.value)
    db.command("create", "v_ci2", viewOn="v_ci", pipeline=[], collation=CI)
    assert db.v_ci2.count_documents({"name": "cherry"}) == 1
    # (system.views itself needs privileges no built-in role has under --auth)
    info = next(db.list_collections(filter={"name": "v_ci"}))
    assert info["options"]["collation"] == NORMALISED_CI
    # (viewOn with the pipeline: mongod requires both under --auth, as in the compose run)
    db.command("collMod", "v_ci", viewOn=coll.name, pipeline=[{"$match": {"n": {"$gte": 0}}}])
    info = next(db.list_collections(filter={"name": "v_ci"}))
    assert info["options"]["collation"] == NORMALISED_CI
    for v in ("v_ci", "v_plain", "v_ci2"):
        db.drop_collection(v)


def test_update_operators_and_array_filters(client: pymongo.MongoClient) -> None:
    c = client.collation_e2e.update_ops
    c.drop()
    c.insert_one({"_id": 1, "tags": ["Red", "green"], "best": "m",
                  "items": [{"k": "A", "v": 0}, {"k": "b", "v": 0}]})
    c.update_one({"_id": 1}, {"$addToSet": {"tags": "RED"}, "$max": {"best": "M"}},
                 collation=CI)
    doc = c.find_one({"_id": 1})
    assert doc["tags"] == ["Red", "green"] and doc["best"] == "m"
    c.update_one({"_id": 1}, {"$pull": {"tags": "GREEN"}}, collation=CI)
    assert c.find_one({"_id": 1})["tags"] == ["Red"]
    c.update_one({"_id": 1}, {"$set": {"items.$[e].v": 1}},
                 array_filters=[{"e.k": "a"}], collation=CI)
    assert [i["v"] for i in c.find_one({"_id": 1})["items"]] == [1, 0]
    c.update_one({"_id": 1}, {"$push": {"tags": {"$each": ["apple", "Zed"], "$sort": 1}}},
                 collation=CI)
    assert c.find_one({"_id": 1})["tags"] == ["apple", "Red", "Zed"]
    c.update_one({"_id": 1}, [{"$set": {"same": {"$eq": ["$best", "M"]}}}], collation=CI)
    assert c.find_one({"_id": 1})["same"] is True
    # without the collation: simple comparisons
    c.update_one({"_id": 1}, {"$addToSet": {"tags": "RED"}})
    assert c.find_one({"_id": 1})["tags"][-1] == "RED"
    c.drop()


# --- time series ---------------------------------------------------------------------------

def test_timeseries_default_and_operation_collations(client: pymongo.MongoClient) -> None:
    import datetime as dt
    db = client.collation_e2e
    db.drop_collection("ts_ci")
    db.drop_collection("ts_plain")
    t0 = dt.datetime(2024, 1, 1)
    rows = [{"t": t0 + dt.timedelta(minutes=i), "m": s, "v": w, "n": i}
            for i, (s, w) in enumerate([("Sensor", "Apple"), ("sensor", "apple"),
                                        ("SENSOR", "Banana"), ("other", "apple")])]
    ci = db.create_collection("ts_ci", timeseries={"timeField": "t", "metaField": "m"},
                              collation=CI)
    plain = db.create_collection("ts_plain", timeseries={"timeField": "t", "metaField": "m"})
    ci.insert_many([dict(r) for r in rows])
    plain.insert_many([dict(r) for r in rows])
    info = next(db.list_collections(filter={"name": "ts_ci"}))
    assert info["options"]["collation"] == NORMALISED_CI
    # the default: meta (bucket level) and measurement fields compare case-insensitively
    assert ci.count_documents({"m": "SENSOR"}) == 3
    assert ci.count_documents({"v": "APPLE"}) == 3
    assert sorted(d["n"] for d in ci.find({"m": "sensor", "v": "apple"})) == [0, 1]
    assert ci.distinct("v") == ["Apple", "Banana"]
    assert [d["n"] for d in ci.find({}, sort=[("v", 1), ("n", 1)])] == [0, 1, 3, 2]
    got = list(ci.aggregate([{"$group": {"_id": "$m", "c": {"$sum": 1}}},
                             {"$sort": {"_id": 1}}]))
    assert [(g["_id"].lower(), g["c"]) for g in got] == [("other", 1), ("sensor", 3)]
    assert ci.count_documents({"m": "SENSOR"}, collation={"locale": "simple"}) == 1
    # an operation's collation on a collection without a default
    assert plain.count_documents({"m": "SENSOR"}) == 1
    assert plain.count_documents({"m": "SENSOR"}, collation=CI) == 3
    assert len(list(plain.find({"v": "APPLE"}, collation=CI))) == 3
    assert len(list(plain.aggregate([{"$match": {"v": "APPLE"}}], collation=CI))) == 3
    # writes
    assert ci.delete_many({"v": "BANANA"}).deleted_count == 1
    assert ci.update_many({"m": "SENSOR"}, {"$set": {"seen": True}}).matched_count == 2
    assert ci.count_documents({"seen": True}) == 2
    assert plain.delete_many({"m": "SENSOR"}, collation=CI).deleted_count == 3
    assert plain.count_documents({}) == 1
    db.drop_collection("ts_ci")
    db.drop_collection("ts_plain")


def test_string_free_filters_use_any_collation_index(ci_coll: Any) -> None:
    ci_coll.create_index("n2")
    ci_coll.update_many({}, [{"$set": {"n2": "$_id"}}])
    # the index has the collection's collation; a simple-collation query comparing no
    # string may still use it
    cur = ci_coll.find({"n2": {"$gte": 4}}).collation({"locale": "simple"})
    assert "IXSCAN" in _winning(cur)
    assert _ids(ci_coll.find({"n2": {"$gte": 4}}).collation({"locale": "simple"})
                .sort("_id")) == [4, 5]
    assert "IXSCAN" not in _winning(ci_coll.find({"name": "x"}).collation({"locale": "simple"}))


def test_bucket_boundaries_and_refused_stages(coll: Any) -> None:
    pipe = [{"$bucket": {"groupBy": "$name", "boundaries": ["a", "b", "c", "d"],
                         "default": "other"}}]
    assert list(coll.aggregate(pipe, collation=CI)) == [
        {"_id": "a", "count": 3}, {"_id": "b", "count": 2}, {"_id": "c", "count": 1}]
    assert list(coll.aggregate(pipe)) == [
        {"_id": "a", "count": 1}, {"_id": "b", "count": 1}, {"_id": "c", "count": 1},
        {"_id": "other", "count": 3}]
    for stage in ({"$setWindowFields": {"partitionBy": "$name",
                                        "output": {"c": {"$count": {}}}}},
                  {"$bucketAuto": {"groupBy": "$name", "buckets": 2}},
                  {"$densify": {"field": "n", "range": {"step": 1, "bounds": "full"}}}):
        with pytest.raises(OperationFailure) as e:
            list(coll.aggregate([stage], collation=CI))
        assert e.value.code == 238, stage
        assert len(list(coll.aggregate([stage]))) >= 1


@pytest.mark.mongosh
def test_node_driver(uri: str, coll: Any) -> None:
    out = run_node(uri, f"""
const c = client.db('collation_e2e').collection('{coll.name}');
const ci = {{locale: 'en', strength: 2}};
const found = (await c.find({{name: 'APPLE'}}, {{collation: ci}}).sort({{_id: 1}}).toArray())
  .map(d => d._id);
const n = await c.countDocuments({{name: 'BANANA'}}, {{collation: ci}});
const del = (await c.deleteMany({{name: 'CHERRY'}}, {{collation: ci}})).deletedCount;
await c.createIndex({{name: 1}}, {{name: 'n_ci', collation: ci}});
const plan = await c.find({{name: 'x'}}).collation(ci).explain();
let code = null;
try {{ await c.find({{}}, {{collation: {{locale: 'en', bogus: 1}}}}).toArray(); }}
catch (e) {{ code = e.code; }}
return {{found, n, del, stage: JSON.stringify(plan.queryPlanner.winningPlan).includes('IXSCAN'),
        code}};
""")
    assert out == {"found": [0, 1, 2], "n": 2, "del": 1, "stage": True, "code": 40415}


def test_create_parses_its_collation_as_a_typed_field(client: pymongo.MongoClient) -> None:
    # create types `collation` as mongod's Collation struct: the message names the command
    db = client.collation_e2e
    db.drop_collection("typed")
    with pytest.raises(OperationFailure) as e:
        db.command({"create": "typed", "collation": {}})
    assert (e.value.code, e.value.details["errmsg"]) == (
        40414, "BSON field 'create.collation.locale' is missing but a required field")
    assert "typed" not in db.list_collection_names()

"""storage.catalog + storage.collection on every engine: CRUD, indexes, errors, scans."""

from __future__ import annotations

import math
import random
from functools import cmp_to_key
from typing import Any

import pytest
from bson import Int64, MaxKey, MinKey, ObjectId

from storage import bsonutil
from storage.bounds import Interval
from storage.bson_order import compare, sort_key
from storage.catalog import Catalog
from storage.collection_results import IndexKeys, Replacement, ScanStats
from storage.errors import MongoError
from storage.indexes import KeyGenerator
from storage.keystring import UNDEFINED
from storage.vocabulary.error_codes import ErrorCode
from tests.engines import close_test_engine, engine_options, unit_engines


def tiny_matcher(flt: dict[str, Any]):
    """Test-only partial filter: equality and $gt/$gte/$lt/$lte/$exists on fields."""
    ops = {"$gt": lambda a, b: compare(a, b) > 0, "$gte": lambda a, b: compare(a, b) >= 0,
           "$lt": lambda a, b: compare(a, b) < 0, "$lte": lambda a, b: compare(a, b) <= 0}
    for cond in flt.values():
        if isinstance(cond, dict) and any(k.startswith("$") and k not in (*ops, "$exists")
                                          for k in cond):
            raise MongoError(ErrorCode.CannotCreateIndex,
                             "Expression not supported in partial index")

    def match(doc):
        for f, cond in flt.items():
            if isinstance(cond, dict) and cond and all(k.startswith("$") for k in cond):
                for op, arg in cond.items():
                    if op == "$exists":
                        if (f in doc) != bool(arg):
                            return False
                    elif f not in doc or doc[f] is None or type(doc[f]) is not type(arg) \
                            or not ops[op](doc[f], arg):
                        return False
            elif compare(doc.get(f), cond) != 0:
                return False
        return True

    return match


@pytest.fixture(params=unit_engines())
def kind(request):
    return request.param


@pytest.fixture
def catalog(kind, tmp_path):
    cat = Catalog.open(str(tmp_path / "db"), engine=kind, compile_filter=tiny_matcher,
                       **engine_options(kind))
    yield cat
    close_test_engine(cat.engine)


def docs_of(coll, it=None):
    return [bsonutil.decode(raw) for _, raw in (it if it is not None else coll.scan())]


# --- namespaces ---------------------------------------------------------------------------


def test_create_list_drop(catalog: Catalog):
    entry = catalog.create_collection("db1", "a", {"capped": False})
    assert entry.ns == "db1.a" and entry.kind == "collection" and entry.uuid.subtype == 4
    catalog.create_collection("db1", "b")
    catalog.create_collection("db2", "v", {"viewOn": "a", "pipeline": []}, kind="view")
    assert catalog.list_databases() == ["db1", "db2"]
    assert [e.name for e in catalog.list_collections("db1")] == ["a", "b"]
    assert catalog.entry("db1", "a").options == {"capped": False}
    assert catalog.get_collection("db2", "v") is None  # a view has no storage
    with pytest.raises(MongoError) as ei:
        catalog.create_collection("db1", "a")
    assert ei.value.code == ErrorCode.NamespaceExists
    with pytest.raises(MongoError) as ei:
        catalog.get_or_create_collection("db2", "v")
    assert ei.value.code == ErrorCode.CommandNotSupportedOnView
    assert catalog.drop_collection("db1", "b") and not catalog.drop_collection("db1", "b")
    assert catalog.drop_database("db1") == ["a"]
    assert catalog.list_databases() == ["db2"]
    coll = catalog.get_or_create_collection("db3", "implicit")
    assert coll.list_indexes() == [{"v": 2, "key": {"_id": 1}, "name": "_id_"}]


@pytest.mark.parametrize(("db", "name"), [("", "a"), ("a b", "c"), ("a.b", "c"), ("a$", "c"),
                                          ("x" * 64, "c"), ("d", ""), ("d", "a$b"),
                                          ("d", ".a"), ("d", "a\x00"), ("d", "system.foo"),
                                          ("d", "x" * 300)])
def test_invalid_names(catalog: Catalog, db, name):
    with pytest.raises(MongoError) as ei:
        catalog.create_collection(db, name)
    assert ei.value.code == ErrorCode.InvalidNamespace
    assert catalog.list_databases() == []


def test_database_names_differing_in_case(catalog: Catalog):
    catalog.create_collection("Test", "a")
    with pytest.raises(MongoError) as ei:
        catalog.create_collection("test", "b")
    assert ei.value.code == ErrorCode.DatabaseDifferCase
    catalog.create_collection("Test", "b")


def test_system_buckets_allowed(catalog: Catalog):
    catalog.create_collection("d", "system.buckets.m", {"timeseries": {"timeField": "t"}})
    catalog.create_collection("d", "m", {"timeseries": {"timeField": "t"}}, kind="timeseries",
                              info={"buckets": "system.buckets.m"})
    assert catalog.entry("d", "m").info == {"buckets": "system.buckets.m"}


def test_rename(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "a")
    coll.insert_many([{"_id": 1}])
    coll.create_indexes([{"key": {"x": 1}, "name": "x_1"}])
    catalog.rename_collection("d", "a", "e", "b")
    assert catalog.entry("d", "a") is None and coll.ns == "e.b"
    assert docs_of(coll) == [{"_id": 1}] and len(coll.list_indexes()) == 2
    other = catalog.get_or_create_collection("e", "c")
    with pytest.raises(MongoError) as ei:
        catalog.rename_collection("e", "b", "e", "c")
    assert ei.value.code == ErrorCode.NamespaceExists
    catalog.rename_collection("e", "b", "e", "c", drop_target=True)
    with pytest.raises(MongoError) as ei:
        other.count()
    assert ei.value.code == ErrorCode.NamespaceNotFound
    with pytest.raises(MongoError) as ei:
        catalog.rename_collection("e", "nope", "e", "x")
    assert ei.value.code == ErrorCode.NamespaceNotFound


def test_set_options(catalog: Catalog):
    catalog.create_collection("d", "c", {"a": 1})
    catalog.set_options("d", "c", options={"a": 2}, info={"z": 1})
    e = catalog.entry("d", "c")
    assert e.options == {"a": 2} and e.info == {"z": 1}


# --- inserts and duplicate keys ------------------------------------------------------------------


def test_insert_get_scan(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    res = coll.insert_many([{"_id": i, "v": "x" * i} for i in range(5)])
    assert res.n_inserted == 5 and not res.errors
    assert coll.count() == 5
    assert [d["_id"] for d in docs_of(coll)] == [0, 1, 2, 3, 4]
    assert [d["_id"] for d in docs_of(coll, coll.scan(reverse=True))] == [4, 3, 2, 1, 0]
    rid, raw = coll.find_id(3)
    assert bsonutil.decode(raw) == {"_id": 3, "v": "xxx"} and coll.get(rid) == raw
    assert coll.find_id(3.0)[0] == rid and coll.find_id(Int64(3))[0] == rid
    assert coll.find_id(99) is None


def test_duplicate_id_ordered_and_unordered(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.insert_many([{"_id": 1}])
    res = coll.insert_many([{"_id": 2}, {"_id": 1}, {"_id": 3}], ordered=True)
    assert [r is not None for r in res.record_ids] == [True, False, False]
    (pos, err), = res.errors
    assert pos == 1 and err.code == 11000
    assert err.errmsg == ("E11000 duplicate key error collection: d.c index: _id_ dup key: "
                          "{ _id: 1 }")
    assert err.extra == {"keyPattern": {"_id": 1}, "keyValue": {"_id": 1}}
    res = coll.insert_many([{"_id": 4}, {"_id": 1}, {"_id": 5}, {"_id": 5.0}, {"_id": 6}],
                           ordered=False)
    assert [p for p, _ in res.errors] == [1, 3]
    assert "dup key: { _id: 5.0 }" in res.errors[1][1].errmsg
    assert sorted(d["_id"] for d in docs_of(coll)) == [1, 2, 4, 5, 6]
    assert coll.validate().valid


def test_unique_compound_index_errors(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.create_indexes([{"key": {"a": 1, "b": -1}, "name": "ab", "unique": True}])
    coll.insert_many([{"_id": 1, "a": 1, "b": "x"}])
    with pytest.raises(MongoError) as ei:
        coll.insert_one({"_id": 2, "a": 1.0, "b": "x"})
    assert ei.value.errmsg.endswith('index: ab dup key: { a: 1.0, b: "x" }')
    assert ei.value.extra == {"keyPattern": {"a": 1, "b": -1}, "keyValue": {"a": 1.0, "b": "x"}}
    coll.insert_one({"_id": 3, "a": 1, "b": "y"})
    # a missing field is null: only one document may lack both
    coll.insert_one({"_id": 4})
    with pytest.raises(MongoError):
        coll.insert_one({"_id": 5, "a": None})
    # multikey: one shared element is a duplicate
    coll.insert_one({"_id": 6, "a": [7, 8], "b": 0})
    with pytest.raises(MongoError) as ei:
        coll.insert_one({"_id": 7, "a": [9, 8], "b": 0})
    assert ei.value.extra["keyValue"] == {"a": 8, "b": 0}
    assert coll.count() == 4 and coll.validate().valid


def test_error_precedence_follows_index_order(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.create_indexes([{"key": {"a": 1, "b": 1}, "name": "ab"}])
    coll.insert_one({"_id": 1})
    res = coll.insert_many([{"_id": 1, "a": [1], "b": [2]}])  # _id dup reported first
    assert res.errors[0][1].code == 11000
    res = coll.insert_many([{"_id": 2, "a": [1], "b": [2]}, {"_id": 3}], ordered=False)
    assert res.errors[0][1].code == ErrorCode.CannotIndexParallelArrays
    assert res.errors[0][1].errmsg == "cannot index parallel arrays [b] [a]"
    assert [r is not None for r in res.record_ids] == [False, True]


def test_document_too_large(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    big = {"_id": 1, "x": "a" * (16 * 1024 * 1024)}
    res = coll.insert_many([big, {"_id": 2}], ordered=False)
    assert res.errors[0][1].code == ErrorCode.BSONObjectTooLarge == 10334
    assert "object to insert too large" in res.errors[0][1].errmsg
    assert coll.count() == 1
    rid, _ = coll.find_id(2)
    with pytest.raises(MongoError) as ei:
        coll.update(rid, {"_id": 2, "x": "a" * (16 * 1024 * 1024)})
    assert ei.value.code == 10334
    exact = {"_id": 3, "x": ""}
    exact["x"] = "a" * (16 * 1024 * 1024 - len(bsonutil.encode(exact)))
    assert len(bsonutil.encode(exact)) == 16 * 1024 * 1024
    coll.insert_one(exact)


def test_unencodable_document(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    res = coll.insert_many([{"_id": 1, "x": object()}, {"_id": 2}], ordered=False)
    assert res.errors[0][1].code == ErrorCode.BadValue and res.n_inserted == 1


# --- updates and deletes ------------------------------------------------------------------------


def test_update_reindexes(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.create_indexes([{"key": {"a": 1}, "name": "a_1", "unique": True}])
    r1 = coll.insert_one({"_id": 1, "a": 1})
    coll.insert_one({"_id": 2, "a": 2})
    coll.update(r1, {"_id": 1, "a": 5})
    assert [rid for rid, _ in coll.index_entries("a_1")] == [coll.find_id(2)[0], r1]
    with pytest.raises(MongoError) as ei:
        coll.update(r1, {"_id": 1, "a": 2})
    assert ei.value.code == 11000
    assert bsonutil.decode(coll.get(r1)) == {"_id": 1, "a": 5}
    coll.update(r1, {"_id": 1, "a": [5, 6]})  # keeps its own key, adds one
    assert coll.index("a_1").multikey
    assert coll.index("a_1").multikey_paths == (frozenset({0}),)
    with pytest.raises(KeyError):
        coll.update(999, {"_id": 9})
    assert coll.validate().valid


def _update_state(coll) -> tuple[list, list, list]:
    """Documents, every index's entries (as record positions), and the stored size."""
    rids = [rid for rid, _ in coll.scan()]
    entries = [[(rids.index(r), k) for r, k in coll.index_entries(ix.name)]
               for ix in coll.entry.indexes]
    return docs_of(coll), entries, [coll.stats().size]


def test_update_many_is_update_of_each(catalog: Catalog):
    """`update_many` leaves what `update` of each document leaves (records, index entries,
    multikey, the stored size) and returns the same keys; a key two of its documents
    take in a unique index, or a missing record, fails the call whole."""
    colls = [catalog.get_or_create_collection("d", name) for name in ("one", "many")]
    rids = []
    for coll in colls:
        coll.create_indexes([{"key": {"a": 1}, "name": "a_1", "unique": True},
                             {"key": {"b": 1}, "name": "b_1"}])
        rids.append(coll.insert_many([{"_id": i, "a": i, "b": [i]} for i in range(6)]
                                     ).record_ids)
    new = [{"_id": i, "a": i + 10, "b": [i, i + 1, "x" * (i * 50)]} for i in range(5)]
    one, many = colls
    with catalog.transaction():
        keys_one = [one.update(r, d) for r, d in zip(rids[0], new)]
        # the first document's stored keys, as the update that stored them returned them
        stored = many.update(rids[1][0], bsonutil.decode(many.get(rids[1][0])))
        keys_many = many.update_many(
            [Replacement(r, d, old_keys=stored if i == 0 else None)
             for i, (r, d) in enumerate(zip(rids[1], new))])
    assert [k.keys for k in keys_many] == [k.keys for k in keys_one]
    assert _update_state(many) == _update_state(one)
    assert many.index("b_1").multikey and many.validate().valid
    with pytest.raises(MongoError) as ei, catalog.transaction():
        many.update_many([Replacement(rids[1][0], {"_id": 0, "a": 99}),
                          Replacement(rids[1][1], {"_id": 1, "a": 99})])
    assert ei.value.code == 11000
    with pytest.raises(KeyError), catalog.transaction():
        many.update_many([Replacement(rids[1][0], {"_id": 0, "a": 98}),
                          Replacement(999, {"_id": 9})])
    assert _update_state(many) == _update_state(one) and many.validate().valid


def _caller_keys(coll, doc: dict[str, Any]) -> IndexKeys:
    """The keys a caller of `insert_many`/`update_many` makes for `doc` itself."""
    indexes = coll.entry.indexes
    return IndexKeys(tuple(ix.ident for ix in indexes),
                     tuple(tuple(k for k, _ in KeyGenerator(ix.spec).keys(doc).entries)
                           for ix in indexes))


def test_a_callers_keys_are_taken_as_the_documents_keys(catalog: Catalog):
    """Documents given with their keys (`known_keys`, `Replacement.new_keys`), bytes and
    no decoded version: inserted and updated as when keyed from the documents, and a
    duplicate in a unique index names the key's values as then."""
    colls = [catalog.get_or_create_collection("d", name) for name in ("keyed", "given")]
    docs = [{"_id": i, "a": i, "b": f"x{i}"} for i in range(4)]
    new = [{"_id": i, "a": i + 10, "b": f"y{i}"} for i in range(3)]
    for coll in colls:
        coll.create_indexes([{"key": {"a": 1}, "name": "a_1", "unique": True},
                             {"key": {"b": -1, "a": 1}, "name": "b_a"}])
    keyed, given = colls
    keyed.insert_many(docs)
    res = given.insert_many([{}] * 4, encoded=[bsonutil.encode(d) for d in docs],
                            known_keys=[_caller_keys(given, d) for d in docs],
                            return_keys=True)
    assert res.keys == [_caller_keys(given, d) for d in docs]
    rids = [[rid for rid, _ in coll.scan()] for coll in colls]
    with catalog.transaction():
        keyed.update_many([Replacement(r, d) for r, d in zip(rids[0], new)])
        assert given.update_many(
            [Replacement(r, {}, bsonutil.encode(d), new_keys=_caller_keys(given, d))
             for r, d in zip(rids[1], new)]) == [_caller_keys(given, d) for d in new]
    assert _update_state(given) == _update_state(keyed) and given.validate().valid

    def errors(coll) -> list[tuple[str, Any]]:
        """The errors of three bad writes (with their keys given to `given` alone)."""
        mine = [rid for rid, _ in coll.scan()]

        def replacement(rid: Any, d: dict[str, Any]) -> Replacement:
            if coll is keyed:
                return Replacement(rid, d)
            return Replacement(rid, {}, bsonutil.encode(d), new_keys=_caller_keys(coll, d))

        out = []
        taken = {"_id": 3, "a": 10, "b": "z"}  # a key the first document holds
        with pytest.raises(MongoError) as ei, catalog.transaction():
            coll.update_many([replacement(mine[3], taken)])
        out.append((ei.value.errmsg, ei.value.extra))
        twice = [{"_id": i, "a": 50, "b": "w"} for i in (0, 1)]  # one key, two documents
        with pytest.raises(MongoError) as ei, catalog.transaction():
            coll.update_many([replacement(r, d) for r, d in zip(mine, twice)])
        out.append((ei.value.errmsg, ei.value.extra))
        again = [{"_id": 7, "a": 70}, {"_id": 1, "a": 71}]  # _id 1 is taken
        res = coll.insert_many(again, ordered=False) if coll is keyed else coll.insert_many(
            [{}] * 2, encoded=[bsonutil.encode(d) for d in again],
            known_keys=[_caller_keys(coll, d) for d in again], ordered=False)
        out += [(e.errmsg, e.extra) for _i, e in res.errors]
        return out

    given_errors = errors(given)
    assert len(given_errors) == 3
    assert "dup key: { a: 10 }" in given_errors[0][0]
    assert given_errors[2][1] == {"keyPattern": {"_id": 1}, "keyValue": {"_id": 1}}
    assert [(m.replace("given", "keyed"), x) for m, x in given_errors] == errors(keyed)
    assert _update_state(given) == _update_state(keyed) and given.validate().valid


def test_delete_and_truncate(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.create_indexes([{"key": {"a": 1}, "name": "a_1"}])
    rids = coll.insert_many([{"_id": i, "a": [i, i + 1]} for i in range(10)]).record_ids
    assert coll.delete(rids[3]) and not coll.delete(rids[3])
    assert coll.count() == 9 and coll.validate().valid
    assert coll.truncate() == 9
    assert coll.count() == 0 and list(coll.index_entries("a_1")) == []
    assert len(coll.list_indexes()) == 2


# --- index builds and drops ----------------------------------------------------------------------


def test_create_indexes_conflicts(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    res = coll.create_indexes([{"key": {"a": 1}, "name": "a_1"},
                               {"key": {"b": -1}, "name": "b_-1", "sparse": True}])
    assert res.created == ["a_1", "b_-1"] and res.num_indexes_before == 1
    assert res.num_indexes_after == 3
    again = coll.create_indexes([{"key": {"a": 1}, "name": "a_1"}])
    assert again.all_existed and again.num_indexes_after == 3
    cases = [
        ({"key": {"a": -1}, "name": "a_1"}, ErrorCode.IndexKeySpecsConflict),
        ({"key": {"a": 1}, "name": "a_1", "expireAfterSeconds": 5}, ErrorCode.IndexOptionsConflict),
        ({"key": {"a": 1}, "name": "other"}, ErrorCode.IndexOptionsConflict),
        ({"key": {"a": 1}, "name": "other", "expireAfterSeconds": 9},
         ErrorCode.IndexOptionsConflict),
    ]
    for spec, code in cases:
        with pytest.raises(MongoError) as ei:
            coll.create_indexes([{"key": {"z": 1}, "name": "z_1"}, spec])
        assert ei.value.code == code, spec
    assert [ix["name"] for ix in coll.list_indexes()] == ["_id_", "a_1", "b_-1"]
    # same key, different identifying option: a second index is fine
    coll.create_indexes([{"key": {"a": 1}, "name": "a_unique", "unique": True}])
    with pytest.raises(MongoError) as ei:
        coll.create_indexes([{"key": {"a": 1}, "name": "x", "expireAfterSeconds": 1,
                              "unique": True}])
    assert ei.value.code == ErrorCode.IndexOptionsConflict


def test_unique_build_over_duplicates_fails_cleanly(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 2}, {"_id": 3, "a": 1}])
    with pytest.raises(MongoError) as ei:
        coll.create_indexes([{"key": {"b": 1}, "name": "b_1"},
                             {"key": {"a": 1}, "name": "a_1", "unique": True}])
    assert ei.value.code == 11000
    assert "Index build failed" in ei.value.errmsg
    assert ei.value.errmsg.endswith("dup key: { a: 1 }")
    assert ei.value.extra["keyValue"] == {"a": 1}
    assert [ix["name"] for ix in coll.list_indexes()] == ["_id_"]
    assert catalog.engine.list_idents() == sorted(
        ["_catalog", coll.entry.ident, coll.entry.indexes[0].ident])
    coll.insert_one({"_id": 4, "a": [1, 2], "b": [3]})
    with pytest.raises(MongoError) as ei:
        coll.create_indexes([{"key": {"a": 1, "b": 1}, "name": "ab"}])
    assert ei.value.code == ErrorCode.CannotIndexParallelArrays


def test_build_marks_multikey(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.insert_many([{"_id": 1, "a": {"b": [1, 2]}}, {"_id": 2, "a": {"b": 3}}])
    coll.create_indexes([{"key": {"a.b": 1}, "name": "ab"}, {"key": {"_id": -1}, "name": "i"}])
    assert coll.index("ab").multikey and coll.index("ab").multikey_paths == (frozenset({1}),)
    assert not coll.index("i").multikey
    assert coll.validate().valid


def test_too_many_indexes(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.create_indexes([{"key": {f"f{i}": 1}, "name": f"f{i}"} for i in range(63)])
    with pytest.raises(MongoError) as ei:
        coll.create_indexes([{"key": {"g": 1}, "name": "g"}])
    assert ei.value.code == ErrorCode.CannotCreateIndex and "too many indexes" in ei.value.errmsg


def test_drop_indexes(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.create_indexes([{"key": {"a": 1}, "name": "a_1"}, {"key": {"b": 1}, "name": "b_1"},
                         {"key": {"b": 1}, "name": "b_u", "unique": True},
                         {"key": {"c": 1}, "name": "c_1"}])
    assert coll.drop_indexes("a_1") == 5
    assert coll.drop_indexes({"c": 1}) == 4
    for target, code in [("nope", ErrorCode.IndexNotFound), ("_id_", ErrorCode.InvalidOptions),
                         ({"zz": 1}, ErrorCode.IndexNotFound),
                         ({"b": 1}, ErrorCode.AmbiguousIndexKeyPattern),
                         (["b_1", "nope"], ErrorCode.IndexNotFound)]:
        with pytest.raises(MongoError) as ei:
            coll.drop_indexes(target)
        assert ei.value.code == code
    assert coll.drop_indexes("*") == 3
    assert [ix["name"] for ix in coll.list_indexes()] == ["_id_"]


def test_sparse_and_partial_indexes(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.create_indexes([
        {"key": {"s": 1}, "name": "s", "unique": True, "sparse": True},
        {"key": {"p": 1}, "name": "p", "unique": True,
         "partialFilterExpression": {"live": True}},
    ])
    coll.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 3, "s": 1}, {"_id": 4, "p": 1},
                      {"_id": 5, "p": 1, "live": True}])
    assert coll.insert_many([{"_id": 6, "s": 1}]).errors[0][1].code == 11000
    assert coll.insert_many([{"_id": 7, "p": 1, "live": True}]).errors[0][1].code == 11000
    coll.insert_one({"_id": 8, "p": 1, "live": False})
    assert [r for r, _ in coll.index_entries("s")] == [coll.find_id(3)[0]]
    assert [r for r, _ in coll.index_entries("p")] == [coll.find_id(5)[0]]
    rid = coll.find_id(8)[0]
    with pytest.raises(MongoError):
        coll.update(rid, {"_id": 8, "p": 1, "live": True})
    with pytest.raises(MongoError) as ei:
        coll.create_indexes([{"key": {"q": 1}, "name": "q",
                              "partialFilterExpression": {"a": {"$regex": "x"}}}])
    assert ei.value.code == ErrorCode.CannotCreateIndex
    assert coll.validate().valid


# --- index scans ------------------------------------------------------------------------------------


def test_index_scan_bounds(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.create_indexes([{"key": {"a": 1, "b": -1}, "name": "ab"}])
    docs = [{"_id": i, "a": i % 4, "b": i} for i in range(20)]
    coll.insert_many(docs)

    def ids(bounds, **kw):
        return [bsonutil.decode(raw)["_id"] for _, raw in coll.index_scan("ab", bounds, **kw)]

    every = [Interval.all()]
    assert ids([[Interval.point(1)], every]) == [17, 13, 9, 5, 1]
    assert ids([[Interval.point(1)], every], reverse=True) == [1, 5, 9, 13, 17]
    assert ids([[Interval.point(1), Interval.point(3)], [Interval(5, False, 13, True)]]) == \
        [13, 9, 11, 7]
    assert ids([[((2, True), (3, False))], [((0, True), (10, True))]]) == [10, 6, 2]
    assert ids([[Interval(MinKey(), True, 1, False)], every]) == [16, 12, 8, 4, 0]
    assert ids([[Interval(3, False, MaxKey(), True)], every]) == []
    assert ids([[Interval.point(1)], [Interval.point(9), Interval.point(5)]]) == [9, 5]
    assert ids([[], every]) == []
    stats = ScanStats()
    assert ids([every, [Interval.point(7)]], stats=stats) == [7]
    assert stats.keys_examined == 20 and stats.docs_examined == 1
    with pytest.raises(MongoError) as ei:
        list(coll.index_scan("nope", None))
    assert ei.value.code == ErrorCode.IndexNotFound


def test_multikey_scan_returns_each_document_once(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.create_indexes([{"key": {"tags": 1}, "name": "tags"}])
    coll.insert_many([{"_id": 1, "tags": [1, 2, 3]}, {"_id": 2, "tags": [2]},
                      {"_id": 3, "tags": []}, {"_id": 4}])
    got = [bsonutil.decode(raw)["_id"]
           for _, raw in coll.index_scan("tags", [[Interval(1, True, 3, True)]])]
    assert got == [1, 2]
    undefined = [bsonutil.decode(raw)["_id"]
                 for _, raw in coll.index_scan("tags", [[Interval.point(UNDEFINED)]])]
    assert undefined == [3]
    nulls = [bsonutil.decode(raw)["_id"]
             for _, raw in coll.index_scan("tags", [[Interval.point(None)]])]
    assert nulls == [4]


VALUES = [None, -1, 0, 0.5, 1, Int64(2), 3.0, math.inf, "", "a", "b", [1, 2], [], {"x": 1},
          True, ObjectId(b"\x00" * 12)]


def _cmp(a, b) -> int:
    """bson_order.compare, plus the undefined key of empty arrays (just above MinKey)."""
    ka = (0,) if a is UNDEFINED else sort_key(a)
    kb = (0,) if b is UNDEFINED else sort_key(b)
    return (ka > kb) - (ka < kb)


def _in(v, iv: Interval) -> bool:
    lo, hi = _cmp(v, iv.low), _cmp(v, iv.high)
    return (lo > 0 or (lo == 0 and iv.low_inclusive)) and (hi < 0 or (hi == 0 and iv.high_inclusive))


@pytest.mark.parametrize("seed", range(6))
def test_index_scan_matches_brute_force(catalog: Catalog, seed):
    rnd = random.Random(seed)
    coll = catalog.get_or_create_collection("d", f"c{seed}")
    dirs = [rnd.choice([1, -1]) for _ in range(3)]
    key = {"a": dirs[0], "b": dirs[1], "c": dirs[2]}
    coll.create_indexes([{"key": key, "name": "abc"}])
    docs = []
    for i in range(150):
        d: dict[str, Any] = {"_id": i}
        for f in "abc":
            if rnd.random() < 0.9:
                d[f] = rnd.choice(VALUES) if f != "c" or rnd.random() < 0.7 else [
                    rnd.choice(VALUES[:8]), rnd.choice(VALUES[:8])]
        docs.append(d)
    res = coll.insert_many(docs, ordered=False)
    assert all(e.code == ErrorCode.CannotIndexParallelArrays for _, e in res.errors)
    docs = [d for d, rid in zip(docs, res.record_ids) if rid is not None]
    gen = KeyGenerator(coll.index("abc").spec)
    scalars = [v for v in VALUES if not isinstance(v, list | dict)]
    for _ in range(25):
        bounds = []
        for _f in "abc":
            pts = rnd.sample(scalars, rnd.randint(1, 3))
            choice = rnd.random()
            if choice < 0.3:
                ivs = [Interval.all()]
            elif choice < 0.6:
                uniq = []
                for p in sorted(pts, key=cmp_to_key(compare)):
                    if not uniq or compare(uniq[-1], p) != 0:
                        uniq.append(p)
                ivs = [Interval.point(p) for p in uniq]
            else:
                lo, hi = sorted(rnd.sample(scalars, 2), key=cmp_to_key(compare))
                ivs = [Interval(lo, rnd.random() < 0.5, hi, rnd.random() < 0.5)]
            bounds.append(ivs)
        expected = set()
        for d in docs:
            for values in gen.keys(d).values:
                if all(any(_in(v, iv) for iv in ivs) for v, ivs in zip(values, bounds)):
                    expected.add(d["_id"])
        for reverse in (False, True):
            got = [bsonutil.decode(raw)["_id"]
                   for _, raw in coll.index_scan("abc", bounds, reverse=reverse)]
            assert len(got) == len(set(got))
            assert set(got) == expected, (bounds, reverse)
            keys = [k for _, k in coll.index_entries("abc", bounds, reverse=reverse)]
            assert keys == sorted(keys, reverse=reverse)


# --- stats, validate, transactions, persistence ---------------------------------------------------


def test_stats_and_validate_detects_damage(catalog: Catalog):
    coll = catalog.get_or_create_collection("d", "c")
    coll.create_indexes([{"key": {"a": 1}, "name": "a_1"}])
    coll.insert_many([{"_id": i, "a": i} for i in range(100)])
    st = coll.stats()
    assert st.count == 100 and st.size == sum(len(bsonutil.encode({"_id": i, "a": i}))
                                              for i in range(100))
    assert st.nindexes == 2 and set(st.index_sizes) == {"_id_", "a_1"}
    assert st.storage_size > 0 and st.total_index_size > 0 and st.avg_obj_size > 0
    dbst = catalog.database_stats("d")
    assert dbst.objects == 100 and dbst.collections == 1 and dbst.indexes == 2
    v = coll.validate()
    assert v.valid and v.n_records == 100 and v.keys_per_index == {"_id_": 100, "a_1": 100}
    store = catalog.engine.index_store(coll.index("a_1").ident)
    with catalog.transaction():
        store.delete([next(iter(store.scan()))])
        store.insert([(b"\x13junk", 12345)])
    v = coll.validate()
    assert not v.valid and v.index_details["a_1"] == {"valid": False}
    assert any("missing 1" in e for e in v.errors) and any("1 entries that match" in e
                                                             for e in v.errors)


def test_transaction_rolls_back_catalog_and_data(catalog: Catalog):
    keep = catalog.get_or_create_collection("d", "keep")
    keep.insert_one({"_id": 0})
    with pytest.raises(RuntimeError), catalog.transaction():
        coll = catalog.get_or_create_collection("d", "gone")
        coll.insert_many([{"_id": 1}, {"_id": 2}])
        coll.create_indexes([{"key": {"a": 1}, "name": "a_1"}])
        keep.insert_one({"_id": 1, "a": [1, 2]})
        keep.create_indexes([{"key": {"a": 1}, "name": "a_1"}])
        catalog.rename_collection("d", "keep", "d", "renamed")
        raise RuntimeError("abort")
    assert catalog.entry("d", "gone") is None and catalog.entry("d", "renamed") is None
    assert keep.ns == "d.keep" and docs_of(keep) == [{"_id": 0}]
    assert [ix["name"] for ix in keep.list_indexes()] == ["_id_"]
    assert len(catalog.engine.list_idents()) == 3
    # inner failures roll back only themselves
    with catalog.transaction():
        keep.insert_one({"_id": 5})
        with pytest.raises(MongoError):
            keep.insert_one({"_id": 5})
        keep.insert_one({"_id": 6})
    assert [d["_id"] for d in docs_of(keep)] == [0, 5, 6]


def test_reopen_keeps_everything(tmp_path):
    path = str(tmp_path / "db")
    cat = Catalog.open(path, compile_filter=tiny_matcher)
    coll = cat.get_or_create_collection("shop", "orders")
    cat.create_collection("shop", "v", {"viewOn": "orders", "pipeline": [{"$match": {}}]},
                          kind="view")
    cat.create_collection("other", "capped", {"capped": True, "size": 4096})
    coll.create_indexes([{"key": {"tags": 1}, "name": "tags_1"},
                         {"key": {"sku": 1}, "name": "sku", "unique": True,
                          "partialFilterExpression": {"sku": {"$exists": True}}},
                         {"key": {"at": 1}, "name": "ttl", "expireAfterSeconds": 60}])
    coll.insert_many([{"_id": 1, "tags": ["a", "b"], "sku": "x"}, {"_id": 2}])
    uuid = coll.uuid
    cat.close()
    cat = Catalog.open(path, compile_filter=tiny_matcher)
    try:
        assert cat.list_databases() == ["other", "shop"]
        assert cat.entry("other", "capped").options == {"capped": True, "size": 4096}
        assert cat.entry("shop", "v").kind == "view"
        coll = cat.get_collection("shop", "orders")
        assert coll.uuid == uuid and coll.count() == 2
        assert [ix["name"] for ix in coll.list_indexes()] == ["_id_", "tags_1", "sku", "ttl"]
        assert coll.index("tags_1").multikey and coll.index("ttl").spec.is_ttl
        assert coll.insert_many([{"_id": 3, "sku": "x"}]).errors[0][1].code == 11000
        assert coll.validate().valid
    finally:
        cat.close()


def test_ttl_delete_expired(catalog: Catalog):
    from bson.datetime_ms import DatetimeMS

    coll = catalog.get_or_create_collection("d", "ttl")
    coll.create_indexes([{"key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 10},
                         {"key": {"x": 1}, "name": "x_1"}])
    now = 1_000_000
    coll.insert_many([
        {"_id": 1, "at": DatetimeMS(now - 20_000)},           # expired
        {"_id": 2, "at": DatetimeMS(now - 5_000)},            # live
        {"_id": 3, "at": [DatetimeMS(now), DatetimeMS(now - 11_000)]},  # earliest expired
        {"_id": 4, "at": now - 20_000},                       # not a date: never expires
        {"_id": 5},
        {"_id": 6, "at": DatetimeMS(now - 10_000)},           # exactly at the limit: live
    ])
    assert catalog.ttl_indexes() == [("d", "ttl", "at_1")]
    assert coll.delete_expired("at_1", now, batch=1) == 2
    assert sorted(d["_id"] for d in docs_of(coll)) == [2, 4, 5, 6]
    assert coll.delete_expired("at_1", now) == 0
    with pytest.raises(MongoError):
        coll.delete_expired("x_1", now)
    assert coll.validate().valid

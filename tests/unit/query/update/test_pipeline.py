"""Pipeline-style updates compiled by `compile_update`: each allowed stage, the document
they make, `_id` kept or refused as mongod's PipelineExecutor does, upserts seeded from
the filter, variables and constants, and the refusals with mongod's codes."""

from __future__ import annotations

from typing import Any

import pytest
from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from query.update import compile_update
from query.variables import CommandVariables, resolve_let
from storage.errors import MongoError

DOC: dict[str, Any] = {"_id": 1, "a": 2, "b": {"c": 3, "d": 4}, "arr": [1, 2]}


def _apply(stages: list[Any], doc: dict[str, Any] = DOC, **kw: Any) -> tuple[dict, bool]:
    return compile_update(stages, **kw).apply(doc)


@pytest.mark.parametrize(("stages", "expected"), [
    ([{"$set": {"x": {"$add": ["$a", 1]}}}],
     {"_id": 1, "a": 2, "b": {"c": 3, "d": 4}, "arr": [1, 2], "x": 3}),
    ([{"$addFields": {"b.e": "$a"}}],
     {"_id": 1, "a": 2, "b": {"c": 3, "d": 4, "e": 2}, "arr": [1, 2]}),
    ([{"$project": {"a": 1}}], {"_id": 1, "a": 2}),
    ([{"$project": {"_id": 0, "a": 1}}], {"_id": 1, "a": 2}),  # _id kept: the pipeline dropped it
    ([{"$project": {"b": 0, "arr": 0}}], {"_id": 1, "a": 2}),
    ([{"$unset": ["b.c", "arr"]}], {"_id": 1, "a": 2, "b": {"d": 4}}),
    ([{"$unset": "a"}], {"_id": 1, "b": {"c": 3, "d": 4}, "arr": [1, 2]}),
    ([{"$replaceRoot": {"newRoot": "$b"}}], {"_id": 1, "c": 3, "d": 4}),
    ([{"$replaceWith": {"$mergeObjects": ["$$ROOT", {"a": 7, "z": 0}]}}],
     {"_id": 1, "a": 7, "b": {"c": 3, "d": 4}, "arr": [1, 2], "z": 0}),
    ([{"$replaceWith": {"k": "$$CURRENT.a", "_id": "$_id"}}], {"_id": 1, "k": 2}),
    ([{"$set": {"a": "$$REMOVE"}}], {"_id": 1, "b": {"c": 3, "d": 4}, "arr": [1, 2]}),
    ([{"$set": {"s": {"$sum": "$arr"}}}, {"$unset": "arr"}, {"$set": {"t": "$s"}}],
     {"_id": 1, "a": 2, "b": {"c": 3, "d": 4}, "s": 3, "t": 3}),
    ([{"$fill": {"output": {"a": {"value": 9}, "q": {"value": 5}}}}],
     {"_id": 1, "a": 2, "b": {"c": 3, "d": 4}, "arr": [1, 2], "q": 5}),
    ([], DOC),
])
def test_stages_transform_the_document(stages: list[Any], expected: dict[str, Any]) -> None:
    new, modified = _apply(stages)
    assert new == expected
    assert next(iter(new)) == "_id"
    assert modified == (new != DOC)
    assert DOC == {"_id": 1, "a": 2, "b": {"c": 3, "d": 4}, "arr": [1, 2]}  # untouched


def test_setting_the_same_values_is_not_a_modification() -> None:
    new, modified = _apply([{"$set": {"a": 2}}])
    assert new == DOC and not modified
    _new, modified = _apply([{"$set": {"a": 2.0}}])
    assert modified  # another type is another value


def test_changing_the_id_is_immutable_field() -> None:
    with pytest.raises(MongoError) as exc:
        _apply([{"$set": {"_id": 2}}])
    assert exc.value.code == 66
    assert "the (immutable) field '_id' was found to have been altered to _id: 2" in \
        exc.value.errmsg


def test_variables_constants_and_now() -> None:
    now = DatetimeMS(1_700_000_000_000)
    variables = resolve_let({"k": {"$multiply": [2, 5]}}, now=now)
    new, _ = _apply([{"$set": {"k": "$$k", "c": "$$cst", "n": "$$NOW"}}],
                    variables=variables, constants={"cst": {"$add": [1, 1]}})
    # constants are literal values, never evaluated
    assert (new["k"], new["c"], new["n"]) == (10, {"$add": [1, 1]}, now)


def test_undefined_variable_fails_at_compile_time() -> None:
    with pytest.raises(MongoError) as exc:
        compile_update([{"$set": {"a": "$$nope"}}])
    assert exc.value.code == 17276


def test_upsert_document_from_the_filter_then_the_pipeline() -> None:
    u = compile_update([{"$set": {"n": {"$add": ["$a", 1]}, "q": "$b.c"}}], is_upsert=True)
    doc = u.upsert_document({"a": 5, "b.c": 7, "z": {"$gt": 1}})
    assert next(iter(doc)) == "_id" and isinstance(doc["_id"], ObjectId)
    assert {k: v for k, v in doc.items() if k != "_id"} == {"a": 5, "b": {"c": 7}, "n": 6,
                                                            "q": 7}
    doc = u.upsert_document({"_id": "x", "a": 1})
    assert doc == {"_id": "x", "a": 1, "n": 2}
    # the pipeline may set the _id when the filter has none
    doc = compile_update([{"$set": {"_id": "$a"}}], is_upsert=True).upsert_document({"a": 3})
    assert doc == {"_id": 3, "a": 3}
    with pytest.raises(MongoError) as exc:
        compile_update([{"$set": {"_id": 9}}], is_upsert=True).upsert_document({"_id": 1})
    assert exc.value.code == 66


@pytest.mark.parametrize(("stages", "kw", "code", "fragment"), [
    ([{"$match": {"a": 1}}], {}, 72, "$match is not allowed to be used within an update"),
    ([{"$set": {"a": 1}}, {"$group": {"_id": None}}], {}, 72,
     "$group is not allowed to be used within an update"),
    ([{"$limit": 1}], {}, 72, "$limit is not allowed to be used within an update"),
    ([{"$sort": {"a": 1}}], {}, 72, "$sort is not allowed to be used within an update"),
    ([{"$lookup": {"from": "x", "localField": "a", "foreignField": "b", "as": "c"}}], {}, 72,
     "$lookup is not allowed to be used within an update"),
    ([{"$out": "x"}], {}, 72, "$out is not allowed to be used within an update"),
    ([{"$nope": {}}], {}, 40324, "Unrecognized pipeline stage name: '$nope'"),
    ([5], {}, 14, "Each element of the 'pipeline' array must be an object"),
    ([{"$set": {"a": 1}, "$unset": "b"}], {}, 40323, "must contain exactly one field"),
    ([{"$set": {"$a": 1}}], {}, 16410, "FieldPath field names may not start with '$'"),
    ([{"$set": {"a": 1}}], {"array_filters": [{"x": 1}]}, 9,
     "arrayFilters may not be specified for pipeline-style updates"),
    ([{"$set": {"a": 1}}], {"constants": {"Ok": 1, "1x": 2}}, 16867,
     "'1x' starts with an invalid character for a user variable name"),
    ([{"$set": {"a": 1}}], {"constants": {"a-b": 1}}, 16868,
     "'a-b' contains an invalid character for a variable name: '-'"),
    ([{"$set": {"a": 1}}], {"constants": {"ROOT": 1}}, 17275,
     "Can't redefine a non-user-writable variable"),
    ({"$set": {"a": 1}}, {"constants": {"k": 1}}, 51198,
     "Constant values may only be specified for pipeline updates"),
    ({"a": 1}, {"constants": {}}, 51198,
     "Constant values may only be specified for pipeline updates"),
])
def test_refusals(stages: Any, kw: dict[str, Any], code: int, fragment: str) -> None:
    with pytest.raises(MongoError) as exc:
        compile_update(stages, **kw)
    assert exc.value.code == code
    assert fragment in exc.value.errmsg


def test_constants_with_uppercase_first_letter_are_readable() -> None:
    new, _ = _apply([{"$set": {"v": "$$Big"}}], constants={"Big": 1})
    assert new["v"] == 1


def test_runtime_errors_of_stages_surface() -> None:
    u = compile_update([{"$replaceWith": "$a"}])
    with pytest.raises(MongoError) as exc:
        u.apply(DOC)
    assert exc.value.code == 40228  # 'newRoot' must evaluate to an object


def test_default_variables_give_a_now() -> None:
    new, _ = compile_update([{"$set": {"n": "$$NOW"}}],
                            variables=CommandVariables()).apply(DOC)
    assert isinstance(new["n"], DatetimeMS)

"""Sort tests: MongoDB manual "cursor.sort()" (Behaviors: "Ascending/Descending Sort",
"Sort with Arrays", "Sort Consistency", comparison/sort order of BSON types) and the
codes of src/mongo/db/query/sort_pattern.cpp."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Decimal128, Int64, MaxKey, MinKey, ObjectId
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from query.sort import compile_sort
from storage.errors import MongoError


def order(spec: dict[str, Any], docs: list[dict[str, Any]]) -> list[Any]:
    return [d["_id"] for d in sorted(docs, key=compile_sort(spec))]


def test_array_sort_uses_min_ascending_and_max_descending() -> None:
    # manual cursor.sort(): "Sort with Arrays" -- ascending compares the smallest element,
    # descending the largest.
    docs = [
        {"_id": "A", "sizes": [2, 10]},
        {"_id": "B", "sizes": [3, 4]},
        {"_id": "C", "sizes": [1, 20]},
    ]
    assert order({"sizes": 1}, docs) == ["C", "A", "B"]
    assert order({"sizes": -1}, docs) == ["C", "A", "B"]
    docs2 = [{"_id": 1, "a": [5, 9]}, {"_id": 2, "a": [7]}, {"_id": 3, "a": 6}]
    assert order({"a": 1}, docs2) == [1, 3, 2]
    assert order({"a": -1}, docs2) == [1, 2, 3]


def test_empty_array_below_null_and_missing_like_null() -> None:
    docs = [{"_id": "num", "a": 1}, {"_id": "null", "a": None}, {"_id": "missing"},
            {"_id": "empty", "a": []}, {"_id": "minkey", "a": MinKey()}]
    assert order({"a": 1}, docs) == ["minkey", "empty", "null", "missing", "num"]
    assert order({"a": -1}, docs) == ["num", "null", "missing", "empty", "minkey"]


def test_bson_type_order_and_mixed_numbers() -> None:
    # manual "Comparison/Sort Order": MinKey < null < numbers < string < object < array <
    # binData < ObjectId < bool < date < timestamp < regex < MaxKey
    vals = [MaxKey(), DatetimeMS(-1), True, ObjectId("0" * 24), b"x", {"x": 1}, "s",
            Decimal128("2.5"), Int64(2), 1.5, float("nan"), None, MinKey()]
    docs = [{"_id": i, "a": v} for i, v in enumerate(vals)]
    assert order({"a": 1}, docs) == [12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]


def test_dotted_fanout_compound_mixed_direction_and_stability() -> None:
    docs = [
        {"_id": 1, "a": [{"b": 3}, {"b": 1}], "c": 1},
        {"_id": 2, "a": {"b": 2}, "c": 2},
        {"_id": 3, "a": {"b": 2}, "c": 3},
        {"_id": 4, "a": [{"b": 5}, {}], "c": 0},   # the missing b sorts as null
        {"_id": 5, "a": {"b": 2}, "c": 3},
    ]
    assert order({"a.b": 1}, docs) == [4, 1, 2, 3, 5]
    assert order({"a.b": -1}, docs) == [4, 1, 2, 3, 5]
    assert order({"a.b": 1, "c": -1}, docs) == [4, 1, 3, 5, 2]
    assert order({}, docs) == [1, 2, 3, 4, 5]


def test_dates_before_1970() -> None:
    docs = [{"_id": i, "t": DatetimeMS(ms)} for i, ms in enumerate([0, -1, -10**12, 10**12])]
    assert order({"t": 1}, docs) == [2, 1, 0, 3]


SPEC_ERRORS = [
    ({"a": 2}, 15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)"),
    ({"a": 0}, 15975, "$sort key ordering must be 1"),
    ({"a": "x"}, 15974, "Illegal key in $sort specification"),
    ({"a": {"$foo": 1}}, 17312, "$meta is the only expression supported by $sort right now"),
    ({"a": {"$meta": "nope"}}, 31138, "Illegal $meta sort"),
    ({"a": {"$meta": "textScore"}}, 238, "not supported"),
    ({"": 1}, 40352, "FieldPath cannot be constructed with empty string"),
    ({"a..b": 1}, 15998, "may not be empty strings"),
    ({"$a": 1}, 16410, "may not start with '$'"),
]


@pytest.mark.parametrize(("spec", "code", "fragment"), SPEC_ERRORS)
def test_sort_spec_errors(spec: dict[str, Any], code: int, fragment: str) -> None:
    with pytest.raises(MongoError) as exc:
        compile_sort(spec)
    assert exc.value.code == code
    assert fragment in exc.value.errmsg


scalars = st.one_of(st.none(), st.integers(-5, 5), st.floats(allow_nan=False, width=32),
                    st.text(max_size=2), st.booleans())
values = st.one_of(scalars, st.lists(scalars, max_size=3))


@settings(max_examples=60)
@given(st.lists(values, max_size=8))
def test_descending_is_reverse_of_ascending_for_scalars(xs: list[Any]) -> None:
    """For non-array values, -1 gives exactly the reverse order of 1 (ties kept stable)."""
    docs = [{"_id": i, "a": x} for i, x in enumerate(xs) if not isinstance(x, list)]
    asc = sorted(docs, key=compile_sort({"a": 1}))
    desc = sorted(docs, key=compile_sort({"a": -1}))
    key = compile_sort({"a": 1})
    assert [key(d) for d in desc] == [key(d) for d in reversed(asc)]


@settings(max_examples=60)
@given(st.lists(scalars, min_size=1, max_size=8))
def test_array_key_is_min_or_max_element_key(xs: list[Any]) -> None:
    """An array's ascending key is its smallest element's key, descending its largest."""
    asc, desc = compile_sort({"a": 1}), compile_sort({"a": -1})
    assert asc({"a": xs}) == min(asc({"a": x}) for x in xs)
    # descending keys order the other way round: the largest element has the least key
    assert desc({"a": xs}) == min(desc({"a": x}) for x in xs)

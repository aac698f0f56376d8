"""create / collMod time-series options: validation tables with MongoDB's codes."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Decimal128, Int64

from storage.errors import MongoError
from storage.timeseries.options import (
    TimeseriesOptions,
    buckets_collection_options,
    coll_mod_timeseries,
    options_equal,
    parse_coll_mod_expire_after_seconds,
    parse_expire_after_seconds,
    parse_timeseries_options,
    round_timestamp_ms,
    view_pipeline,
)

VALID: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"timeField": "time"},
     {"timeField": "time", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}),
    ({"timeField": "time", "metaField": "meta"},
     {"timeField": "time", "metaField": "meta", "granularity": "seconds",
      "bucketMaxSpanSeconds": 3600}),
    ({"timeField": "time", "granularity": "minutes"},
     {"timeField": "time", "granularity": "minutes", "bucketMaxSpanSeconds": 86400}),
    ({"timeField": "time", "metaField": "m", "granularity": "hours"},
     {"timeField": "time", "metaField": "m", "granularity": "hours",
      "bucketMaxSpanSeconds": 2592000}),
    ({"timeField": "time", "granularity": "seconds", "bucketMaxSpanSeconds": 3600},
     {"timeField": "time", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}),
    ({"timeField": "time", "granularity": "hours", "bucketMaxSpanSeconds": 2592000},
     {"timeField": "time", "granularity": "hours", "bucketMaxSpanSeconds": 2592000}),
    ({"timeField": "time", "bucketRoundingSeconds": 4000, "bucketMaxSpanSeconds": 4000},
     {"timeField": "time", "bucketRoundingSeconds": 4000, "bucketMaxSpanSeconds": 4000}),
    ({"timeField": "t", "bucketRoundingSeconds": Int64(31536000),
      "bucketMaxSpanSeconds": 31536000.0},
     {"timeField": "t", "bucketRoundingSeconds": 31536000, "bucketMaxSpanSeconds": 31536000}),
    ({"metaField": "m", "timeField": "t", "bucketMaxSpanSeconds": Decimal128("1"),
      "bucketRoundingSeconds": 1.9},
     {"timeField": "t", "metaField": "m", "bucketRoundingSeconds": 1,
      "bucketMaxSpanSeconds": 1}),
]


@pytest.mark.parametrize(("spec", "shown"), VALID)
def test_valid_options_are_filled_and_shown_like_mongodb(spec: dict, shown: dict) -> None:
    opts = parse_timeseries_options(spec, ns="db.c")
    doc = opts.to_document()
    assert doc == shown
    assert list(doc) == list(shown)  # listCollections field order
    assert TimeseriesOptions.from_document(doc) == opts


INVALID: list[tuple[Any, int]] = [
    ("", 14),
    ({"timeField": 100}, 14),
    ({"timeField": "time", "metaField": 100}, 14),
    ({"timeField": "time", "invalidOption": {}}, 40415),
    ({"metaField": "m"}, 40414),
    ({"timeField": "sub.time"}, 72),
    ({"timeField": "time", "metaField": "sub.meta"}, 72),
    ({"timeField": "time", "metaField": "time"}, 72),
    ({"timeField": "time", "metaField": "_id"}, 72),
    ({"timeField": "time", "metaField": "meta", "bucketMaxSpanSeconds": 10}, 72),
    ({"timeField": "time", "granularity": "minutes", "bucketMaxSpanSeconds": 3600}, 72),
    ({"timeField": "time", "granularity": "seconds", "bucketMaxSpanSeconds": 3600,
      "bucketRoundingSeconds": 60}, 72),
    ({"timeField": "time", "bucketRoundingSeconds": 4000}, 72),
    ({"timeField": "time", "bucketMaxSpanSeconds": 3600}, 72),
    ({"timeField": "time", "bucketRoundingSeconds": 100, "bucketMaxSpanSeconds": 50}, 72),
    ({"timeField": "time", "granularity": "hours", "bucketRoundingSeconds": 4000,
      "bucketMaxSpanSeconds": 4000}, 72),
    ({"timeField": "time", "bucketRoundingSeconds": -1, "bucketMaxSpanSeconds": -1}, 2),
    ({"timeField": "time", "bucketRoundingSeconds": 31536001,
      "bucketMaxSpanSeconds": 31536001}, 2),
    ({"timeField": "time", "granularity": "days"}, 2),
    ({"timeField": "time", "granularity": 5}, 14),
    ({"timeField": "time", "bucketMaxSpanSeconds": "x", "bucketRoundingSeconds": 1}, 14),
    ({"timeField": "\x00time"}, 2),
    ({"timeField": "time", "metaField": "t\x00ag"}, 2),
    ({"timeField": "$t"}, 2),
]


@pytest.mark.parametrize(("spec", "code"), INVALID)
def test_invalid_options_fail_with_mongodb_code(spec: Any, code: int) -> None:
    with pytest.raises(MongoError) as e:
        parse_timeseries_options(spec, ns="db.c")
    assert e.value.code == code


def test_error_messages_name_the_field_like_idl() -> None:
    with pytest.raises(MongoError) as e:
        parse_timeseries_options({"timeField": "t", "nope": 1})
    assert e.value.errmsg == "BSON field 'create.timeseries.nope' is an unknown field."
    with pytest.raises(MongoError) as e:
        parse_timeseries_options({"timeField": 1})
    assert e.value.errmsg == ("BSON field 'create.timeseries.timeField' is the wrong type "
                              "'int', expected type 'string'")
    with pytest.raises(MongoError) as e:
        parse_timeseries_options({"timeField": "t", "metaField": "t"})
    assert e.value.errmsg == "'metaField' cannot be the same as 'timeField'"


@pytest.mark.parametrize(("value", "expected"), [
    (Int64(100), 100), (0, 0), (3600.0, 3600), (Decimal128("10"), 10)])
def test_expire_after_seconds_valid(value: Any, expected: int) -> None:
    assert parse_expire_after_seconds(value) == expected


@pytest.mark.parametrize(("value", "code"), [
    (Int64(-10), 72), (Int64(4611686018427387904), 72), ("", 14), (True, 14),
    (10**12, 72)])
def test_expire_after_seconds_invalid(value: Any, code: int) -> None:
    with pytest.raises(MongoError) as e:
        parse_expire_after_seconds(value)
    assert e.value.code == code


def test_coll_mod_expire_after_seconds() -> None:
    assert parse_coll_mod_expire_after_seconds("off") is None
    assert parse_coll_mod_expire_after_seconds(5) == 5
    for bad in ("on", -1, {"a": 1}):
        with pytest.raises(MongoError) as e:
            parse_coll_mod_expire_after_seconds(bad)
        assert e.value.code == 72


SECONDS = TimeseriesOptions("t", "m", "seconds", 3600, None)
MINUTES = TimeseriesOptions("t", "m", "minutes", 86400, None)
HOURS = TimeseriesOptions("t", "m", "hours", 2592000, None)
FIXED_4000 = TimeseriesOptions("t", "m", None, 4000, 4000)

COLLMOD: list[tuple[TimeseriesOptions, dict[str, Any], TimeseriesOptions | int, bool]] = [
    (SECONDS, {"granularity": "minutes"}, MINUTES, True),
    (SECONDS, {"granularity": "hours"}, HOURS, True),
    (MINUTES, {"granularity": "hours"}, HOURS, True),
    (MINUTES, {"granularity": "minutes"}, MINUTES, False),
    (SECONDS, {}, SECONDS, False),
    (MINUTES, {"granularity": "seconds"}, 72, False),
    (HOURS, {"granularity": "minutes"}, 72, False),
    (HOURS, {"granularity": "seconds"}, 72, False),
    (SECONDS, {"granularity": "minutes", "bucketMaxSpanSeconds": 86400}, MINUTES, True),
    (SECONDS, {"granularity": "minutes", "bucketMaxSpanSeconds": 3600}, 72, False),
    (SECONDS, {"granularity": "minutes", "bucketRoundingSeconds": 3600}, 72, False),
    (SECONDS, {"bucketMaxSpanSeconds": 3600, "bucketRoundingSeconds": 3600},
     TimeseriesOptions("t", "m", None, 3600, 3600), True),
    (SECONDS, {"bucketMaxSpanSeconds": 100, "bucketRoundingSeconds": 100}, 72, False),
    (SECONDS, {"bucketMaxSpanSeconds": 7200}, 72, False),
    (SECONDS, {"bucketMaxSpanSeconds": 7200, "bucketRoundingSeconds": 3600}, 72, False),
    (FIXED_4000, {"bucketMaxSpanSeconds": 5000, "bucketRoundingSeconds": 5000},
     TimeseriesOptions("t", "m", None, 5000, 5000), True),
    (FIXED_4000, {"bucketMaxSpanSeconds": 4000, "bucketRoundingSeconds": 4000},
     FIXED_4000, False),
    (FIXED_4000, {"bucketMaxSpanSeconds": 3000, "bucketRoundingSeconds": 3000}, 72, False),
    (FIXED_4000, {"granularity": "minutes"}, 72, False),   # rounding 3600 < 4000
    (FIXED_4000, {"granularity": "hours"}, HOURS, True),
    (SECONDS, {"timeField": "x"}, 40415, False),
    (SECONDS, {"granularity": "days"}, 2, False),
    (SECONDS, "minutes", 14, False),
]


@pytest.mark.parametrize(("current", "mod", "expected", "changed"), COLLMOD)
def test_coll_mod_transitions(current: TimeseriesOptions, mod: Any,
                              expected: TimeseriesOptions | int, changed: bool) -> None:
    if isinstance(expected, int):
        with pytest.raises(MongoError) as e:
            coll_mod_timeseries(current, mod)
        assert e.value.code == expected
        return
    new, did_change = coll_mod_timeseries(current, mod)
    assert new == expected
    assert did_change is changed


def test_coll_mod_granularity_shows_no_rounding_seconds() -> None:
    new, _ = coll_mod_timeseries(FIXED_4000, {"granularity": "hours"})
    assert new.to_document() == {"timeField": "t", "metaField": "m", "granularity": "hours",
                                 "bucketMaxSpanSeconds": 2592000}


@pytest.mark.parametrize(("t", "r", "expected"), [
    (0, 60, 0), (59_999, 60, 0), (60_000, 60, 60_000), (-1, 60, -60_000),
    (-60_000, 60, -60_000), (-60_001, 60, -120_000), (1_000, 3600, 0),
    (86_400_000 * 10 + 5, 86_400, 86_400_000 * 10)])
def test_rounding_floors_also_before_1970(t: int, r: int, expected: int) -> None:
    assert round_timestamp_ms(t, r) == expected


def test_options_equality_and_derived_documents() -> None:
    a = parse_timeseries_options({"timeField": "t", "metaField": "m"})
    b = parse_timeseries_options({"timeField": "t", "metaField": "m", "granularity": "seconds",
                                  "bucketMaxSpanSeconds": 3600})
    c = parse_timeseries_options({"timeField": "t", "metaField": "m", "granularity": "minutes"})
    assert options_equal(a, b)
    assert not options_equal(a, c)
    assert view_pipeline(a) == [{"$_internalUnpackBucket": {
        "timeField": "t", "metaField": "m", "bucketMaxSpanSeconds": 3600}}]
    opts = buckets_collection_options(a, 100)
    assert opts["clusteredIndex"] is True
    assert opts["expireAfterSeconds"] == 100
    schema = opts["validator"]["$jsonSchema"]
    assert schema["required"] == ["_id", "control", "data"]
    assert schema["properties"]["control"]["properties"]["min"] == {
        "bsonType": "object", "required": ["t"], "properties": {"t": {"bsonType": "date"}}}
    assert schema["properties"]["meta"] == {}

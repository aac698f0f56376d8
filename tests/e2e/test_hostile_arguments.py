"""Values a driver would never send but a client can: huge or NaN numbers where a count
goes, and non-documents in a time-series insert. Each gets MongoDB's answer, never
InternalError, and nothing is lost."""

from __future__ import annotations

import datetime
from typing import Any

import bson
import pymongo
import pytest
from bson import Binary, Decimal128

from protocol import encode_op_msg

from .wire_client import raw_connection


@pytest.fixture
def db(client: pymongo.MongoClient):
    d = client.hostile_args
    d.drop_collection("c")
    d.drop_collection("ts")
    d.c.insert_many([{"_id": i} for i in range(5)])
    d.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    yield d
    client.drop_database("hostile_args")


@pytest.mark.parametrize("field, value, want", [
    ("skip", 1e300, []),
    ("skip", Decimal128("1E+6000"), []),
    ("limit", Decimal128("1E+6000"), list(range(5))),
    ("limit", 1e300, list(range(5))),
    ("batchSize", Decimal128("1E+6000"), list(range(5))),
])
def test_huge_numbers_saturate(db, field: str, value: Any, want: list[int]) -> None:
    reply = db.command({"find": "c", field: value, "sort": {"_id": 1}})
    assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == want


@pytest.mark.parametrize("value", [float("nan"), Decimal128("NaN"), Decimal128("-NaN")])
@pytest.mark.parametrize("field, want", [
    ("skip", list(range(5))),        # skip 0
    ("limit", list(range(5))),       # limit 0: no limit
    ("batchSize", []),               # an empty first batch
])
def test_nan_is_zero_as_mongods_safe_int64(db, field: str, want: list[int], value: Any
                                           ) -> None:
    """mongod's find takes skip/limit/batchSize as safeInt64 (BSONElement::safeNumberLong):
    NaN is 0, +/-infinity saturate, a decimal rounds half to even."""
    reply = db.command({"find": "c", field: value, "sort": {"_id": 1}})
    assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == want


@pytest.mark.parametrize("value, want", [
    (float("inf"), []), (Decimal128("Infinity"), []),
    (Decimal128("2.5"), [2, 3, 4]), (Decimal128("3.5"), [4]), (2.9, [2, 3, 4]),
])
def test_skip_saturates_and_rounds(db, value: Any, want: list[int]) -> None:
    reply = db.command({"find": "c", "skip": value, "sort": {"_id": 1}})
    assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == want


@pytest.mark.parametrize("value", [float("-inf"), Decimal128("-Infinity"), -1e300])
def test_minus_infinity_is_below_zero(db, value: Any) -> None:
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        db.command({"find": "c", "skip": value})
    assert exc.value.code == 51024
    assert exc.value.details["errmsg"] == ("BSON field 'skip' value must be >= 0, actual value "
                                           "'-9223372036854775808'")


def _insert(server: Any, body: dict[str, Any]) -> dict[str, Any]:
    raw = raw_connection(server)  # pymongo sends no non-document
    try:
        raw.send(encode_op_msg({**body, "$db": "hostile_args"}, 1, 0))
        reply = raw.recv_reply_doc()
        assert reply is not None
        return reply
    finally:
        raw.close()


@pytest.mark.parametrize("bad", [1, "x", [1, 2], Binary(bson.encode({"t": 1}))])
@pytest.mark.parametrize("ordered", [True, False])
def test_a_non_document_measurement_is_refused_at_its_index(server, db, bad: Any,
                                                            ordered: bool) -> None:
    good = {"t": bson.datetime_ms.DatetimeMS(1_700_000_000_000), "m": 1, "v": 1}
    reply = _insert(server, {"insert": "ts", "documents": [good, bad, good],
                                  "ordered": ordered})
    assert reply["ok"] == 1.0
    assert [(e["index"], e["code"]) for e in reply["writeErrors"]] == [(1, 14)]
    assert reply["n"] == (1 if ordered else 2)
    assert db.ts.count_documents({}) == reply["n"]


def test_an_index_name_with_a_null_byte_is_refused(db) -> None:
    # found by tools/fuzz_wire.py: it was accepted, and `validate` then failed to encode
    # its reply (index names are field names there)
    db.drop_collection("nul_index")
    db.nul_index.insert_one({"a": 1})
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        db.command({"createIndexes": "nul_index",
                    "indexes": [{"key": {"a": 1}, "name": "a\x00b"}]})
    assert exc.value.code == 67
    assert [ix["name"] for ix in db.nul_index.list_indexes()] == ["_id_"]
    assert db.command("validate", "nul_index")["valid"] is True


@pytest.mark.parametrize("addend", [Decimal128("1E+6000"), Decimal128("-1E+6000"),
                                    Decimal128("9223372036854775808")])
def test_a_date_plus_a_huge_decimal_is_date_overflow(db, addend: Decimal128) -> None:
    # found by tools/fuzz_wire.py: rounding the decimal to a long was an InternalError
    db.drop_collection("dates")
    db.dates.insert_one({"d": datetime.datetime(2026, 1, 1)})
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        list(db.dates.aggregate([{"$project": {"x": {"$add": ["$d", addend]}}}]))
    assert (exc.value.code, str(exc.value.details["errmsg"])) == (15, "date overflow")
    edge = list(db.dates.aggregate([{"$project": {"_id": 0, "x": {
        "$add": ["$d", Decimal128("-1")]}}}]))
    assert edge == [{"x": datetime.datetime(2025, 12, 31, 23, 59, 59, 999000)}]

"""Values a driver would never send but a client can: huge or NaN numbers where a count
goes, and non-documents in a time-series insert. Each gets MongoDB's answer, never
InternalError, and nothing is lost."""

from __future__ import annotations

from typing import Any

import bson
import pymongo
import pytest
from bson import Binary, Decimal128

from protocol import encode_op_msg

from .wire_client import RawConnection


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


@pytest.mark.parametrize("field", ["skip", "limit", "batchSize"])
def test_nan_decimals_are_refused(db, field: str) -> None:
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        db.command({"find": "c", field: Decimal128("NaN")})
    assert exc.value.code == 2 and "must be finite" in str(exc.value)


def _insert(server: Any, body: dict[str, Any]) -> dict[str, Any]:
    raw = RawConnection(server.port, host=server.host)  # pymongo sends no non-document
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

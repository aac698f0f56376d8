"""killOp: mark an operation killed; it stops at its next safe point with Interrupted.

mongod answers the same whether or not the operation exists (once authorized)."""

from __future__ import annotations

from typing import Any

from bson import Int64

from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..log import LOG


def parse_opid(body: dict[str, Any]) -> int:
    if "op" not in body:
        raise MongoError(ErrorCode.NoSuchKey, "Missing expected field \"op\"")
    value = body["op"]
    if type(value) not in (int, Int64, float):
        raise MongoError(ErrorCode.TypeMismatch, "\"op\" had the wrong type. Expected number, "
                         f"found {type_name(value)}")
    opid = int(value)
    if type(value) is float and value != opid:
        raise MongoError(ErrorCode.BadValue, f"Expected field \"op\" to have a value exactly "
                         f"representable as a 64-bit integer, but found op: {value}")
    if not -2**31 <= opid < 2**31:
        raise MongoError(26823, f"invalid op : {opid}. Op ID cannot be represented with 32 "
                         "bits")
    return opid


async def handle(req: CommandRequest) -> dict[str, Any]:
    opid = parse_opid(req.body)
    LOG.info("COMMAND", 20482, f"conn{req.conn.id}", "Going to kill op", opId=opid)
    req.server.operations.kill(opid & 0xFFFFFFFF)
    return {"info": "attempting to kill op"}

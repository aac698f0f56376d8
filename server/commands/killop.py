"""killOp: mark an operation killed; it stops at its next safe point with Interrupted.

As mongod: with --auth, a user without `killop` on the cluster may kill only an
operation of its own; once authorized, the answer is the same whether or not the
operation exists."""

from __future__ import annotations

from typing import Any

from bson import Int64

from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from ..auth.authorize import unauthorized_message, user_privileges
from ..auth.privileges import CLUSTER
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


def _may_kill_any(req: CommandRequest) -> bool:
    user = req.conn.user
    return not req.server.config.auth or user is None or \
        user_privileges(user).allows(CLUSTER, "killop")


def _check_own(req: CommandRequest) -> None:
    """Without `killop`, only one's own operation, named by a number (checked before the
    command is parsed, as mongod authorizes first)."""
    user = req.conn.user
    value: Any = req.body.get("op")
    op = None
    if isinstance(value, int | float) and not isinstance(value, bool) and \
            -2**31 <= value < 2**31:
        op = req.server.operations.get(int(value) & 0xFFFFFFFF)
    if user is None or op is None or op.conn.user is None or op.conn.user.name != user.name:
        raise MongoError(ErrorCode.Unauthorized,
                         unauthorized_message("killOp", req.body, req.db))


async def handle(req: CommandRequest) -> dict[str, Any]:
    if not _may_kill_any(req):
        _check_own(req)
    opid = parse_opid(req.body)
    LOG.info("COMMAND", 20482, f"conn{req.conn.id}", "Going to kill op", opId=opid)
    req.server.operations.kill(opid & 0xFFFFFFFF)
    return {"info": "attempting to kill op"}

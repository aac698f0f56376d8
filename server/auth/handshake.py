"""What hello adds for authentication: `saslSupportedMechs` (the mechanisms a named user
has credentials for) and `speculativeAuthenticate` (the first authentication step run
inside the handshake, saving drivers a round trip). A speculative attempt that fails
only leaves its field out of the reply, as in mongod."""

from __future__ import annotations

import contextlib
from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import ConnectionState, ServerState
from .authenticate import authenticate
from .principals import UserName
from .sasl import enabled_mechanisms, sasl_start
from .users import UserStore

__all__ = ["hello_auth_fields"]


async def _supported_mechs(server: ServerState, value: Any) -> list[str] | None:
    if type(value) is not str:
        raise MongoError(ErrorCode.TypeMismatch,
                         "BSON field 'hello.saslSupportedMechs' is the wrong type, expected "
                         "type 'string'")
    db, dot, user = value.partition(".")
    if not dot:
        raise MongoError(ErrorCode.BadValue,
                         "UserName must contain a '.' separated database.user pair")
    record = await UserStore.for_server(server).load(UserName(user, db))
    if record is None:
        return None
    enabled = enabled_mechanisms(server)
    return [m for m in record.mechanisms if m in enabled]


async def _speculative(server: ServerState, conn: ConnectionState, value: Any
                       ) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        raise MongoError(ErrorCode.BadValue, "speculativeAuthenticate must be an object")
    command = next(iter(value), "")
    if command not in ("saslStart", "authenticate"):
        raise MongoError(ErrorCode.BadValue, "Unknown speculative authentication command: "
                                             f"{command}")
    db = value.get("db")
    if type(db) is not str or not db:
        return None
    with contextlib.suppress(MongoError):
        if command == "saslStart":
            return await sasl_start(server, conn, db, value, speculative=True)
        return await authenticate(server, conn, db, value, speculative=True)
    conn.sasl = None
    return None


async def hello_auth_fields(server: ServerState, conn: ConnectionState, body: dict[str, Any]
                            ) -> dict[str, Any]:
    """The reply fields for hello's `saslSupportedMechs` and `speculativeAuthenticate`."""
    out: dict[str, Any] = {}
    if "saslSupportedMechs" in body:
        server.auth_counters.sasl_supported_mechs_received += 1
        mechs = await _supported_mechs(server, body["saslSupportedMechs"])
        if mechs is not None:
            out["saslSupportedMechs"] = mechs
    if "speculativeAuthenticate" in body:
        reply = await _speculative(server, conn, body["speculativeAuthenticate"])
        if reply is not None:
            out["speculativeAuthenticate"] = reply
    return out

"""hello / isMaster / ismaster: the handshake, topology monitoring and compression negotiation.

An awaitable hello (with `topologyVersion` and `maxAwaitTimeMS`, as drivers' streaming
monitors send) waits until the topology changes — for a standalone, until shutdown —
or the time is up, then answers. The connection loop repeats it under exhaust.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from bson import Int64
from bson.datetime_ms import DatetimeMS

from protocol import COMPRESSOR_NAMES, MAX_BSON_SIZE, MAX_MESSAGE_SIZE, MAX_WRITE_BATCH_SIZE
from protocol.compression import SUPPORTED
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..auth.handshake import hello_auth_fields
from ..context import CommandRequest
from ..log import LOG

# MongoDB 8.0's wire version; pymongo uses bulkWrite and other 8.0 features from 25 on.
MAX_WIRE_VERSION = 25


def topology_version(req: CommandRequest) -> dict[str, Any]:
    return {"processId": req.server.process_id, "counter": Int64(0)}


def _negotiate_compression(req: CommandRequest, requested: Any) -> None:
    if not isinstance(requested, list):
        raise MongoError(ErrorCode.TypeMismatch, "'compression' is not an array")
    names: list[str] = []
    for item in requested:
        if type(item) is not str:
            raise MongoError(ErrorCode.BadValue, "'compression' is not an array of strings")
        if item in SUPPORTED and item in COMPRESSOR_NAMES and item not in names:
            names.append(item)
    req.conn.compressors = tuple(names)


async def _await_topology_change(req: CommandRequest) -> None:
    tv = req.body.get("topologyVersion")
    max_await = req.body.get("maxAwaitTimeMS")
    if tv is None and max_await is None:
        return
    if tv is None or max_await is None:
        raise MongoError(31368, "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'"
                         if max_await is None else
                         "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'")
    if not isinstance(max_await, int | float) or isinstance(max_await, bool) or max_await < 0:
        raise MongoError(31373, "maxAwaitTimeMS must be a non-negative integer")
    if not isinstance(tv, dict) or tv.get("processId") != req.server.process_id:
        return  # a different server process: answer now
    if int(tv.get("counter", 0)) < 0:
        raise MongoError(31372, "Topology version counter cannot be negative")
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(req.server.shutting_down.wait(), timeout=float(max_await) / 1000.0)


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    conn = req.conn
    if "client" in body:
        if conn.handshake_done and conn.client_metadata is not None:
            raise MongoError(ErrorCode.ClientMetadataCannotBeMutated,
                             "The client metadata document may only be sent in the first hello")
        client = body["client"]
        if not isinstance(client, dict):
            raise MongoError(ErrorCode.TypeMismatch, "'client' field must be an object")
        conn.client_metadata = client
        if not LOG.quiet:  # mongod logs it unless quiet
            LOG.info("NETWORK", 51800, f"conn{conn.id}", "client metadata",
                     remote=conn.remote, client=f"conn{conn.id}", doc=client)
    if "compression" in body and not conn.handshake_done:
        _negotiate_compression(req, body["compression"])
    conn.handshake_done = True

    await _await_topology_change(req)

    reply: dict[str, Any] = {}
    if body.get("helloOk") is True:
        reply["helloOk"] = True
    if req.name == "hello":
        reply["isWritablePrimary"] = True
    else:
        reply["ismaster"] = True
    reply.update(
        topologyVersion=topology_version(req),
        maxBsonObjectSize=MAX_BSON_SIZE,
        maxMessageSizeBytes=MAX_MESSAGE_SIZE,
        maxWriteBatchSize=MAX_WRITE_BATCH_SIZE,
        localTime=DatetimeMS(int(time.time() * 1000)),
        logicalSessionTimeoutMinutes=30,
        connectionId=conn.id,
        minWireVersion=0,
        maxWireVersion=MAX_WIRE_VERSION,
        readOnly=False,
    )
    if conn.compressors:
        reply["compression"] = list(conn.compressors)
    if "saslSupportedMechs" in body or "speculativeAuthenticate" in body:
        reply.update(await hello_auth_fields(req.server, conn, body))
    return reply


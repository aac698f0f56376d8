"""shutdown: stop the server cleanly, as mongod does on a standalone.

Admin database only (dispatch); without authentication, only from a localhost
connection, with mongod's message. `force` (bool) and `timeoutSecs` (a number, default
15) are mongod's: on a standalone there is no primary to step down and no quiesce
period, so both are only checked and logged. The server then takes the one shutdown
path (`Server.shutdown`, as for SIGTERM: stop accepting, let commands finish, write the
pending time-series writes, close storage cleanly, exit 0). The command never answers:
as mongod's, it waits until shutdown closes its connection, and the client sees the
connection close (pymongo raises AutoReconnect).
"""

from __future__ import annotations

import asyncio
from typing import Any

from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from ..auth.gate import is_loopback
from ..context import CommandRequest
from ..log import LOG
from ._args import check_fields, get_int


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "shutdown", ("force", "timeoutSecs"))
    force = body.get("force", False)
    if type(force) is not bool:
        raise MongoError(ErrorCode.TypeMismatch,
                         f"BSON field 'shutdown.force' is the wrong type '{type_name(force)}', "
                         "expected type 'bool'")
    timeout_secs = get_int(body, "shutdown", "timeoutSecs", 15)
    if not req.server.config.auth and not is_loopback(req.conn.remote):
        raise MongoError(ErrorCode.Unauthorized,
                         "shutdown must run from localhost when running db without auth")
    hook = req.server.shutdown_hook
    if hook is None:  # a server without the lifecycle (in-process tests)
        raise MongoError(ErrorCode.IllegalOperation, "this server cannot be shut down")
    LOG.info("COMMAND", 4695300, f"conn{req.conn.id}", "Terminating via shutdown command",
             force=force, timeoutSecs=timeout_secs)
    hook("shutdown command")
    await asyncio.Event().wait()  # shutdown closes this connection; there is no reply
    raise AssertionError("unreachable")


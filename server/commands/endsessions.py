"""endSessions: forget the sessions (bucketd is a standalone without transactions; the
local session cache is all the state a session has)."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    ids = req.body.get("endSessions")
    if isinstance(ids, list):
        req.server.sessions.end(ids)
    return {}

"""authenticate: single-step authentication (MONGODB-X509 in mongod), by mechanism."""

from __future__ import annotations

from typing import Any

from ..auth.authenticate import authenticate
from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    return await authenticate(req.server, req.conn, req.db, req.body)

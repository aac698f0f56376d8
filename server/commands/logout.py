"""logout: forget the connection's user if it authenticated on this database (deprecated
in mongod since 5.0 but still answered)."""

from __future__ import annotations

from typing import Any

from ..auth.session import logout
from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    req.conn.sasl = None
    logout(req.conn, req.db)
    return {}

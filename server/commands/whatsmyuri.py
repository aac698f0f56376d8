"""whatsmyuri: the client's address as the server sees it."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    return {"you": req.conn.remote}

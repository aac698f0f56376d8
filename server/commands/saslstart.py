"""saslStart: the first step of a SASL conversation (SCRAM-SHA-1, SCRAM-SHA-256)."""

from __future__ import annotations

from typing import Any

from ..auth.sasl import sasl_start
from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    return await sasl_start(req.server, req.conn, req.db, req.body)

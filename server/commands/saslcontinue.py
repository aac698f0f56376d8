"""saslContinue: the next steps of the connection's SASL conversation."""

from __future__ import annotations

from typing import Any

from ..auth.sasl import sasl_continue
from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    return await sasl_continue(req.server, req.conn, req.db, req.body)

"""killsessions: accepted; bucketd is a standalone without transactions and keeps no session state."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    return {}

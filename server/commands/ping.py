"""ping: answers ok."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    return {}

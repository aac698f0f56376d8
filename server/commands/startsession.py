"""startSession: a new logical session id (bucketd keeps no per-session state)."""

from __future__ import annotations

import uuid
from typing import Any

from bson.binary import Binary

from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    return {"id": {"id": Binary(uuid.uuid4().bytes, 4)}, "timeoutMinutes": 30}

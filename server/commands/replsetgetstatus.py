"""replSetGetStatus: a standalone is not a replica set member (NoReplicationEnabled)."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    raise MongoError(ErrorCode.NoReplicationEnabled, "not running with --replSet")

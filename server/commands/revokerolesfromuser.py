"""revokeRolesFromUser: remove roles from a user's roles (ones it lacks are ignored)."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest
from ._user_roles import change_roles


async def handle(req: CommandRequest) -> dict[str, Any]:
    return await change_roles(req, "revokeRolesFromUser", grant=False)

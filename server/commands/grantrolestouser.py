"""grantRolesToUser: add roles (which must exist) to a user's roles."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest
from ._user_roles import change_roles


async def handle(req: CommandRequest) -> dict[str, Any]:
    return await change_roles(req, "grantRolesToUser", grant=True)

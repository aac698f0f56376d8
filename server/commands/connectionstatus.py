"""connectionStatus: authentication state of the connection (bucketd has no users yet)."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    info: dict[str, Any] = {"authenticatedUsers": [], "authenticatedUserRoles": []}
    if req.body.get("showPrivileges"):
        info["authenticatedUserPrivileges"] = []
    return {"authInfo": info}

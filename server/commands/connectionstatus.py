"""connectionStatus: the connection's authenticated user and its roles."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    user = req.conn.user
    info: dict[str, Any] = {
        "authenticatedUsers": [user.name.document()] if user is not None else [],
        "authenticatedUserRoles": ([r.document() for r in sorted(user.roles)]
                                   if user is not None else []),
    }
    if req.body.get("showPrivileges"):
        info["authenticatedUserPrivileges"] = []
    return {"authInfo": info}

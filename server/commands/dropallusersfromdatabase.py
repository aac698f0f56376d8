"""dropAllUsersFromDatabase: remove every user of the command's database; `n` counts them."""

from __future__ import annotations

from typing import Any

from ..auth.session import refresh_user
from ..auth.users import UserStore
from ..context import CommandRequest
from ._args import check_fields
from ._users import USER_COMMAND_FIELDS


async def handle(req: CommandRequest) -> dict[str, Any]:
    check_fields(req.body, "dropAllUsersFromDatabase", USER_COMMAND_FIELDS)
    store = UserStore.for_server(req.server)
    names = [r.name for r in await store.users(req.db)]
    n = await store.delete(names) if names else 0
    for name in names:
        refresh_user(req.server, name, None)
    return {"n": n}

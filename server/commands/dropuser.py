"""dropUser: remove a user; connections authenticated as it are logged out."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..auth.session import refresh_user
from ..auth.users import UserStore
from ..context import CommandRequest
from ._args import check_fields
from ._users import USER_COMMAND_FIELDS, user_name_arg


async def handle(req: CommandRequest) -> dict[str, Any]:
    check_fields(req.body, "dropUser", USER_COMMAND_FIELDS)
    name = user_name_arg(req, "dropUser")
    if not await UserStore.for_server(req.server).delete([name]):
        raise MongoError(ErrorCode.UserNotFound, f"User '{name.user}@{name.db}' not found")
    refresh_user(req.server, name, None)
    return {}

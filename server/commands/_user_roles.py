"""grantRolesToUser and revokeRolesFromUser: one change of a user's direct roles."""

from __future__ import annotations

from typing import Any

from ..auth.principals import RoleName
from ..auth.session import refresh_user
from ..auth.users import UserRecord, UserStore, user_document
from ..context import CommandRequest
from ._args import check_fields
from ._users import USER_COMMAND_FIELDS, roles_arg, user_name_arg

__all__ = ["change_roles"]

ALLOWED = ("roles", *USER_COMMAND_FIELDS)


async def change_roles(req: CommandRequest, command: str, grant: bool) -> dict[str, Any]:
    check_fields(req.body, command, ALLOWED)
    name = user_name_arg(req, command)
    given = roles_arg(req, command, required_non_empty=True)
    store = UserStore.for_server(req.server)
    record = await store.require(name)
    roles: list[RoleName] = list(record.roles)
    if grant:
        roles += [r for r in given if r not in roles]
    else:
        roles = [r for r in roles if r not in given]
    old = record.document
    doc = user_document(name, record.credentials, roles, old.get("customData"),
                        old.get("userId"))
    await store.replace(doc)
    updated = UserRecord.from_document(doc)
    assert updated is not None
    refresh_user(req.server, name, updated.authenticated())
    return {}

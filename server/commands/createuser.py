"""createUser: a user in admin.system.users, with SCRAM credentials made from `pwd`
(none for `$external` users), roles that must exist, and optional customData."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..auth.credentials import make_credentials
from ..auth.users import UserStore, user_document
from ..context import CommandRequest
from ._args import check_fields, get_bool, get_doc
from ._users import (
    USER_COMMAND_FIELDS,
    check_digest,
    check_localhost_grant,
    check_password_db,
    default_mechanisms,
    mechanisms_arg,
    password_arg,
    roles_arg,
    user_name_arg,
)

ALLOWED = ("pwd", "customData", "roles", "digestPassword", "mechanisms",
           "authenticationRestrictions", *USER_COMMAND_FIELDS)


async def handle(req: CommandRequest) -> dict[str, Any]:
    check_fields(req.body, "createUser", ALLOWED)
    name = user_name_arg(req, "createUser")
    if name.db == "local":
        raise MongoError(ErrorCode.BadValue, "Cannot create users in the local database")
    pwd = password_arg(req, "createUser")
    check_password_db(name, pwd is not None)
    custom = get_doc(req.body, "createUser", "customData")
    digest = get_bool(req.body, "createUser", "digestPassword", True)
    explicit = mechanisms_arg(req, "createUser")
    if req.body.get("authenticationRestrictions"):
        raise MongoError(ErrorCode.NotImplemented,
                         "authenticationRestrictions are not supported by bucketd")
    roles = roles_arg(req, "createUser")
    check_localhost_grant(req, roles)
    credentials = {}
    if pwd is not None:
        mechanisms = check_digest(digest, explicit or default_mechanisms(req),
                                  explicit is not None)
        credentials = await make_credentials(req.server, name.user, pwd, mechanisms,
                                             digested=not digest)
    await UserStore.for_server(req.server).insert(
        user_document(name, credentials, roles, custom))
    return {}

"""updateUser: change a user's password (and so its credentials), mechanisms, roles or
customData; what is not given stays. Connections authenticated as the user see new
roles from their next command."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..auth.credentials import make_credentials
from ..auth.session import refresh_user
from ..auth.users import UserRecord, UserStore, user_document
from ..context import CommandRequest
from ._args import check_fields, get_bool, get_doc
from ._users import (
    USER_COMMAND_FIELDS,
    check_digest,
    check_password_db,
    default_mechanisms,
    mechanisms_arg,
    password_arg,
    roles_arg,
    user_name_arg,
)

ALLOWED = ("pwd", "customData", "roles", "digestPassword", "mechanisms",
           "authenticationRestrictions", *USER_COMMAND_FIELDS)
_UPDATES = ("pwd", "customData", "roles", "mechanisms", "authenticationRestrictions")


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "updateUser", ALLOWED)
    name = user_name_arg(req, "updateUser")
    if not any(k in body for k in _UPDATES):
        raise MongoError(ErrorCode.BadValue,
                         "Must specify at least one field to update in updateUser")
    pwd = password_arg(req, "updateUser")
    if pwd is not None:
        check_password_db(name, True)
    custom = get_doc(body, "updateUser", "customData")
    digest = get_bool(body, "updateUser", "digestPassword", True)
    explicit = mechanisms_arg(req, "updateUser")
    if body.get("authenticationRestrictions"):
        raise MongoError(ErrorCode.NotImplemented,
                         "authenticationRestrictions are not supported by bucketd")
    roles = roles_arg(req, "updateUser") if "roles" in body else None
    store = UserStore.for_server(req.server)
    record = await store.require(name)
    credentials = dict(record.credentials)
    if pwd is not None:
        wanted = explicit or record.mechanisms or default_mechanisms(req)
        mechanisms = check_digest(digest, wanted, explicit is not None)
        credentials = await make_credentials(req.server, name.user, pwd, mechanisms,
                                             digested=not digest)
    elif explicit is not None:
        if not set(explicit) <= set(record.mechanisms):
            raise MongoError(ErrorCode.BadValue,
                             "mechanisms field must be a subset of previously set mechanisms")
        credentials = {m: c for m, c in credentials.items() if m in explicit}
    old = record.document
    doc = user_document(name, credentials, roles if roles is not None else list(record.roles),
                        custom if "customData" in body else old.get("customData"),
                        old.get("userId"))
    await store.replace(doc)
    updated = UserRecord.from_document(doc)
    assert updated is not None
    refresh_user(req.server, name, updated.authenticated())
    return {}

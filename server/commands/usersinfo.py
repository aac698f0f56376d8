"""usersInfo: describe users — `1` (all of this database), "name", {user, db}, a list of
those, or {forAllDBs: true} — without credentials unless `showCredentials`.

`showPrivileges` / `showAuthenticationRestrictions` (exact names only, as mongod) add the
roles and privileges the user inherits, resolved by authorization. As in mongod, with
`showCustomData` (the default) the user is its stored document with those appended;
without it, mongod's fixed field order for a cached user.
"""

from __future__ import annotations

from typing import Any

from query.match import compile_filter
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from ..auth.authorize import inherited_description
from ..auth.principals import UserName
from ..auth.users import UserRecord, UserStore
from ..context import CommandRequest
from ._args import check_fields, get_bool, get_doc

ALLOWED = ("showCredentials", "showCustomData", "showPrivileges",
           "showAuthenticationRestrictions", "filter", "comment")


def _name(item: Any, db: str) -> UserName:
    if type(item) is str:
        return UserName(item, db)
    if isinstance(item, dict):
        user, user_db = item.get("user"), item.get("db")
        if type(user) is not str or type(user_db) is not str:
            raise MongoError(ErrorCode.BadValue,
                             "User name must contain a string 'user' and 'db' field")
        return UserName(user, user_db)
    raise MongoError(ErrorCode.BadValue,
                     f"User name must be either a string or an object, got {type_name(item)}")


def _describe(record: UserRecord, show_credentials: bool, show_custom: bool
              ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in record.document.items():
        if (k == "credentials" and not show_credentials) or (
                k == "customData" and not show_custom):
            continue
        out[k] = v
    out["mechanisms"] = record.mechanisms
    return out


def _describe_resolved(record: UserRecord, show_credentials: bool, show_custom: bool,
                       show_restrictions: bool) -> dict[str, Any]:
    doc = record.document
    inherited = inherited_description(record.authenticated())
    out: dict[str, Any] = {}
    if show_custom:
        for k, v in doc.items():
            if k == "credentials":
                out["mechanisms"] = record.mechanisms
                if not show_credentials:
                    continue
            if k == "authenticationRestrictions" and not show_restrictions:
                continue
            out[k] = v
        out.update(inherited)
    else:
        out = {k: doc[k] for k in ("_id", "userId", "user", "db") if k in doc}
        out["mechanisms"] = record.mechanisms
        out["roles"] = doc.get("roles", [])
        if show_credentials and "credentials" in doc:
            out["credentials"] = doc["credentials"]
        out.update(inherited)
    if show_restrictions:
        out.setdefault("authenticationRestrictions", [])
    return out


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "usersInfo", ALLOWED)
    arg = body["usersInfo"]
    show_credentials = get_bool(body, "usersInfo", "showCredentials", False)
    show_custom = get_bool(body, "usersInfo", "showCustomData", True)
    show_privileges = get_bool(body, "usersInfo", "showPrivileges", False)
    show_restrictions = get_bool(body, "usersInfo", "showAuthenticationRestrictions", False)
    spec = get_doc(body, "usersInfo", "filter")
    store = UserStore.for_server(req.server)
    whole = isinstance(arg, int | float) and not isinstance(arg, bool) and arg == 1
    all_dbs = isinstance(arg, dict) and set(arg) == {"forAllDBs"}
    if all_dbs and arg["forAllDBs"] is not True:
        raise MongoError(ErrorCode.BadValue, "forAllDBs must be true")
    if spec is not None and not (whole or all_dbs):
        raise MongoError(ErrorCode.BadValue,
                         "Filter is only allowed when usersInfo is 1 or {forAllDBs: true}")
    resolved = show_privileges or show_restrictions
    if resolved and (whole or all_dbs or spec is not None):
        raise MongoError(ErrorCode.IllegalOperation,
                         "Privilege or restriction details require exact-match usersInfo queries")
    records: list[UserRecord]
    if whole or all_dbs:
        records = await store.users(None if all_dbs else req.db)
    else:
        items = arg if isinstance(arg, list) else [arg]
        names: list[UserName] = []
        for item in items:
            name = _name(item, req.db)
            if name not in names:
                names.append(name)
        records = [r for r in [await store.load(n) for n in names] if r is not None]
    if resolved:
        return {"users": [_describe_resolved(r, show_credentials, show_custom,
                                             show_restrictions) for r in records]}
    users = [_describe(r, show_credentials, show_custom) for r in records]
    if spec is not None:
        matcher = compile_filter(spec)
        users = [u for u in users if matcher.matches(u)]
    return {"users": users}

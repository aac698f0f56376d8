"""rolesInfo: describe roles (bucketd has only MongoDB's built-in roles).

Forms as mongod: `1` (the roles of `$db`: none unless `showBuiltinRoles`), a role name on
`$db`, `{role, db}`, or an array of those. A built-in role is shown flattened, as mongod
shows it: no subordinate roles, its privileges all direct (`showPrivileges`). Names that
are no role are left out of the answer.
"""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..auth.principals import RoleName
from ..auth.roles import builtin_role_names, is_builtin_role, role_privileges
from ..context import CommandRequest
from ._args import check_fields

_FIELDS = ("showPrivileges", "showBuiltinRoles", "showAuthenticationRestrictions")


def _bad(detail: str) -> MongoError:
    return MongoError(ErrorCode.BadValue, detail)


def _role_name(item: Any, db: str) -> RoleName:
    if type(item) is str:
        return RoleName(item, db)
    if isinstance(item, dict):
        role, rdb = item.get("role"), item.get("db")
        if type(role) is not str:
            raise _bad("Role names must be either strings or objects with 'role' and 'db' "
                       "fields")
        if type(rdb) is not str:
            raise _bad(f"Missing expected field \"db\" in role {role}")
        return RoleName(role, rdb)
    raise _bad("Role names must be either strings or objects")


def _requested(value: Any, db: str) -> list[RoleName] | None:
    """The roles asked for by name, or None for `rolesInfo: 1` (every role of `db`)."""
    if type(value) in (int, float) and value == 1:
        return None
    if isinstance(value, list):
        return [_role_name(v, db) for v in value]
    if type(value) is str or isinstance(value, dict):
        return [_role_name(value, db)]
    raise _bad("'rolesInfo' must be 1, a string, an object, or an array of roles")


def _flag(body: dict[str, Any], field: str) -> bool:
    v = body.get(field, False)
    if v == "asUserFragment" and field == "showPrivileges":
        raise MongoError(ErrorCode.NotImplemented,
                         "showPrivileges: 'asUserFragment' is not supported")
    if type(v) not in (bool, int, float):
        raise MongoError(ErrorCode.TypeMismatch, f"BSON field 'rolesInfo.{field}' is the "
                         "wrong type, expected type 'bool'")
    return bool(v)


def describe(role: RoleName, show_privileges: bool, show_restrictions: bool
             ) -> dict[str, Any]:
    doc: dict[str, Any] = {"role": role.role, "db": role.db, "isBuiltin": True, "roles": [],
                           "inheritedRoles": []}
    if show_privileges:
        privileges = [p.document() for p in role_privileges(role) or ()]
        doc["privileges"] = privileges
        doc["inheritedPrivileges"] = [dict(p) for p in privileges]
    if show_restrictions:
        doc["authenticationRestrictions"] = []
        doc["inheritedAuthenticationRestrictions"] = []
    return doc


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "rolesInfo", _FIELDS)
    show_privileges = _flag(body, "showPrivileges")
    show_builtin = _flag(body, "showBuiltinRoles")
    show_restrictions = _flag(body, "showAuthenticationRestrictions")
    requested = _requested(body.get("rolesInfo"), req.db)
    if requested is None:
        names = builtin_role_names(req.db) if show_builtin else []
    else:
        names = [r for r in dict.fromkeys(requested) if is_builtin_role(r)]
    return {"roles": [describe(r, show_privileges, show_restrictions) for r in names]}

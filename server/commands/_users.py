"""Arguments the user management commands share, read with mongod's rules and errors:
the user's name, role lists (strings on the command's database, or {role, db}), the
mechanisms list, and the localhost exception's limit on granted roles."""

from __future__ import annotations

from typing import Any, Final

from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from ..auth.builtin_role_names import is_builtin_role
from ..auth.principals import RoleName, UserName
from ..auth.sasl import EXTERNAL_DB, enabled_mechanisms
from ..auth.scram import MECHANISMS
from ..context import CommandRequest

__all__ = ["user_name_arg", "roles_arg", "mechanisms_arg", "default_mechanisms",
           "check_localhost_grant", "check_password_db", "password_arg", "check_digest",
           "USER_COMMAND_FIELDS"]

# Arguments every user-writing command may carry besides its own.
USER_COMMAND_FIELDS: Final = ("writeConcern", "comment")


def user_name_arg(req: CommandRequest, command: str) -> UserName:
    v = req.body[command]
    if type(v) is not str:
        raise MongoError(ErrorCode.TypeMismatch,
                         f"BSON field '{command}.{command}' is the wrong type '{type_name(v)}', "
                         "expected type 'string'")
    if not v:
        raise MongoError(ErrorCode.BadValue, "User document needs 'user' field to be non-empty")
    if "\x00" in v:
        raise MongoError(ErrorCode.BadValue, "Username cannot contain NULL characters")
    return UserName(v, req.db)


def roles_arg(req: CommandRequest, command: str, *, required_non_empty: bool = False
              ) -> list[RoleName]:
    """The `roles` array as role names, each checked to exist (RoleNotFound 31)."""
    if "roles" not in req.body:
        if required_non_empty:
            raise _needs_roles(command)
        raise MongoError(ErrorCode.IDLFailedToParse,
                         f"BSON field '{command}.roles' is missing but a required field")
    value = req.body["roles"]
    if not isinstance(value, list):
        raise MongoError(ErrorCode.TypeMismatch,
                         f"BSON field '{command}.roles' is the wrong type '{type_name(value)}', "
                         "expected type 'array'")
    if required_non_empty and not value:
        raise _needs_roles(command)
    out: list[RoleName] = []
    for item in value:
        role = _role(item, req.db, command)
        if not is_builtin_role(role):
            raise MongoError(ErrorCode.RoleNotFound,
                             f"Could not find role: {role.role}@{role.db}")
        if role not in out:
            out.append(role)
    return out


def _needs_roles(command: str) -> MongoError:
    return MongoError(ErrorCode.BadValue,
                      f'"{command}" command requires a non-empty "roles" array')


def _role(item: Any, db: str, command: str) -> RoleName:
    if type(item) is str:
        if not item:
            raise MongoError(ErrorCode.BadValue, "Role names must be non-empty")
        return RoleName(item, db)
    if isinstance(item, dict):
        role, role_db = item.get("role"), item.get("db")
        for field, v in (("role", role), ("db", role_db)):
            if v is None:
                raise MongoError(ErrorCode.IDLFailedToParse,
                                 f"BSON field '{command}.roles.{field}' is missing but a "
                                 "required field")
            if type(v) is not str:
                raise MongoError(ErrorCode.TypeMismatch,
                                 f"BSON field '{command}.roles.{field}' is the wrong type "
                                 f"'{type_name(v)}', expected type 'string'")
        assert isinstance(role, str) and isinstance(role_db, str)
        if not role or not role_db:
            raise MongoError(ErrorCode.BadValue, "Role names must be non-empty")
        return RoleName(role, role_db)
    raise MongoError(ErrorCode.TypeMismatch,
                     f"Role names must be either strings or objects, got {type_name(item)}")


def mechanisms_arg(req: CommandRequest, command: str) -> list[str] | None:
    """The `mechanisms` array (None when absent): SCRAM mechanisms that are enabled."""
    value = req.body.get("mechanisms")
    if value is None:
        return None
    if not isinstance(value, list):
        raise MongoError(ErrorCode.TypeMismatch,
                         f"BSON field '{command}.mechanisms' is the wrong type "
                         f"'{type_name(value)}', expected type 'array'")
    if not value:
        raise MongoError(ErrorCode.BadValue, "mechanisms field must not be empty")
    enabled = enabled_mechanisms(req.server)
    out: list[str] = []
    for m in value:
        if type(m) is not str:
            raise MongoError(ErrorCode.TypeMismatch,
                             f"BSON field '{command}.mechanisms' is the wrong type "
                             f"'{type_name(m)}', expected type 'string'")
        if m not in MECHANISMS:
            raise MongoError(ErrorCode.BadValue, f"Unknown auth mechanism '{m}'")
        if m not in enabled:
            raise MongoError(ErrorCode.BadValue, f"{m} not supported in authMechanisms")
        if m not in out:
            out.append(m)
    return out


def default_mechanisms(req: CommandRequest) -> list[str]:
    enabled = enabled_mechanisms(req.server)
    return [m for m in MECHANISMS if m in enabled]


def check_localhost_grant(req: CommandRequest, roles: list[RoleName]) -> None:
    """Under the localhost exception (auth on, nobody authenticated: the gate let the
    first createUser through) only roles on `admin` may be granted, as mongod's
    exception holds grantRole on admin alone."""
    if not req.server.config.auth or req.conn.user is not None:
        return
    for role in roles:
        if role.db != "admin":
            raise MongoError(ErrorCode.Unauthorized,
                             f"not authorized on {role.db} to grant role {role.role}@{role.db}"
                             " under the localhost exception")


def check_password_db(name: UserName, has_password: bool) -> None:
    """`$external` users have no password; every other user has one."""
    if name.db == EXTERNAL_DB and has_password:
        raise MongoError(ErrorCode.BadValue,
                         "Cannot set the password for users defined on the '$external' "
                         "database")
    if name.db != EXTERNAL_DB and not has_password:
        raise MongoError(ErrorCode.BadValue,
                         "Must provide a 'pwd' field for all user documents, except those "
                         "with '$external' as the user's source db")


def password_arg(req: CommandRequest, command: str) -> str | None:
    value = req.body.get("pwd")
    if value is None:
        return None
    if type(value) is not str:
        raise MongoError(ErrorCode.TypeMismatch,
                         f"BSON field '{command}.pwd' is the wrong type '{type_name(value)}', "
                         "expected type 'string'")
    if not value:
        raise MongoError(ErrorCode.BadValue, "User passwords must not be empty")
    return value


def check_digest(digest: bool, mechanisms: list[str], explicit: bool) -> list[str]:
    """digestPassword: false means the client sent md5("user:mongo:pwd") hex, which only
    SCRAM-SHA-1 can use."""
    if digest:
        return mechanisms
    if "SCRAM-SHA-256" in mechanisms:
        if explicit:
            raise MongoError(ErrorCode.BadValue,
                             "Use of SCRAM-SHA-256 requires undigested passwords")
        mechanisms = [m for m in mechanisms if m != "SCRAM-SHA-256"]
    return mechanisms

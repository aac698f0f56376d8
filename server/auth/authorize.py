"""The authorization check: may this authenticated user run this command?

`authorize(user, command, body, db)` is the one entry point the dispatcher calls (with
`--auth`, for an authenticated connection). It raises `Unauthorized` (13) with mongod's
message, `not authorized on <db> to execute command { ... }`, the command printed as
mongod prints it (a password shown as "xxx"). The rest serves the commands whose answer
depends on the user's privileges: listDatabases (`database_filter`), listCollections
(`collection_filter`) and connectionStatus (`user_privileges`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from storage.bsontext import to_mongo_string
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.raw_documents import RawDocuments

from .principals import AuthenticatedUser
from .privileges import CLUSTER, PrivilegeSet, namespace
from .required import Requirement, requirement
from .roles import privileges_of_roles

__all__ = ["authorize", "user_privileges", "unauthorized_message", "database_filter",
           "collection_filter", "inherited_description"]

# Commands whose password mongod masks when it prints them (snipForLogging).
_PASSWORD_COMMANDS = frozenset({"createUser", "updateUser"})


def user_privileges(user: AuthenticatedUser) -> PrivilegeSet:
    """Every privilege `user` holds through its roles (built-in roles flattened). The
    set is shared between users with the same roles: read it, do not change it."""
    return privileges_of_roles(user.roles)


def inherited_description(user: AuthenticatedUser) -> dict[str, Any]:
    """What usersInfo's `showPrivileges` adds to a user, as mongod resolves it: every role
    the user holds (a built-in role has no subordinate roles: its privileges are
    flattened), every privilege they grant, and the roles' authentication restrictions
    (built-in roles have none)."""
    return {"inheritedRoles": [r.document() for r in sorted(user.roles)],
            "inheritedPrivileges": user_privileges(user).documents(),
            "inheritedAuthenticationRestrictions": []}


def unauthorized_message(command: str, body: Mapping[str, Any], db: str) -> str:
    shown: dict[str, Any] = {}
    for k, v in body.items():
        if isinstance(v, RawDocuments):
            continue  # a document sequence: mongod prints the body without them
        shown[k] = "xxx" if k == "pwd" and command in _PASSWORD_COMMANDS else v
    return f"not authorized on {db} to execute command {to_mongo_string(shown)}"


def authorize(user: AuthenticatedUser, command: str, body: Mapping[str, Any], db: str
              ) -> Requirement:
    """Raise Unauthorized unless `user`'s roles grant what `command` requires; return
    that requirement (a cursor the command opens keeps it, for getMore)."""
    required = requirement(command, body, db, user)
    if not required.satisfied_by(user_privileges(user)):
        raise MongoError(ErrorCode.Unauthorized, unauthorized_message(command, body, db))
    return required


def database_filter(auth_enabled: bool, user: AuthenticatedUser | None,
                    authorized_databases: bool | None) -> Callable[[str], bool] | None:
    """Which databases listDatabases shows (None: all). As mongod: a user who may list
    all databases sees all unless it asks `authorizedDatabases: true`; any other user
    sees the databases it holds some privilege in, and asking for all is refused."""
    if not auth_enabled or user is None:
        return None
    grants = user_privileges(user)
    may_list_all = grants.allows(CLUSTER, "listDatabases")
    if authorized_databases is None:
        authorized_databases = not may_list_all
    elif not authorized_databases and not may_list_all:
        raise MongoError(ErrorCode.Unauthorized, "Insufficient permissions to list all databases")
    if not authorized_databases:
        return None
    return grants.any_action_in_db


def collection_filter(auth_enabled: bool, user: AuthenticatedUser | None, db: str,
                      authorized_collections: bool) -> Callable[[str], bool] | None:
    """Which collections listCollections shows (None: all): with
    `authorizedCollections: true`, those the user holds some privilege on."""
    if not auth_enabled or user is None or not authorized_collections:
        return None
    grants = user_privileges(user)
    return lambda name: grants.any_action_on(namespace(db, name))

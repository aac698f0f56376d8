"""Who may use or kill a cursor, with `--auth`: mongod's cursor ownership.

A cursor belongs to the user that opened it. `claim` records that user, and what the
opening command required, on a cursor the command just opened. `getMore` then needs no
privilege on the namespace (only authentication) but must come from the same user,
who must still hold what opening the cursor required (roles may have been revoked
since): `getmore_check`. `killCursors` may close a cursor of the caller's own, or any
cursor with `killAnyCursor` on the cluster or on the cursor's namespace, else the
command is refused before any cursor is closed: `kill_check`. Without `--auth` cursors carry no owner and nothing here is called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..cursors import Cursor, CursorCheck, CursorManager
from .authorize import unauthorized_message, user_privileges
from .principals import AuthenticatedUser
from .privileges import CLUSTER, Resource, database, namespace
from .required import Requirement

__all__ = ["claim", "getmore_check", "kill_check"]


def claim(cursors: CursorManager, user: AuthenticatedUser, required: Requirement,
          reply: Mapping[str, Any]) -> None:
    """Make `user` the owner of the cursor `reply` opened, if it opened one."""
    cursor_field = reply.get("cursor")
    if not isinstance(cursor_field, Mapping):
        return
    cid = cursor_field.get("id")
    cursor = cursors.get(int(cid)) if isinstance(cid, int) and cid else None
    if cursor is not None and cursor.owner is None:
        cursor.owner = user.name
        cursor.originating = required


def getmore_check(user: AuthenticatedUser | None) -> CursorCheck:
    """mongod's getMore authorization: the cursor's own user, still holding what
    opening it required."""
    def check(cursor: Cursor) -> None:
        if user is None or cursor.owner != user.name:
            raise MongoError(ErrorCode.Unauthorized, f"cursor id {cursor.id} was not created "
                                                     "by the authenticated user")
        required = cursor.originating
        if isinstance(required, Requirement) and not required.satisfied_by(
                user_privileges(user)):
            raise MongoError(ErrorCode.Unauthorized,
                             f"not authorized for getMore with cursor id {cursor.id}")
    return check


def _kill_target(ns: str) -> Resource:
    """A listCollections cursor is the database's; any other cursor its namespace's."""
    db, _, coll = ns.partition(".")
    return database(db) if coll == "$cmd.listCollections" else namespace(db, coll)


def kill_check(user: AuthenticatedUser | None, ns: str, body: Mapping[str, Any], db: str
               ) -> CursorCheck:
    """mongod's killCursors authorization for `ns` (the namespace the command names).
    mongod makes it while authorizing the command, so a refusal is worded as the
    command's: "not authorized on <db> to execute command { killCursors: ... }"."""
    def check(cursor: Cursor) -> None:
        if user is not None:
            grants = user_privileges(user)
            if grants.allows(CLUSTER, "killAnyCursor") or cursor.owner == user.name or \
                    grants.allows(_kill_target(ns), "killAnyCursor"):
                return
        raise MongoError(ErrorCode.Unauthorized,
                         unauthorized_message("killCursors", body, db))
    return check

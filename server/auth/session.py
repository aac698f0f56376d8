"""Who a connection is: setting and clearing `ConnectionState.user` with mongod's rules.

Since MongoDB 6.0 a connection authenticates as one user at most: authenticating again
as the same user is allowed (with a warning), as another user it fails (5626701, or
5626702 for another database), and `logout` on the user's database clears it.
"""

from __future__ import annotations

from storage.errors import MongoError

from ..context import ConnectionState, ServerState
from ..log import LOG
from .principals import AuthenticatedUser, UserName

__all__ = ["add_authenticated_user", "check_may_authenticate", "logout", "refresh_user"]


def check_may_authenticate(conn: ConnectionState, user: AuthenticatedUser) -> None:
    """Raise mongod's error if `conn` is already someone else."""
    previous = conn.user
    if previous is None or previous.name == user.name:
        return
    shown = f"{previous.name.user}@{previous.name.db}"
    if previous.name.db == user.name.db:
        raise MongoError(5626701, "Each client connection may only be authenticated once. "
                                  f"Previously authenticated as: {shown}")
    raise MongoError(5626702, "Client has attempted to authenticate on multiple databases."
                              f"Already authenticated as: {shown}")


def add_authenticated_user(conn: ConnectionState, user: AuthenticatedUser) -> None:
    """Make `user` the connection's user (its roles as now stored)."""
    check_may_authenticate(conn, user)
    if conn.user is not None:
        LOG.warning("ACCESS", 5626700, f"conn{conn.id}",
                    "Client has attempted to reauthenticate as a single user",
                    user=user.name.document())
    conn.user = user


def logout(conn: ConnectionState, db: str) -> None:
    """Forget the connection's user if it authenticated on `db` (mongod's logout)."""
    if conn.user is not None and conn.user.name.db == db:
        conn.user = None


def refresh_user(server: ServerState, name: UserName, user: AuthenticatedUser | None) -> None:
    """After user management changed or dropped `name`: the connections authenticated as
    it see its new roles at their next command, or are logged out if it is gone (mongod's
    user cache invalidation)."""
    for conn in server.connections.values():
        if conn.user is not None and conn.user.name == name:
            conn.user = user

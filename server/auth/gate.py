"""The authentication gate: with `--auth`, a command that requires authentication runs
only on an authenticated connection — or under the localhost exception.

mongod's localhost exception: with authentication on and no user in admin.system.users
yet, a client connected from a loopback address may create the first user, on `admin`
(or on `$external`); the first user closes it. Authorization (what an authenticated
user may do) is a separate check, after this one.
"""

from __future__ import annotations

import ipaddress
from typing import Final, Protocol

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import ConnectionState, ServerState
from .users import UserStore

__all__ = ["check_authenticated", "localhost_exception_applies", "is_loopback"]

# What the exception grants (mongod's default privileges: createUser and grantRole on
# admin, createUser on $external).
LOCALHOST_COMMANDS: Final = frozenset({"createUser"})
LOCALHOST_DATABASES: Final = frozenset({"admin", "$external"})


class GatedCommand(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def requires_auth(self) -> bool: ...


def is_loopback(remote: str) -> bool:
    """Whether a "host:port" / "[v6]:port" peer address is a loopback address."""
    host = remote.rpartition(":")[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def localhost_exception_applies(server: ServerState, conn: ConnectionState) -> bool:
    """Authentication on, bypass enabled, a loopback client, and no user yet."""
    return (server.config.auth and conn.user is None
            and bool(server.params.get("enableLocalhostAuthBypass"))
            and is_loopback(conn.remote)
            and not await UserStore.for_server(server).any_user())


async def check_authenticated(server: ServerState, conn: ConnectionState, cmd: GatedCommand,
                              db: str) -> None:
    """Unauthorized (13) "Command <name> requires authentication" unless `cmd` may run."""
    if not server.config.auth or conn.user is not None or not cmd.requires_auth:
        return
    if cmd.name in LOCALHOST_COMMANDS and db in LOCALHOST_DATABASES and \
            await localhost_exception_applies(server, conn):
        return
    raise MongoError(ErrorCode.Unauthorized, f"Command {cmd.name} requires authentication")

"""The command registry: every command name, its handler and help (FerretDB's table shape).

One module per command in this package exports `handle(req) -> dict`. Aliases are
spelled out and hidden from nothing: `listCommands` shows them all, as mongod does.
A command MongoDB has that bucketd does not build is simply absent, so it is answered
with `CommandNotFound` (59).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..context import CommandRequest
from . import (
    aggregate,
    authenticate,
    buildinfo,
    bulkwrite,
    collmod,
    collstats,
    connectionstatus,
    count,
    create,
    createindexes,
    createuser,
    currentop,
    dbstats,
    delete,
    distinct,
    drop,
    dropallusersfromdatabase,
    dropdatabase,
    dropindexes,
    dropuser,
    endsessions,
    explain,
    find,
    findandmodify,
    getcmdlineopts,
    getlog,
    getmore,
    getparameter,
    grantrolestouser,
    hello,
    hostinfo,
    insert,
    killcursors,
    killop,
    killsessions,
    listcollections,
    listcommands,
    listdatabases,
    listindexes,
    logout,
    ping,
    profile,
    refreshsessions,
    renamecollection,
    replsetgetstatus,
    revokerolesfromuser,
    rolesinfo,
    saslcontinue,
    saslstart,
    serverstatus,
    setparameter,
    shutdown,
    startsession,
    update,
    updateuser,
    usersinfo,
    validate,
    whatsmyuri,
)

__all__ = ["Command", "COMMANDS", "NEVER_COMPRESS"]

Handler = Callable[[CommandRequest], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    handler: Handler
    help: str
    admin_only: bool = False
    requires_auth: bool = True
    opcounter: str = "command"


def _table(*commands: Command) -> dict[str, Command]:
    table = {c.name: c for c in commands}
    assert len(table) == len(commands), "duplicate command name"
    return dict(sorted(table.items()))


# Replies to these are never compressed (the wire compression specification).
NEVER_COMPRESS: Final = frozenset({
    "hello", "isMaster", "ismaster", "saslStart", "saslContinue", "getnonce", "authenticate",
    "createUser", "updateUser", "copydbSaslStart", "copydbgetnonce", "copydb",
})

# listCommands reads the table below when it runs (it cannot import this module back)
_LIST_COMMANDS = listcommands.ListCommands(lambda: COMMANDS)

COMMANDS: Final[Mapping[str, Command]] = _table(
    Command("aggregate", aggregate.handle, "Runs an aggregation pipeline.", opcounter="query"),
    Command("authenticate", authenticate.handle, "Authenticates in one step (by mechanism).",
            requires_auth=False),
    Command("buildInfo", buildinfo.handle, "Returns build information.", requires_auth=False),
    Command("buildinfo", buildinfo.handle, "Returns build information.", requires_auth=False),
    Command("bulkWrite", bulkwrite.handle, "Writes across namespaces in one command.",
            admin_only=True),
    Command("collMod", collmod.handle, "Changes collection and index options."),
    Command("collStats", collstats.handle, "Returns a collection's statistics."),
    Command("connectionStatus", connectionstatus.handle,
            "Returns the connection's authentication information.", requires_auth=False),
    Command("count", count.handle, "Counts documents matching a query.", opcounter="query"),
    Command("create", create.handle, "Creates a collection (incl. time-series)."),
    Command("createIndexes", createindexes.handle, "Builds indexes."),
    Command("createUser", createuser.handle, "Adds a user to the database."),
    Command("currentOp", currentop.handle, "Reports the operations in progress.",
            admin_only=True),
    Command("dbStats", dbstats.handle, "Returns a database's statistics."),
    Command("delete", delete.handle, "Deletes documents.", opcounter="delete"),
    Command("deleteIndexes", dropindexes.handle, "Legacy name of dropIndexes."),
    Command("distinct", distinct.handle, "Returns the distinct values of a field.",
            opcounter="query"),
    Command("drop", drop.handle, "Drops a collection."),
    Command("dropAllUsersFromDatabase", dropallusersfromdatabase.handle,
            "Drops all users of the database."),
    Command("dropDatabase", dropdatabase.handle, "Drops the current database."),
    Command("dropIndexes", dropindexes.handle, "Drops indexes."),
    Command("endSessions", endsessions.handle, "Ends logical sessions.", requires_auth=False),
    Command("dropUser", dropuser.handle, "Drops a single user."),
    Command("explain", explain.handle, "Explains how a command would run."),
    Command("find", find.handle, "Queries a collection.", opcounter="query"),
    Command("findAndModify", findandmodify.handle, "Modifies and returns one document."),
    Command("findandmodify", findandmodify.handle, "Legacy name of findAndModify."),
    Command("getCmdLineOpts", getcmdlineopts.handle, "Returns the command line options.",
            admin_only=True),
    Command("getLog", getlog.handle, "Returns recent log lines.", admin_only=True),
    Command("getMore", getmore.handle, "Returns the next batch of a cursor.",
            opcounter="getmore"),
    Command("getParameter", getparameter.handle, "Reads server parameters.", admin_only=True),
    Command("grantRolesToUser", grantrolestouser.handle, "Grants roles to a user."),
    Command("hello", hello.handle, "Returns the server's role and limits.", requires_auth=False),
    Command("hostInfo", hostinfo.handle, "Returns information about the host."),
    Command("insert", insert.handle, "Inserts documents.", opcounter="insert"),
    Command("isMaster", hello.handle, "Legacy name of hello.", requires_auth=False),
    Command("ismaster", hello.handle, "Legacy name of hello.", requires_auth=False),
    Command("killAllSessions", killsessions.handle, "Kills all sessions."),
    Command("killCursors", killcursors.handle, "Closes cursors."),
    Command("killOp", killop.handle, "Interrupts an operation in progress.",
            admin_only=True),
    Command("killSessions", killsessions.handle, "Kills sessions."),
    Command("listCollections", listcollections.handle, "Lists a database's collections."),
    Command("listCommands", _LIST_COMMANDS.handle, "Lists the server's commands.",
            requires_auth=False),
    Command("listDatabases", listdatabases.handle, "Lists databases.", admin_only=True),
    Command("listIndexes", listindexes.handle, "Lists a collection's indexes."),
    Command("logout", logout.handle, "De-authenticates the connection's user on this database.",
            requires_auth=False),
    Command("ping", ping.handle, "Answers ok.", requires_auth=False),
    Command("profile", profile.handle, "Sets or reads the database's profiling level."),
    Command("refreshSessions", refreshsessions.handle, "Refreshes sessions."),
    Command("renameCollection", renamecollection.handle, "Renames a collection.",
            admin_only=True),
    Command("replSetGetStatus", replsetgetstatus.handle,
            "Reports the replica set's status (a standalone has none).", admin_only=True),
    Command("revokeRolesFromUser", revokerolesfromuser.handle, "Revokes roles from a user."),
    Command("rolesInfo", rolesinfo.handle, "Returns information about roles."),
    Command("saslContinue", saslcontinue.handle,
            "Subsequent steps in a SASL authentication conversation.", requires_auth=False),
    Command("saslStart", saslstart.handle, "First step in a SASL authentication conversation.",
            requires_auth=False),
    Command("serverStatus", serverstatus.handle, "Returns the server's status and statistics."),
    Command("setParameter", setparameter.handle, "Changes runtime server parameters.",
            admin_only=True),
    Command("shutdown", shutdown.handle, "Shuts the server down cleanly.", admin_only=True),
    Command("startSession", startsession.handle, "Starts a logical session.",
            requires_auth=False),
    Command("update", update.handle, "Updates documents.", opcounter="update"),
    Command("updateUser", updateuser.handle, "Updates a user's password, roles or customData."),
    Command("usersInfo", usersinfo.handle, "Returns information about users."),
    Command("validate", validate.handle, "Validates a collection and its indexes."),
    Command("whatsmyuri", whatsmyuri.handle, "Returns the client's address.",
            requires_auth=False),
)

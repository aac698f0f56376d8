"""Role-by-command matrix: what each built-in role may run, through authorize().

The expectations are written from MongoDB's documented built-in role privileges (the
"Built-In Roles" reference and mongod's role definitions), not from this implementation:
database roles are granted on `app`, admin-only roles on `admin`. `weather` is a
time-series collection of `app` (its commands name the view), `system.buckets.weather`
its buckets collection, reached only by the roles that grant on `system_buckets`
resources. Every probe not listed as allowed for a role must be refused with
Unauthorized (13).
"""

from __future__ import annotations

from typing import Any

import pytest

from server.auth.authorize import authorize
from server.auth.principals import AuthenticatedUser, RoleName, UserName
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

BUCKETS = "system.buckets.weather"

# probe name -> ($db, command body)
PROBES: dict[str, tuple[str, dict[str, Any]]] = {
    # needing no privilege
    "ping": ("app", {"ping": 1}),
    "hello": ("admin", {"hello": 1}),
    "buildInfo": ("admin", {"buildInfo": 1}),
    "connectionStatus": ("admin", {"connectionStatus": 1}),
    # reads
    "find app.c": ("app", {"find": "c", "filter": {}}),
    "find other.c": ("other", {"find": "c"}),
    "find admin.c": ("admin", {"find": "c"}),
    "find config.c": ("config", {"find": "c"}),
    "find app.weather": ("app", {"find": "weather"}),
    "find app.buckets": ("app", {"find": BUCKETS}),
    "find app.system.js": ("app", {"find": "system.js"}),
    "find app.system.profile": ("app", {"find": "system.profile"}),
    "find admin.system.users": ("admin", {"find": "system.users"}),
    "aggregate app.weather": ("app", {"aggregate": "weather", "pipeline": [], "cursor": {}}),
    "count app.c": ("app", {"count": "c"}),
    # writes
    "insert app.c": ("app", {"insert": "c", "documents": [{}]}),
    "insert other.c": ("other", {"insert": "c", "documents": [{}]}),
    "insert app.weather": ("app", {"insert": "weather", "documents": [{}]}),
    "insert app.buckets": ("app", {"insert": BUCKETS, "documents": [{}]}),
    "insert app.c bypassDocumentValidation": ("app", {"insert": "c", "documents": [{}],
                                                      "bypassDocumentValidation": True}),
    "update app.c": ("app", {"update": "c", "updates": [{"q": {}, "u": {"$set": {"a": 1}}}]}),
    "update app.c upsert": ("app", {"update": "c", "updates": [
        {"q": {}, "u": {"$set": {"a": 1}}, "upsert": True}]}),
    "delete app.c": ("app", {"delete": "c", "deletes": [{"q": {}, "limit": 0}]}),
    "findAndModify app.c": ("app", {"findAndModify": "c", "query": {}, "remove": True}),
    # DDL
    "create app.new": ("app", {"create": "new"}),
    "create app.ts": ("app", {"create": "ts", "timeseries": {"timeField": "t"}}),
    "createIndexes app.weather": ("app", {"createIndexes": "weather", "indexes": []}),
    "createIndexes app.buckets": ("app", {"createIndexes": BUCKETS, "indexes": []}),
    "drop app.c": ("app", {"drop": "c"}),
    "drop app.weather": ("app", {"drop": "weather"}),
    "drop app.buckets": ("app", {"drop": BUCKETS}),
    "dropIndexes app.c": ("app", {"dropIndexes": "c", "index": "*"}),
    "collMod app.weather": ("app", {"collMod": "weather", "expireAfterSeconds": 60}),
    "dropDatabase app": ("app", {"dropDatabase": 1}),
    "dropDatabase other": ("other", {"dropDatabase": 1}),
    "renameCollection app.c app.d": ("admin", {"renameCollection": "app.c", "to": "app.d"}),
    # catalog and statistics
    "listCollections app": ("app", {"listCollections": 1}),
    "listIndexes app.c": ("app", {"listIndexes": "c"}),
    "collStats app.weather": ("app", {"collStats": "weather"}),
    "collStats app.buckets": ("app", {"collStats": BUCKETS}),
    "dbStats app": ("app", {"dbStats": 1}),
    "dbStats other": ("other", {"dbStats": 1}),
    "validate app.c": ("app", {"validate": "c"}),
    "validate app.buckets": ("app", {"validate": BUCKETS}),
    # server
    "serverStatus": ("admin", {"serverStatus": 1}),
    "hostInfo": ("admin", {"hostInfo": 1}),
    "getCmdLineOpts": ("admin", {"getCmdLineOpts": 1}),
    "getLog": ("admin", {"getLog": "global"}),
    "getParameter": ("admin", {"getParameter": 1, "logLevel": 1}),
    "setParameter": ("admin", {"setParameter": 1, "logLevel": 0}),
    "shutdown": ("admin", {"shutdown": 1}),
    "killAllSessions": ("admin", {"killAllSessions": []}),
    # users and roles
    "createUser app": ("app", {"createUser": "u", "pwd": "p", "roles": ["read"]}),
    "createUser admin": ("admin", {"createUser": "u", "pwd": "p", "roles": []}),
    "dropUser app": ("app", {"dropUser": "u"}),
    "usersInfo app": ("app", {"usersInfo": 1}),
    "rolesInfo app": ("app", {"rolesInfo": 1}),
    "grantRolesToUser app": ("app", {"grantRolesToUser": "u", "roles": ["read"]}),
}

NO_PRIVILEGE = {"ping", "hello", "buildInfo", "connectionStatus"}

READ = {"find app.c", "find app.weather", "aggregate app.weather", "count app.c",
        "find app.system.js", "listCollections app", "listIndexes app.c",
        "collStats app.weather", "dbStats app"}
READ_WRITE = READ | {
    "insert app.c", "insert app.weather", "update app.c", "update app.c upsert",
    "delete app.c", "findAndModify app.c", "create app.new", "create app.ts",
    "createIndexes app.weather", "drop app.c", "drop app.weather", "dropIndexes app.c",
    "renameCollection app.c app.d"}
DB_ADMIN = {
    "create app.new", "create app.ts", "createIndexes app.weather", "drop app.c",
    "drop app.weather", "dropIndexes app.c", "collMod app.weather", "dropDatabase app",
    "listCollections app", "listIndexes app.c", "collStats app.weather", "dbStats app",
    "validate app.c", "find app.system.profile",
    # renameCollectionSameDB suffices when the user can read neither side (mongod's rule)
    "renameCollection app.c app.d"}
USER_ADMIN = {"createUser app", "dropUser app", "usersInfo app", "rolesInfo app",
              "grantRolesToUser app"}
CLUSTER_MONITOR = {"collStats app.weather", "dbStats app", "dbStats other", "serverStatus",
                   "hostInfo", "getCmdLineOpts", "getLog", "getParameter",
                   "find app.system.profile", "find config.c"}
HOST_MANAGER = {"setParameter", "shutdown", "killAllSessions"}
CLUSTER_MANAGER = {"find config.c"}
READ_ANY = {"find app.c", "find other.c", "find admin.c", "find app.weather",
            "find app.buckets", "find app.system.js", "aggregate app.weather", "count app.c",
            "listCollections app", "listIndexes app.c", "collStats app.weather",
            "collStats app.buckets", "dbStats app", "dbStats other"}
READ_WRITE_ANY = READ_ANY | {
    "insert app.c", "insert other.c", "insert app.weather", "insert app.buckets",
    "update app.c", "update app.c upsert", "delete app.c", "findAndModify app.c",
    "create app.new", "create app.ts", "createIndexes app.weather",
    "createIndexes app.buckets", "drop app.c", "drop app.weather", "drop app.buckets",
    "dropIndexes app.c", "renameCollection app.c app.d"}
USER_ADMIN_ANY = USER_ADMIN | {"createUser admin", "find admin.system.users"}
DB_ADMIN_ANY = DB_ADMIN | {"dropDatabase other", "dbStats other", "createIndexes app.buckets",
                           "drop app.buckets", "collStats app.buckets",
                           "validate app.buckets"}
BACKUP = {"find app.c", "find other.c", "find admin.c", "find config.c", "find app.weather",
          "find app.buckets", "find app.system.js", "find app.system.profile",
          "find admin.system.users", "aggregate app.weather", "count app.c",
          "listCollections app", "listIndexes app.c", "collStats app.weather",
          "collStats app.buckets", "serverStatus", "getParameter"}
RESTORE = {"insert app.c", "insert other.c", "insert app.weather", "insert app.buckets",
           "insert app.c bypassDocumentValidation", "create app.new", "create app.ts",
           "createIndexes app.weather", "createIndexes app.buckets", "drop app.c",
           "drop app.weather", "drop app.buckets", "collMod app.weather",
           "listCollections app", "getParameter", "find admin.system.users"} | USER_ADMIN | {
           "createUser admin"}

# role (granted on `app` for database roles, on `admin` for the others) -> allowed probes
ALLOWED: dict[RoleName, set[str]] = {
    RoleName("read", "app"): READ,
    RoleName("readWrite", "app"): READ_WRITE,
    RoleName("dbAdmin", "app"): DB_ADMIN,
    RoleName("userAdmin", "app"): USER_ADMIN,
    RoleName("dbOwner", "app"): READ_WRITE | DB_ADMIN | USER_ADMIN | {
        "insert app.c bypassDocumentValidation"},
    RoleName("clusterMonitor", "admin"): CLUSTER_MONITOR,
    RoleName("hostManager", "admin"): HOST_MANAGER,
    RoleName("clusterManager", "admin"): CLUSTER_MANAGER,
    RoleName("clusterAdmin", "admin"): CLUSTER_MONITOR | HOST_MANAGER | CLUSTER_MANAGER | {
        "dropDatabase app", "dropDatabase other"},
    RoleName("readAnyDatabase", "admin"): READ_ANY,
    RoleName("readWriteAnyDatabase", "admin"): READ_WRITE_ANY,
    RoleName("userAdminAnyDatabase", "admin"): USER_ADMIN_ANY,
    RoleName("dbAdminAnyDatabase", "admin"): DB_ADMIN_ANY,
    RoleName("backup", "admin"): BACKUP,
    RoleName("restore", "admin"): RESTORE,
    RoleName("root", "admin"): set(PROBES),
    RoleName("__system", "admin"): set(PROBES),
}

CASES = [(role, probe) for role in ALLOWED for probe in PROBES]


def _user(*roles: RoleName) -> AuthenticatedUser:
    return AuthenticatedUser(UserName("u1", "app"), frozenset(roles))


@pytest.mark.parametrize(("role", "probe"), CASES,
                         ids=[f"{r.role}@{r.db}-{p}" for r, p in CASES])
def test_role_matrix(role: RoleName, probe: str) -> None:
    db, body = PROBES[probe]
    name = next(iter(body))
    allowed = probe in ALLOWED[role] or probe in NO_PRIVILEGE
    if allowed:
        authorize(_user(role), name, body, db)
    else:
        with pytest.raises(MongoError) as info:
            authorize(_user(role), name, body, db)
        assert info.value.code == ErrorCode.Unauthorized
        assert info.value.errmsg.startswith(f"not authorized on {db} to execute command {{ ")


def test_tables_name_only_probes() -> None:
    for allowed in ALLOWED.values():
        assert allowed <= set(PROBES), allowed - set(PROBES)


def test_a_user_without_roles_runs_only_what_needs_no_privilege() -> None:
    for probe, (db, body) in PROBES.items():
        name = next(iter(body))
        if probe in NO_PRIVILEGE:
            authorize(_user(), name, body, db)
        else:
            with pytest.raises(MongoError):
                authorize(_user(), name, body, db)


@pytest.mark.parametrize("role", ["read", "readWrite", "dbAdmin", "dbOwner", "userAdmin"])
def test_database_roles_do_not_reach_another_database(role: str) -> None:
    user = _user(RoleName(role, "app"))
    for probe in ("find other.c", "insert other.c", "dbStats other", "dropDatabase other"):
        db, body = PROBES[probe]
        with pytest.raises(MongoError):
            authorize(user, next(iter(body)), body, db)


@pytest.mark.parametrize("role", ["root", "readAnyDatabase", "clusterAdmin", "backup",
                                  "restore", "userAdminAnyDatabase"])
def test_admin_only_roles_grant_nothing_on_another_database(role: str) -> None:
    user = _user(RoleName(role, "app"))  # no such role: app has only the database roles
    for probe in ("find app.c", "serverStatus", "insert app.c", "usersInfo app"):
        db, body = PROBES[probe]
        with pytest.raises(MongoError):
            authorize(user, next(iter(body)), body, db)


def test_roles_add_up() -> None:
    user = _user(RoleName("read", "app"), RoleName("readWrite", "other"),
                 RoleName("clusterMonitor", "admin"))
    for probe in ("find app.c", "insert other.c", "serverStatus", "find other.c"):
        db, body = PROBES[probe]
        authorize(user, next(iter(body)), body, db)
    db, body = PROBES["insert app.c"]
    with pytest.raises(MongoError):
        authorize(user, "insert", body, db)

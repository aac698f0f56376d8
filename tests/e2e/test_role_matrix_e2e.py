"""The role-by-command matrix end to end: one server with --auth, one user per built-in
role, each logged in through pymongo (SCRAM-SHA-256), running the same table of commands
against its own database, another one, admin, a time-series collection (its view) and
that collection's `system.buckets.*` namespace.

The expectations are data written from mongod's documented role privileges (the manual's
"Built-In Roles" page and mongod's src/mongo/db/auth/builtin_roles.yml), not from this
implementation: database roles are granted on `app`, the others on `admin`; a database
role reaches normal collections of its own database only; `system.buckets.*` is reached
only by the roles that grant on `system_buckets` resources (readAnyDatabase,
readWriteAnyDatabase, dbAdminAnyDatabase, backup, restore, root) and by none of the
database roles. A refused command must fail with Unauthorized (13) and mongod's message,
and must not have run: each command with an effect leaves a trace named after the role,
looked for afterwards by root.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pymongo
import pytest
from pymongo.errors import OperationFailure

from pytest_bucketd import BucketdProcess

from ..conftest import start_server

pytestmark = pytest.mark.skipif(bool(os.environ.get("BUCKETD_URI")),
                                reason="starts a server of its own")

Client = pymongo.MongoClient[dict[str, Any]]
APP, OTHER = "app", "other"
BUCKETS = "system.buckets.weather"

DATABASE_ROLES = ("read", "readWrite", "dbAdmin", "dbOwner", "userAdmin")  # granted on app
ADMIN_ROLES = ("clusterMonitor", "clusterAdmin", "readAnyDatabase", "readWriteAnyDatabase",
               "userAdminAnyDatabase", "dbAdminAnyDatabase", "backup", "restore", "root")
ROLES = DATABASE_ROLES + ADMIN_ROLES
ANONYMOUS = "anonymous"  # a client that never logs in
EVERYONE = frozenset(ROLES)

# --- who holds which actions (builtin_roles.yml) -------------------------------------------
# read / readWrite / dbAdmin / userAdmin on `app`: their actions on app's normal
# collections (and the database); dbOwner = readWrite + dbAdmin + userAdmin.
READ_APP = {"read", "readWrite", "dbOwner"}
WRITE_APP = {"readWrite", "dbOwner"}
DBADMIN_APP = {"dbAdmin", "dbOwner"}
USERADMIN_APP = {"userAdmin", "dbOwner"}
# readAnyDatabase: read actions on every normal namespace and on system_buckets;
# readWriteAnyDatabase adds the write actions on both; root holds both.
READ_ANY = {"readAnyDatabase", "readWriteAnyDatabase", "root"}
WRITE_ANY = {"readWriteAnyDatabase", "root"}
# dbAdminAnyDatabase: dbAdmin's actions on every normal namespace and on system_buckets.
DBADMIN_ANY = {"dbAdminAnyDatabase", "root"}
# userAdminAnyDatabase: userAdmin's actions on every normal database, viewUser on the
# cluster, read on admin.system.users.
USERADMIN_ANY = {"userAdminAnyDatabase", "root"}
# clusterMonitor: serverStatus, hostInfo, getCmdLineOpts, getLog, getParameter, ... on the
# cluster, collStats and dbStats on every normal namespace. clusterAdmin holds
# clusterMonitor, hostManager (setParameter, killAnyCursor...) and clusterManager, and
# dropDatabase on every normal database.
MONITOR = {"clusterMonitor", "clusterAdmin", "root"}
# backup (__queryableBackup): find on every normal namespace and on system_buckets;
# collStats, listCollections, listIndexes on any resource; getParameter; serverStatus.
BACKUP = {"backup"}
# restore: insert, createCollection, createIndex, dropCollection, collMod,
# bypassDocumentValidation... (no find, update, remove) on every normal namespace and on
# system_buckets, plus userAdmin's actions on every normal database, listCollections on
# any resource, getParameter, and find on the `system.users` collection name.
RESTORE = {"restore"}


def _names(*groups: set[str]) -> frozenset[str]:
    return frozenset().union(*groups)


@dataclass(frozen=True)
class Probe:
    """A command run by every role's user. `body(role)` names what it touches after the
    role, `trace(root, role)` tells whether it ran (None: nothing to see)."""

    name: str
    db: str
    body: Callable[[str], dict[str, Any]]
    allowed: frozenset[str]
    trace: Callable[[Client, str], bool] | None = None


def _has_doc(db: str, coll: str, doc_id: str) -> Callable[[Client, str], bool]:
    return lambda root, role: root[db][coll].find_one({"_id": f"{doc_id}-{role}"}) is not None


def _gone_doc(db: str, coll: str, doc_id: str) -> Callable[[Client, str], bool]:
    return lambda root, role: root[db][coll].find_one({"_id": f"{doc_id}-{role}"}) is None


def _number(role: str) -> int:
    return ROLES.index(role) if role in ROLES else len(ROLES)


def _ttl(role: str) -> int:
    return 100_000 + _number(role)


def _slow_ms(role: str) -> int:
    return 300 + _number(role)


def _weather_ttl(root: Client) -> Any:
    info = next(root[APP].list_collections(filter={"name": "weather"}))
    return info["options"].get("expireAfterSeconds")


def _user_exists(root: Client, name: str) -> bool:
    return bool(root[APP].command("usersInfo", name)["users"])


PROBES: tuple[Probe, ...] = (
    # needing no privilege once authenticated
    Probe("ping", APP, lambda r: {"ping": 1}, EVERYONE),
    Probe("connectionStatus", APP, lambda r: {"connectionStatus": 1}, EVERYONE),
    Probe("listDatabases", "admin", lambda r: {"listDatabases": 1, "nameOnly": True},
          EVERYONE),  # filtered to what the user may see, never refused
    # reads: the `find` action
    Probe("find app.c", APP, lambda r: {"find": "c"},
          _names(READ_APP, READ_ANY, BACKUP)),
    Probe("find other.c", OTHER, lambda r: {"find": "c"}, _names(READ_ANY, BACKUP)),
    Probe("find admin.c", "admin", lambda r: {"find": "c"}, _names(READ_ANY, BACKUP)),
    Probe("find app.weather (time-series view)", APP, lambda r: {"find": "weather"},
          _names(READ_APP, READ_ANY, BACKUP)),
    Probe("find app.system.buckets.weather", APP, lambda r: {"find": BUCKETS},
          _names(READ_ANY, BACKUP)),
    Probe("aggregate app.weather", APP,
          lambda r: {"aggregate": "weather", "pipeline": [{"$match": {}}], "cursor": {}},
          _names(READ_APP, READ_ANY, BACKUP)),
    Probe("count app.c", APP, lambda r: {"count": "c"}, _names(READ_APP, READ_ANY, BACKUP)),
    Probe("find admin.system.users", "admin", lambda r: {"find": "system.users"},
          _names(USERADMIN_ANY, BACKUP, RESTORE)),
    # catalog and statistics
    Probe("listCollections app", APP, lambda r: {"listCollections": 1},
          _names(READ_APP, DBADMIN_APP, READ_ANY, DBADMIN_ANY, BACKUP, RESTORE)),
    Probe("listIndexes app.c", APP, lambda r: {"listIndexes": "c"},
          _names(READ_APP, DBADMIN_APP, READ_ANY, DBADMIN_ANY, BACKUP)),
    Probe("collStats app.weather", APP, lambda r: {"collStats": "weather"},
          _names(READ_APP, DBADMIN_APP, READ_ANY, DBADMIN_ANY, MONITOR, BACKUP)),
    Probe("collStats app.system.buckets.weather", APP, lambda r: {"collStats": BUCKETS},
          _names(READ_ANY, DBADMIN_ANY, BACKUP)),  # clusterMonitor's grant is normal-only
    Probe("dbStats app", APP, lambda r: {"dbStats": 1},
          _names(READ_APP, DBADMIN_APP, READ_ANY, DBADMIN_ANY, MONITOR)),
    Probe("dbStats other", OTHER, lambda r: {"dbStats": 1},
          _names(READ_ANY, DBADMIN_ANY, MONITOR)),
    # writes
    Probe("insert app.c", APP, lambda r: {"insert": "c", "documents": [{"_id": f"ins-{r}"}]},
          _names(WRITE_APP, WRITE_ANY, RESTORE), _has_doc(APP, "c", "ins")),
    Probe("insert other.c", OTHER,
          lambda r: {"insert": "c", "documents": [{"_id": f"ins-{r}"}]},
          _names(WRITE_ANY, RESTORE), _has_doc(OTHER, "c", "ins")),
    Probe("insert admin.c", "admin",
          lambda r: {"insert": "c", "documents": [{"_id": f"ins-{r}"}]},
          _names(WRITE_ANY, RESTORE), _has_doc("admin", "c", "ins")),
    Probe("insert app.weather (time-series view)", APP,
          lambda r: {"insert": "weather", "documents": [
              {"t": datetime.datetime(2024, 5, 1), "tag": r}]},
          _names(WRITE_APP, WRITE_ANY, RESTORE),
          lambda root, r: root[APP]["weather"].count_documents({"tag": r}) > 0),
    Probe("update app.c", APP,
          lambda r: {"update": "c", "updates": [
              {"q": {"_id": f"upd-{r}"}, "u": {"$set": {"updated": True}}}]},
          _names(WRITE_APP, WRITE_ANY),
          lambda root, r: root[APP]["c"].find_one({"_id": f"upd-{r}", "updated": True})
          is not None),
    Probe("delete app.c", APP,
          lambda r: {"delete": "c", "deletes": [{"q": {"_id": f"del-{r}"}, "limit": 1}]},
          _names(WRITE_APP, WRITE_ANY), _gone_doc(APP, "c", "del")),
    Probe("findAndModify app.c (remove)", APP,
          lambda r: {"findAndModify": "c", "query": {"_id": f"fam-{r}"}, "remove": True},
          _names(WRITE_APP, WRITE_ANY), _gone_doc(APP, "c", "fam")),
    Probe("delete app.system.buckets.weather (matching nothing)", APP,
          lambda r: {"delete": BUCKETS, "deletes": [{"q": {"_id": "none"}, "limit": 1}]},
          _names(WRITE_ANY)),  # restore and dbAdminAnyDatabase hold no remove there
    # DDL
    Probe("createIndexes app.c", APP,
          lambda r: {"createIndexes": "c", "indexes": [{"key": {f"f_{r}": 1},
                                                        "name": f"ix_{r}"}]},
          _names(WRITE_APP, DBADMIN_APP, WRITE_ANY, DBADMIN_ANY, RESTORE),
          lambda root, r: f"ix_{r}" in root[APP]["c"].index_information()),
    Probe("createIndexes app.system.buckets.weather", APP,
          lambda r: {"createIndexes": BUCKETS, "indexes": [{"key": {f"meta.{r}": 1},
                                                            "name": f"bix_{r}"}]},
          _names(WRITE_ANY, DBADMIN_ANY, RESTORE),
          lambda root, r: f"bix_{r}" in root[APP][BUCKETS].index_information()),
    Probe("create app.new_<role>", APP, lambda r: {"create": f"new_{r}"},
          _names(WRITE_APP, DBADMIN_APP, WRITE_ANY, DBADMIN_ANY, RESTORE),
          lambda root, r: f"new_{r}" in root[APP].list_collection_names()),
    Probe("create app.ts_<role> (time-series)", APP,
          lambda r: {"create": f"ts_{r}", "timeseries": {"timeField": "t"}},
          _names(WRITE_APP, DBADMIN_APP, WRITE_ANY, DBADMIN_ANY, RESTORE),
          lambda root, r: f"ts_{r}" in root[APP].list_collection_names()),
    Probe("drop app.drop_<role>", APP, lambda r: {"drop": f"drop_{r}"},
          _names(WRITE_APP, DBADMIN_APP, WRITE_ANY, DBADMIN_ANY, RESTORE),
          lambda root, r: f"drop_{r}" not in root[APP].list_collection_names()),
    Probe("collMod app.weather (time-series view)", APP,
          lambda r: {"collMod": "weather", "expireAfterSeconds": _ttl(r)},
          _names(DBADMIN_APP, DBADMIN_ANY, RESTORE),
          lambda root, r: _weather_ttl(root) == _ttl(r)),
    # renameCollectionSameDB on app suffices when the user can read the source or cannot
    # read the target (dbAdmin reads neither); restore has neither it nor find.
    Probe("renameCollection app.ren_<role> to app.renamed_<role>", "admin",
          lambda r: {"renameCollection": f"{APP}.ren_{r}", "to": f"{APP}.renamed_{r}"},
          _names(WRITE_APP, DBADMIN_APP, WRITE_ANY, DBADMIN_ANY),
          lambda root, r: f"renamed_{r}" in root[APP].list_collection_names()),
    Probe("dropDatabase scratch_<role>", "", lambda r: {"dropDatabase": 1},
          frozenset({"clusterAdmin", "dbAdminAnyDatabase", "root"}),
          lambda root, r: f"scratch_{r}" not in root.list_database_names()),
    # the server
    Probe("serverStatus", "admin", lambda r: {"serverStatus": 1}, _names(MONITOR, BACKUP)),
    Probe("hostInfo", "admin", lambda r: {"hostInfo": 1}, _names(MONITOR)),
    Probe("getCmdLineOpts", "admin", lambda r: {"getCmdLineOpts": 1}, _names(MONITOR)),
    Probe("getLog", "admin", lambda r: {"getLog": "startupWarnings"}, _names(MONITOR)),
    Probe("getParameter", "admin", lambda r: {"getParameter": 1, "slowOpThresholdMs": 1},
          _names(MONITOR, BACKUP, RESTORE)),
    Probe("setParameter", "admin", lambda r: {"setParameter": 1, "slowOpThresholdMs":
                                               _slow_ms(r)},
          frozenset({"clusterAdmin", "root"}),  # hostManager's
          lambda root, r: root.admin.command("getParameter", 1, slowOpThresholdMs=1)[
              "slowOpThresholdMs"] == _slow_ms(r)),
    # users and roles
    Probe("usersInfo app", APP, lambda r: {"usersInfo": 1},
          _names(USERADMIN_APP, USERADMIN_ANY, RESTORE)),
    Probe("usersInfo admin", "admin", lambda r: {"usersInfo": 1},
          _names(USERADMIN_ANY, RESTORE)),
    Probe("rolesInfo app", APP, lambda r: {"rolesInfo": 1},
          _names(USERADMIN_APP, USERADMIN_ANY, RESTORE)),
    Probe("createUser app", APP,
          lambda r: {"createUser": f"made_by_{r}", "pwd": "x", "roles": []},
          _names(USERADMIN_APP, USERADMIN_ANY, RESTORE),
          lambda root, r: _user_exists(root, f"made_by_{r}")),
    Probe("dropUser app", APP, lambda r: {"dropUser": f"victim_{r}"},
          _names(USERADMIN_APP, USERADMIN_ANY, RESTORE),
          lambda root, r: not _user_exists(root, f"victim_{r}")),
)
NO_AUTH_NEEDED = frozenset({"ping", "connectionStatus"})  # before authentication too


def _db_of(probe: Probe, role: str) -> str:
    return probe.db or f"scratch_{role}"


def _client(proc: BucketdProcess, **kw: Any) -> Client:
    return pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=10_000, **kw)


def _login(proc: BucketdProcess, role: str) -> Client:
    return _client(proc, username=f"as_{role}", password=f"pw-{role}",
                   authSource=APP if role in DATABASE_ROLES else "admin",
                   authMechanism="SCRAM-SHA-256")


@pytest.fixture(scope="module")
def matrix_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BucketdProcess]:
    proc = start_server(tmp_path_factory.mktemp("matrix"), "--auth")
    try:
        with _client(proc) as c:  # the localhost exception
            c.admin.command("createUser", "root", pwd="pw-root", roles=["root"])
        with _client(proc, username="root", password="pw-root") as root:
            _seed(root)
        yield proc
    finally:
        proc.stop()


def _seed(root: Client) -> None:
    app = root[APP]
    app.create_collection("weather", timeseries={"timeField": "t"})
    app["weather"].insert_many([{"t": datetime.datetime(2024, 1, 1, h)} for h in range(3)])
    docs: list[dict[str, Any]] = [{"_id": "seed"}]
    for role in ROLES:
        docs += [{"_id": f"upd-{role}"}, {"_id": f"del-{role}"}, {"_id": f"fam-{role}"}]
        app[f"drop_{role}"].insert_one({})
        app[f"ren_{role}"].insert_one({})
        root[f"scratch_{role}"]["x"].insert_one({})
        app.command("createUser", f"victim_{role}", pwd="x", roles=[])
        db = APP if role in DATABASE_ROLES else "admin"
        root[db].command("createUser", f"as_{role}", pwd=f"pw-{role}",
                         roles=[{"role": role, "db": db}])
    app["c"].insert_many(docs)
    root[OTHER]["c"].insert_one({"_id": "seed"})
    root.admin["c"].insert_one({"_id": "seed"})


@pytest.fixture(scope="module")
def root(matrix_server: BucketdProcess) -> Iterator[Client]:
    with _client(matrix_server, username="root", password="pw-root") as c:
        yield c


def _outcome(client: Client, probe: Probe, role: str) -> str:
    """"allowed", "refused" (13 with mongod's message), or what else happened."""
    db = _db_of(probe, role)
    body = probe.body(role)
    try:
        reply = client[db].command(body)
    except OperationFailure as exc:
        msg = str(exc.details.get("errmsg", "")) if exc.details else str(exc)
        name = next(iter(body))
        expected = (f"Command {name} requires authentication" if role == ANONYMOUS
                    else f"not authorized on {db} to execute command {{ {name}: ")
        if exc.code == 13 and msg.startswith(expected):
            return "refused"
        return f"failed {exc.code}: {msg[:200]}"
    if reply.get("writeErrors"):
        return f"write errors: {reply['writeErrors']}"
    return "allowed"


@pytest.mark.parametrize("role", ROLES)
def test_role_matrix(matrix_server: BucketdProcess, root: Client, role: str) -> None:
    wrong: list[str] = []
    with _login(matrix_server, role) as client:
        for probe in PROBES:
            expected = "allowed" if role in probe.allowed else "refused"
            got = _outcome(client, probe, role)
            if got != expected:
                wrong.append(f"{probe.name}: expected {expected}, got {got}")
            if probe.trace is not None and probe.trace(root, role) != (expected == "allowed"):
                wrong.append(f"{probe.name}: {'no trace' if expected == 'allowed' else 'RAN'}"
                             " (data checked afterwards)")
    assert not wrong, f"{role}:\n  " + "\n  ".join(wrong)


def test_unauthenticated_client(matrix_server: BucketdProcess, root: Client) -> None:
    wrong: list[str] = []
    with _client(matrix_server) as client:
        for probe in PROBES:
            expected = "allowed" if probe.name in NO_AUTH_NEEDED else "refused"
            got = _outcome(client, probe, ANONYMOUS)
            if got != expected:
                wrong.append(f"{probe.name}: expected {expected}, got {got}")
    assert not wrong, "\n  ".join(wrong)
    assert root[APP]["c"].find_one({"_id": f"ins-{ANONYMOUS}"}) is None


def test_the_table_is_sound() -> None:
    for probe in PROBES:
        assert probe.allowed <= EVERYONE, probe.name
        assert "root" in probe.allowed, probe.name  # root holds every action probed here
    # each role is refused something and allowed something beyond the no-privilege probes
    for role in ROLES:
        allowed = {p.name for p in PROBES if role in p.allowed}
        assert allowed - {"ping", "connectionStatus", "listDatabases"}, role
        if role != "root":
            assert len(allowed) < len(PROBES), role

"""Operations commands through real clients, as a standalone mongod 8.0 answers them:
currentOp and `$currentOp` (a running aggregate seen from another connection, idle
connections and cursors, filters), killOp (a running aggregate or getMore stops with
Interrupted 11601), profile levels and `system.profile`, `$indexStats` counts (ordinary
and time-series collections), `$listLocalSessions`, replSetGetStatus (76) and the admin,
config and local databases of listDatabases.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pymongo
import pytest
from bson import Int64
from pymongo.errors import OperationFailure

from ..conftest import mongosh_path, start_server
from .mongosh_util import run_mongosh

DB = "ops_e2e"
N = 4000  # a self-join of this many documents without an index runs for seconds


def slow_pipeline(*, streaming: bool = False) -> list[dict[str, Any]]:
    """A nested-loop $lookup: one scan of the collection per document; all of it in the
    first batch, or (`streaming`) batch by batch."""
    lookup = {"$lookup": {"from": "big", "let": {"k": "$k"},
                          "pipeline": [{"$match": {"$expr": {"$eq": ["$_id", "$$k"]}}}],
                          "as": "j"}}
    return [lookup] if streaming else [lookup, {"$count": "n"}]


@pytest.fixture(scope="module")
def big(uri: str) -> Iterator[None]:
    with pymongo.MongoClient(uri) as c:
        c[DB].big.drop()
        c[DB].big.insert_many([{"_id": i, "k": (i * 7) % N} for i in range(N)])
        yield
        c[DB].big.drop()


class Background:
    """Runs `fn(client)` in a thread; `client` (its own connections) is closed by join."""

    def __init__(self, client: pymongo.MongoClient,
                 fn: Callable[[pymongo.MongoClient], Any]) -> None:
        self.client = client
        self.error: BaseException | None = None
        self.result: Any = None
        self.seconds = 0.0

        def run() -> None:
            start = time.monotonic()
            try:
                self.result = fn(self.client)
            except BaseException as exc:  # handed to the test
                self.error = exc
            self.seconds = time.monotonic() - start

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 120.0) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the operation did not stop"
        self.client.close()


def wait_for_op(client: pymongo.MongoClient, flt: dict[str, Any], timeout: float = 20.0
                ) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = client.admin.command({"currentOp": 1, **flt})["inprog"]
        if found:
            assert len(found) == 1, found
            return found[0]
        time.sleep(0.05)
    seen = client.admin.command({"currentOp": 1, "$all": True})["inprog"]
    raise AssertionError(f"no operation matching {flt} in {seen}")


def _my_ip(client: pymongo.MongoClient) -> str:
    """The address the server sees this test's connections come from."""
    you: str = client.admin.command("whatsmyuri")["you"]
    return you.rsplit(":", 1)[0]


def test_current_op_sees_a_running_aggregate_and_kill_op_interrupts_it(
        client: pymongo.MongoClient, uri: str, big: None) -> None:
    # the watching connection logs in first: with --auth a login reads the users on the
    # storage thread, which the slow operation keeps busy
    client.admin.command("ping")
    run = Background(pymongo.MongoClient(uri, appname="ops-slow-agg"),
                     lambda c: list(c[DB].big.aggregate(slow_pipeline())))
    op = wait_for_op(client, {"appName": "ops-slow-agg", "command.aggregate": "big"})
    assert op["type"] == "op" and op["active"] is True
    assert type(op["opid"]) is int
    assert op["op"] == "command"
    assert op["ns"] == f"{DB}.big"
    assert op["command"]["pipeline"] == slow_pipeline() and op["command"]["$db"] == DB
    assert isinstance(op["secs_running"], int) and op["microsecs_running"] > 0
    assert op["desc"] == f"conn{op['connectionId']}"
    assert op["client"].rsplit(":", 1)[0] == _my_ip(client)
    assert op["clientMetadata"]["application"]["name"] == "ops-slow-agg"
    assert datetime.datetime.fromisoformat(op["currentOpTime"]).tzinfo is not None
    assert "lsid" in op and op["redacted"] is False
    # the aggregation stage sees the same operation
    staged = list(client.admin.aggregate([{"$currentOp": {"allUsers": True}},
                                          {"$match": {"opid": op["opid"]}}]))
    assert [d["command"]["aggregate"] for d in staged] == ["big"]

    assert client.admin.command("killOp", op=op["opid"]) == {
        "info": "attempting to kill op", "ok": 1.0}
    run.join()
    assert isinstance(run.error, OperationFailure), run.result
    assert run.error.code == 11601
    assert run.error.details["codeName"] == "Interrupted"
    assert run.error.details["errmsg"] == "operation was interrupted"
    assert run.seconds < 60
    left = client.admin.command({"currentOp": 1, "opid": op["opid"]})["inprog"]
    assert left == []


def test_kill_op_interrupts_a_getmore_and_closes_its_cursor(
        client: pymongo.MongoClient, uri: str, big: None) -> None:
    def read(c: pymongo.MongoClient) -> Any:
        first = c[DB].command("aggregate", "big", pipeline=slow_pipeline(streaming=True),
                              cursor={"batchSize": 1})
        cursor_id = first["cursor"]["id"]
        try:
            c[DB].command("getMore", cursor_id, collection="big")
        except OperationFailure as exc:
            # the cursor went with its operation
            with pytest.raises(OperationFailure) as again:
                c[DB].command("getMore", cursor_id, collection="big")
            assert again.value.code == 43
            raise exc

    client.admin.command("ping")  # logged in before the slow read (see above)
    run = Background(pymongo.MongoClient(uri, appname="ops-slow-getmore"), read)
    op = wait_for_op(client, {"appName": "ops-slow-getmore", "op": "getmore"})
    assert op["ns"] == f"{DB}.big"
    cursor = op["cursor"]
    assert cursor["originatingCommand"]["aggregate"] == "big"
    assert cursor["nDocsReturned"] == 1 and cursor["nBatchesReturned"] == 1
    assert cursor["operationUsingCursorId"] == op["opid"]
    assert cursor["cursorId"] == op["command"]["getMore"]
    client.admin.command("killOp", op=op["opid"])
    run.join()
    assert isinstance(run.error, OperationFailure), run.result
    assert run.error.code == 11601


def test_current_op_idle_connections_cursors_and_filters(client: pymongo.MongoClient,
                                                         uri: str) -> None:
    coll = client[DB].small
    coll.drop()
    coll.insert_many([{"_id": i} for i in range(10)])
    with pymongo.MongoClient(uri, appname="ops-idle") as idle:
        idle.admin.command("ping")
        only_active = client.admin.command({"currentOp": 1, "appName": "ops-idle"})["inprog"]
        assert [d for d in only_active if d["active"]] == only_active
        everyone = client.admin.command({"currentOp": 1, "$all": True,
                                         "appName": "ops-idle", "active": False})["inprog"]
        assert everyone and all(d["type"] == "op" and "opid" not in d for d in everyone)
        assert {"desc", "connectionId", "client", "clientMetadata", "currentOpTime"} <= \
            set(everyone[0])
    mine = client.admin.command({"currentOp": 1, "command.currentOp": {"$exists": True}})
    assert len(mine["inprog"]) == 1 and mine["inprog"][0]["ns"] == "admin.$cmd"
    assert client.admin.command({"currentOp": 1, "op": "no-such-op"})["inprog"] == []

    reply = client[DB].command("find", "small", batchSize=2)
    cursor_id = reply["cursor"]["id"]
    idle_cursors = list(client.admin.aggregate([
        {"$currentOp": {"idleCursors": True}}, {"$match": {"type": "idleCursor"}},
        {"$match": {"cursor.cursorId": cursor_id}}]))
    assert len(idle_cursors) == 1
    entry = idle_cursors[0]
    assert entry["ns"] == f"{DB}.small"
    assert entry["cursor"]["nDocsReturned"] == 2
    assert entry["cursor"]["originatingCommand"]["find"] == "small"
    assert isinstance(entry["cursor"]["createdDate"], datetime.datetime)
    client[DB].command("killCursors", "small", cursors=[Int64(cursor_id)])


@pytest.mark.parametrize(("run", "code"), [
    (lambda c: c[DB].command("currentOp"), 13),
    (lambda c: list(c[DB].aggregate([{"$currentOp": {}}])), 73),
    (lambda c: list(c.admin.c.aggregate([{"$currentOp": {}}])), 73),
    (lambda c: list(c.admin.aggregate([{"$currentOp": {"bogus": True}}])), 9),
    (lambda c: list(c.admin.aggregate([{"$currentOp": {"allUsers": 1}}])), 9),
    (lambda c: list(c.admin.aggregate([{"$currentOp": "x"}])), 14),
    (lambda c: c.admin.command("killOp"), 4),
    (lambda c: c.admin.command("killOp", op="12"), 14),
    (lambda c: c[DB].command("killOp", op=1), 13),
    (lambda c: c.admin.command("replSetGetStatus"), 76),
    (lambda c: c[DB].command("profile", 1, sampleRate=1.5), 2),
])
def test_operations_commands_refuse_bad_input(client: pymongo.MongoClient,
                                              run: Callable[[pymongo.MongoClient], Any],
                                              code: int) -> None:
    with pytest.raises(OperationFailure) as err:
        run(client)
    assert err.value.code == code


def test_repl_set_get_status_on_a_standalone(client: pymongo.MongoClient) -> None:
    with pytest.raises(OperationFailure) as err:
        client.admin.command("replSetGetStatus")
    assert err.value.details["errmsg"] == "not running with --replSet"
    assert err.value.details["codeName"] == "NoReplicationEnabled"


def test_kill_op_of_no_operation_still_answers(client: pymongo.MongoClient) -> None:
    assert client.admin.command("killOp", op=2**31 - 1)["info"] == "attempting to kill op"


@pytest.fixture
def profiled(client: pymongo.MongoClient) -> Iterator[pymongo.database.Database]:
    db = client["ops_profile"]
    db.command("profile", 0)
    db.drop_collection("system.profile")
    db.drop_collection("c")
    yield db
    db.command("profile", 0, slowms=100, sampleRate=1.0)
    db.drop_collection("system.profile")


def test_profile_levels_and_system_profile(profiled: pymongo.database.Database,
                                           uri: str) -> None:
    db = profiled
    assert db.command("profile", -1) == {"was": 0, "slowms": 100, "sampleRate": 1.0,
                                         "ok": 1.0}
    db.c.insert_many([{"_id": i, "x": i} for i in range(5)])
    assert "system.profile" not in db.list_collection_names()  # level 0: nothing
    assert db.command("profile", 2)["was"] == 0
    with pymongo.MongoClient(uri, appname="ops-profiled") as other:
        got = list(other.ops_profile.c.find({"x": {"$gte": 2}}))
        users = other.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]
    assert len(got) == 3
    entries = list(db.system.profile.find({"op": "query", "ns": "ops_profile.c"}))
    assert len(entries) == 1
    entry = entries[0]
    assert entry["command"]["find"] == "c" and entry["command"]["filter"] == {"x": {"$gte": 2}}
    assert entry["nreturned"] == 3
    assert entry["planSummary"] == "COLLSCAN"
    assert (entry["keysExamined"], entry["docsExamined"]) == (0, 5)
    assert entry["responseLength"] > 0 and isinstance(entry["millis"], int)
    assert isinstance(entry["ts"], datetime.datetime)
    assert entry["client"] == _my_ip(db.client) and entry["appName"] == "ops-profiled"
    # with --auth (the compose run) the profiled client's user, else none
    assert entry["allUsers"] == users
    assert entry["user"] == "".join(f"{u['user']}@{u['db']}" for u in users)
    db.c.find_one({"_id": 3})
    by_id = db.system.profile.find_one({"command.filter": {"_id": 3}})
    assert by_id is not None and by_id["planSummary"] == "IXSCAN { _id: 1 }"
    assert (by_id["keysExamined"], by_id["docsExamined"]) == (1, 1)
    db.c.insert_one({"_id": 10})
    inserted = db.system.profile.find_one({"op": "insert"})
    assert inserted is not None and inserted["ninserted"] == 1
    assert "documents" not in inserted["command"]  # a document sequence, as mongod
    # level 1: only what is slower than slowms
    assert db.command("profile", 1, slowms=60_000) == {"was": 2, "slowms": 100,
                                                       "sampleRate": 1.0, "ok": 1.0}
    before = db.system.profile.count_documents({})
    list(db.c.find({"x": 1}))
    assert db.system.profile.count_documents({}) == before
    assert db.command("profile", -1)["slowms"] == 60_000
    assert db.command("profile", 0, slowms=100)["was"] == 1
    list(db.c.find())
    assert db.system.profile.count_documents({}) == before


def test_slowms_drives_the_slow_query_log_line(profiled: pymongo.database.Database,
                                               client: pymongo.MongoClient) -> None:
    profiled.command("profile", -1, slowms=0)
    profiled.command("find", "c", filter={"marker": "slow-line-e2e"})
    profiled.command("profile", -1, slowms=100)
    lines = client.admin.command("getLog", "global")["log"]
    assert any('"id":51803' in line and "slow-line-e2e" in line for line in lines)


def test_index_stats_counts_index_uses(client: pymongo.MongoClient) -> None:
    db = client[DB]
    db.drop_collection("ix")
    db.ix.insert_many([{"_id": i, "a": i % 10} for i in range(100)])
    db.ix.create_index("a")

    def accesses() -> dict[str, int]:
        return {d["name"]: d["accesses"]["ops"]
                for d in db.ix.aggregate([{"$indexStats": {}}])}

    assert accesses() == {"_id_": 0, "a_1": 0}
    list(db.ix.find({"a": 3}))
    db.ix.count_documents({"a": {"$gt": 5}})
    list(db.ix.find({"_id": {"$gt": 1000}}))
    list(db.ix.find({"b": 1}))  # a collection scan uses none
    assert accesses() == {"_id_": 1, "a_1": 2}
    stats = {d["name"]: d for d in db.ix.aggregate([{"$indexStats": {}}])}
    assert stats["a_1"]["key"] == {"a": 1}
    assert stats["a_1"]["spec"] == {"v": 2, "key": {"a": 1}, "name": "a_1"}
    assert isinstance(stats["a_1"]["accesses"]["since"], datetime.datetime)
    assert stats["a_1"]["host"].rpartition(":")[2].isdigit()


def test_index_stats_on_a_time_series_collection(client: pymongo.MongoClient) -> None:
    db = client[DB]
    db.drop_collection("tsix")
    db.create_collection("tsix", timeseries={"timeField": "t", "metaField": "m"})
    t0 = datetime.datetime(2024, 1, 1)
    db.tsix.insert_many([{"t": t0 + datetime.timedelta(minutes=i), "m": i % 3, "v": i}
                         for i in range(60)])
    db.tsix.create_index([("m", 1), ("v", -1)], name="mv")
    db.command("createIndexes", "system.buckets.tsix",
               indexes=[{"key": {"not_meta": 1}, "name": "bucketindex"}])
    before = {d["name"]: d for d in db.tsix.aggregate([{"$indexStats": {}}])}
    assert set(before) == {"m_1_t_1", "mv"}  # no user form for "bucketindex", no _id_
    assert before["mv"]["key"] == {"m": 1, "v": -1}
    assert before["m_1_t_1"]["spec"]["key"] == {"m": 1, "t": 1}
    list(db.tsix.find({"m": 1}))
    after = {d["name"]: d["accesses"]["ops"] for d in db.tsix.aggregate([{"$indexStats": {}}])}
    assert after["m_1_t_1"] == before["m_1_t_1"]["accesses"]["ops"] + 1
    if _authenticated(client):
        return  # as on mongod, root has no privilege on system.buckets.* (the compose run)
    raw = {d["name"] for d in db["system.buckets.tsix"].aggregate([{"$indexStats": {}}])}
    assert raw == {"bucketindex", "m_1_t_1", "mv"}  # clustered by _id: no _id_ index


def _authenticated(client: pymongo.MongoClient) -> bool:
    return bool(client.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"])


def test_list_local_sessions(client: pymongo.MongoClient) -> None:
    with client.start_session() as session:
        client[DB].command("ping", session=session)
        sid = session.session_id["id"]
        listed = list(client.admin.aggregate([{"$listLocalSessions": {}}]))
        ours = [d for d in listed if d["_id"]["id"] == sid]
        assert len(ours) == 1
        assert isinstance(ours[0]["lastUse"], datetime.datetime)
        assert len(ours[0]["_id"]["uid"]) == 32
        everyone = list(client[DB].aggregate([{"$listLocalSessions": {"allUsers": True}}]))
        assert any(d["_id"]["id"] == sid for d in everyone)
        client.admin.command("endSessions", [session.session_id])
        left = list(client.admin.aggregate([{"$listLocalSessions": {"allUsers": True}}]))
        assert all(d["_id"]["id"] != sid for d in left)
    with pytest.raises(OperationFailure) as err:
        list(client[DB].c.aggregate([{"$listLocalSessions": {}}]))
    assert err.value.code == 73


def test_list_databases_shows_admin_config_and_local(client: pymongo.MongoClient) -> None:
    dbs = {d["name"]: d for d in client.admin.command("listDatabases")["databases"]}
    for name in ("admin", "config", "local"):
        assert dbs[name]["empty"] is False and dbs[name]["sizeOnDisk"] > 0
    start = client.local.startup_log.find_one(sort=[("startTime", -1)])
    assert start is not None and isinstance(start["pid"], int)
    assert start["buildinfo"]["version"].startswith("8.0.")
    assert client.admin["system.version"].find_one({"_id": "featureCompatibilityVersion"})[
        "version"] == "8.0"
    ttl = {ix["name"]: ix for ix in client.config["system.sessions"].list_indexes()}
    assert ttl["lsidTTLIndex"]["expireAfterSeconds"] == 1800


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    proc = start_server(tmp_path_factory.mktemp("ops_auth"), "--auth")
    try:
        with pymongo.MongoClient(proc.uri) as c:  # the localhost exception
            c.admin.command("createUser", "root", pwd="root-pw", roles=["root"])
        with pymongo.MongoClient(proc.uri, username="root", password="root-pw") as root:
            for name in ("bob", "eve"):
                root.admin.command("createUser", name, pwd=f"{name}-pw",
                                   roles=[{"role": "readWrite", "db": DB}])
            root[DB].big.insert_many([{"_id": i, "k": (i * 7) % N} for i in range(N)])
        yield proc
    finally:
        proc.stop()


@pytest.mark.skipif(bool(os.environ.get("BUCKETD_URI")), reason="starts a server of its own")
def test_with_auth_users_see_and_kill_only_their_own_operations(auth_server: Any) -> None:
    def login(name: str, **kw: Any) -> pymongo.MongoClient:
        return pymongo.MongoClient(auth_server.uri, username=name, password=f"{name}-pw",
                                   **kw)

    bob, eve, root = login("bob"), login("eve"), login("root")
    for c in (bob, eve, root):  # logged in first: a login reads the users from storage,
        c.admin.command("ping")  # which is busy with the slow aggregate below
    run = Background(login("bob", appname="bob-slow"),
                     lambda c: list(c[DB].big.aggregate(slow_pipeline())))
    with bob, eve, root:
        op = wait_for_op(root, {"appName": "bob-slow", "command.aggregate": "big"})
        assert op["effectiveUsers"] == [{"user": "bob", "db": "admin"}]
        with pytest.raises(OperationFailure) as err:
            eve.admin.command("currentOp")
        assert err.value.code == 13
        mine = eve.admin.command({"currentOp": 1, "$ownOps": True})["inprog"]
        assert mine and all(o["effectiveUsers"] == [{"user": "eve", "db": "admin"}]
                            for o in mine)
        with pytest.raises(OperationFailure) as err:
            list(eve.admin.aggregate([{"$currentOp": {"allUsers": True}}]))
        assert err.value.code == 13
        with pytest.raises(OperationFailure) as err:
            eve.admin.command("killOp", op=op["opid"])
        assert err.value.code == 13
        seen = bob.admin.command({"currentOp": 1, "$ownOps": True, "appName": "bob-slow"})
        assert [o["opid"] for o in seen["inprog"]] == [op["opid"]]
        assert bob.admin.command("killOp", op=op["opid"])["info"] == "attempting to kill op"
        run.join()
    assert isinstance(run.error, OperationFailure) and run.error.code == 11601


@pytest.mark.mongosh
def test_mongosh_current_op_and_show_dbs(uri: str) -> None:
    script = r"""
const out = {};
const ops = db.currentOp();
out.ok = ops.ok;
out.mine = ops.inprog.filter(o => o.command && (o.command.currentOp ||
    (o.command.pipeline && o.command.pipeline[0].$currentOp))).map(o => o.ns);
out.all = db.currentOp(true).inprog.some(o => o.active === false);
out.shown = db.adminCommand({listDatabases: 1}).databases.map(d => d.name);
out.kill = db.killOp(2147483000).info;
const p = db.getSiblingDB('ops_mongosh');
out.set = p.setProfilingLevel(1, {slowms: 250});
out.status = p.getProfilingStatus();
out.reset = p.setProfilingLevel(0, {slowms: 100}).was;
print(EJSON.stringify(out));
"""
    result, output = run_mongosh(uri, script)
    assert result["ok"] == 1
    # mongosh asks with the currentOp command or (2.x) the $currentOp stage
    assert result["mine"] in (["admin.$cmd"], ["admin.$cmd.aggregate"])
    assert result["all"] is True
    assert {"admin", "config", "local"} <= set(result["shown"])
    assert result["kill"] == "attempting to kill op"
    assert result["set"] == {"was": 0, "slowms": 100, "sampleRate": 1, "ok": 1}
    assert {k: result["status"][k] for k in ("was", "slowms", "sampleRate")} == {
        "was": 1, "slowms": 250, "sampleRate": 1}
    assert result["reset"] == 1
    assert "MongoServerError" not in output
    exe = mongosh_path()
    assert exe is not None
    shown = subprocess.run([exe, uri, "--quiet"], input="show dbs\n", capture_output=True,
                           text=True, timeout=60)
    names = {line.replace("test>", "").split()[0] for line in shown.stdout.splitlines()
             if line.replace("test>", "").strip()}
    assert {"admin", "config", "local"} <= names, shown.stdout

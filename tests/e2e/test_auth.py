"""Authentication end to end: a server of its own with --auth, real clients (pymongo sync
and async, motor, mongosh, the Node.js driver), user management, the localhost exception,
the one-user-per-connection rule, logout, restarts, and the log lines."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest
from bson import Binary
from pymongo.errors import OperationFailure

from pytest_bucketd import BucketdProcess

from ..conftest import mongosh_path, start_server
from .node_driver import node_modules
from .scram_client import ScramClient

ROOT_USER, ROOT_PWD = "root", "s3cret-p4ss"
pytestmark = pytest.mark.skipif(bool(os.environ.get("BUCKETD_URI")),
                                reason="starts servers of its own")


def _client(proc: BucketdProcess, **kw: Any) -> pymongo.MongoClient[dict[str, Any]]:
    return pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=10_000, **kw)


def _code(fn: Any) -> int:
    with pytest.raises(OperationFailure) as info:
        fn()
    assert info.value.code is not None
    return info.value.code


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BucketdProcess]:
    proc = start_server(tmp_path_factory.mktemp("auth"), "--auth")
    try:
        with _client(proc) as c:  # the localhost exception makes the first user
            c.admin.command("createUser", ROOT_USER, pwd=ROOT_PWD, roles=["root"])
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def root(auth_server: BucketdProcess) -> Iterator[pymongo.MongoClient[dict[str, Any]]]:
    with _client(auth_server, username=ROOT_USER, password=ROOT_PWD) as c:
        yield c


def _user(root: pymongo.MongoClient[dict[str, Any]], db: str, name: str, **kw: Any) -> None:
    root[db].command("createUser", name, **{"pwd": "pw-" + name, "roles": [], **kw})


# --- the gate and the localhost exception -------------------------------------------------

def test_localhost_exception(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--auth")
    try:
        with _client(proc) as c:
            assert c.admin.command("ping")["ok"] == 1  # handshake commands need no user
            assert _code(lambda: c.test.c.find_one()) == 13
            # the exception covers createUser on admin, granting roles on admin only
            assert _code(lambda: c.test.command("createUser", "u", pwd="p", roles=[])) == 13
            assert _code(lambda: c.admin.command("createUser", "u", pwd="p",
                                                 roles=[{"role": "read", "db": "test"}])) == 13
            c.admin.command("createUser", "first", pwd="p", roles=["root"])
            with pytest.raises(OperationFailure) as info:
                c.admin.command("createUser", "second", pwd="p", roles=["root"])
            assert info.value.code == 13
            assert info.value.details["errmsg"] == "Command createUser requires authentication"
        with _client(proc, username="first", password="p") as c:
            assert c.admin.command("usersInfo", 1)["users"][0]["user"] == "first"
    finally:
        proc.stop()


def test_unauthenticated_commands(auth_server: BucketdProcess) -> None:
    with _client(auth_server) as c:
        with pytest.raises(OperationFailure) as info:
            c.test.c.find_one()
        assert info.value.code == 13
        assert info.value.details["errmsg"] == "Command find requires authentication"
        assert c.admin.command("buildInfo")["ok"] == 1
        status = c.admin.command("connectionStatus")["authInfo"]
        assert status == {"authenticatedUsers": [], "authenticatedUserRoles": []}


# --- clients authenticate -----------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-1", None])
def test_pymongo_mechanisms(auth_server: BucketdProcess, mechanism: str | None) -> None:
    kw = {"authMechanism": mechanism} if mechanism else {}
    with _client(auth_server, username=ROOT_USER, password=ROOT_PWD, **kw) as c:
        c.test.c.insert_one({"x": 1})
        assert c.test.c.find_one({"x": 1}) is not None
        info = c.admin.command("connectionStatus")["authInfo"]
        assert info["authenticatedUsers"] == [{"user": ROOT_USER, "db": "admin"}]
        assert info["authenticatedUserRoles"] == [{"role": "root", "db": "admin"}]


def test_default_mechanism_negotiated(auth_server: BucketdProcess,
                                      root: pymongo.MongoClient[dict[str, Any]]) -> None:
    # A user with SCRAM-SHA-1 credentials only: the driver must learn from hello's
    # saslSupportedMechs that SCRAM-SHA-256 (its default) would fail.
    _user(root, "test", "sha1only", mechanisms=["SCRAM-SHA-1"])
    hello = root.test.command("hello", saslSupportedMechs="test.sha1only")
    assert hello["saslSupportedMechs"] == ["SCRAM-SHA-1"]
    assert "saslSupportedMechs" not in root.test.command("hello",
                                                         saslSupportedMechs="test.nobody")
    with _client(auth_server, username="sha1only", password="pw-sha1only",
                 authSource="test") as c:
        assert c.test.command("connectionStatus")["authInfo"]["authenticatedUsers"] == [
            {"user": "sha1only", "db": "test"}]
    with _client(auth_server, username="sha1only", password="pw-sha1only", authSource="test",
                 authMechanism="SCRAM-SHA-256") as c:
        assert _code(lambda: c.test.command("ping")) == 18


@pytest.mark.parametrize("username, password", [(ROOT_USER, "wrong"), ("nobody", "x")])
def test_wrong_password_and_unknown_user(auth_server: BucketdProcess, username: str,
                                         password: str) -> None:
    with _client(auth_server, username=username, password=password) as c:
        with pytest.raises(OperationFailure) as info:
            c.admin.command("ping")
        assert info.value.code == 18
        assert info.value.details["errmsg"] == "Authentication failed."


def test_async_pymongo_and_motor(auth_server: BucketdProcess) -> None:
    from motor.motor_asyncio import AsyncIOMotorClient
    from pymongo import AsyncMongoClient

    async def run() -> None:
        for cls in (AsyncMongoClient, AsyncIOMotorClient):
            c: Any = cls(auth_server.uri, username=ROOT_USER, password=ROOT_PWD,
                         serverSelectionTimeoutMS=10_000)
            try:
                status = await c.admin.command("connectionStatus")
                assert status["authInfo"]["authenticatedUsers"] == [
                    {"user": ROOT_USER, "db": "admin"}]
                await c.test.async_c.insert_one({"by": cls.__name__})
                assert await c.test.async_c.count_documents({"by": cls.__name__}) == 1
            finally:
                result = c.close()
                if asyncio.iscoroutine(result):
                    await result
            bad: Any = cls(auth_server.uri, username=ROOT_USER, password="nope",
                           serverSelectionTimeoutMS=10_000)
            try:
                with pytest.raises(OperationFailure) as info:
                    await bad.admin.command("ping")
                assert info.value.code == 18
            finally:
                result = bad.close()
                if asyncio.iscoroutine(result):
                    await result

    asyncio.run(run())


@pytest.mark.mongosh
def test_mongosh(auth_server: BucketdProcess) -> None:
    exe = mongosh_path()
    if exe is None:
        pytest.fail("mongosh is not installed (the README test command installs it)")
    script = ("print(EJSON.stringify(db.getSiblingDB('admin').runCommand("
              "{connectionStatus: 1}).authInfo))")
    res = subprocess.run([exe, auth_server.uri, "-u", ROOT_USER, "-p", ROOT_PWD,
                          "--authenticationDatabase", "admin", "--quiet", "--eval", script],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1])["authenticatedUsers"] == [
        {"user": ROOT_USER, "db": "admin"}]
    res = subprocess.run([exe, auth_server.uri, "-u", ROOT_USER, "-p", "wrong",
                          "--authenticationDatabase", "admin", "--quiet", "--eval", "1"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "Authentication failed" in res.stdout + res.stderr


def test_node_driver(auth_server: BucketdProcess) -> None:
    modules = node_modules()
    node = shutil.which("node")
    if modules is None or node is None:
        pytest.skip("the Node.js driver is not installed")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-1"):
        script = f"""
const {{ MongoClient }} = require('mongodb');
(async () => {{
  const c = new MongoClient({json.dumps(auth_server.uri)}, {{
    auth: {{ username: {json.dumps(ROOT_USER)}, password: {json.dumps(ROOT_PWD)} }},
    authMechanism: {json.dumps(mechanism)}, serverSelectionTimeoutMS: 10000 }});
  const s = await c.db('admin').command({{ connectionStatus: 1 }});
  console.log(JSON.stringify(s.authInfo.authenticatedUsers));
  await c.close();
}})().catch(e => {{ console.error(e); process.exit(1); }});
"""
        res = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "NODE_PATH": str(modules)})
        assert res.returncode == 0, res.stdout + res.stderr
        assert json.loads(res.stdout.strip()) == [{"user": ROOT_USER, "db": "admin"}]


# --- the SASL conversation by hand ----------------------------------------------------------

def _conversation(db: Any, user: str, password: str) -> list[dict[str, Any]]:
    """The classic three-step exchange (no skipEmptyExchange); the replies."""
    cl = ScramClient(user, password)
    r1 = db.command("saslStart", 1, mechanism="SCRAM-SHA-256", payload=Binary(cl.first()),
                    autoAuthorize=1)
    assert r1["conversationId"] == 1 and r1["done"] is False
    r2 = db.command("saslContinue", 1, conversationId=1, payload=Binary(cl.final(r1["payload"])))
    assert r2["done"] is False and r2["payload"] == cl.expected
    r3 = db.command("saslContinue", 1, conversationId=1, payload=Binary(b""))
    return [r1, r2, r3]


def test_classic_exchange_one_user_per_connection_and_logout(
        auth_server: BucketdProcess, root: pymongo.MongoClient[dict[str, Any]]) -> None:
    _user(root, "admin", "alice", roles=["readAnyDatabase"])
    _user(root, "admin", "bob")
    with _client(auth_server, maxPoolSize=1) as c:
        assert _code(lambda: c.admin.command("saslContinue", 1, conversationId=1,
                                             payload=Binary(b""))) == 17
        replies = _conversation(c.admin, "alice", "pw-alice")
        assert replies[2]["done"] is True and replies[2]["payload"] == b""
        assert c.admin.command("connectionStatus")["authInfo"]["authenticatedUserRoles"] == [
            {"role": "readAnyDatabase", "db": "admin"}]
        c.app.command("find", "things")  # authenticated now, and readAnyDatabase reads it
        _conversation(c.admin, "alice", "pw-alice")  # the same user again: allowed
        with pytest.raises(OperationFailure) as info:
            _conversation(c.admin, "bob", "pw-bob")
        assert info.value.code == 5626701
        assert "Previously authenticated as: alice@admin" in info.value.details["errmsg"]
        c.test.command("logout")  # another database: alice stays
        assert c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]
        c.admin.command("logout")
        assert c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"] == []
        assert _code(lambda: c.test.c.find_one()) == 13
        # a wrong proof fails the conversation at its second step
        cl = ScramClient("bob", "not-bobs")
        r1 = c.admin.command("saslStart", 1, mechanism="SCRAM-SHA-256",
                             payload=Binary(cl.first()))
        assert _code(lambda: c.admin.command("saslContinue", 1, conversationId=1,
                                             payload=Binary(cl.final(r1["payload"])))) == 18
        assert _code(lambda: c.admin.command("saslStart", 1, mechanism="PLAIN",
                                             payload=Binary(b"x"))) == 334


def test_speculative_authenticate(auth_server: BucketdProcess) -> None:
    with _client(auth_server, maxPoolSize=1) as c:
        cl = ScramClient(ROOT_USER, ROOT_PWD)
        spec = {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": Binary(cl.first()),
                "options": {"skipEmptyExchange": True}, "db": "admin"}
        hello = c.admin.command("hello", speculativeAuthenticate=spec)
        first = hello["speculativeAuthenticate"]
        assert first["conversationId"] == 1 and first["done"] is False
        done = c.admin.command("saslContinue", 1, conversationId=1,
                               payload=Binary(cl.final(first["payload"])))
        assert done["done"] is True and done["payload"] == cl.expected
        assert c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"] == [
            {"user": ROOT_USER, "db": "admin"}]
        # an unknown user's speculative attempt leaves the field out
        spec["payload"] = Binary(ScramClient("nobody", "x").first())
        assert "speculativeAuthenticate" not in c.admin.command(
            "hello", speculativeAuthenticate=spec)


# --- user management ------------------------------------------------------------------------

def test_create_user_rules(root: pymongo.MongoClient[dict[str, Any]]) -> None:
    _user(root, "app", "dup", roles=["readWrite"])
    with pytest.raises(OperationFailure) as info:
        _user(root, "app", "dup")
    assert info.value.code == 51003
    assert info.value.details["errmsg"] == 'User "dup@app" already exists'
    with pytest.raises(OperationFailure) as info:
        _user(root, "app", "r", roles=["readWrit"])
    assert (info.value.code, info.value.details["errmsg"]) == (31, "Could not find role: "
                                                                   "readWrit@app")
    with pytest.raises(OperationFailure) as info:
        _user(root, "app", "r", roles=["root"])  # root exists on admin only
    assert info.value.code == 31
    assert _code(lambda: root.app.command("createUser", "nopwd", roles=[])) == 2
    assert _code(lambda: root.local.command("createUser", "l", pwd="p", roles=[])) == 2
    assert _code(lambda: root.app.command("createUser", "e", pwd="", roles=[])) == 2
    assert _code(lambda: root.app.command("createUser", "m", pwd="p", roles=[],
                                          mechanisms=["MD5"])) == 2
    assert _code(lambda: root.app.command("createUser", "noroles", pwd="p")) == 40414
    # $external users (X.509) have no password and external credentials
    ext = root["$external"]
    ext.command("createUser", "CN=client,O=bucketd", roles=[{"role": "read", "db": "app"}])
    assert _code(lambda: ext.command("createUser", "CN=x", pwd="p", roles=[])) == 2
    users = ext.command("usersInfo", "CN=client,O=bucketd", showCredentials=True)["users"]
    assert users[0]["credentials"] == {"external": True}
    assert users[0]["mechanisms"] == ["external"]


def test_users_info_forms(root: pymongo.MongoClient[dict[str, Any]]) -> None:
    _user(root, "info", "ann", roles=["read"], customData={"team": "a"})
    _user(root, "info", "ben", roles=[{"role": "readWrite", "db": "info"}])
    _user(root, "other", "cat")
    names = [u["user"] for u in root.info.command("usersInfo", 1)["users"]]
    assert names == ["ann", "ben"]
    ann = root.info.command("usersInfo", "ann")["users"][0]
    assert list(ann) == ["_id", "userId", "user", "db", "customData", "roles", "mechanisms"]
    assert ann["_id"] == "info.ann" and ann["userId"].subtype == 4
    assert ann["roles"] == [{"role": "read", "db": "info"}]
    assert ann["mechanisms"] == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    with_creds = root.info.command("usersInfo", {"user": "ann", "db": "info"},
                                   showCredentials=True)["users"][0]
    creds = with_creds["credentials"]
    assert creds["SCRAM-SHA-1"]["iterationCount"] == 10000
    assert creds["SCRAM-SHA-256"]["iterationCount"] == 15000
    assert len(base64.b64decode(creds["SCRAM-SHA-256"]["salt"])) == 28
    assert "pw-ann" not in json.dumps(with_creds, default=str)
    listed = root.info.command("usersInfo", ["ben", {"user": "cat", "db": "other"}, "nobody"])
    assert [(u["user"], u["db"]) for u in listed["users"]] == [("ben", "info"), ("cat", "other")]
    everyone = root.admin.command("usersInfo", {"forAllDBs": True})["users"]
    assert {("cat", "other"), ("ann", "info"), (ROOT_USER, "admin")} <= {
        (u["user"], u["db"]) for u in everyone}
    filtered = root.info.command("usersInfo", 1, filter={"customData.team": "a"})["users"]
    assert [u["user"] for u in filtered] == ["ann"]
    assert "customData" not in root.info.command("usersInfo", "ann",
                                                 showCustomData=False)["users"][0]


def test_update_grant_revoke_drop(auth_server: BucketdProcess,
                                  root: pymongo.MongoClient[dict[str, Any]]) -> None:
    _user(root, "ops", "dan", roles=["read"])
    with _client(auth_server, username="dan", password="pw-dan", authSource="ops",
                 maxPoolSize=1) as dan:
        def roles() -> list[dict[str, str]]:
            return dan.ops.command("connectionStatus")["authInfo"]["authenticatedUserRoles"]

        assert roles() == [{"role": "read", "db": "ops"}]
        root.ops.command("grantRolesToUser", "dan", roles=["readWrite", "read"])
        assert roles() == [{"role": "read", "db": "ops"}, {"role": "readWrite", "db": "ops"}]
        root.ops.command("revokeRolesFromUser", "dan", roles=["read"])
        assert roles() == [{"role": "readWrite", "db": "ops"}]
        assert _code(lambda: root.ops.command("grantRolesToUser", "dan", roles=[])) == 2
        assert _code(lambda: root.ops.command("grantRolesToUser", "nobody",
                                              roles=["read"])) == 11
        root.ops.command("updateUser", "dan", pwd="new-pass", customData={"k": 1})
        info = root.ops.command("usersInfo", "dan")["users"][0]
        assert info["customData"] == {"k": 1} and info["roles"] == [
            {"role": "readWrite", "db": "ops"}]
    with _client(auth_server, username="dan", password="pw-dan", authSource="ops") as old:
        assert _code(lambda: old.ops.command("ping")) == 18
    with _client(auth_server, username="dan", password="new-pass", authSource="ops") as new:
        assert new.ops.command("ping")["ok"] == 1
    assert _code(lambda: root.ops.command("updateUser", "dan")) == 2
    assert _code(lambda: root.ops.command("updateUser", "nobody", pwd="x")) == 11
    root.ops.command("updateUser", "dan", mechanisms=["SCRAM-SHA-256"])
    assert root.ops.command("usersInfo", "dan")["users"][0]["mechanisms"] == ["SCRAM-SHA-256"]
    root.ops.command("dropUser", "dan")
    with pytest.raises(OperationFailure) as info:
        root.ops.command("dropUser", "dan")
    assert (info.value.code, info.value.details["errmsg"]) == (11, "User 'dan@ops' not found")
    _user(root, "gone", "u1")
    _user(root, "gone", "u2")
    assert root.gone.command("dropAllUsersFromDatabase")["n"] == 2
    assert root.gone.command("usersInfo", 1)["users"] == []


# --- durability and logs --------------------------------------------------------------------

def test_users_survive_a_restart(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--auth")
    try:
        with _client(proc) as c:
            c.admin.command("createUser", "keeper", pwd="kept", roles=["root"])
        proc.stop()
        proc.start()
        with _client(proc, username="keeper", password="kept") as c:
            assert c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"] == [
                {"user": "keeper", "db": "admin"}]
        with _client(proc) as c:  # the exception stays closed after the restart
            assert _code(lambda: c.admin.command("createUser", "x", pwd="y", roles=[])) == 13
    finally:
        proc.stop()


def test_auth_log_lines(auth_server: BucketdProcess) -> None:
    with _client(auth_server, username=ROOT_USER, password="log-me-not-1234") as c, \
            pytest.raises(OperationFailure):
        c.admin.command("ping")
    with _client(auth_server, username=ROOT_USER, password=ROOT_PWD) as c:
        c.admin.command("ping")
    lines = [json.loads(line) for line in auth_server.log_text().splitlines()
             if line.startswith("{")]
    failed = [ln for ln in lines if ln["id"] == 5286307]
    assert failed and failed[-1]["attr"]["user"] == ROOT_USER
    assert "storedKey mismatch" in failed[-1]["attr"]["error"]
    assert failed[-1]["attr"]["result"] == 18
    assert any(ln["id"] == 20249 for ln in lines)
    ok = [ln for ln in lines if ln["id"] == 5286306]
    assert ok and ok[-1]["attr"]["mechanism"] == "SCRAM-SHA-256"
    assert ok[-1]["attr"]["isSpeculative"] is True  # pymongo authenticates in hello
    assert any(ln["id"] == 20250 for ln in lines)
    text = auth_server.log_text()
    assert "log-me-not-1234" not in text and ROOT_PWD not in text


def test_wrong_typed_auth_arguments(auth_server: BucketdProcess) -> None:
    from bson import Code

    with _client(auth_server) as c:
        assert _code(lambda: c.admin.command("saslStart", 1, mechanism=Code("x"),
                                             payload=Binary(b"n,,n=a,r=abcdefgh"))) == 14
        assert _code(lambda: c.admin.command("saslStart", 1, mechanism="SCRAM-SHA-256",
                                             payload=Binary(b"\xff\xfe"))) == 18
        assert _code(lambda: c.admin.command("saslStart", 1, mechanism="SCRAM-SHA-256",
                                             payload=1)) == 14
        assert _code(lambda: c.admin.command("hello", saslSupportedMechs="nodot")) == 2

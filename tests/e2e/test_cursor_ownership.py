"""Cursor ownership with --auth, as mongod has it, through pymongo with real logins.

mongod (getmore_cmd.cpp validateAuthorization, authorization_checks.cpp
checkAuthForGetMore / checkAuthForKillCursors, killcursors_common.h):
- getMore needs only authentication; the cursor must have been opened by the same user
  ("cursor id N was not created by the authenticated user", 13) who must still hold
  what opening it required ("not authorized for getMore with cursor id N", 13). A refused
  getMore leaves the cursor open for its owner.
- killCursors closes a cursor of the caller's own, or any with killAnyCursor (hostManager
  on the cluster); otherwise the whole command fails (13) and kills nothing. The check is
  made while authorizing the command, so mongod (commands.cpp checkAuthorization) words
  the refusal as any other: "not authorized on <db> to execute command { ... }". An
  unknown id is reported in cursorsNotFound.
- Without --auth a cursor belongs to no one.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator
from typing import Any

import pymongo
import pytest
from bson import Int64
from pymongo.errors import OperationFailure

from pytest_bucketd import BucketdProcess

from ..conftest import start_server

pytestmark = pytest.mark.skipif(bool(os.environ.get("BUCKETD_URI")),
                                reason="starts a server of its own")

Client = pymongo.MongoClient[dict[str, Any]]
DB, COLL, N = "owned", "c", 10
USERS = {  # name (on DB unless it says admin) -> roles
    "alice": [{"role": "readWrite", "db": DB}],
    "bob": [{"role": "readWrite", "db": DB}],
    "dave": [{"role": "read", "db": DB}],
    "hostmgr": [{"role": "hostManager", "db": "admin"}],
}


def _client(proc: BucketdProcess, user: str | None = None, **kw: Any) -> Client:
    if user is not None:
        auth_db = "admin" if user in ("root", "hostmgr") else DB
        kw.update(username=user, password="pw-" + user, authSource=auth_db)
    return pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=10_000, **kw)


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BucketdProcess]:
    proc = start_server(tmp_path_factory.mktemp("owners"), "--auth")
    try:
        with _client(proc) as c:
            c.admin.command("createUser", "root", pwd="pw-root", roles=["root"])
        with _client(proc, "root") as root:
            for name, roles in USERS.items():
                db = "admin" if name == "hostmgr" else DB
                root[db].command("createUser", name, pwd="pw-" + name, roles=roles)
            root[DB][COLL].insert_many([{"_id": i} for i in range(N)])
            root[DB].create_collection("ts", timeseries={"timeField": "t"})
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def clients(auth_server: BucketdProcess) -> Iterator[dict[str, Client]]:
    out = {name: _client(auth_server, name) for name in (*USERS, "root")}
    try:
        yield out
    finally:
        for c in out.values():
            c.close()


def _open(c: Client, coll: str = COLL) -> int:
    reply = c[DB].command("find", coll, batchSize=2)
    cid = reply["cursor"]["id"]
    assert cid != 0
    return int(cid)


def _get_more(c: Client, cid: int, coll: str = COLL) -> dict[str, Any]:
    return c[DB].command("getMore", Int64(cid), collection=coll, batchSize=2)["cursor"]


def _refused(fn: Any) -> str:
    with pytest.raises(OperationFailure) as info:
        fn()
    assert info.value.code == 13, info.value.details
    return str(info.value.details["errmsg"])


def test_getmore_by_another_user_is_refused(clients: dict[str, Client]) -> None:
    cid = _open(clients["alice"])
    for other in ("bob", "dave", "root"):  # even root: a cursor is its creator's only
        assert _refused(lambda o=other: _get_more(clients[o], cid)) == \
            f"cursor id {cid} was not created by the authenticated user"
    # the refusals consumed nothing and closed nothing
    assert [d["_id"] for d in _get_more(clients["alice"], cid)["nextBatch"]] == [2, 3]


def test_owner_needs_no_find_privilege_beyond_what_opened_it(
        clients: dict[str, Client]) -> None:
    cid = _open(clients["dave"])  # read only
    assert [d["_id"] for d in _get_more(clients["dave"], cid)["nextBatch"]] == [2, 3]
    clients["dave"][DB].command("killCursors", COLL, cursors=[Int64(cid)])


def test_time_series_and_list_cursors_belong_to_their_opener(
        clients: dict[str, Client]) -> None:
    clients["root"][DB]["ts"].insert_many(
        [{"t": datetime.datetime(2024, 1, 1, 0, i)} for i in range(5)])
    cid = _open(clients["alice"], "ts")
    assert _refused(lambda: _get_more(clients["bob"], cid, "ts")) == \
        f"cursor id {cid} was not created by the authenticated user"
    assert len(_get_more(clients["alice"], cid, "ts")["nextBatch"]) == 2
    for i in range(3):
        clients["root"][DB].create_collection(f"extra{i}")
    listed = clients["alice"][DB].command("listCollections", cursor={"batchSize": 1})
    lcid = int(listed["cursor"]["id"])
    assert lcid != 0
    assert _refused(lambda: _get_more(clients["bob"], lcid, "$cmd.listCollections"))
    assert _get_more(clients["alice"], lcid, "$cmd.listCollections")["nextBatch"]


def test_killcursors_of_another_users_cursor(clients: dict[str, Client]) -> None:
    alices = _open(clients["alice"])
    bobs = _open(clients["bob"])
    # one foreign cursor in the list refuses the whole command: bob's own stays open too
    assert _refused(lambda: clients["bob"][DB].command(
        "killCursors", COLL, cursors=[Int64(bobs), Int64(alices)])).startswith(
        f"not authorized on {DB} to execute command {{ killCursors: \"{COLL}\", cursors: [ ")
    assert _get_more(clients["alice"], alices)["nextBatch"]
    assert _get_more(clients["bob"], bobs)["nextBatch"]
    # an unknown id is not an authorization matter
    reply = clients["bob"][DB].command("killCursors", COLL, cursors=[Int64(bobs), Int64(12345)])
    assert reply["cursorsKilled"] == [bobs] and reply["cursorsNotFound"] == [12345]
    # killAnyCursor on the cluster (hostManager) kills anyone's
    reply = clients["hostmgr"][DB].command("killCursors", COLL, cursors=[Int64(alices)])
    assert reply["cursorsKilled"] == [alices]
    with pytest.raises(OperationFailure) as info:
        _get_more(clients["alice"], alices)
    assert info.value.code == 43  # CursorNotFound


def test_getmore_after_the_opening_privilege_was_revoked(auth_server: BucketdProcess,
                                                         clients: dict[str, Client]) -> None:
    root = clients["root"]
    root[DB].command("createUser", "erin", pwd="pw-erin", roles=["read"])
    with _client(auth_server, "erin") as erin:
        cid = _open(erin)
        assert _get_more(erin, cid)["nextBatch"]
        root[DB].command("revokeRolesFromUser", "erin", roles=["read"])
        assert _refused(lambda: _get_more(erin, cid)) == \
            f"not authorized for getMore with cursor id {cid}"
        root[DB].command("grantRolesToUser", "erin", roles=["read"])
        assert _get_more(erin, cid)["nextBatch"]  # still open


def test_getmore_after_logout_and_unauthenticated(auth_server: BucketdProcess,
                                                  clients: dict[str, Client]) -> None:
    with _client(auth_server, "alice", maxPoolSize=1) as alice:
        cid = _open(alice)
        alice[DB].command("logout")
        assert _refused(lambda: _get_more(alice, cid)) == \
            "Command getMore requires authentication"
        assert _refused(lambda: alice[DB].command("killCursors", COLL, cursors=[Int64(cid)])) \
            == "Command killCursors requires authentication"
    with _client(auth_server) as anonymous:
        assert _refused(lambda: _get_more(anonymous, cid)) == \
            "Command getMore requires authentication"
    reply = clients["alice"][DB].command("killCursors", COLL, cursors=[Int64(cid)])
    assert reply["cursorsKilled"] == [cid]  # the same user on another connection


def test_without_auth_a_cursor_belongs_to_no_one(server: BucketdProcess) -> None:
    with _client(server) as a, _client(server) as b:  # the session's server, no --auth
        a[DB].drop_collection("unowned")
        a[DB]["unowned"].insert_many([{"_id": i} for i in range(N)])
        cid = _open(a, "unowned")
        assert [d["_id"] for d in _get_more(b, cid, "unowned")["nextBatch"]] == [2, 3]
        assert b[DB].command("killCursors", "unowned", cursors=[Int64(cid)])[
            "cursorsKilled"] == [cid]

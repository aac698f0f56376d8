"""Authorization through the dispatcher: only with --auth and an authenticated user, and
the commands whose answers depend on the user's privileges (listDatabases,
listCollections, connectionStatus)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from server.auth.principals import AuthenticatedUser, RoleName, UserName
from server.context import ConnectionState, ServerState
from server.dispatch import execute

from ..harness import storage_state


@pytest.fixture
async def stored(tmp_path: Path) -> AsyncIterator[ServerState]:
    async with storage_state(tmp_path / "db") as state:
        setup = state.new_connection("a", "l")
        for db, coll in (("app", "c"), ("app", "d"), ("other", "x"), ("third", "y")):
            reply, _ = await execute(state, setup, {"insert": coll, "documents": [{"a": 1}]}, db)
            assert reply["ok"] == 1.0, reply
        reply, _ = await execute(state, setup, {"create": "weather", "timeseries": {
            "timeField": "t"}}, "app")
        assert reply["ok"] == 1.0, reply
        state.config.auth = True
        yield state


def as_user(state: ServerState, *roles: RoleName) -> ConnectionState:
    conn = state.new_connection("a", "l")
    conn.user = AuthenticatedUser(UserName("u", "app"), frozenset(roles))
    return conn


async def run(state: ServerState, conn: ConnectionState, body: dict[str, Any], db: str
              ) -> dict[str, Any]:
    reply, _ = await execute(state, conn, body, db)
    return reply


async def test_dispatch_refuses_with_unauthorized_and_mongods_message(stored: ServerState
                                                                      ) -> None:
    conn = as_user(stored, RoleName("read", "app"))
    reply = await run(stored, conn, {"insert": "c", "documents": [{"b": 1}], "$db": "app"}, "app")
    assert (reply["ok"], reply["code"], reply["codeName"]) == (0.0, 13, "Unauthorized")
    assert reply["errmsg"].startswith("not authorized on app to execute command { insert: "
                                      '"c", documents: [ { b: 1 } ]')
    reply = await run(stored, conn, {"find": "c", "filter": {}}, "app")
    assert reply["ok"] == 1.0 and len(reply["cursor"]["firstBatch"]) == 1
    assert stored.command_counts["insert"] == 4  # the refused insert did not run


async def test_without_auth_or_without_a_user_dispatch_checks_nothing(stored: ServerState
                                                                      ) -> None:
    nobody = stored.new_connection("a", "l")  # the authentication gate refuses it first
    reply = await run(stored, nobody, {"find": "c"}, "app")
    assert (reply["code"], reply["errmsg"]) == (13, "Command find requires authentication")
    stored.config.auth = False
    conn = as_user(stored, RoleName("read", "app"))
    reply = await run(stored, conn, {"insert": "c", "documents": [{}]}, "app")
    assert reply["ok"] == 1.0


async def test_admin_only_rule_still_comes_first(stored: ServerState) -> None:
    conn = as_user(stored, RoleName("root", "admin"))
    reply = await run(stored, conn, {"getLog": "global"}, "app")
    assert reply["code"] == 13
    assert reply["errmsg"] == "getLog may only be run against the admin database."


async def names(state: ServerState, conn: ConnectionState, body: dict[str, Any]) -> Any:
    reply = await run(state, conn, body, "admin")
    if reply["ok"] != 1.0:
        return reply
    return sorted(d["name"] for d in reply["databases"])


async def test_list_databases_shows_a_user_only_its_databases(stored: ServerState) -> None:
    reader = as_user(stored, RoleName("read", "app"), RoleName("readWrite", "other"))
    assert await names(stored, reader, {"listDatabases": 1, "nameOnly": True}) == [
        "app", "other"]
    assert await names(stored, reader, {"listDatabases": 1, "authorizedDatabases": True}) == [
        "app", "other"]
    refused = await names(stored, reader, {"listDatabases": 1, "authorizedDatabases": False})
    assert refused["code"] == 13
    assert refused["errmsg"] == "Insufficient permissions to list all databases"


async def test_list_databases_shows_all_to_who_may_list_them(stored: ServerState) -> None:
    monitor = as_user(stored, RoleName("clusterMonitor", "admin"))
    every = await names(stored, monitor, {"listDatabases": 1})
    assert {"app", "other", "third"} <= set(every)
    reader = as_user(stored, RoleName("readAnyDatabase", "admin"))
    assert await names(stored, reader, {"listDatabases": 1, "authorizedDatabases": False}) == \
        every


async def test_list_collections_authorized_collections(stored: ServerState) -> None:
    one = as_user(stored, RoleName("read", "other"))
    body = {"listCollections": 1, "nameOnly": True, "authorizedCollections": True}
    reply = await run(stored, one, body, "app")
    assert reply["code"] == 13  # no privilege at all in app

    reader = as_user(stored, RoleName("read", "app"))
    reply = await run(stored, reader, body, "app")
    listed = {d["name"] for d in reply["cursor"]["firstBatch"]}
    # read reaches the normal collections and the view, not system.buckets.* nor system.views
    assert listed == {"c", "d", "weather"}
    reply = await run(stored, reader, {"listCollections": 1}, "app")
    assert {"system.buckets.weather", "weather"} <= {d["name"] for d in
                                                     reply["cursor"]["firstBatch"]}

    reader_any = as_user(stored, RoleName("readAnyDatabase", "admin"))
    reply = await run(stored, reader_any, body, "app")
    assert "system.buckets.weather" in {d["name"] for d in reply["cursor"]["firstBatch"]}


async def test_connection_status_shows_user_roles_and_privileges(stored: ServerState) -> None:
    conn = as_user(stored, RoleName("read", "app"))
    reply = await run(stored, conn, {"connectionStatus": 1, "showPrivileges": True}, "admin")
    info = reply["authInfo"]
    assert info["authenticatedUsers"] == [{"user": "u", "db": "app"}]
    assert info["authenticatedUserRoles"] == [{"role": "read", "db": "app"}]
    privileges = info["authenticatedUserPrivileges"]
    assert {"resource": {"db": "app", "collection": ""}, "actions": [
        "changeStream", "collStats", "dbHash", "dbStats", "find", "killCursors",
        "listCollections", "listIndexes", "listSearchIndexes", "planCacheRead"]} in privileges
    assert {"db": "app", "collection": "system.js"} in [p["resource"] for p in privileges]
    nobody = stored.new_connection("a", "l")
    reply = await run(stored, nobody, {"connectionStatus": 1, "showPrivileges": True}, "admin")
    assert reply["authInfo"] == {"authenticatedUsers": [], "authenticatedUserRoles": [],
                                 "authenticatedUserPrivileges": []}


async def test_time_series_view_and_buckets_through_dispatch(stored: ServerState) -> None:
    reader = as_user(stored, RoleName("read", "app"))
    reply = await run(stored, reader, {"find": "weather"}, "app")
    assert reply["ok"] == 1.0
    reply = await run(stored, reader, {"find": "system.buckets.weather"}, "app")
    assert reply["code"] == 13
    reader_any = as_user(stored, RoleName("readAnyDatabase", "admin"))
    reply = await run(stored, reader_any, {"find": "system.buckets.weather"}, "app")
    assert reply["ok"] == 1.0

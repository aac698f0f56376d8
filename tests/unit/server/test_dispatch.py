"""`server.dispatch.execute` on its own: a real `ServerState`/`ConnectionState` (and a
real storage service on a temporary dbpath where a command needs one), no socket.

What is checked: the reply envelope (`ok`, `code`, `codeName`, `errmsg`), the checks
made before a handler runs (OP_QUERY only for the handshake, `$db`, admin-only
commands, API version, transactions), a handler's bug becoming InternalError while the
server keeps serving, the counters serverStatus reports, the slow-query and debug log
lines, and a cursor's life across find/getMore/killCursors/drop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from bson import Int64

from server.commands import COMMANDS, Command
from server.context import ConnectionState, ServerState
from server.dispatch import OP_QUERY_COMMANDS, execute

from .harness import LogWatch, bare_state, storage_state


@pytest.fixture
def state() -> ServerState:
    return bare_state()


@pytest.fixture
def conn(state: ServerState) -> ConnectionState:
    return state.new_connection("127.0.0.1:50000", "127.0.0.1:27017")


@pytest.fixture
async def stored(tmp_path: Path) -> AsyncIterator[ServerState]:
    async with storage_state(tmp_path / "db") as state:
        yield state


async def run(state: ServerState, conn: ConnectionState, body: dict[str, Any],
              db: str | None = "test", **kw: Any) -> dict[str, Any]:
    reply, _cmd = await execute(state, conn, body, db, **kw)
    return reply


def assert_error(reply: dict[str, Any], code: int, code_name: str) -> None:
    assert reply["ok"] == 0.0, reply
    assert (reply["code"], reply["codeName"]) == (code, code_name), reply
    assert isinstance(reply["errmsg"], str) and reply["errmsg"]


# -- the envelope and the counters --------------------------------------------------------------
async def test_ping_answers_ok_and_is_counted(state: ServerState, conn: ConnectionState) -> None:
    reply, cmd = await execute(state, conn, {"ping": 1}, "test")
    assert reply == {"ok": 1.0}
    assert isinstance(reply["ok"], float)
    assert cmd is COMMANDS["ping"]
    assert state.opcounters["command"] == 1
    assert state.command_counts == {"ping": 1}
    assert not state.command_failures


async def test_opcounters_follow_the_command_kind(stored: ServerState) -> None:
    conn = stored.new_connection("a", "b")
    assert (await run(stored, conn, {"insert": "c", "documents": [{"_id": 1}]}))["n"] == 1
    await run(stored, conn, {"find": "c"})
    await run(stored, conn, {"count": "c"})
    await run(stored, conn, {"delete": "c", "deletes": [{"q": {}, "limit": 0}]})
    await run(stored, conn, {"ping": 1})
    assert {k: v for k, v in stored.opcounters.items() if v} == {
        "insert": 1, "query": 2, "delete": 1, "command": 1}
    assert stored.command_counts == {"insert": 1, "find": 1, "count": 1, "delete": 1, "ping": 1}


async def test_unknown_command(state: ServerState, conn: ConnectionState) -> None:
    reply, cmd = await execute(state, conn, {"frobnicate": 1}, "test")
    assert_error(reply, 59, "CommandNotFound")
    assert reply["errmsg"] == "no such command: 'frobnicate'"
    assert cmd is None
    assert state.opcounters["command"] == 1
    assert not state.command_counts and not state.command_failures


async def test_empty_command_document(state: ServerState, conn: ConnectionState) -> None:
    reply, cmd = await execute(state, conn, {}, "test")
    assert_error(reply, 59, "CommandNotFound")
    assert cmd is None


async def test_a_handler_error_is_the_reply_and_counted_as_failed(
        state: ServerState, conn: ConnectionState) -> None:
    reply = await run(state, conn, {"hello": 1, "client": "not a document"})
    assert_error(reply, 14, "TypeMismatch")
    assert state.command_counts["hello"] == 1
    assert state.command_failures["hello"] == 1
    assert (await run(state, conn, {"hello": 1}))["ok"] == 1.0
    assert state.command_failures["hello"] == 1  # the success is not a failure


# -- checks made before the handler ------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(OP_QUERY_COMMANDS))
async def test_op_query_runs_the_handshake(state: ServerState, conn: ConnectionState,
                                           name: str) -> None:
    reply = await run(state, conn, {name: 1}, "admin", via_op_query=True)
    assert reply["ok"] == 1.0
    assert reply["isWritablePrimary" if name == "hello" else "ismaster"] is True
    assert conn.handshake_done


async def test_op_query_refuses_other_commands(state: ServerState,
                                               conn: ConnectionState) -> None:
    reply, cmd = await execute(state, conn, {"ping": 1}, "admin", via_op_query=True)
    assert_error(reply, 352, "UnsupportedOpQueryCommand")
    assert "Unsupported OP_QUERY command: ping" in reply["errmsg"]
    assert cmd is None
    assert "ping" not in state.command_counts


async def test_op_msg_needs_db(state: ServerState, conn: ConnectionState) -> None:
    reply = await run(state, conn, {"ping": 1}, None)
    assert_error(reply, 40571, "Location40571")
    assert reply["errmsg"] == "OP_MSG requests require a $db argument"


@pytest.mark.parametrize("db", ["", "a.b", "a b", "a\x00b", 5, ["test"]])
async def test_invalid_database_names(state: ServerState, conn: ConnectionState,
                                      db: Any) -> None:
    reply = await run(state, conn, {"ping": 1}, db)
    assert_error(reply, 73, "InvalidNamespace")
    assert "Invalid database name" in reply["errmsg"]


async def test_admin_only_commands(state: ServerState, conn: ConnectionState) -> None:
    reply = await run(state, conn, {"getParameter": 1, "logLevel": 1}, "test")
    assert_error(reply, 13, "Unauthorized")
    assert reply["errmsg"] == "getParameter may only be run against the admin database."
    assert state.command_failures["getParameter"] == 1
    ok = await run(state, conn, {"getParameter": 1, "logLevel": 1}, "admin")
    assert ok["ok"] == 1.0 and ok["logLevel"] == 0


@pytest.mark.parametrize(("api", "ok"), [("1", True), ("2", False), (1, False)])
async def test_api_version(state: ServerState, conn: ConnectionState, api: Any,
                           ok: bool) -> None:
    reply = await run(state, conn, {"ping": 1, "apiVersion": api})
    if ok:
        assert reply == {"ok": 1.0}
    else:
        assert_error(reply, 322, "APIVersionError")


@pytest.mark.parametrize("fields", [{"txnNumber": Int64(1)}, {"startTransaction": True},
                                    {"autocommit": False}])
async def test_transactions_are_refused_on_a_standalone(state: ServerState,
                                                        conn: ConnectionState,
                                                        fields: dict[str, Any]) -> None:
    reply = await run(state, conn, {"ping": 1, **fields})
    assert_error(reply, 20, "IllegalOperation")
    assert "replica set member or mongos" in reply["errmsg"]


async def test_start_transaction_false_is_not_a_transaction(state: ServerState,
                                                            conn: ConnectionState) -> None:
    assert await run(state, conn, {"ping": 1, "startTransaction": False}) == {"ok": 1.0}


# -- a bug in a handler ------------------------------------------------------------------------
async def test_a_handler_bug_is_internal_error_and_the_server_goes_on(
        state: ServerState, conn: ConnectionState, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(req: Any) -> dict[str, Any]:
        return {"x": 1 // 0}

    monkeypatch.setitem(COMMANDS, "ping", Command("ping", broken, "broken ping"))  # type: ignore[index]
    log = LogWatch()
    reply = await run(state, conn, {"ping": 1, "comment": "boom"})
    assert_error(reply, 1, "InternalError")
    assert reply["errmsg"] == "ZeroDivisionError: integer division or modulo by zero"
    assert state.command_failures["ping"] == 1
    [line] = log.by_id(21962)
    assert line["s"] == "E" and line["ctx"] == f"conn{conn.id}"
    assert line["attr"]["command"] == "ping" and line["attr"]["db"] == "test"
    assert "ZeroDivisionError" in line["attr"]["trace"]
    assert (await run(state, conn, {"hello": 1}))["ok"] == 1.0


# -- logs and metrics ---------------------------------------------------------------------------
async def test_slow_query_log_line(state: ServerState, conn: ConnectionState) -> None:
    state.params.set_runtime({"slowOpThresholdMs": 0})
    log = LogWatch()
    await run(state, conn, {"ping": 1, "comment": [1, 2, 3, 4], "short": [1, 2]})
    await run(state, conn, {"hello": 1})  # the handshake is never a slow query
    [line] = log.by_id(51803)
    attr = line["attr"]
    assert line["msg"] == "Slow query" and line["c"] == "COMMAND"
    assert attr["ns"] == "test.$cmd" and attr["ok"] == 1 and attr["type"] == "command"
    # arrays are logged as they are (mongod's way), long ones cut at maxLogSizeKB
    assert attr["command"] == {"ping": 1, "comment": [1, 2, 3, 4], "short": [1, 2]}
    assert isinstance(attr["durationMillis"], int)


async def test_no_slow_query_line_under_the_threshold(state: ServerState,
                                                      conn: ConnectionState) -> None:
    state.params.set_runtime({"slowOpThresholdMs": 60_000})
    log = LogWatch()
    await run(state, conn, {"ping": 1})
    assert 51803 not in log.ids()


async def test_debug_line_for_every_command_at_verbosity_1(
        state: ServerState, conn: ConnectionState, monkeypatch: pytest.MonkeyPatch) -> None:
    from server.log import LOG

    log = LogWatch()
    await run(state, conn, {"ping": 1})
    assert 21965 not in log.ids()
    monkeypatch.setattr(LOG, "verbosity", 1)
    await run(state, conn, {"frobnicate": 1})
    [line] = log.by_id(21965)
    assert line["s"] == "D1"
    assert line["attr"]["command"] == "frobnicate" and line["attr"]["code"] == 59
    assert line["attr"]["ok"] == 0.0


async def test_metrics_observe_each_command(state: ServerState, conn: ConnectionState) -> None:
    seen: list[tuple[str, float, bool]] = []

    class Metrics:
        def observe_command(self, command: str, seconds: float, ok: bool) -> None:
            seen.append((command, seconds, ok))

    state.metrics = Metrics()
    await run(state, conn, {"ping": 1})
    await run(state, conn, {"frobnicate": 1})
    await run(state, conn, {"hello": 1, "client": 3})
    assert [(name, ok) for name, _s, ok in seen] == [("ping", True), ("unknown", False),
                                                      ("hello", False)]
    assert all(0.0 <= s < 5.0 for _n, s, _ok in seen)


# -- the connection state -----------------------------------------------------------------------
async def test_hello_records_the_handshake_on_the_connection(state: ServerState,
                                                             conn: ConnectionState) -> None:
    reply = await run(state, conn, {"hello": 1, "client": {"driver": {"name": "unit"}},
                                    "compression": ["zstd", "bogus", "zlib", "zstd"]}, "admin")
    assert reply["ok"] == 1.0
    assert reply["connectionId"] == conn.id
    assert reply["compression"] == ["zstd", "zlib"]
    assert conn.compressors == ("zstd", "zlib")
    assert conn.client_metadata == {"driver": {"name": "unit"}}
    again = await run(state, conn, {"hello": 1, "client": {"driver": {"name": "unit"}}})
    assert_error(again, 186, "ClientMetadataCannotBeMutated")  # metadata only in the first hello
    later = await run(state, conn, {"hello": 1, "compression": ["snappy"]})
    assert later["compression"] == ["zstd", "zlib"]  # negotiated once


# -- cursors through the commands ---------------------------------------------------------------
async def test_a_cursor_across_find_get_more_and_kill(stored: ServerState) -> None:
    a = stored.new_connection("a", "l")
    b = stored.new_connection("b", "l")
    docs = [{"_id": i} for i in range(7)]
    assert (await run(stored, a, {"insert": "c", "documents": docs}))["n"] == 7
    first = await run(stored, a, {"find": "c", "sort": {"_id": 1}, "batchSize": 3})
    cursor = first["cursor"]
    cid = cursor["id"]
    assert first["ok"] == 1.0 and cursor["ns"] == "test.c" and cid != 0
    assert [d["_id"] for d in cursor["firstBatch"]] == [0, 1, 2]

    # Without authentication a cursor is not tied to its connection: another one continues it.
    more = await run(stored, b, {"getMore": cid, "collection": "c", "batchSize": 2})
    assert more["ok"] == 1.0 and more["cursor"]["id"] == cid
    assert [d["_id"] for d in more["cursor"]["nextBatch"]] == [3, 4]

    wrong = await run(stored, a, {"getMore": cid, "collection": "other"})
    assert_error(wrong, 13, "Unauthorized")

    killed = await run(stored, a, {"killCursors": "c", "cursors": [cid, Int64(42)]})
    assert killed["ok"] == 1.0
    assert killed["cursorsKilled"] == [cid] and killed["cursorsNotFound"] == [42]

    gone = await run(stored, a, {"getMore": cid, "collection": "c"})
    assert_error(gone, 43, "CursorNotFound")
    assert stored.opcounters["getmore"] == 3
    assert stored.command_failures["getMore"] == 2
    assert len(stored.cursors or ()) == 0


async def test_get_more_to_the_end_closes_the_cursor(stored: ServerState) -> None:
    conn = stored.new_connection("a", "l")
    await run(stored, conn, {"insert": "c", "documents": [{"_id": i} for i in range(5)]})
    first = await run(stored, conn, {"find": "c", "batchSize": 2})
    cid = first["cursor"]["id"]
    rest = await run(stored, conn, {"getMore": cid, "collection": "c"})
    assert sorted(d["_id"] for d in rest["cursor"]["nextBatch"]) == [2, 3, 4]
    assert rest["cursor"]["id"] == 0
    assert_error(await run(stored, conn, {"getMore": cid, "collection": "c"}), 43,
                 "CursorNotFound")


async def test_a_limit_within_the_first_batch_opens_no_cursor(stored: ServerState) -> None:
    conn = stored.new_connection("a", "l")
    await run(stored, conn, {"insert": "c", "documents": [{"_id": i} for i in range(5)]})
    reply = await run(stored, conn, {"find": "c", "limit": 2})
    assert reply["cursor"]["id"] == 0 and len(reply["cursor"]["firstBatch"]) == 2
    assert len(stored.cursors or ()) == 0


async def test_drop_closes_the_collections_cursors(stored: ServerState) -> None:
    conn = stored.new_connection("a", "l")
    for name in ("c", "keep"):
        await run(stored, conn, {"insert": name, "documents": [{"_id": i} for i in range(4)]})
    c = (await run(stored, conn, {"find": "c", "batchSize": 1}))["cursor"]["id"]
    keep = (await run(stored, conn, {"find": "keep", "batchSize": 1}))["cursor"]["id"]
    assert (await run(stored, conn, {"drop": "c"}))["ok"] == 1.0
    assert_error(await run(stored, conn, {"getMore": c, "collection": "c"}), 43,
                 "CursorNotFound")
    alive = await run(stored, conn, {"getMore": keep, "collection": "keep", "batchSize": 1})
    assert alive["ok"] == 1.0 and len(alive["cursor"]["nextBatch"]) == 1


async def test_get_more_argument_errors(stored: ServerState) -> None:
    conn = stored.new_connection("a", "l")
    assert_error(await run(stored, conn, {"getMore": "x", "collection": "c"}), 14,
                 "TypeMismatch")
    assert_error(await run(stored, conn, {"getMore": Int64(1), "collection": "c",
                                          "batchSize": -1}), 2, "BadValue")
    assert_error(await run(stored, conn, {"getMore": Int64(1), "collection": "c"}), 43,
                 "CursorNotFound")

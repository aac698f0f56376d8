"""The operation table and its reports: opids, namespaces and logical ops as mongod
reports them, killOp's flag, currentOp through dispatch (its own operation, filters),
interrupted write statements failing the command, and the profiler's choices."""

from __future__ import annotations

from typing import Any

import pytest

from server.context import ConnectionState, ServerState
from server.dispatch import execute
from server.operations import OperationTable, logical_op
from server.write_batches import WriteTally, run_statements
from storage import interrupt
from storage.errors import MongoError

from .harness import bare_state


@pytest.fixture
def state() -> ServerState:
    return bare_state()


@pytest.fixture
def conn(state: ServerState) -> ConnectionState:
    return state.new_connection("127.0.0.1:50000", "127.0.0.1:27017")


@pytest.mark.parametrize(("name", "body", "db", "ns", "op"), [
    ("find", {"find": "c"}, "d", "d.c", "query"),
    ("aggregate", {"aggregate": 1}, "admin", "admin.$cmd.aggregate", "command"),
    ("aggregate", {"aggregate": "c"}, "d", "d.c", "command"),
    ("getMore", {"getMore": 5, "collection": "c"}, "d", "d.c", "getmore"),
    ("insert", {"insert": "c"}, "d", "d.c", "insert"),
    ("update", {"update": "c"}, "d", "d.c", "update"),
    ("delete", {"delete": "c"}, "d", "d.c", "remove"),
    ("createUser", {"createUser": "bob"}, "admin", "admin.$cmd", "command"),
    ("ping", {"ping": 1}, "admin", "admin.$cmd", "command"),
])
def test_namespace_and_logical_op(conn: ConnectionState, name: str, body: dict[str, Any],
                                  db: str, ns: str, op: str) -> None:
    table = OperationTable()
    running = table.begin(conn, name, body, db)
    assert (running.ns, running.op, logical_op(name)) == (ns, op, op)


def test_opids_increase_and_kill_marks_the_operation(conn: ConnectionState) -> None:
    table = OperationTable()
    a = table.begin(conn, "ping", {"ping": 1}, "admin")
    b = table.begin(conn, "ping", {"ping": 1}, "admin")
    assert b.opid == a.opid + 1 and len(table) == 2
    assert table.kill(a.opid) is True and a.killed is not None
    assert a.killed.code == 11601 and a.killed.errmsg == "operation was interrupted"
    assert b.killed is None
    table.end(a)
    assert table.kill(a.opid) is False and list(table) == [b]


def test_the_command_without_its_document_sequences(conn: ConnectionState) -> None:
    op = OperationTable().begin(conn, "insert", {"insert": "c", "documents": [{}], "$db": "d"},
                                "d", ("documents",))
    assert op.command == {"insert": "c", "$db": "d"}


async def test_current_op_reports_itself_and_filters(state: ServerState,
                                                     conn: ConnectionState) -> None:
    reply, _ = await execute(state, conn, {"currentOp": 1, "$db": "admin"}, "admin")
    assert reply["ok"] == 1.0
    [me] = reply["inprog"]
    assert me["command"] == {"currentOp": 1, "$db": "admin"}
    assert me["desc"] == f"conn{conn.id}" and me["active"] is True
    reply, _ = await execute(state, conn, {"currentOp": 1, "op": "query"}, "admin")
    assert reply["inprog"] == []
    assert len(state.operations) == 0  # ended with their commands


async def test_current_op_truncates_a_long_command(state: ServerState,
                                                   conn: ConnectionState) -> None:
    body = {"currentOp": 1, "comment": "c", "x": {"$ne": "y" * 2000}}
    reply, _ = await execute(state, conn, body, "admin")
    assert reply["inprog"] and set(reply["inprog"][0]["command"]) == {"$truncated", "comment"}


def test_an_interrupted_statement_fails_the_whole_batch() -> None:
    def apply(i: int, statement: Any, tally: WriteTally) -> None:
        if i == 1:
            raise MongoError(11601, "operation was interrupted")
        tally.n += 1

    with pytest.raises(MongoError) as err:
        run_statements([1, 2, 3], ordered=False, apply=apply)
    assert err.value.code == 11601

    class Killed:
        killed = MongoError(11601, "operation was interrupted")

    with pytest.raises(MongoError):
        interrupt.run_for(Killed(), lambda: run_statements([1], ordered=True, apply=apply))


def test_other_write_errors_stay_write_errors() -> None:
    def apply(i: int, statement: Any, tally: WriteTally) -> None:
        raise MongoError(11000, "dup")

    tally = run_statements([1, 2], ordered=False, apply=apply)
    assert [i for i, _ in tally.errors] == [0, 1]


def test_profile_choices(state: ServerState, conn: ConnectionState) -> None:
    settings = state.profile
    op = OperationTable().begin(conn, "find", {"find": "c"}, "d")
    assert not settings.wants(op, 1000.0, 100)  # level 0
    settings.set_level("d", 1)
    assert not settings.wants(op, 5.0, 100) and settings.wants(op, 150.0, 100)
    settings.set_level("d", 2)
    assert settings.wants(op, 0.0, 100)
    hello = OperationTable().begin(conn, "hello", {"hello": 1}, "d")
    assert not settings.wants(hello, 0.0, 100)
    settings.set_filter("d", {"op": "insert"})
    assert not settings.keeps("d", {"op": "query"}) and settings.keeps("d", {"op": "insert"})

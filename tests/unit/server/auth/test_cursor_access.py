"""server.auth.cursor_access with the cursor manager: who may getMore and kill a cursor
(mongod's validateAuthorization and checkAuthForKillCursors), and that a refusal changes
nothing."""

from __future__ import annotations

from typing import Any

import pytest

from server.auth.authorize import authorize
from server.auth.cursor_access import claim, getmore_check, kill_check
from server.auth.principals import AuthenticatedUser, RoleName, UserName
from server.cursors import CursorManager
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

NS = "app.c"
FIND = {"find": "c"}


def _user(name: str, *roles: tuple[str, str]) -> AuthenticatedUser:
    return AuthenticatedUser(UserName(name, "app"),
                             frozenset(RoleName(r, db) for r, db in roles))


ALICE = _user("alice", ("read", "app"))
BOB = _user("bob", ("readWrite", "app"))
KILLER = _user("ops", ("hostManager", "admin"))


async def _open(mgr: CursorManager, owner: AuthenticatedUser, n: int = 10) -> int:
    reply: dict[str, Any] = {"cursor": await mgr.first_batch(
        NS, iter({"_id": i} for i in range(n)), batch_size=2)}
    claim(mgr, owner, authorize(owner, "find", FIND, "app"), reply)
    return int(reply["cursor"]["id"])


def _code(exc: pytest.ExceptionInfo[MongoError]) -> int:
    return exc.value.code


async def test_owner_continues_others_are_refused() -> None:
    mgr = CursorManager()
    cid = await _open(mgr, ALICE)
    with pytest.raises(MongoError) as info:
        await mgr.get_more(cid, NS, 2, getmore_check(BOB))
    assert _code(info) == ErrorCode.Unauthorized
    assert info.value.errmsg == f"cursor id {cid} was not created by the authenticated user"
    with pytest.raises(MongoError):
        await mgr.get_more(cid, NS, 2, getmore_check(None))
    more = await mgr.get_more(cid, NS, 2, getmore_check(ALICE))
    assert [d["_id"] for d in more["nextBatch"]] == [2, 3]  # the refusals took nothing


async def test_ownership_is_checked_before_the_namespace() -> None:
    mgr = CursorManager()
    cid = await _open(mgr, ALICE)
    with pytest.raises(MongoError) as info:
        await mgr.get_more(cid, "app.other", 2, getmore_check(BOB))
    assert "was not created by the authenticated user" in info.value.errmsg
    with pytest.raises(MongoError) as info:
        await mgr.get_more(cid, "app.other", 2, getmore_check(ALICE))
    assert "belongs to a different namespace" in info.value.errmsg


async def test_owner_without_the_opening_privilege_any_more() -> None:
    mgr = CursorManager()
    cid = await _open(mgr, ALICE)
    stripped = AuthenticatedUser(ALICE.name, frozenset())
    with pytest.raises(MongoError) as info:
        await mgr.get_more(cid, NS, 2, getmore_check(stripped))
    assert info.value.errmsg == f"not authorized for getMore with cursor id {cid}"
    assert (await mgr.get_more(cid, NS, 2, getmore_check(ALICE)))["nextBatch"]


async def test_kill_refuses_all_or_nothing() -> None:
    mgr = CursorManager()
    alices, bobs = await _open(mgr, ALICE), await _open(mgr, BOB)
    body = {"killCursors": "c", "cursors": [bobs, alices]}
    with pytest.raises(MongoError) as info:
        mgr.kill(NS, [bobs, alices, 99], kill_check(BOB, NS, body, "app"))
    assert _code(info) == ErrorCode.Unauthorized
    assert info.value.errmsg.startswith("not authorized on app to execute command "
                                        "{ killCursors: \"c\", cursors: [ ")
    assert len(mgr) == 2
    reply = mgr.kill(NS, [bobs, 99], kill_check(BOB, NS, body, "app"))
    assert reply["cursorsKilled"] == [bobs] and reply["cursorsNotFound"] == [99]
    reply = mgr.kill(NS, [alices], kill_check(KILLER, NS, body, "app"))  # killAnyCursor
    assert reply["cursorsKilled"] == [alices] and len(mgr) == 0


async def test_without_a_check_nothing_changes() -> None:
    mgr = CursorManager()
    cid = await _open(mgr, ALICE)
    assert (await mgr.get_more(cid, NS, 2))["nextBatch"]
    assert mgr.kill(NS, [cid])["cursorsKilled"] == [cid]


async def test_claim_leaves_an_owned_cursor_and_ignores_replies_without_one() -> None:
    mgr = CursorManager()
    cid = await _open(mgr, ALICE)
    claim(mgr, BOB, authorize(BOB, "find", FIND, "app"), {"cursor": {"id": cid}})
    cursor = mgr.get(cid)
    assert cursor is not None and cursor.owner == ALICE.name
    claim(mgr, BOB, authorize(BOB, "ping", {"ping": 1}, "app"), {"ok": 1})
    claim(mgr, BOB, authorize(BOB, "find", FIND, "app"), {"cursor": {"id": 0}})

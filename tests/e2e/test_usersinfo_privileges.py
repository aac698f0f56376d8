"""usersInfo with showPrivileges / showAuthenticationRestrictions, through pymongo.

As mongod (user_management_commands.cpp usersInfo, User::reportForUsersInfo,
serializeResolvedRoles): only exact user names may be asked for (IllegalOperation 20
"Privilege or restriction details require exact-match usersInfo queries" otherwise);
each user gets `inheritedRoles`, `inheritedPrivileges` and
`inheritedAuthenticationRestrictions` after its own fields (there is no `privileges`
field on a user). The privileges of `read` are the documented ones: its actions on the
database and on its `system.js` collection.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pymongo
import pytest
from pymongo.errors import OperationFailure

from pytest_bucketd import BucketdProcess

from ..conftest import start_server

pytestmark = pytest.mark.skipif(bool(os.environ.get("BUCKETD_URI")),
                                reason="starts a server of its own")

Client = pymongo.MongoClient[dict[str, Any]]
# The read role's actions (builtin_roles.yml readRoleActions), in mongod's order.
READ_ACTIONS = ["changeStream", "collStats", "dbHash", "dbStats", "find", "killCursors",
                "listCollections", "listIndexes", "listSearchIndexes", "planCacheRead"]
ADMIN_ROLES = ("dbOwner", "clusterMonitor", "readAnyDatabase", "root")


def _client(proc: BucketdProcess, **kw: Any) -> Client:
    return pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=10_000, **kw)


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BucketdProcess]:
    p = start_server(tmp_path_factory.mktemp("usersinfo"), "--auth")
    try:
        with _client(p) as c:
            c.admin.command("createUser", "root", pwd="pw", roles=["root"])
        with _client(p, username="root", password="pw") as root:
            root.shop.command("createUser", "reader", pwd="pw", roles=["read"],
                              customData={"team": "a"})
            root.shop.command("createUser", "mixed", pwd="pw",
                              roles=["readWrite", {"role": "clusterMonitor", "db": "admin"}])
            for role in ADMIN_ROLES:
                db = "shop" if role == "dbOwner" else "admin"
                root[db].command("createUser", f"as_{role}", pwd="pw",
                                 roles=[{"role": role, "db": db}])
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="module")
def root(proc: BucketdProcess) -> Iterator[Client]:
    with _client(proc, username="root", password="pw") as c:
        yield c


def test_read_role_privileges_as_documented(root: Client) -> None:
    user = root.shop.command("usersInfo", "reader", showPrivileges=True)["users"][0]
    assert list(user) == ["_id", "userId", "user", "db", "mechanisms", "customData", "roles",
                          "inheritedRoles", "inheritedPrivileges",
                          "inheritedAuthenticationRestrictions"]
    assert user["mechanisms"] == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    assert user["customData"] == {"team": "a"}
    assert user["inheritedRoles"] == [{"role": "read", "db": "shop"}]
    assert user["inheritedPrivileges"] == [
        {"resource": {"db": "shop", "collection": ""}, "actions": READ_ACTIONS},
        {"resource": {"db": "shop", "collection": "system.js"}, "actions": READ_ACTIONS}]
    assert user["inheritedAuthenticationRestrictions"] == []
    assert "credentials" not in user


def test_without_custom_data_and_with_credentials(root: Client) -> None:
    user = root.shop.command("usersInfo", {"user": "reader", "db": "shop"},
                             showPrivileges=True, showCustomData=False,
                             showCredentials=True)["users"][0]
    # mongod's order for a user described without its custom data
    assert list(user) == ["_id", "userId", "user", "db", "mechanisms", "roles", "credentials",
                          "inheritedRoles", "inheritedPrivileges",
                          "inheritedAuthenticationRestrictions"]
    assert set(user["credentials"]) == {"SCRAM-SHA-1", "SCRAM-SHA-256"}


def test_several_users_and_roles_across_databases(root: Client) -> None:
    users = root.shop.command("usersInfo", ["mixed", "nobody", "reader"],
                              showPrivileges=True)["users"]
    assert [u["user"] for u in users] == ["mixed", "reader"]
    mixed = users[0]
    assert mixed["inheritedRoles"] == [{"role": "clusterMonitor", "db": "admin"},
                                       {"role": "readWrite", "db": "shop"}]
    by_resource = {tuple(sorted(p["resource"].items())): p["actions"]
                   for p in mixed["inheritedPrivileges"]}
    shop = by_resource[(("collection", ""), ("db", "shop"))]
    assert {"find", "insert", "update", "remove", "collStats", "dbStats"} <= set(shop)
    assert "serverStatus" in by_resource[(("cluster", True),)]


def test_show_authentication_restrictions(root: Client) -> None:
    user = root.shop.command("usersInfo", "reader",
                             showAuthenticationRestrictions=True)["users"][0]
    assert user["authenticationRestrictions"] == []
    assert user["inheritedAuthenticationRestrictions"] == []
    assert user["inheritedRoles"] == [{"role": "read", "db": "shop"}]


@pytest.mark.parametrize("role", ADMIN_ROLES)
def test_privileges_are_those_the_user_is_granted(proc: BucketdProcess, root: Client,
                                                  role: str) -> None:
    db = "shop" if role == "dbOwner" else "admin"
    described = root[db].command("usersInfo", f"as_{role}", showPrivileges=True)["users"][0]
    with _client(proc, username=f"as_{role}", password="pw", authSource=db) as me:
        status = me.admin.command("connectionStatus", showPrivileges=True)["authInfo"]
        # a user may describe itself without viewUser
        own = me[db].command("usersInfo", f"as_{role}", showPrivileges=True)["users"][0]
    assert described["inheritedPrivileges"] == status["authenticatedUserPrivileges"]
    assert own["inheritedPrivileges"] == described["inheritedPrivileges"]
    assert described["inheritedRoles"] == [{"role": role, "db": db}]


def test_read_any_database_reaches_buckets(root: Client) -> None:
    user = root.admin.command("usersInfo", "as_readAnyDatabase",
                              showPrivileges=True)["users"][0]
    privileges = user["inheritedPrivileges"]
    assert {"resource": {"cluster": True}, "actions": ["listDatabases"]} in privileges
    assert {"resource": {"system_buckets": ""}, "actions": READ_ACTIONS} in privileges
    assert {"resource": {"db": "", "collection": ""}, "actions": READ_ACTIONS} in privileges


@pytest.mark.parametrize("arg, extra", [
    (1, {"showPrivileges": True}),
    ({"forAllDBs": True}, {"showPrivileges": True}),
    (1, {"showAuthenticationRestrictions": True}),
    (1, {"showPrivileges": True, "filter": {"user": "reader"}}),
])
def test_only_exact_names(root: Client, arg: Any, extra: dict[str, Any]) -> None:
    db = root.admin if isinstance(arg, dict) else root.shop
    with pytest.raises(OperationFailure) as info:
        db.command("usersInfo", arg, **extra)
    assert info.value.code == 20
    assert info.value.details is not None
    assert info.value.details["errmsg"] == \
        "Privilege or restriction details require exact-match usersInfo queries"


def test_without_show_privileges_nothing_is_added(root: Client) -> None:
    user = root.shop.command("usersInfo", "reader")["users"][0]
    assert not {"inheritedRoles", "inheritedPrivileges"} & set(user)

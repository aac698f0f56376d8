"""rolesInfo through pymongo, on a server without --auth (rolesInfo answers there too)."""

from __future__ import annotations

import pymongo
import pytest
from pymongo.errors import OperationFailure

READ_ACTIONS = ["changeStream", "collStats", "dbHash", "dbStats", "find", "killCursors",
                "listCollections", "listIndexes", "listSearchIndexes", "planCacheRead"]


def test_a_role_by_name_on_the_database(client: pymongo.MongoClient) -> None:
    reply = client["app"].command("rolesInfo", "read")
    assert reply["roles"] == [{"role": "read", "db": "app", "isBuiltin": True, "roles": [],
                               "inheritedRoles": []}]


def test_show_privileges_lists_them_as_mongod(client: pymongo.MongoClient) -> None:
    reply = client["app"].command({"rolesInfo": {"role": "read", "db": "app"},
                                   "showPrivileges": True})
    (role,) = reply["roles"]
    expected = [{"resource": {"db": "app", "collection": ""}, "actions": READ_ACTIONS},
                {"resource": {"db": "app", "collection": "system.js"}, "actions": READ_ACTIONS}]
    assert role["privileges"] == expected
    assert role["inheritedPrivileges"] == expected


def test_an_array_of_roles_and_admin_only_roles(client: pymongo.MongoClient) -> None:
    reply = client["app"].command({"rolesInfo": ["readWrite", {"role": "root", "db": "admin"},
                                                 {"role": "root", "db": "app"}, "nosuchrole"]})
    assert [(r["role"], r["db"]) for r in reply["roles"]] == [("readWrite", "app"),
                                                              ("root", "admin")]


def test_all_roles_of_a_database(client: pymongo.MongoClient) -> None:
    assert client["app"].command("rolesInfo", 1)["roles"] == []  # no user-defined roles
    builtin = client["app"].command({"rolesInfo": 1, "showBuiltinRoles": True})["roles"]
    assert {r["role"] for r in builtin} == {"read", "readWrite", "dbAdmin", "dbOwner",
                                            "userAdmin", "enableSharding"}
    admin = client["admin"].command({"rolesInfo": 1, "showBuiltinRoles": True})["roles"]
    assert {"root", "clusterAdmin", "readAnyDatabase", "backup", "restore",
            "__system"} <= {r["role"] for r in admin}


def test_read_any_database_reaches_system_buckets(client: pymongo.MongoClient) -> None:
    reply = client["admin"].command({"rolesInfo": "readAnyDatabase", "showPrivileges": True})
    resources = [p["resource"] for p in reply["roles"][0]["privileges"]]
    assert {"system_buckets": ""} in resources
    assert {"cluster": True} in resources
    assert {"db": "", "collection": ""} in resources


@pytest.mark.parametrize("value", [2, True, 1.5, None])
def test_a_bad_argument_is_refused(client: pymongo.MongoClient, value: object) -> None:
    with pytest.raises(OperationFailure) as info:
        client["app"].command({"rolesInfo": value})
    assert info.value.code == 2  # BadValue

"""The privileges commands require, computed from their bodies (mongod's rules), and the
registry's coverage by those rules."""

from __future__ import annotations

from typing import Any

import pytest

from server.auth.authorize import authorize, unauthorized_message
from server.auth.principals import AuthenticatedUser, RoleName, UserName
from server.auth.privileges import (
    CLUSTER,
    Privilege,
    PrivilegeSet,
    database,
    namespace,
)
from server.auth.required import RULES, UNKNOWN_COMMAND, pipeline_privileges, requirement
from server.commands import COMMANDS
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

# The commands the authentication branch adds; each needs a rule too.
AUTHN_COMMANDS = ("saslStart", "saslContinue", "logout", "authenticate", "createUser",
                  "updateUser", "dropUser", "dropAllUsersFromDatabase", "usersInfo",
                  "grantRolesToUser", "revokeRolesFromUser", "rolesInfo")


def actions_by_ns(privs: list[Privilege]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in privs:
        out.setdefault(p.resource.describe(), set()).update(p.actions)
    return out


def needs(command: str, body: dict[str, Any], db: str = "app") -> dict[str, set[str]]:
    req = requirement(command, body, db)
    assert len(req.alternatives) == 1
    return actions_by_ns(list(req.privileges()))


@pytest.mark.parametrize("name", sorted(set(COMMANDS) | set(AUTHN_COMMANDS)))
def test_every_command_has_a_rule(name: str) -> None:
    assert name in RULES


def test_a_command_without_a_rule_is_refused_to_all_but_system() -> None:
    root = AuthenticatedUser(UserName("r", "admin"), frozenset({RoleName("root", "admin")}))
    assert requirement("frobnicate", {"frobnicate": 1}, "app") is UNKNOWN_COMMAND
    with pytest.raises(MongoError):
        authorize(root, "frobnicate", {"frobnicate": 1}, "app")


# -- aggregate ------------------------------------------------------------------------------
def test_aggregate_reads_every_namespace_of_lookup_unionwith_graphlookup_and_facet() -> None:
    pipeline = [
        {"$lookup": {"from": "a", "localField": "x", "foreignField": "y", "as": "j"}},
        {"$lookup": {"from": "b", "pipeline": [{"$unionWith": "c"}], "as": "k"}},
        {"$unionWith": {"coll": "d", "pipeline": [
            {"$graphLookup": {"from": "e", "startWith": "$x", "connectFromField": "x",
                              "connectToField": "y", "as": "g"}}]}},
        {"$facet": {"f": [{"$lookup": {"from": "h", "pipeline": [], "as": "z"}}]}},
    ]
    got = needs("aggregate", {"aggregate": "src", "pipeline": pipeline})
    assert got == {f"app.{c}": {"find"} for c in ("src", "a", "b", "c", "d", "e", "h")}


def test_lookup_from_another_database_names_it() -> None:
    got = needs("aggregate", {"aggregate": "src", "pipeline": [
        {"$lookup": {"from": {"db": "other", "coll": "x"}, "pipeline": [], "as": "j"}}]})
    assert got == {"app.src": {"find"}, "other.x": {"find"}}


def test_out_needs_insert_and_remove_on_its_target() -> None:
    assert needs("aggregate", {"aggregate": "src", "pipeline": [{"$out": "dst"}]}) == {
        "app.src": {"find"}, "app.dst": {"insert", "remove"}}
    got = needs("aggregate", {"aggregate": "src", "bypassDocumentValidation": True,
                              "pipeline": [{"$out": {"db": "other", "coll": "dst"}}]})
    assert got == {"app.src": {"find"},
                   "other.dst": {"insert", "remove", "bypassDocumentValidation"}}


@pytest.mark.parametrize(("modes", "actions"), [
    ({}, {"insert", "update"}),  # merge / insert
    ({"whenMatched": "fail", "whenNotMatched": "insert"}, {"insert"}),
    ({"whenMatched": "replace", "whenNotMatched": "discard"}, {"update"}),
    ({"whenMatched": "keepExisting", "whenNotMatched": "insert"}, {"insert", "update"}),
    ({"whenMatched": [{"$set": {"a": 1}}], "whenNotMatched": "fail"}, {"update"}),
])
def test_merge_actions_follow_its_modes(modes: dict[str, Any], actions: set[str]) -> None:
    got = needs("aggregate", {"aggregate": "src", "pipeline": [
        {"$merge": {"into": {"db": "o", "coll": "t"}, **modes}}]})
    assert got == {"app.src": {"find"}, "o.t": actions}


def test_initial_sources_need_their_own_action_not_find() -> None:
    assert needs("aggregate", {"aggregate": "c", "pipeline": [{"$collStats": {}}]}) == {
        "app.c": {"collStats"}}
    assert needs("aggregate", {"aggregate": "c", "pipeline": [{"$indexStats": {}}]}) == {
        "app.c": {"indexStats"}}
    assert needs("aggregate", {"aggregate": 1, "pipeline": [{"$currentOp": {
        "allUsers": True}}]}, "admin") == {CLUSTER.describe(): {"inprog"}}
    assert needs("aggregate", {"aggregate": 1, "pipeline": [{"$documents": [{}]}]}) == {}


def test_a_facet_subpipeline_adds_no_find_of_its_own() -> None:
    privs = pipeline_privileges([{"$match": {}}], "app", "c", sub=True)
    assert privs == []


def test_explain_needs_what_the_explained_command_needs() -> None:
    assert needs("explain", {"explain": {"find": "c"}}) == {"app.c": {"find"}}
    assert needs("explain", {"explain": {"delete": "c", "deletes": []}}) == {
        "app.c": {"remove"}}


# -- writes ---------------------------------------------------------------------------------
def test_writes_add_bypass_document_validation_and_upsert_insert() -> None:
    assert needs("insert", {"insert": "c", "bypassDocumentValidation": True}) == {
        "app.c": {"insert", "bypassDocumentValidation"}}
    assert needs("insert", {"insert": "c", "bypassDocumentValidation": False}) == {
        "app.c": {"insert"}}
    assert needs("update", {"update": "c", "updates": [{"q": {}, "u": {}},
                                                       {"q": {}, "u": {}, "upsert": True}]}) \
        == {"app.c": {"update", "insert"}}
    assert needs("findAndModify", {"findAndModify": "c", "update": {}, "upsert": True}) == {
        "app.c": {"find", "update", "insert"}}
    assert needs("findAndModify", {"findAndModify": "c", "remove": True}) == {
        "app.c": {"find", "remove"}}


def test_bulk_write_needs_each_namespace_its_actions() -> None:
    body = {"bulkWrite": 1, "nsInfo": [{"ns": "a.x"}, {"ns": "b.y"}],
            "ops": [{"insert": 0, "document": {}}, {"update": 1, "filter": {}, "updateMods": {},
                                                    "upsert": True},
                    {"delete": 0, "filter": {}}]}
    assert needs("bulkWrite", body, "admin") == {"a.x": {"insert", "remove"},
                                                 "b.y": {"update", "insert"}}


def test_create_takes_create_collection_or_insert_and_a_view_reads_its_source() -> None:
    req = requirement("create", {"create": "t", "timeseries": {"timeField": "t"}}, "app")
    assert [actions_by_ns(list(a)) for a in req.alternatives] == [
        {"app.t": {"createCollection"}}, {"app.t": {"insert"}}]
    assert needs("create", {"create": "v", "viewOn": "src", "pipeline": [
        {"$lookup": {"from": "o", "localField": "a", "foreignField": "b", "as": "c"}}]}) == {
        "app.v": {"createCollection"}, "app.src": {"find"}, "app.o": {"find"}}


def test_a_time_series_view_and_its_buckets_are_different_namespaces() -> None:
    assert needs("find", {"find": "weather"}) == {"app.weather": {"find"}}
    assert needs("find", {"find": "system.buckets.weather"}) == {
        "app.system.buckets.weather": {"find"}}


def test_a_collection_argument_of_the_wrong_type_is_held_to_the_database() -> None:
    assert needs("find", {"find": 12}) == {database("app").describe(): {"find"}}


# -- users ----------------------------------------------------------------------------------
def _plain(user: str = "me", db: str = "app") -> AuthenticatedUser:
    return AuthenticatedUser(UserName(user, db), frozenset({RoleName("read", db)}))


def test_users_info_on_oneself_needs_nothing() -> None:
    me = _plain()
    authorize(me, "usersInfo", {"usersInfo": "me"}, "app")
    authorize(me, "usersInfo", {"usersInfo": {"user": "me", "db": "app"}}, "admin")
    with pytest.raises(MongoError):
        authorize(me, "usersInfo", {"usersInfo": "other"}, "app")
    with pytest.raises(MongoError):
        authorize(me, "usersInfo", {"usersInfo": 1}, "app")
    assert needs("usersInfo", {"usersInfo": {"forAllDBs": True}}, "admin") == {
        CLUSTER.describe(): {"viewUser"}}


def test_roles_info_on_ones_own_role_needs_nothing() -> None:
    me = _plain()
    authorize(me, "rolesInfo", {"rolesInfo": "read"}, "app")
    with pytest.raises(MongoError):
        authorize(me, "rolesInfo", {"rolesInfo": "readWrite"}, "app")


def test_update_user_password_needs_change_password_or_own_change_own_password() -> None:
    req = requirement("updateUser", {"updateUser": "me", "pwd": "x"}, "app", _plain())
    on_app = database("app").describe()
    assert [actions_by_ns(list(a)) for a in req.alternatives] == [
        {on_app: {"changePassword"}}, {on_app: {"changeOwnPassword"}}]
    other = requirement("updateUser", {"updateUser": "you", "pwd": "x"}, "app", _plain())
    assert len(other.alternatives) == 1
    # no built-in role grants changeOwnPassword: a read user cannot change its password
    with pytest.raises(MongoError):
        authorize(_plain(), "updateUser", {"updateUser": "me", "pwd": "x"}, "app")
    admin = AuthenticatedUser(UserName("a", "app"), frozenset({RoleName("userAdmin", "app")}))
    authorize(admin, "updateUser", {"updateUser": "me", "pwd": "x"}, "app")


def test_granting_roles_needs_grant_role_on_each_roles_database() -> None:
    assert needs("createUser", {"createUser": "u", "pwd": "p",
                                "roles": ["read", {"role": "read", "db": "other"}]}) == {
        database("app").describe(): {"createUser", "grantRole"},
        database("other").describe(): {"grantRole"}}
    assert needs("revokeRolesFromUser", {"revokeRolesFromUser": "u", "roles": ["read"]}) == {
        database("app").describe(): {"revokeRole"}}


# -- renameCollection -----------------------------------------------------------------------
def _grants(*privs: Privilege) -> PrivilegeSet:
    return PrivilegeSet(privs)


def test_rename_within_a_database_follows_mongods_read_rule() -> None:
    req = requirement("renameCollection", {"renameCollection": "app.a", "to": "app.b"}, "admin")
    same = Privilege.of(database("app"), "renameCollectionSameDB")
    assert req.satisfied_by(_grants(same))  # reads neither side
    assert req.satisfied_by(_grants(same, Privilege.of(namespace("app", "a"), "find")))
    # could read the destination but not the source: the rename would leak the source
    assert not req.satisfied_by(_grants(same, Privilege.of(namespace("app", "b"), "find")))
    cross = requirement("renameCollection", {"renameCollection": "app.a", "to": "o.b"},
                        "admin")
    assert not cross.satisfied_by(_grants(same))
    assert cross.satisfied_by(_grants(
        Privilege.of(namespace("app", "a"), "find", "dropCollection"),
        Privilege.of(namespace("o", "b"), "insert", "createIndex")))


# -- listCollections ------------------------------------------------------------------------
def test_list_collections_names_only_needs_any_privilege_in_the_database() -> None:
    one = _grants(Privilege.of(namespace("app", "c"), "find"))
    names = requirement("listCollections", {"listCollections": 1, "nameOnly": True,
                                            "authorizedCollections": True}, "app")
    full = requirement("listCollections", {"listCollections": 1}, "app")
    assert names.satisfied_by(one)
    assert not full.satisfied_by(one)
    assert not names.satisfied_by(_grants(Privilege.of(namespace("other", "c"), "find")))


# -- the message ----------------------------------------------------------------------------
def test_unauthorized_message_is_mongods_with_the_password_masked() -> None:
    msg = unauthorized_message("find", {"find": "c", "filter": {"a": 1}, "$db": "app"}, "app")
    assert msg == 'not authorized on app to execute command { find: "c", filter: { a: 1 }, ' \
                  '$db: "app" }'
    msg = unauthorized_message("createUser", {"createUser": "u", "pwd": "secret"}, "app")
    assert "secret" not in msg and 'pwd: "xxx"' in msg


def test_authorize_raises_unauthorized_code_13() -> None:
    with pytest.raises(MongoError) as info:
        authorize(_plain(), "insert", {"insert": "c", "documents": [{}]}, "app")
    assert info.value.code == ErrorCode.Unauthorized == 13

"""The privileges each command requires, computed from its body and `$db` as mongod does.

`requirement(command, body, db, user)` gives a `Requirement`: alternatives of which one
must be held in full (mongod's "createCollection or insert" is two alternatives), or, for
renameCollection, mongod's own test. A command without a rule in `RULES` requires what
only `__system` holds: every command bucketd serves must have a rule
(tests/unit/server/auth check that the registry is covered).

Namespaces are taken from the command as sent: a time-series collection's commands name
its view, so they need the action on the view; a command naming
`<db>.system.buckets.<coll>` needs it on that namespace, which only the `system_buckets`
grants (readAnyDatabase, readWriteAnyDatabase, dbAdminAnyDatabase, restore, root...) reach.
An argument of the wrong type is held to the database-wide privilege, so the command's own
parsing reports it only to a user who could have run it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .principals import AuthenticatedUser, RoleName, UserName
from .privileges import (
    ANY_NORMAL,
    CLUSTER,
    Privilege,
    PrivilegeSet,
    Resource,
    database,
    namespace,
)

__all__ = ["Requirement", "requirement", "RULES", "NOTHING", "pipeline_privileges",
           "UNKNOWN_COMMAND"]


@dataclass(frozen=True)
class Requirement:
    """Satisfied when every privilege of one alternative is held (or, when `check` is
    set, when it says so)."""

    alternatives: tuple[tuple[Privilege, ...], ...]
    check: Callable[[PrivilegeSet], bool] | None = None

    def satisfied_by(self, grants: PrivilegeSet) -> bool:
        if self.check is not None:
            return self.check(grants)
        return any(grants.allows_all(alt) for alt in self.alternatives)

    def privileges(self) -> tuple[Privilege, ...]:
        """The first alternative's privileges (what a single-way command needs)."""
        return self.alternatives[0] if self.alternatives else ()


NOTHING: Final = Requirement(((),))
# What no role but __system grants: the answer for a command without a rule.
UNKNOWN_COMMAND: Final = Requirement(((Privilege.of(CLUSTER, "internal"),),))


def need(*privileges: Privilege) -> Requirement:
    return Requirement((tuple(privileges),))


def either(*requirements: Requirement) -> Requirement:
    return Requirement(tuple(alt for r in requirements for alt in r.alternatives))


def both(a: Requirement, b: Requirement) -> Requirement:
    return Requirement(tuple(x + y for x in a.alternatives for y in b.alternatives))


Body = Mapping[str, Any]
Rule = Callable[[Body, str, "AuthenticatedUser | None"], Requirement]


def _target(body: Body, field: str, db: str) -> Resource:
    """The namespace a command's `field` names, or the database when it names none
    properly (the handler then refuses it)."""
    coll = body.get(field)
    if type(coll) is str and coll:
        return namespace(db, coll)
    return database(db)


def _split_ns(full: Any) -> tuple[str, str] | None:
    if type(full) is not str or "." not in full:
        return None
    db, _, coll = full.partition(".")
    return (db, coll) if db and coll else None


def _on(field: str, *actions: str) -> Rule:
    def rule(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
        return need(Privilege(_target(body, field, db), frozenset(actions)))
    return rule


def _on_db(*actions: str) -> Rule:
    def rule(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
        return need(Privilege(database(db), frozenset(actions)))
    return rule


def _on_cluster(*actions: str) -> Rule:
    def rule(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
        return need(Privilege(CLUSTER, frozenset(actions)))
    return rule


def _nothing(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    return NOTHING


def _bypass(body: Body) -> tuple[str, ...]:
    return ("bypassDocumentValidation",) if body.get("bypassDocumentValidation") is True \
        else ()


# --- CRUD -----------------------------------------------------------------------------

def _insert(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    return need(Privilege(_target(body, "insert", db), frozenset(("insert", *_bypass(body)))))


def _update(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    actions = {"update", *_bypass(body)}
    updates = body.get("updates")
    if isinstance(updates, list) and any(isinstance(u, Mapping) and u.get("upsert") is True
                                         for u in updates):
        actions.add("insert")
    return need(Privilege(_target(body, "update", db), frozenset(actions)))


def _find_and_modify(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    name = next(iter(body), "findAndModify")
    actions = {"find", *_bypass(body)}
    if body.get("remove") is True:
        actions.add("remove")
    else:
        actions.add("update")
        if body.get("upsert") is True:
            actions.add("insert")
    return need(Privilege(_target(body, name, db), frozenset(actions)))


def _bulk_write(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    ns_info = body.get("nsInfo")
    ops = body.get("ops")
    if not isinstance(ns_info, list) or not isinstance(ops, list):
        return NOTHING  # refused by the command's own parsing
    actions: dict[int, set[str]] = {}
    for op in ops:
        if not isinstance(op, Mapping) or not op:
            continue
        kind = next(iter(op))
        idx = op.get(kind)
        if type(idx) is not int:
            continue
        acts = actions.setdefault(idx, set(_bypass(body)))
        if kind == "insert":
            acts.add("insert")
        elif kind == "update":
            acts.add("update")
            if op.get("upsert") is True:
                acts.add("insert")
        elif kind == "delete":
            acts.add("remove")
    privs = []
    for idx, acts in sorted(actions.items()):
        if 0 <= idx < len(ns_info) and isinstance(ns_info[idx], Mapping):
            parts = _split_ns(ns_info[idx].get("ns"))
            if parts is not None:
                privs.append(Privilege(namespace(*parts), frozenset(acts)))
    return need(*privs)


# --- aggregation --------------------------------------------------------------------

_INITIAL_SOURCES: Final = frozenset({
    "$collStats", "$indexStats", "$currentOp", "$listSessions", "$listLocalSessions",
    "$documents", "$changeStream", "$planCacheStats", "$listCatalog", "$queryStats",
    "$listSampledQueries", "$shardedDataDistribution", "$listClusterCatalog",
})

# $merge's actions on its target by (whenMatched, whenNotMatched), as mongod has them.
_MERGE_ACTIONS: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {
    ("replace", "insert"): ("insert", "update"), ("replace", "fail"): ("update",),
    ("replace", "discard"): ("update",), ("merge", "insert"): ("insert", "update"),
    ("merge", "fail"): ("update",), ("merge", "discard"): ("update",),
    ("keepExisting", "insert"): ("insert", "update"), ("fail", "insert"): ("insert",),
    ("pipeline", "insert"): ("insert", "update"), ("pipeline", "fail"): ("update",),
    ("pipeline", "discard"): ("update",),
}


def _stage(stage: Any) -> tuple[str, Any]:
    if isinstance(stage, Mapping) and len(stage) == 1:
        name = next(iter(stage))
        return str(name), stage[name]
    return "", None


def _starts_with_documents(pipeline: Any) -> bool:
    return isinstance(pipeline, list) and bool(pipeline) and _stage(pipeline[0])[0] == \
        "$documents"


def pipeline_privileges(pipeline: Any, db: str, coll: str | None, bypass: bool = False,
                        *, sub: bool = False) -> list[Privilege]:
    """What running `pipeline` over `db.coll` (coll None: a collectionless aggregate)
    requires: find on every namespace it reads, each stage's own actions, and insert /
    remove / update on the targets of $out and $merge. A $facet's sub-pipelines
    (`sub=True`) read their parent's documents, so they add no find of their own."""
    out: list[Privilege] = []
    stages = pipeline if isinstance(pipeline, list) else []
    first = _stage(stages[0])[0] if stages else ""
    if not sub and first not in _INITIAL_SOURCES:
        out.append(Privilege.of(namespace(db, coll if coll is not None else "$cmd.aggregate"),
                                "find"))
    here = namespace(db, coll) if coll is not None else database(db)
    extra = ("bypassDocumentValidation",) if bypass else ()
    for stage in stages:
        name, spec = _stage(stage)
        if name == "$collStats":
            out.append(Privilege.of(here, "collStats"))
        elif name == "$indexStats":
            out.append(Privilege.of(here, "indexStats"))
        elif name == "$planCacheStats":
            out.append(Privilege.of(here, "planCacheRead"))
        elif name == "$changeStream":
            out.append(Privilege.of(here, "changeStream", "find"))
        elif name == "$currentOp":
            if isinstance(spec, Mapping) and spec.get("allUsers") is True:
                out.append(Privilege.of(CLUSTER, "inprog"))
        elif name in ("$listSessions", "$listLocalSessions"):
            if isinstance(spec, Mapping) and (spec.get("allUsers") is True or spec.get("users")):
                out.append(Privilege.of(CLUSTER, "listSessions"))
        elif name == "$lookup" and isinstance(spec, Mapping):
            out += _lookup_privileges(spec, db, bypass)
        elif name == "$graphLookup" and isinstance(spec, Mapping):
            if type(spec.get("from")) is str:
                out.append(Privilege.of(namespace(db, spec["from"]), "find"))
        elif name == "$unionWith":
            out += _union_with_privileges(spec, db, bypass)
        elif name == "$facet" and isinstance(spec, Mapping):
            for sub_pipeline in spec.values():
                out += pipeline_privileges(sub_pipeline, db, coll, bypass, sub=True)
        elif name == "$out":
            target = _out_target(spec, db)
            if target is not None:
                out.append(Privilege.of(target, "insert", "remove", *extra))
        elif name == "$merge":
            out += _merge_privileges(spec, db, extra)
    return out


def _lookup_privileges(spec: Mapping[str, Any], db: str, bypass: bool) -> list[Privilege]:
    frm = spec.get("from")
    sub_pipeline = spec.get("pipeline")
    if isinstance(frm, Mapping) and type(frm.get("db")) is str and type(frm.get("coll")) is str:
        fdb, fcoll = frm["db"], frm["coll"]
    elif type(frm) is str:
        fdb, fcoll = db, frm
    else:
        return pipeline_privileges(sub_pipeline, db, None, bypass) \
            if _starts_with_documents(sub_pipeline) else []
    if sub_pipeline is None:
        return [Privilege.of(namespace(fdb, fcoll), "find")]
    return pipeline_privileges(sub_pipeline, fdb, fcoll, bypass)


def _union_with_privileges(spec: Any, db: str, bypass: bool) -> list[Privilege]:
    if type(spec) is str:
        return [Privilege.of(namespace(db, spec), "find")]
    if not isinstance(spec, Mapping):
        return []
    coll = spec.get("coll")
    sub_pipeline = spec.get("pipeline", [])
    if type(coll) is str:
        return pipeline_privileges(sub_pipeline, db, coll, bypass)
    return pipeline_privileges(sub_pipeline, db, None, bypass)


def _out_target(spec: Any, db: str) -> Resource | None:
    if type(spec) is str and spec:
        return namespace(db, spec)
    if isinstance(spec, Mapping) and type(spec.get("coll")) is str:
        tdb = spec.get("db", db)
        return namespace(tdb, spec["coll"]) if type(tdb) is str else None
    return None


def _merge_privileges(spec: Any, db: str, extra: tuple[str, ...]) -> list[Privilege]:
    if type(spec) is str:
        spec = {"into": spec}
    if not isinstance(spec, Mapping):
        return []
    into = spec.get("into")
    if type(into) is str:
        target = namespace(db, into)
    elif isinstance(into, Mapping) and type(into.get("coll")) is str:
        tdb = into.get("db", db)
        if type(tdb) is not str:
            return []
        target = namespace(tdb, into["coll"])
    else:
        return []
    wm = spec.get("whenMatched", "merge")
    wm = "pipeline" if isinstance(wm, list) else wm
    wnm = spec.get("whenNotMatched", "insert")
    actions = _MERGE_ACTIONS.get((str(wm), str(wnm)), ("insert", "update"))
    return [Privilege.of(target, *actions, *extra)]


def _aggregate(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    target = body.get("aggregate")
    coll = target if type(target) is str and target else None
    if coll is None and target != 1:
        return need(Privilege.of(database(db), "find"))
    return need(*pipeline_privileges(body.get("pipeline"), db, coll,
                                     body.get("bypassDocumentValidation") is True))


def _explain(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    inner = body.get("explain")
    if not isinstance(inner, Mapping) or not inner:
        return NOTHING  # refused by explain's own parsing
    return requirement(str(next(iter(inner))), inner, db, user)


# --- DDL ------------------------------------------------------------------------------

def _view_privileges(body: Body, db: str) -> list[Privilege]:
    view_on = body.get("viewOn")
    if type(view_on) is not str or not view_on:
        return [Privilege.of(database(db), "find")]
    return pipeline_privileges(body.get("pipeline", []), db, view_on)


def _create(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    target = _target(body, "create", db)
    if "viewOn" in body:
        return need(Privilege.of(target, "createCollection"), *_view_privileges(body, db))
    return either(need(Privilege.of(target, "createCollection")),
                  need(Privilege.of(target, "insert")))


def _coll_mod(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    target = _target(body, "collMod", db)
    if "viewOn" in body:
        return need(Privilege.of(target, "collMod"), *_view_privileges(body, db))
    return need(Privilege.of(target, "collMod"))


def _rename_collection(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    source = _split_ns(body.get("renameCollection"))
    dest = _split_ns(body.get("to"))
    if source is None or dest is None:
        return need(Privilege.of(CLUSTER, "internal"))  # malformed: nobody but __system
    drop_target = bool(body.get("dropTarget"))
    src, dst = namespace(*source), namespace(*dest)

    def check(grants: PrivilegeSet) -> bool:
        # mongod's rule: within one database and outside system collections,
        # renameCollectionSameDB suffices when the user can read the source or cannot read
        # the destination (a rename must not reveal data the user could not read).
        same_db = source[0] == dest[0] and not source[1].startswith("system.") \
            and not dest[1].startswith("system.")
        if same_db and grants.allows(database(source[0]), "renameCollectionSameDB") and (
                not drop_target or grants.allows(dst, "dropCollection")) and (
                grants.allows(src, "find") or not grants.allows(dst, "find")):
            return True
        dest_actions = ("insert", "createIndex") + (("dropCollection",) if drop_target else ())
        return grants.allows_all([Privilege.of(src, "find", "dropCollection"),
                                  Privilege.of(dst, *dest_actions)])

    dest_actions = ("insert", "createIndex") + (("dropCollection",) if drop_target else ())
    return Requirement(((Privilege.of(src, "find", "dropCollection"),
                         Privilege.of(dst, *dest_actions)),), check)


# --- cursors and sessions -------------------------------------------------------------

def _get_more(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    # mongod's checkAuthForGetMore: only authentication (the cursor must be the user's
    # own and what opened it still granted: auth.cursor_access, with the cursor); `term`
    # is for replica-set members, which only __system is.
    if "term" in body:
        return need(Privilege.of(CLUSTER, "internal"))
    return NOTHING


def _kill_all_sessions(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    users = body.get("killAllSessions")
    if user is not None and isinstance(users, list) and users and all(
            isinstance(u, Mapping) and u.get("user") == user.name.user
            and u.get("db") == user.name.db for u in users):
        return NOTHING
    return need(Privilege.of(CLUSTER, "killAnySession"))


def _list_collections(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    names_only = body.get("authorizedCollections") is True and body.get("nameOnly") is True
    full = Privilege.of(database(db), "listCollections")

    def check(grants: PrivilegeSet) -> bool:
        return (names_only and grants.any_action_in_db(db)) or grants.allows_privilege(full)

    return Requirement(((full,),), check)


# --- users and roles ------------------------------------------------------------------

def _role_names(value: Any, db: str) -> list[RoleName]:
    out = []
    for r in value if isinstance(value, list) else []:
        if type(r) is str:
            out.append(RoleName(r, db))
        elif isinstance(r, Mapping) and type(r.get("role")) is str and type(r.get("db")) is str:
            out.append(RoleName(r["role"], r["db"]))
    return out


def _user_names(value: Any, db: str) -> list[UserName]:
    items = value if isinstance(value, list) else [value]
    out = []
    for u in items:
        if type(u) is str:
            out.append(UserName(u, db))
        elif isinstance(u, Mapping) and type(u.get("user")) is str and type(u.get("db")) is str:
            out.append(UserName(u["user"], u["db"]))
    return out


def _grant_roles(roles: Iterable[RoleName], action: str) -> list[Privilege]:
    return [Privilege.of(database(r.db), action) for r in roles]


def _create_user(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    privs = [Privilege.of(database(db), "createUser")]
    privs += _grant_roles(_role_names(body.get("roles"), db), "grantRole")
    if "authenticationRestrictions" in body:
        privs.append(Privilege.of(database(db), "setAuthenticationRestriction"))
    return need(*privs)


def _is_self(user: AuthenticatedUser | None, name: UserName) -> bool:
    return user is not None and user.name == name


def _update_user(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    target = body.get("updateUser")
    me = _is_self(user, UserName(target, db)) if type(target) is str else False
    req = NOTHING
    for field, action, own in (("pwd", "changePassword", "changeOwnPassword"),
                               ("customData", "changeCustomData", "changeOwnCustomData")):
        if field in body:
            alt = need(Privilege.of(database(db), action))
            if me:
                alt = either(alt, need(Privilege.of(database(db), own)))
            req = both(req, alt)
    if "roles" in body:
        # mongod: setting the roles array may revoke any role, so it needs revokeRole on
        # every normal resource, and grantRole on each granted role's database.
        req = both(req, need(Privilege.of(ANY_NORMAL, "revokeRole"),
                             *_grant_roles(_role_names(body.get("roles"), db), "grantRole")))
    if "authenticationRestrictions" in body:
        req = both(req, need(Privilege.of(database(db), "setAuthenticationRestriction")))
    return req


def _grant_roles_to_user(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    return need(*_grant_roles(_role_names(body.get("roles"), db), "grantRole"))


def _revoke_roles_from_user(body: Body, db: str, user: AuthenticatedUser | None
                            ) -> Requirement:
    return need(*_grant_roles(_role_names(body.get("roles"), db), "revokeRole"))


def _users_info(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    value = body.get("usersInfo")
    if isinstance(value, Mapping) and value.get("forAllDBs") is True:
        return need(Privilege.of(CLUSTER, "viewUser"))
    if value == 1 and type(value) is not bool:
        return need(Privilege.of(database(db), "viewUser"))
    return need(*(Privilege.of(database(u.db), "viewUser")
                  for u in _user_names(value, db) if not _is_self(user, u)))


def _roles_info(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    value = body.get("rolesInfo")
    if value == 1 and type(value) is not bool:
        return need(Privilege.of(database(db), "viewRole"))
    items = value if isinstance(value, list) else [value]
    names = _role_names(items, db)
    held = user.roles if user is not None else frozenset()
    return need(*(Privilege.of(database(r.db), "viewRole") for r in names if r not in held))


def _current_op(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    own = body.get("$ownOps")
    if own is not None and own is not False and own != 0:
        return NOTHING  # one's own operations (mongod checks nothing more)
    return need(Privilege.of(CLUSTER, "inprog"))


def _profile(body: Body, db: str, user: AuthenticatedUser | None) -> Requirement:
    level = body.get("profile")
    enable = need(Privilege.of(database(db), "enableProfiler"))
    if isinstance(level, int | float) and level < 0 and "slowms" not in body and \
            "sampleRate" not in body:
        return either(need(Privilege.of(namespace(db, "system.profile"), "find")), enable)
    return enable


RULES: Final[Mapping[str, Rule]] = {
    # no privileges once authenticated (most are also allowed before it)
    **{name: _nothing for name in (
        "hello", "isMaster", "ismaster", "ping", "buildInfo", "buildinfo", "connectionStatus",
        "whatsmyuri", "listCommands", "startSession", "endSessions", "refreshSessions",
        "killSessions", "saslStart", "saslContinue", "authenticate", "logout", "getnonce",
        "killCursors", "listDatabases")},
    # reads
    "find": _on("find", "find"),
    "count": _on("count", "find"),
    "distinct": _on("distinct", "find"),
    "aggregate": _aggregate,
    "explain": _explain,
    "getMore": _get_more,
    # writes
    "insert": _insert,
    "update": _update,
    "delete": _on("delete", "remove"),
    "findAndModify": _find_and_modify,
    "findandmodify": _find_and_modify,
    "bulkWrite": _bulk_write,
    # DDL and catalog
    "create": _create,
    "createIndexes": _on("createIndexes", "createIndex"),
    "drop": _on("drop", "dropCollection"),
    "dropIndexes": _on("dropIndexes", "dropIndex"),
    "deleteIndexes": _on("deleteIndexes", "dropIndex"),
    "dropDatabase": _on_db("dropDatabase"),
    "collMod": _coll_mod,
    "renameCollection": _rename_collection,
    "listCollections": _list_collections,
    "listIndexes": _on("listIndexes", "listIndexes"),
    "collStats": _on("collStats", "collStats"),
    "dbStats": _on_db("dbStats"),
    "validate": _on("validate", "validate"),
    # server
    "serverStatus": _on_cluster("serverStatus"),
    "hostInfo": _on_cluster("hostInfo"),
    "getCmdLineOpts": _on_cluster("getCmdLineOpts"),
    "getLog": _on_cluster("getLog"),
    "getParameter": _on_cluster("getParameter"),
    "setParameter": _on_cluster("setParameter"),
    "shutdown": _on_cluster("shutdown"),
    "killAllSessions": _kill_all_sessions,
    "currentOp": _current_op,
    "killOp": _nothing,  # killop on the cluster, or the operation is one's own: the command
    # checks which (it needs the operation)
    "replSetGetStatus": _on_cluster("replSetGetStatus"),
    "profile": _profile,
    "fsync": _on_cluster("fsync"),
    "logRotate": _on_cluster("logRotate"),
    # users and roles
    "createUser": _create_user,
    "updateUser": _update_user,
    "dropUser": _on_db("dropUser"),
    "dropAllUsersFromDatabase": _on_db("dropUser"),
    "grantRolesToUser": _grant_roles_to_user,
    "revokeRolesFromUser": _revoke_roles_from_user,
    "usersInfo": _users_info,
    "rolesInfo": _roles_info,
}


def requirement(command: str, body: Body, db: str, user: AuthenticatedUser | None = None
                ) -> Requirement:
    """What running `command` (its `body`, on `db`) requires of `user`."""
    rule = RULES.get(command)
    if rule is None:
        return UNKNOWN_COMMAND
    return rule(body, db, user)

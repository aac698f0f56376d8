"""MongoDB 8.0's built-in roles and the privileges they grant.

The table below follows mongod's role definitions: each role is a list of grants (a
resource pattern and actions; a pattern's database is the role's own unless named) and
the built-in roles whose privileges it takes in. Roles marked admin-only exist only on
`admin`; the others exist on every database but `$external`. Like mongod, a built-in
role's privileges are flattened: rolesInfo shows it with no subordinate roles.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from .principals import RoleName
from .privileges import (
    ACTION_TYPES,
    ANY_ACTION,
    ANY_NORMAL,
    ANY_RESOURCE,
    CLUSTER,
    Privilege,
    PrivilegeSet,
    Resource,
    any_system_buckets,
    collection_name,
    database,
    namespace,
)

__all__ = ["BuiltinRole", "BUILTIN_ROLES", "is_builtin_role", "builtin_role_names",
           "role_privileges", "privileges_of_roles", "is_valid_role_db"]

_READ: Final = ("changeStream", "collStats", "dbHash", "dbStats", "find", "killCursors",
                "listCollections", "listIndexes", "listSearchIndexes", "planCacheRead")
_READ_WRITE: Final = (*_READ, "cleanupStructuredEncryptionData", "compactStructuredEncryptionData", "convertToCapped", "createCollection", "createIndex", "createSearchIndexes", "dropCollection", "dropIndex", "dropSearchIndex", "insert", "remove", "renameCollectionSameDB", "update", "updateSearchIndex")
_USER_ADMIN: Final = ("changeCustomData", "changePassword", "createUser", "createRole",
                      "dropUser", "dropRole", "grantRole", "revokeRole",
                      "setAuthenticationRestriction", "viewUser", "viewRole")
_DB_ADMIN: Final = (
    "analyze", "bypassDocumentValidation", "collMod", "collStats", "compact", "convertToCapped",
    "createCollection", "dbStats", "dropCollection", "dropDatabase", "dropIndex",
    "dropSearchIndex", "createIndex", "createSearchIndexes", "enableProfiler",
    "listCollections", "listIndexes", "listSearchIndexes", "updateSearchIndex",
    "planCacheIndexFilter", "planCacheRead", "planCacheWrite", "reIndex",
    "renameCollectionSameDB", "storageDetails", "validate")
_DB_ADMIN_SINGLE_TENANT: Final = ("configureQueryAnalyzer",)
_PROFILE: Final = (*_READ, "convertToCapped", "createCollection", "dropCollection")
_READ_AND_INDEX: Final = (*_READ, "createIndex", "createSearchIndexes", "dropIndex", "dropSearchIndex")
_CLUSTER_MONITOR_CLUSTER: Final = (
    "connPoolStats", "getCmdLineOpts", "getDefaultRWConcern", "getLog", "getParameter",
    "getShardMap", "hostInfo", "listDatabases", "listSampledQueries", "listSessions",
    "listShards", "netstat", "operationMetrics", "replSetGetConfig", "replSetGetStatus",
    "serverStatus", "top", "useUUID", "inprog", "shardingState", "allCollectionStats",
    "shardedDataDistribution")
_CLUSTER_MONITOR_DB: Final = ("collStats", "dbStats", "getDatabaseVersion", "getShardVersion",
                              "indexStats")
_HOST_MANAGER_CLUSTER: Final = (
    "applicationMessage", "auditConfigure", "connPoolSync", "dropConnections", "logRotate",
    "oidReset", "setParameter", "shutdown", "touch", "unlock", "flushRouterConfig", "fsync",
    "invalidateUserCache", "killAnyCursor", "killAnySession", "killop", "replSetResizeOplog",
    "resync", "trafficRecord", "rotateCertificates", "oidcListKeys", "oidcRefreshKeys")
_CLUSTER_MANAGER_CLUSTER: Final = (
    "appendOplogNote", "applicationMessage", "replSetConfigure", "replSetGetConfig",
    "replSetGetStatus", "replSetStateChange", "resync", "addShard", "removeShard",
    "listSessions", "listShards", "flushRouterConfig", "cleanupOrphaned",
    "getDefaultRWConcern", "runTenantMigration", "setDefaultRWConcern",
    "setFeatureCompatibilityVersion", "setClusterParameter", "getClusterParameter",
    "setChangeStreamState", "getChangeStreamState", "querySettings", "queryStatsRead",
    "queryStatsReadTransformed", "checkMetadataConsistency",
    "transitionFromDedicatedConfigServer", "transitionToDedicatedConfigServer")
_CLUSTER_MANAGER_DB: Final = (
    "analyzeShardKey", "configureQueryAnalyzer", "clearJumboFlag", "splitChunk", "moveChunk",
    "moveCollection", "enableSharding", "splitVector", "refineCollectionShardKey",
    "reshardCollection")
_WRITES: Final = ("insert", "update", "remove")
_RESTORE_WRITE: Final = ("bypassDocumentValidation", "collMod", "convertToCapped",
                         "createCollection", "createIndex", "createSearchIndexes",
                         "dropCollection", "insert", "updateSearchIndex")

# A grant: (match type, database or None for the role's own, collection, actions).
# Match types as mongod's builtin_roles.yml names them.
Grant = tuple[str, str | None, str, tuple[str, ...]]


@dataclass(frozen=True)
class BuiltinRole:
    name: str
    grants: tuple[Grant, ...]
    inherits: tuple[tuple[str, str | None], ...] = ()  # (role, db or None for the same)
    admin_only: bool = False
    all_actions: bool = field(default=False)  # __system: every action on anyResource


def _role(name: str, *grants: Grant, inherits: Iterable[tuple[str, str | None]] = (),
          admin_only: bool = False) -> BuiltinRole:
    return BuiltinRole(name, tuple(grants), tuple(inherits), admin_only)


def _db(actions: tuple[str, ...], db: str | None = None) -> Grant:
    return ("database", db, "", actions)


def _exact(coll: str, actions: tuple[str, ...], db: str | None = None) -> Grant:
    return ("exact_namespace", db, coll, actions)


def _coll(coll: str, actions: tuple[str, ...]) -> Grant:
    return ("collection", None, coll, actions)


def _kind(kind: str, actions: tuple[str, ...]) -> Grant:
    return (kind, None, "", actions)


_ROLES: Final[tuple[BuiltinRole, ...]] = (
    _role("read", _db(_READ), _exact("system.js", _READ)),
    _role("readWrite", _db(_READ_WRITE), _exact("system.js", _READ_WRITE)),
    _role("userAdmin", _db(_USER_ADMIN)),
    _role("dbAdmin", _db(_DB_ADMIN), _db(_DB_ADMIN_SINGLE_TENANT),
          _exact("system.profile", _PROFILE)),
    _role("dbOwner", inherits=[("readWrite", None), ("dbAdmin", None), ("userAdmin", None)]),
    _role("enableSharding", _kind("any_normal", (
        "analyzeShardKey", "enableSharding", "moveCollection", "refineCollectionShardKey",
        "reshardCollection"))),
    _role("readAnyDatabase", _kind("any_normal", _READ), _kind("cluster", ("listDatabases",)),
          _coll("system.js", _READ), _kind("any_system_buckets", _READ), admin_only=True),
    _role("readWriteAnyDatabase", _kind("any_normal", _READ_WRITE),
          _coll("system.js", _READ_WRITE), _kind("any_system_buckets", _READ_WRITE),
          inherits=[("readAnyDatabase", None)], admin_only=True),
    _role("userAdminAnyDatabase",
          _kind("any_normal", (*_USER_ADMIN, "listCachedAndActiveUsers")),
          _db(_USER_ADMIN, "local"), _db(_USER_ADMIN, "config"),
          _kind("cluster", ("listDatabases", "authSchemaUpgrade", "invalidateUserCache",
                            "viewUser")),
          _exact("system.users", _READ_AND_INDEX, "admin"),
          _exact("system.roles", _READ_AND_INDEX, "admin"),
          _coll("system.users", _READ),
          _exact("system.version", _READ, "admin"),
          _exact("system.backup_users", _READ, "admin"), admin_only=True),
    _role("dbAdminAnyDatabase", _kind("cluster", ("listDatabases", "applyOps")),
          _kind("any_normal", _DB_ADMIN), _kind("any_normal", _DB_ADMIN_SINGLE_TENANT),
          _coll("system.profile", _PROFILE), _kind("any_system_buckets", _DB_ADMIN),
          admin_only=True),
    _role("clusterMonitor", _kind("cluster", _CLUSTER_MONITOR_CLUSTER),
          _kind("any_normal", _CLUSTER_MONITOR_DB), _db(_CLUSTER_MONITOR_DB, "config"),
          _exact("system.sessions", _CLUSTER_MONITOR_DB, "config"),
          _db(_CLUSTER_MONITOR_DB, "local"),
          _exact("system.replset", ("find",), "local"),
          _exact("replset.election", ("find",), "local"),
          _exact("replset.minvalid", ("find",), "local"),
          _coll("system.profile", ("find",)),
          inherits=[("read", "config"), ("read", "local")], admin_only=True),
    _role("hostManager", _kind("cluster", _HOST_MANAGER_CLUSTER),
          _kind("any_normal", ("killCursors",)), admin_only=True),
    _role("clusterManager", _kind("cluster", _CLUSTER_MANAGER_CLUSTER),
          _kind("any_normal", _CLUSTER_MANAGER_DB),
          _kind("any_system_buckets", _CLUSTER_MANAGER_DB),
          _db(_CLUSTER_MANAGER_DB, "config"), _db(_CLUSTER_MANAGER_DB, "local"),
          _exact("system.replset", _READ, "local"), _kind("any", ("dbCheck",)),
          _exact("system.healthlog", _READ, "local"),
          _db(_WRITES, "config"), _db(_WRITES, "local"),
          _exact("replset.election", _WRITES, "local"),
          _exact("replset.minvalid", _WRITES, "local"),
          inherits=[("read", "config")], admin_only=True),
    _role("clusterAdmin", _kind("any_normal", ("dropDatabase",)),
          _kind("any", ("importCollection", "exportCollection")),
          inherits=[("clusterMonitor", None), ("hostManager", None), ("clusterManager", None)],
          admin_only=True),
    _role("__queryableBackup",
          _kind("any", ("collStats", "listCollections", "listIndexes", "listSearchIndexes")),
          _kind("any_normal", ("find",)), _kind("any_system_buckets", ("find",)),
          _kind("cluster", ("getParameter", "listDatabases", "useUUID")),
          _db(("find",), "config"), _db(("find",), "local"),
          _exact("replset.election", ("find",), "local"),
          _exact("replset.minvalid", ("find",), "local"),
          _coll("system.js", ("find",)), _coll("system.users", ("find",)),
          _coll("system.profile", ("find",)),
          _exact("system.backup_users", ("find",), "admin"),
          _exact("system.roles", ("find",), "admin"),
          _exact("system.version", ("find",), "admin"),
          _exact("settings", ("find",), "config"), admin_only=True),
    _role("backup", _kind("cluster", ("appendOplogNote", "serverStatus",
                                      "setUserWriteBlockMode")),
          _exact("settings", ("insert", "update"), "config"),
          inherits=[("__queryableBackup", None)], admin_only=True),
    _role("restore",
          _kind("cluster", ("getParameter", "forceUUID", "useUUID", "bypassWriteBlockingMode",
                            "setUserWriteBlockMode", "applyOps")),
          _db(_RESTORE_WRITE, "local"), _db(_RESTORE_WRITE, "config"),
          _kind("any_system_buckets", _RESTORE_WRITE),
          _exact("system.replset", _RESTORE_WRITE, "local"),
          _exact("replset.election", _RESTORE_WRITE, "local"),
          _exact("replset.minvalid", _RESTORE_WRITE, "local"),
          _kind("any", ("listCollections",)),
          _kind("any_normal", _RESTORE_WRITE + _USER_ADMIN),
          _coll("system.js", _RESTORE_WRITE),
          _exact("tempusers", ("find",), "admin"), _exact("temproles", ("find",), "admin"),
          _exact("system.backup_users", _RESTORE_WRITE, "admin"),
          _exact("system.version", (*_RESTORE_WRITE, "find"), "admin"),
          _coll("system.users", (*_RESTORE_WRITE, "find", "update", "remove")),
          _exact("system.roles", ("createIndex",), "admin"), admin_only=True),
    _role("root", _kind("any", ("validate",)), _kind("cluster", ("useTenant",)),
          _exact("system.preimages", ("find", "remove"), "config"),
          _exact("system.change_collection", ("find", "insert", "remove", "update"), "config"),
          inherits=[("clusterAdmin", None), ("userAdminAnyDatabase", None),
                    ("dbAdminAnyDatabase", None), ("readWriteAnyDatabase", None),
                    ("backup", None), ("restore", None), ("directShardOperations", None)],
          admin_only=True),
    _role("directShardOperations", _kind("cluster", ("issueDirectShardOperations",)),
          admin_only=True),
    BuiltinRole("__system", (), (), admin_only=True, all_actions=True),
)

BUILTIN_ROLES: Final[dict[str, BuiltinRole]] = {r.name: r for r in _ROLES}


def is_valid_role_db(db: str) -> bool:
    return bool(db) and db != "$external" and "." not in db and "\x00" not in db \
        and " " not in db


def is_builtin_role(role: RoleName) -> bool:
    r = BUILTIN_ROLES.get(role.role)
    return r is not None and is_valid_role_db(role.db) and (not r.admin_only
                                                            or role.db == "admin")


def builtin_role_names(db: str) -> list[RoleName]:
    """The built-in roles that exist on `db`, by name."""
    if not is_valid_role_db(db):
        return []
    return [RoleName(r.name, db) for r in sorted(_ROLES, key=lambda r: r.name)
            if db == "admin" or not r.admin_only]


def _resource(kind: str, db: str, coll: str) -> Resource:
    if kind == "database":
        return database(db)
    if kind == "exact_namespace":
        return namespace(db, coll)
    if kind == "collection":
        return collection_name(coll)
    return {"any": ANY_RESOURCE, "any_normal": ANY_NORMAL, "cluster": CLUSTER,
            "any_system_buckets": any_system_buckets()}[kind]


def _add_role(out: PrivilegeSet, role: BuiltinRole, db: str) -> None:
    for sub, sub_db in role.inherits:
        _add_role(out, BUILTIN_ROLES[sub], sub_db or db)
    for kind, gdb, coll, actions in role.grants:
        out.add(Privilege(_resource(kind, gdb or db, coll), frozenset(actions)))
    if role.all_actions:
        out.add(Privilege(ANY_RESOURCE, frozenset(ACTION_TYPES)))


@lru_cache(maxsize=512)
def _role_privileges(role: RoleName) -> tuple[Privilege, ...] | None:
    if not is_builtin_role(role):
        return None
    out = PrivilegeSet()
    _add_role(out, BUILTIN_ROLES[role.role], role.db)
    return tuple(out)


def role_privileges(role: RoleName) -> tuple[Privilege, ...] | None:
    """A built-in role's privileges, flattened (None when `role` is not built in)."""
    return _role_privileges(role)


@lru_cache(maxsize=256)
def privileges_of_roles(roles: frozenset[RoleName]) -> PrivilegeSet:
    """The privileges a user holding `roles` has (roles that are not built-in grant
    nothing: bucketd has no user-defined roles)."""
    out = PrivilegeSet()
    for role in sorted(roles):
        out.add_all(role_privileges(role) or ())
    return out


assert ANY_ACTION in ACTION_TYPES

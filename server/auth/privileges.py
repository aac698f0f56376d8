"""MongoDB's privilege model: action types, resource patterns, and sets of privileges.

A privilege is a resource pattern with a set of actions. Patterns are those mongod has:
`{anyResource: true}`, `{db: "", collection: ""}` (any *normal* namespace), `{cluster:
true}`, `{db: "d", collection: ""}`, `{db: "", collection: "c"}`, `{db: "d", collection:
"c"}` and the four `system_buckets` forms. A command's target is a concrete resource (the
cluster, a database, or an exact namespace); `search_list` names the patterns that match
it, in mongod's rules: `system.*` namespaces (and `local.replset.*`) are not normal, so
database-wide and any-normal grants do not reach them, and `<db>.system.buckets.<c>` is
matched by the `system_buckets` patterns (and by `anyResource`, its collection name and
its exact namespace) only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ACTION_TYPES", "ANY_ACTION", "Resource", "Privilege", "PrivilegeSet", "CLUSTER",
    "ANY_RESOURCE", "ANY_NORMAL", "database", "namespace", "collection_name",
    "any_system_buckets", "system_buckets_in_db", "system_buckets_in_any_db",
    "exact_system_buckets", "is_normal_namespace", "search_list",
]

# mongod's action types (action_type.idl), in its enum order: the order in which
# mongod lists a privilege's actions.
ACTION_TYPES: Final[tuple[str, ...]] = (
    "addShard", "advanceClusterTime", "allCollectionStats", "analyze", "analyzeShardKey",
    "anyAction", "appendOplogNote", "applicationMessage", "auditConfigure", "auditLogRotate",
    "authCheck", "authenticate", "authSchemaUpgrade", "bypassDocumentValidation",
    "bypassWriteBlockingMode", "changeCustomData", "changePassword", "changeOwnPassword",
    "changeOwnCustomData", "changeStream", "checkFreeMonitoringStatus",
    "checkMetadataConsistency", "cleanupOrphaned", "clearJumboFlag",
    "cleanupStructuredEncryptionData", "closeAllDatabases", "collMod", "collStats", "compact",
    "compactStructuredEncryptionData", "configureQueryAnalyzer", "connPoolStats",
    "connPoolSync", "convertToCapped", "cpuProfiler", "createCollection", "createDatabase",
    "createIndex", "createRole", "createSearchIndexes", "createUser", "dbCheck", "dbHash",
    "dbStats", "dropAllRolesFromDatabase", "dropAllUsersFromDatabase", "dropCollection",
    "dropConnections", "dropDatabase", "dropIndex", "dropRole", "dropSearchIndex", "dropUser",
    "emptycapped", "enableProfiler", "enableSharding", "exportCollection", "find",
    "flushRouterConfig", "forceUUID", "fsync", "fsyncUnlock", "getClusterParameter",
    "getDatabaseVersion", "getDefaultRWConcern", "getCmdLineOpts", "getLog", "getParameter",
    "getShardMap", "getShardVersion", "grantRole", "grantPrivilegesToRole", "grantRolesToRole",
    "grantRolesToUser", "hostInfo", "impersonate", "importCollection", "indexStats", "inprog",
    "insert", "internal", "invalidateUserCache", "issueDirectShardOperations", "killAnyCursor",
    "killAnySession", "killCursors", "killop", "listCachedAndActiveUsers", "listCollections",
    "listCursors", "listDatabases", "listIndexes", "listSampledQueries", "listSearchIndexes",
    "listSessions", "listShards", "logRotate", "updateSearchIndex", "moveChunk",
    "moveCollection", "netstat", "oidcListKeys", "oidcRefreshKeys", "oidReset",
    "operationMetrics", "planCacheIndexFilter", "planCacheRead", "planCacheWrite",
    "querySettings", "queryStatsRead", "queryStatsReadTransformed", "refineCollectionShardKey",
    "reIndex", "remove", "removeShard", "renameCollection", "renameCollectionSameDB",
    "repairDatabase", "replSetConfigure", "replSetGetConfig", "replSetGetStatus",
    "replSetHeartbeat", "replSetReconfig", "replSetResizeOplog", "replSetStateChange",
    "reshardCollection", "resync", "revokeRole", "revokePrivilegesFromRole",
    "revokeRolesFromRole", "revokeRolesFromUser", "rotateCertificates",
    "runAsLessPrivilegedUser", "runTenantMigration", "serverStatus",
    "setAuthenticationRestriction", "setClusterParameter", "setDefaultRWConcern",
    "setFeatureCompatibilityVersion", "setFreeMonitoring", "setParameter",
    "setUserWriteBlockMode", "shardCollection", "shardedDataDistribution", "shardingState",
    "shutdown", "splitChunk", "splitVector", "storageDetails", "top", "touch", "trafficRecord",
    "transitionFromDedicatedConfigServer", "transitionToDedicatedConfigServer", "unlock",
    "useTenant", "useUUID", "update", "updateRole", "updateUser", "validate", "viewRole",
    "viewUser", "applyOps", "setChangeStreamState", "getChangeStreamState",
)
ANY_ACTION: Final = "anyAction"  # a set holding it holds every action
_ORDER: Final = {a: i for i, a in enumerate(ACTION_TYPES)}
_BUCKETS: Final = "system.buckets."


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource pattern. `kind` is one of: any, anyNormal, cluster, db, coll, exact,
    anyBuckets, bucketsInDb, bucketsInAnyDb, exactBuckets (the last four match
    `system.buckets.<coll>` namespaces; their `coll` is the part after that prefix)."""

    kind: str
    db: str = ""
    coll: str = ""

    def document(self) -> dict[str, Any]:
        """The pattern as mongod writes it in a privilege document."""
        k = self.kind
        if k == "any":
            return {"anyResource": True}
        if k == "cluster":
            return {"cluster": True}
        if k in ("anyNormal", "db", "coll", "exact"):
            return {"db": self.db, "collection": self.coll}
        if k in ("anyBuckets", "bucketsInAnyDb"):
            return {"system_buckets": self.coll}
        return {"db": self.db, "system_buckets": self.coll}

    def describe(self) -> str:
        if self.kind == "exact":
            return f"{self.db}.{self.coll}"
        return f"<{self.kind} {self.db}.{self.coll}>"


CLUSTER: Final = Resource("cluster")
ANY_RESOURCE: Final = Resource("any")
ANY_NORMAL: Final = Resource("anyNormal")


def database(db: str) -> Resource:
    return Resource("db", db)


def namespace(db: str, coll: str) -> Resource:
    return Resource("exact", db, coll)


def collection_name(coll: str) -> Resource:
    return Resource("coll", "", coll)


def any_system_buckets() -> Resource:
    return Resource("anyBuckets")


def system_buckets_in_db(db: str) -> Resource:
    return Resource("bucketsInDb", db)


def system_buckets_in_any_db(coll: str) -> Resource:
    return Resource("bucketsInAnyDb", "", coll)


def exact_system_buckets(db: str, coll: str) -> Resource:
    return Resource("exactBuckets", db, coll)


def is_normal_namespace(db: str, coll: str) -> bool:
    return not coll.startswith("system.") and not (db == "local" and coll.startswith("replset."))


def search_list(target: Resource) -> tuple[Resource, ...]:
    """The patterns any of which, granted with an action, grants that action on the
    concrete resource `target` (mongod's ResourcePatternSearchList)."""
    out = [ANY_RESOURCE]
    db, coll = target.db, target.coll
    if target.kind == "exact":
        if is_normal_namespace(db, coll):
            if db not in ("local", "config"):
                out.append(ANY_NORMAL)
            out.append(database(db))
        elif coll.startswith(_BUCKETS) and len(coll) > len(_BUCKETS):
            view = coll[len(_BUCKETS):]
            out += [exact_system_buckets(db, view), any_system_buckets(),
                    system_buckets_in_db(db), system_buckets_in_any_db(view)]
        out.append(collection_name(coll))
    elif target.kind == "db" and db not in ("local", "config"):
        out.append(ANY_NORMAL)
    if target.kind != "any":
        out.append(target)
    return tuple(out)


def sorted_actions(actions: Iterable[str]) -> list[str]:
    return sorted(actions, key=lambda a: (_ORDER.get(a, len(_ORDER)), a))


@dataclass(frozen=True, slots=True)
class Privilege:
    resource: Resource
    actions: frozenset[str]

    @classmethod
    def of(cls, resource: Resource, *actions: str) -> Privilege:
        return cls(resource, frozenset(actions))

    def document(self) -> dict[str, Any]:
        return {"resource": self.resource.document(), "actions": sorted_actions(self.actions)}


class PrivilegeSet:
    """Privileges merged by resource pattern, in the order patterns were first added
    (mongod's addPrivilegeToPrivilegeVector), and the checks mongod makes against them."""

    __slots__ = ("_by_resource",)

    def __init__(self, privileges: Iterable[Privilege] = ()) -> None:
        self._by_resource: dict[Resource, set[str]] = {}
        self.add_all(privileges)

    def add(self, privilege: Privilege) -> None:
        self._by_resource.setdefault(privilege.resource, set()).update(privilege.actions)

    def add_all(self, privileges: Iterable[Privilege]) -> None:
        for p in privileges:
            self.add(p)

    def __iter__(self) -> Iterator[Privilege]:
        for r, acts in self._by_resource.items():
            yield Privilege(r, frozenset(acts))

    def __len__(self) -> int:
        return len(self._by_resource)

    def as_mapping(self) -> Mapping[Resource, set[str]]:
        return self._by_resource

    def documents(self) -> list[dict[str, Any]]:
        return [p.document() for p in self]

    def allows(self, target: Resource, action: str) -> bool:
        for pattern in search_list(target):
            acts = self._by_resource.get(pattern)
            if acts and (action in acts or ANY_ACTION in acts):
                return True
        return False

    def allows_privilege(self, privilege: Privilege) -> bool:
        return all(self.allows(privilege.resource, a) for a in privilege.actions)

    def allows_all(self, privileges: Iterable[Privilege]) -> bool:
        return all(self.allows_privilege(p) for p in privileges)

    def any_action_on(self, target: Resource) -> bool:
        """mongod's isAuthorizedForAnyActionOnResource."""
        return any(self._by_resource.get(p) for p in search_list(target))

    def any_action_in_db(self, db: str) -> bool:
        """mongod's isAuthorizedForAnyActionOnAnyResourceInDB: some grant could reach a
        resource of `db` (a collection-name grant reaches every database)."""
        for r, acts in self._by_resource.items():
            if not acts:
                continue
            k = r.kind
            if k in ("any", "anyBuckets", "coll", "bucketsInAnyDb"):
                return True
            if k == "anyNormal" and db not in ("local", "config"):
                return True
            if k in ("db", "exact", "bucketsInDb", "exactBuckets") and r.db == db:
                return True
        return False

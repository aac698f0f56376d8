"""The names of MongoDB 8.0's built-in roles, and which of them exist only on `admin`.

Names only (mongod's builtin_roles.yml, 8.0): the roles' privileges are authorization's
business, in a module of their own that imports these. searchCoordinator came in 8.2 and
is not here.
"""

from __future__ import annotations

from typing import Final

from .principals import RoleName

__all__ = ["DATABASE_ROLES", "ADMIN_ONLY_ROLES", "BUILTIN_ROLES", "is_builtin_role"]

# On every database.
DATABASE_ROLES: Final = frozenset({
    "read", "readWrite", "dbAdmin", "dbOwner", "userAdmin", "enableSharding",
})

# On `admin` only (adminOnly: true in builtin_roles.yml).
ADMIN_ONLY_ROLES: Final = frozenset({
    "readAnyDatabase", "readWriteAnyDatabase", "userAdminAnyDatabase", "dbAdminAnyDatabase",
    "clusterMonitor", "hostManager", "clusterManager", "clusterAdmin", "__queryableBackup",
    "backup", "restore", "root", "directShardOperations", "__system",
})

BUILTIN_ROLES: Final = DATABASE_ROLES | ADMIN_ONLY_ROLES


def is_builtin_role(role: RoleName) -> bool:
    """Whether `role` names a built-in role (an admin-only one only on `admin`; none on
    `$external`, whose users take roles from elsewhere)."""
    if role.db == "$external":
        return False
    if role.role in DATABASE_ROLES:
        return True
    return role.db == "admin" and role.role in ADMIN_ONLY_ROLES

"""Names of users and roles, and the user a connection authenticated as.

Plain data shared by authentication (which produces an `AuthenticatedUser`) and
authorization (which reads its roles). A MongoDB 6.0+ connection authenticates as one
user at most, so a connection holds one of these or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["UserName", "RoleName", "AuthenticatedUser"]


@dataclass(frozen=True, slots=True, order=True)
class UserName:
    user: str
    db: str

    def document(self) -> dict[str, Any]:
        return {"user": self.user, "db": self.db}


@dataclass(frozen=True, slots=True, order=True)
class RoleName:
    role: str
    db: str

    def document(self) -> dict[str, Any]:
        return {"role": self.role, "db": self.db}


@dataclass(frozen=True, slots=True)
class AuthenticatedUser:
    """A connection's user: its name and the roles granted to it directly (built-in
    roles' own inheritance is authorization's business)."""

    name: UserName
    roles: frozenset[RoleName]

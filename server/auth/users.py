"""The users, stored durably in `admin.system.users` in MongoDB's document format.

    {_id: "<db>.<user>", userId: UUID, user, db,
     credentials: {"SCRAM-SHA-1": {iterationCount, salt, storedKey, serverKey},
                   "SCRAM-SHA-256": {...}},
     customData: {...} (if given), roles: [{role, db}, ...]}

(`$external` users have empty credentials.) Every read and write goes through the
storage service, one storage-thread hop each. `UserStore.for_server(server)` is the way
in; it also remembers whether any user exists, which the localhost exception asks on
unauthenticated commands.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from bson import Binary

from storage import bsonutil
from storage.catalog import Catalog
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import ServerState
from ..storage_service import StorageService
from .principals import AuthenticatedUser, RoleName, UserName
from .scram import MECHANISMS, ScramCredentials

__all__ = ["USERS_DB", "USERS_COLLECTION", "UserRecord", "UserStore", "user_document",
           "user_not_found"]

USERS_DB: Final = "admin"
USERS_COLLECTION: Final = "system.users"
_USER_DB_INDEX: Final = {"key": {"user": 1, "db": 1}, "name": "user_1_db_1", "unique": True}


def user_id(name: UserName) -> str:
    return f"{name.db}.{name.user}"


def user_not_found(name: UserName) -> MongoError:
    """mongod's UserNotFound when a user's description is looked up."""
    return MongoError(ErrorCode.UserNotFound,
                      f'Could not find user "{name.user}" for db "{name.db}"')


@dataclass(frozen=True, slots=True)
class UserRecord:
    """One user as stored: its name, its SCRAM credentials, its directly granted roles,
    and the stored document itself (usersInfo shows it)."""

    name: UserName
    credentials: Mapping[str, ScramCredentials]
    roles: tuple[RoleName, ...]
    document: dict[str, Any]

    @property
    def mechanisms(self) -> list[str]:
        """The mechanisms with credentials, in mongod's order (the document's);
        ["external"] for an `$external` user."""
        stored = self.document.get("credentials")
        if isinstance(stored, dict) and stored.get("external") is True:
            return ["external"]
        return [m for m in self.credentials if m in MECHANISMS]

    def authenticated(self) -> AuthenticatedUser:
        return AuthenticatedUser(self.name, frozenset(self.roles))

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> UserRecord | None:
        """None for a document that is not a user (a stray write into system.users)."""
        user, db = doc.get("user"), doc.get("db")
        if not isinstance(user, str) or not isinstance(db, str):
            return None
        creds: dict[str, ScramCredentials] = {}
        stored = doc.get("credentials")
        if isinstance(stored, dict):
            for mech, entry in stored.items():
                parsed = ScramCredentials.from_document(entry)
                if mech in MECHANISMS and parsed is not None:
                    creds[mech] = parsed
        roles: list[RoleName] = []
        for r in doc.get("roles") or ():
            if isinstance(r, dict) and isinstance(r.get("role"), str) and isinstance(
                    r.get("db"), str):
                roles.append(RoleName(r["role"], r["db"]))
        return cls(UserName(user, db), creds, tuple(roles), doc)


def user_document(name: UserName, credentials: Mapping[str, ScramCredentials],
                  roles: list[RoleName], custom_data: dict[str, Any] | None,
                  user_uuid: Binary | None = None) -> dict[str, Any]:
    """A user's stored document, fields in mongod's order."""
    doc: dict[str, Any] = {
        "_id": user_id(name),
        "userId": user_uuid if user_uuid is not None else Binary(uuid.uuid4().bytes, 4),
        "user": name.user,
        "db": name.db,
        # mongod marks an $external user's credentials as external
        "credentials": ({"external": True} if name.db == "$external" else
                        {m: c.document() for m, c in credentials.items()}),
    }
    if custom_data is not None:
        doc["customData"] = custom_data
    doc["roles"] = [r.document() for r in roles]
    return doc


# --- on the storage thread -------------------------------------------------------------------

def _find(catalog: Catalog, name: UserName) -> dict[str, Any] | None:
    coll = catalog.get_collection(USERS_DB, USERS_COLLECTION)
    if coll is None:
        return None
    found = coll.find_id(user_id(name))
    return bsonutil.decode(found[1]) if found else None


def _all(catalog: Catalog, db: str | None) -> list[dict[str, Any]]:
    coll = catalog.get_collection(USERS_DB, USERS_COLLECTION)
    if coll is None:
        return []
    docs = (bsonutil.decode(raw) for _, raw in coll.scan())
    return [d for d in docs if db is None or d.get("db") == db]


def _insert(catalog: Catalog, doc: dict[str, Any]) -> None:
    coll = catalog.get_or_create_collection(USERS_DB, USERS_COLLECTION)
    if coll.index("user_1_db_1") is None:
        coll.create_indexes([_USER_DB_INDEX])
    try:
        coll.insert_one(doc, durable=True)
    except MongoError as e:
        # the unique _id says the user exists, also when another server sharing the
        # storage created it since this one looked (mongod maps the duplicate so too)
        if e.code != ErrorCode.DuplicateKey:
            raise
        raise MongoError(51003, f'User "{doc["user"]}@{doc["db"]}" already exists') from None


def _replace(catalog: Catalog, doc: dict[str, Any]) -> bool:
    coll = catalog.get_collection(USERS_DB, USERS_COLLECTION)
    found = coll.find_id(doc["_id"]) if coll is not None else None
    if coll is None or found is None:
        return False
    coll.update(found[0], doc, durable=True)
    return True


def _delete(catalog: Catalog, names: list[UserName]) -> int:
    coll = catalog.get_collection(USERS_DB, USERS_COLLECTION)
    if coll is None:
        return 0
    n = 0
    for name in names:
        found = coll.find_id(user_id(name))
        if found is not None and coll.delete(found[0], durable=True):
            n += 1
    return n


def _any(catalog: Catalog) -> bool:
    coll = catalog.get_collection(USERS_DB, USERS_COLLECTION)
    return coll is not None and coll.count() > 0


class UserStore:
    """admin.system.users, read and written through the storage service."""

    def __init__(self, storage: StorageService) -> None:
        self.storage = storage
        self._any_user: bool | None = None  # known after the first look

    @classmethod
    def for_server(cls, server: ServerState) -> UserStore:
        """The server's user store (made on first use)."""
        store = server.users
        if store is None:
            assert server.storage is not None, "storage is not open"
            store = server.users = cls(server.storage)
        assert isinstance(store, UserStore)
        return store

    async def load(self, name: UserName) -> UserRecord | None:
        """The user called `name`, or None."""
        doc = await self.storage.run(_find, self.storage.catalog, name)
        return UserRecord.from_document(doc) if doc is not None else None

    async def require(self, name: UserName) -> UserRecord:
        """The user called `name`, or UserNotFound (11) as mongod words it."""
        record = await self.load(name)
        if record is None:
            raise user_not_found(name)
        return record

    async def users(self, db: str | None = None) -> list[UserRecord]:
        """Every user of `db` (of every database when None), by (db, user)."""
        docs = await self.storage.run(_all, self.storage.catalog, db)
        records = [r for r in map(UserRecord.from_document, docs) if r is not None]
        return sorted(records, key=lambda r: (r.name.db, r.name.user))

    async def insert(self, doc: dict[str, Any]) -> None:
        """Store a new user; 51003 if one of that name exists."""
        await self.storage.run(_insert, self.storage.catalog, doc)
        self._any_user = True

    async def replace(self, doc: dict[str, Any]) -> None:
        """Replace a user's document (same `_id`); UserNotFound if it is gone."""
        if not await self.storage.run(_replace, self.storage.catalog, doc):
            raise user_not_found(UserName(doc["user"], doc["db"]))

    async def delete(self, names: list[UserName]) -> int:
        """Remove these users; how many there were."""
        n = await self.storage.run(_delete, self.storage.catalog, names)
        self._any_user = None
        return n

    async def any_user(self) -> bool:
        """Whether at least one user exists (what closes the localhost exception)."""
        if self._any_user is None:
            self._any_user = await self.storage.run(_any, self.storage.catalog)
        return self._any_user

    def forget(self) -> None:
        """Look again next time (admin.system.users was changed by other means)."""
        self._any_user = None

"""The logical sessions this server has seen (mongod's local session cache).

bucketd keeps no session state beyond this: every command that carries an `lsid` notes
it here with its user and time (`touch`), endSessions forgets it, and a session unused
for `localLogicalSessionTimeoutMinutes` (30) expires. `$listLocalSessions` lists them as
mongod's cache records: `{_id: {id, uid}, lastUse, user?}`, where `uid` is the SHA-256
of the user's name (`user@db`, or of nothing without authentication).
"""

from __future__ import annotations

import datetime
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from bson import Binary

from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

if TYPE_CHECKING:
    from .auth.principals import AuthenticatedUser

__all__ = ["LocalSessions", "parse_sessions_spec", "user_digest"]

TIMEOUT_SECONDS: Final = 30 * 60
_LIMIT: Final = 1_000_000  # mongod's maxSessions


def user_digest(user: str | None) -> bytes:
    """The session `uid` of a user named `user@db` (None: unauthenticated)."""
    return hashlib.sha256((user or "").encode()).digest()


@dataclass(slots=True)
class _Session:
    id: Binary
    uid: bytes
    user: str | None
    last_use: float  # wall clock, seconds


class LocalSessions:
    def __init__(self) -> None:
        self._sessions: dict[bytes, _Session] = {}

    def touch(self, lsid: Any, user: str | None) -> None:
        """Note a command's `lsid` (ignored unless it is `{id: <UUID>}`)."""
        if not isinstance(lsid, dict):
            return
        sid = lsid.get("id")
        if not isinstance(sid, Binary) or sid.subtype != 4:
            return
        key = bytes(sid)
        found = self._sessions.get(key)
        if found is not None:
            found.last_use = time.time()
        elif len(self._sessions) < _LIMIT:
            self._sessions[key] = _Session(sid, user_digest(user), user, time.time())

    def end(self, ids: Iterable[Any]) -> None:
        for lsid in ids:
            sid = lsid.get("id") if isinstance(lsid, dict) else None
            if isinstance(sid, Binary):
                self._sessions.pop(bytes(sid), None)

    def records(self, uids: frozenset[bytes] | None) -> list[dict[str, Any]]:
        """The cache's records, of the users whose uid is in `uids` (None: everyone's)."""
        now = time.time()
        for key in [k for k, s in self._sessions.items() if now - s.last_use > TIMEOUT_SECONDS]:
            del self._sessions[key]
        out = []
        for s in list(self._sessions.values()):
            if uids is not None and s.uid not in uids:
                continue
            doc: dict[str, Any] = {
                "_id": {"id": s.id, "uid": Binary(s.uid)},
                "lastUse": datetime.datetime.fromtimestamp(s.last_use, datetime.UTC)}
            if s.user is not None:
                doc["user"] = {"name": s.user}
            out.append(doc)
        return out

    def __len__(self) -> int:
        return len(self._sessions)


def parse_sessions_spec(spec: Any, user: AuthenticatedUser | None) -> frozenset[bytes] | None:
    """The uids a `$listLocalSessions` spec asks for (None: every user's): the caller's
    own by default, `allUsers: true` or the named `users`."""
    if not isinstance(spec, dict):
        raise MongoError(ErrorCode.TypeMismatch, "$listLocalSessions options must be "
                         f"specified in an object, but found: {type_name(spec)}")
    for name in spec:
        if name not in ("allUsers", "users", "$_internalPredicate"):
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field 'ListSessionsSpec.{name}' is an unknown field.")
    all_users = spec.get("allUsers", False)
    if type(all_users) is not bool:
        raise MongoError(ErrorCode.TypeMismatch, "BSON field 'ListSessionsSpec.allUsers' is "
                         f"the wrong type '{type_name(all_users)}', expected type 'bool'")
    users = spec.get("users")
    if all_users:
        if users:
            raise MongoError(ErrorCode.UnsupportedFormat, "allUsers=true and users=[...] are "
                             "mutually exclusive")
        return None
    if users is None:
        name = None if user is None else f"{user.name.user}@{user.name.db}"
        return frozenset({user_digest(name)})
    if not isinstance(users, list):
        raise MongoError(ErrorCode.TypeMismatch, "BSON field 'ListSessionsSpec.users' is the "
                         f"wrong type '{type_name(users)}', expected type 'array'")
    uids = set()
    for entry in users:
        if not isinstance(entry, dict) or type(entry.get("user")) is not str or \
                type(entry.get("db")) is not str:
            raise MongoError(ErrorCode.TypeMismatch, "users must be {user: <name>, db: <db>}")
        uids.add(user_digest(f"{entry['user']}@{entry['db']}"))
    return frozenset(uids)

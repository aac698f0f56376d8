"""The databases every standalone mongod has: admin, config and local.

At each start, as mongod: `local.startup_log` gets a document describing this start (so
`local` always exists), `admin.system.version` holds the featureCompatibilityVersion
document, and `config.system.sessions` exists with its `lsidTTLIndex`. listDatabases,
listCollections and `show dbs` then show what they show on mongod.
"""

from __future__ import annotations

import datetime
import time
from typing import Any, Final

from bson import Int64

from storage.bsonutil import encode
from storage.catalog import Catalog

__all__ = ["ensure_system_databases"]

_SESSIONS_TTL: Final = {"key": {"lastUse": 1}, "name": "lsidTTLIndex",
                        "expireAfterSeconds": 1800}
_FCV: Final = {"_id": "featureCompatibilityVersion", "version": "8.0"}


def _insert(catalog: Catalog, db: str, name: str, doc: dict[str, Any]) -> None:
    coll = catalog.get_collection(db, name)
    assert coll is not None
    coll.insert_many([doc], encoded=[encode(doc)])


def startup_document(host: str, pid: int, cmd_line: dict[str, Any],
                     build_info: dict[str, Any]) -> dict[str, Any]:
    now = time.time()
    return {"_id": f"{host}-{int(now * 1000)}", "hostname": host,
            "startTime": datetime.datetime.fromtimestamp(int(now), datetime.UTC),
            "startTimeLocal": time.strftime("%a %b %e %H:%M:%S", time.localtime(now))
            + f".{int(now * 1000) % 1000:03d}",
            "cmdLine": cmd_line, "pid": Int64(pid), "buildinfo": build_info}


def ensure_system_databases(catalog: Catalog, startup: dict[str, Any]) -> None:
    """Create what is missing and log this start (storage thread, one transaction)."""
    with catalog.transaction(durable=True):
        if catalog.entry("local", "startup_log") is None:
            catalog.create_collection("local", "startup_log", validate_name=False)
        _insert(catalog, "local", "startup_log", startup)
        if catalog.entry("admin", "system.version") is None:
            catalog.create_collection("admin", "system.version", validate_name=False)
            _insert(catalog, "admin", "system.version", dict(_FCV))
        if catalog.entry("config", "system.sessions") is None:
            catalog.create_collection("config", "system.sessions", validate_name=False)
            sessions = catalog.get_collection("config", "system.sessions")
            assert sessions is not None
            sessions.create_indexes([dict(_SESSIONS_TTL)])

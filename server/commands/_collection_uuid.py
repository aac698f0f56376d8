"""The `collectionUUID` argument: the collection a command names must be the one the
client expects.

mongod checks it on the commands that take it and answers CollectionUUIDMismatch (361)
with `db`, `collectionUUID`, `expectedCollection` and `actualCollection` (the name of
the collection with that UUID in the same database, or null), before it writes or
creates anything. A time-series collection is checked against its buckets collection,
the collection that has a UUID (the one `listCollections` shows for
`system.buckets.<name>`); a view has none, so it never matches.
"""

from __future__ import annotations

from typing import Any, Final

from bson.binary import Binary

from storage.catalog import Catalog
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["COMMANDS_TAKING_UUID", "check_collection_uuid"]

# The commands whose IDL has `collectionUUID`; the value is where the collection name is.
COMMANDS_TAKING_UUID: Final = frozenset({
    "find", "aggregate", "count", "distinct", "insert", "update", "delete",
    "findAndModify", "findandmodify", "createIndexes", "dropIndexes", "collMod", "drop",
    "renameCollection",
})

# mongod's names of binData subtypes, as its IDL parser words a wrong one
_SUBTYPE_NAMES: Final = {0: "general", 1: "function", 2: "byteArrayDeprecated",
                         3: "bdtUUID", 4: "UUID", 5: "MD5", 6: "encrypt", 7: "column",
                         8: "sensitive", 9: "vector", 128: "Custom"}


def check_collection_uuid(catalog: Catalog, command: str, body: dict[str, Any],
                          db: str) -> None:
    """Raise CollectionUUIDMismatch when `body` carries a `collectionUUID` that is not the
    UUID of the collection it names (TypeMismatch when it is not a UUID)."""
    if command not in COMMANDS_TAKING_UUID or "collectionUUID" not in body:
        return
    uuid = body["collectionUUID"]
    field = f"{command}.collectionUUID"
    if isinstance(uuid, bytes) and not isinstance(uuid, Binary):
        uuid = Binary(uuid, 0)  # the codec decodes binData subtype 0 as bytes
    if not isinstance(uuid, Binary):
        raise MongoError(ErrorCode.TypeMismatch, f"BSON field '{field}' is the wrong type "
                                                 f"'{type_name(uuid)}', expected type 'binData'")
    if uuid.subtype != 4:
        raise MongoError(ErrorCode.TypeMismatch,
                         f"BSON field '{field}' is the wrong binData type "
                         f"'{_SUBTYPE_NAMES.get(uuid.subtype, 'Custom')}', expected type 'UUID'")
    target = body.get(command)
    if type(target) is not str:
        return  # the command itself reports a bad namespace
    if command == "renameCollection":
        db, _, target = target.partition(".")
    if _uuid_of(catalog, db, target) == bytes(uuid):
        return
    actual = next((e.name for e in catalog.list_collections(db)
                   if e.kind == "collection" and bytes(e.uuid) == bytes(uuid)), None)
    raise MongoError(ErrorCode.CollectionUUIDMismatch,
                     "Collection UUID does not match that specified", db=db,
                     collectionUUID=uuid, expectedCollection=target, actualCollection=actual)


def _uuid_of(catalog: Catalog, db: str, name: str) -> bytes | None:
    """The UUID `name` is checked against: its own, its buckets' for a time series."""
    entry = catalog.entry(db, name)
    if entry is None or entry.kind == "view":
        return None
    if entry.kind == "timeseries":
        entry = catalog.entry(db, f"system.buckets.{name}")
        if entry is None:
            return None
    return bytes(entry.uuid)

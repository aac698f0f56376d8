"""Changing an existing index's options in place (collMod's `index` field).

MongoDB lets collMod flip `hidden` and change a TTL index's `expireAfterSeconds`
without rebuilding the index; the keys stay, only the stored spec changes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from storage.bson_order import values_equal
from storage.errors import MongoError
from storage.indexes import ID_INDEX_NAME, IndexSpec
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["modify_index"]


def _find(entry: Any, target: dict[str, Any]) -> Any:
    if "name" in target:
        ix = entry.index(target["name"])
        if ix is None:
            raise MongoError(ErrorCode.IndexNotFound,
                             f"cannot find index {target['name']} for ns {entry.ns}")
        return ix
    key = target.get("keyPattern")
    if not isinstance(key, dict):
        raise MongoError(ErrorCode.InvalidOptions,
                         "must specify either index name or key pattern for collMod")
    found = [ix for ix in entry.indexes if list(ix.spec.key) == list(key)
             and all(values_equal(ix.spec.key[k], key[k]) for k in key)]
    if not found:
        raise MongoError(ErrorCode.IndexNotFound,
                         f"cannot find index {key} for ns {entry.ns}")
    return found[0]


def modify_index(catalog: Any, db: str, name: str, target: dict[str, Any]) -> dict[str, Any]:
    """Apply `target`'s `hidden` / `expireAfterSeconds`; returns collMod's reply fields
    (`hidden_old/new`, `expireAfterSeconds_old/new`)."""
    entry = catalog.entry(db, name)
    if entry is None:
        raise MongoError(ErrorCode.NamespaceNotFound, f"ns does not exist: {db}.{name}")
    ix = _find(entry, target)
    doc = dict(ix.spec.document)
    reply: dict[str, Any] = {}
    if "hidden" in target:
        if ix.name == ID_INDEX_NAME:
            raise MongoError(ErrorCode.BadValue, "can't hide _id index")
        if not isinstance(target["hidden"], bool):
            raise MongoError(ErrorCode.TypeMismatch, "hidden must be a boolean")
        old = bool(doc.get("hidden", False))
        if old != target["hidden"]:
            reply.update(hidden_old=old, hidden_new=target["hidden"])
        if target["hidden"]:
            doc["hidden"] = True
        else:
            doc.pop("hidden", None)
    if "expireAfterSeconds" in target:
        if "expireAfterSeconds" not in doc:
            raise MongoError(ErrorCode.InvalidOptions, "no expireAfterSeconds field to update")
        new = target["expireAfterSeconds"]
        if isinstance(new, bool) or not isinstance(new, int | float) or new < 0:
            raise MongoError(ErrorCode.InvalidOptions,
                             "expireAfterSeconds must be a number >= 0")
        old = doc["expireAfterSeconds"]
        if old != new:
            reply.update(expireAfterSeconds_old=old, expireAfterSeconds_new=new)
        doc["expireAfterSeconds"] = new
    new_spec = IndexSpec.from_document(doc)
    indexes = tuple(replace(i, spec=new_spec) if i.name == ix.name else i
                    for i in entry.indexes)
    with catalog.transaction():
        catalog._update_entry(entry, replace(entry, indexes=indexes))
    return reply

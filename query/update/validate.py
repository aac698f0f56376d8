"""Storage rules for documents written by insert, replacement and update.

- `validate_document_for_storage(doc, for_insert=True)`: top-level field names may not
  start with ``$`` (DollarPrefixedFieldName 52); ``_id`` may not be an array, a regex
  or undefined (BadValue 2 on insert, InvalidIdField 53 after an update) and an
  ``_id`` document may not hold ``$``-prefixed fields.
- `check_replacement(doc)`: an update's replacement document (52 for ``$`` fields).
- Both inserted and updated documents may nest at most `MAX_STORAGE_DEPTH` non-empty
  objects or arrays deep, the document itself included (Overflow 15): mongod keeps 20 of
  maxBSONDepth's 200 levels for what it wraps a stored document in (replies, oplog).
"""

from __future__ import annotations

import re
from typing import Any

from bson import Regex

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.nesting import nesting_exceeds

__all__ = ["MAX_STORAGE_DEPTH", "validate_document_for_storage", "check_replacement",
           "check_id_for_storage", "storage_depth_exceeded"]

# mongod's BSONDepth::getMaxDepthForUserStorage() at the default maxBSONDepth (200 - 20)
MAX_STORAGE_DEPTH = 180


def _is_regex(v: Any) -> bool:
    return isinstance(v, Regex | re.Pattern)


def _dollar_fields(v: Any) -> str | None:
    if isinstance(v, dict):
        for k, x in v.items():
            if k.startswith("$") and k not in ("$ref", "$id", "$db"):
                return k
            found = _dollar_fields(x)
            if found:
                return found
    elif isinstance(v, list):
        for x in v:
            found = _dollar_fields(x)
            if found:
                return found
    return None


def check_id_for_storage(value: Any) -> None:
    """The `_id` rules applied to a document produced by an update (InvalidIdField 53)."""
    if isinstance(value, list):
        raise MongoError(ErrorCode.InvalidIdField, "The '_id' value cannot be of type array")
    if _is_regex(value):
        raise MongoError(ErrorCode.InvalidIdField, "The '_id' value cannot be of type regex")
    if isinstance(value, dict):
        bad = _dollar_fields(value)
        if bad:
            raise MongoError(ErrorCode.DollarPrefixedFieldName, "_id fields may not contain "
                             f"'$'-prefixed fields: {bad} is not valid for storage.")


def storage_depth_exceeded(doc: dict[str, Any], limit: int = MAX_STORAGE_DEPTH) -> bool:
    """Whether `doc` nests more than `limit` non-empty objects or arrays deep (the document
    is level 1; empty ones do not count)."""
    return nesting_exceeds(doc, limit, count_empty=False)


def validate_document_for_storage(doc: dict[str, Any], *, for_insert: bool = True) -> None:
    """Raise MongoError if `doc` may not be stored as MongoDB would refuse it."""
    if storage_depth_exceeded(doc):
        raise MongoError(ErrorCode.Overflow,
                         "cannot insert document because it exceeds "
                         f"{MAX_STORAGE_DEPTH} levels of nesting" if for_insert else
                         f"Document exceeds maximum nesting depth of {MAX_STORAGE_DEPTH}")
    for k in doc:
        if k.startswith("$"):
            if for_insert:
                raise MongoError(ErrorCode.DollarPrefixedFieldName,
                                 f"Document can't have $ prefixed field names: {k}")
            raise MongoError(ErrorCode.DollarPrefixedFieldName, f"The dollar ($) prefixed field "
                             f"'{k}' in '{k}' is not valid for storage.")
    if "_id" not in doc:
        return
    value = doc["_id"]
    if not for_insert:
        check_id_for_storage(value)
        return
    if isinstance(value, list):
        raise MongoError(ErrorCode.BadValue, "can't use an array for _id")
    if _is_regex(value):
        raise MongoError(ErrorCode.BadValue, "can't use a regex for _id")
    if isinstance(value, dict):
        bad = _dollar_fields(value)
        if bad:
            raise MongoError(ErrorCode.DollarPrefixedFieldName, "_id fields may not contain "
                             f"'$'-prefixed fields: {bad} is not valid for storage.")


def check_replacement(doc: dict[str, Any]) -> None:
    for k in doc:
        if k.startswith("$"):
            raise MongoError(ErrorCode.DollarPrefixedFieldName, f"The dollar ($) prefixed field "
                             f"'{k}' in '{k}' is not allowed in the context of an update's "
                             "replacement document. Consider using an aggregation pipeline with "
                             "$replaceWith.")
    if "_id" in doc:
        check_id_for_storage(doc["_id"])

"""Storage rules for documents written by insert, replacement and update.

Field names are MongoDB 5.0+'s: dotted and ``$``-prefixed names may be stored at any
level by an insert (an upsert's new document included) and by a pipeline update; an
update of an existing document may not *write* a top-level ``$``-prefixed field (a
replacement document's, or one an operator sets), except a well-formed DBRef
(``$ref`` string, ``$id``, optional ``$db`` string, in that order).

- `validate_document_for_storage(doc, for_insert=True)`: ``_id`` may not be an array, a
  regex or undefined (BadValue 2 on insert, InvalidIdField 53 after an update) and an
  ``_id`` document may not hold ``$``-prefixed fields (DollarPrefixedFieldName 52).
- `check_replacement(doc)`: an update's replacement of an existing document (52 for its
  top-level ``$`` fields, InvalidDBRef 55 for a malformed DBRef).
- `check_written_top_level(doc, name)`: the top-level field `name` an update operator
  wrote, by the same rule.
- Both inserted and updated documents may nest at most `MAX_STORAGE_DEPTH` non-empty
  objects or arrays deep, the document itself included (Overflow 15): mongod keeps 20 of
  maxBSONDepth's 200 levels for what it wraps a stored document in (replies, oplog).
"""

from __future__ import annotations

import re
from typing import Any

from bson import Regex

from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.nesting import nesting_exceeds

__all__ = ["MAX_STORAGE_DEPTH", "validate_document_for_storage", "check_replacement",
           "check_written_top_level", "check_id_for_storage", "storage_depth_exceeded"]

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
    """The top-level fields of a replacement written over an existing document."""
    for k in doc:
        if k.startswith("$"):
            check_written_top_level(doc, k)


def check_written_top_level(doc: dict[str, Any], name: str) -> None:
    """A top-level ``$``-prefixed field written into an existing document is refused
    unless it is part of a well-formed DBRef (mongod's validateDollarPrefixElement)."""
    names = list(doc)
    at = names.index(name)
    current = name
    if current == "$db":
        if not isinstance(doc["$db"], str):
            raise MongoError(ErrorCode.InvalidDBRef, "The DBRef $db field must be a String, "
                             f"not a {type_name(doc['$db'])}")
        if at == 0 or names[at - 1] != "$id":
            raise MongoError(ErrorCode.InvalidDBRef,
                             "Found $db field without a $id before it, which is invalid.")
        at -= 1
        current = "$id"
    if current == "$id":
        if at == 0 or names[at - 1] != "$ref":
            raise MongoError(ErrorCode.InvalidDBRef,
                             "Found $id field without a $ref before it, which is invalid.")
        at -= 1
        current = "$ref"
    if current == "$ref":
        if not isinstance(doc["$ref"], str):
            raise MongoError(ErrorCode.InvalidDBRef, "The DBRef $ref field must be a String, "
                             f"not a {type_name(doc['$ref'])}")
        if at + 1 >= len(names) or names[at + 1] != "$id":
            raise MongoError(ErrorCode.InvalidDBRef,
                             "The DBRef $ref field must be followed by a $id field")
        return
    raise MongoError(ErrorCode.DollarPrefixedFieldName, f"The dollar ($) prefixed field "
                     f"'{name}' in '{name}' is not allowed in the context of an update's "
                     "replacement document. Consider using an aggregation pipeline with "
                     "$replaceWith.")

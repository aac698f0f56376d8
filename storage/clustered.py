"""Clustered collections: the `clusteredIndex` option of `create`, and how a clustered
collection's `_id` index looks to clients.

mongod keeps a clustered collection's documents in `_id` order with no separate `_id`
index. bucketd keeps its ordinary `_id_` index store underneath (an `_id` range is an
index range either way) and shows it as mongod shows the cluster key:

- `clusteredIndex: {key: {_id: 1}, unique: true, name?, v?}` is stored canonical,
  `{v: 2, key: {_id: 1}, name: "_id_", unique: true}` (ClusteredIndexSpec's field
  order), and listCollections shows it so; listIndexes shows the `_id_` index as that
  spec plus the collection's `expireAfterSeconds` and `clustered: true`, under the
  clustered name;
- the legacy form `clusteredIndex: true` (time-series buckets collections only) hides
  the `_id` index from listIndexes altogether.

Validation follows mongod's create (validateClusteredIndexSpec, the strict
ClusteredIndexSpec IDL, the legacy-format rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from storage.bson_order import values_equal
from storage.bsontext import to_mongo_string
from storage.errors import MongoError
from storage.vocabulary.bson_types import INT32_MAX, INT32_MIN, is_number, safe_number, type_name
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["CLUSTERED_OPTION", "clustered_index_name", "clustered_list_index",
           "is_clustered", "parse_clustered_index"]

CLUSTERED_OPTION: Final = "clusteredIndex"
_SPEC_FIELDS: Final = ("v", "key", "name", "unique")
_BASE: Final = "create.clusteredIndex"


def is_clustered(options: Mapping[str, Any]) -> bool:
    """Whether a collection with these options is clustered by `_id` (either form)."""
    value = options.get(CLUSTERED_OPTION)
    return isinstance(value, Mapping) or value is True


def clustered_index_name(options: Mapping[str, Any]) -> str | None:
    """The clustered index's name (the object form only; None otherwise)."""
    value = options.get(CLUSTERED_OPTION)
    return str(value["name"]) if isinstance(value, Mapping) else None


def clustered_list_index(options: Mapping[str, Any]) -> dict[str, Any] | None:
    """What listIndexes shows for the `_id` index of a clustered collection: the spec,
    the collection's expireAfterSeconds, `clustered: true`; None when it is not shown
    (the legacy form)."""
    value = options.get(CLUSTERED_OPTION)
    if not isinstance(value, Mapping):
        return None
    shown = dict(value)
    if options.get("expireAfterSeconds") is not None:
        shown["expireAfterSeconds"] = options["expireAfterSeconds"]
    shown["clustered"] = True
    return shown


def _is_bool(v: Any) -> bool:
    # IDL safeBool: a bool or a number
    return isinstance(v, bool) or is_number(v)


def _truthy(v: Any) -> bool:
    return bool(v) and v == v  # NaN counts as false, as BSONElement::trueValue


def parse_clustered_index(value: Any, *, buckets: bool) -> dict[str, Any] | None:
    """`create`'s clusteredIndex: the canonical spec to store (`True` for the legacy form
    on a buckets collection), or None for `false`. MongoError as mongod's create."""
    if not isinstance(value, bool | Mapping) and not is_number(value):
        raise MongoError(ErrorCode.TypeMismatch,
                         f"BSON field '{_BASE}' is the wrong type '{type_name(value)}', "
                         "expected types '[bool, object]'")
    if not isinstance(value, Mapping):
        if not _truthy(value):
            return None
        if not buckets:
            raise MongoError(5979703, "The 'clusteredIndex' legacy format {clusteredIndex: "
                             "<bool>} is only supported for specific internal collections "
                             "and vice versa")
        return {CLUSTERED_OPTION: True}
    if buckets:
        raise MongoError(5979703, "The 'clusteredIndex' legacy format {clusteredIndex: <bool>} "
                         "is only supported for specific internal collections and vice versa")
    spec = _parse_spec(value)
    return {CLUSTERED_OPTION: spec}


def _parse_spec(value: Mapping[str, Any]) -> dict[str, Any]:
    for field in value:
        if field not in _SPEC_FIELDS:
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field '{_BASE}.{field}' is an unknown field.")
    for field in ("key", "unique"):
        if field not in value:
            raise MongoError(ErrorCode.IDLFailedToParse,
                             f"BSON field '{_BASE}.{field}' is missing but a required field")
    key = value["key"]
    if not isinstance(key, Mapping):
        raise _wrong_type("key", key, "object")
    unique = value["unique"]
    if not _is_bool(unique):
        raise _wrong_type("unique", unique, "bool")
    name = value.get("name")
    if "name" in value and not isinstance(name, str):
        raise _wrong_type("name", name, "string")
    version: Any = 2
    if "v" in value:
        version = value["v"]
        if not is_number(version):
            raise MongoError(ErrorCode.TypeMismatch,
                             f"BSON field '{_BASE}.v' is the wrong type '{type_name(version)}', "
                             "expected types '[long, int, decimal, double]'")
    if not _truthy(unique):
        raise MongoError(5979700, "The clusteredIndex option requires unique: true to be "
                         "specified")
    if list(key) != ["_id"] or not values_equal(key["_id"], 1):
        raise MongoError(ErrorCode.InvalidIndexSpecificationOption,
                         "The clusteredIndex option is only supported for key: {_id: 1}")
    as_given: dict[str, Any] = {"v": version, "key": dict(key)}
    if name is not None:
        as_given["name"] = name
    as_given["unique"] = unique
    number = safe_number(version, INT32_MIN, INT32_MAX)  # IDL safeInt
    if number != 2:
        raise MongoError(5979704, f"Invalid clusteredIndex specification "
                         f"{to_mongo_string(as_given)}; cannot create a clusteredIndex with "
                         f"v={number}")
    return {"v": 2, "key": {"_id": 1}, "name": name if name is not None else "_id_",
            "unique": True}


def _wrong_type(field: str, v: Any, expected: str) -> MongoError:
    return MongoError(ErrorCode.TypeMismatch,
                      f"BSON field '{_BASE}.{field}' is the wrong type '{type_name(v)}', "
                      f"expected type '{expected}'")

"""Index specifications and index keys, by MongoDB's rules.

Specs: `validate_index_spec(raw)` checks one ``createIndexes`` spec document the way
MongoDB 8.0 does (``index_key_validate.cpp``, ``IndexCatalogImpl::_isSpecOk``) and
returns an `IndexSpec`, whose `document` is the spec as ``listIndexes`` shows it
(``v``, ``unique``, ``key``, ``name``, then the other options). Errors are MongoErrors
with MongoDB's codes: CannotCreateIndex 67 (bad key pattern, TTL rules, sparse with
partial, ...), InvalidIndexSpecificationOption 197 (unknown option), TypeMismatch 14,
FailedToParse 9 (missing key/name), BadValue 2 (reserved names). Conflicts with
existing indexes (`compare_index_specs`) decide between IndexOptionsConflict 85,
IndexKeySpecsConflict 86 and "already exists" in the collection layer.

Only b-tree indexes (numbers +1/-1 per field) are built; ``2d``, ``2dsphere``,
``text``, ``hashed``, wildcard and ``columnstore`` specs are refused with
NotImplemented (238) after validation; a collation other than ``simple`` likewise.
``partialFilterExpression`` is compiled by a callable the caller supplies
(`PartialFilterCompiler`: filter document -> predicate over documents, raising
MongoError for filters MongoDB refuses): storage does not import the query engine.

Keys: `KeyGenerator(spec).keys(doc)` returns the distinct key tuples of a document
(one value per indexed field) and its multikey paths, following MongoDB's
``BtreeKeyGenerator``: a missing field gives null; an array on a path gives one key
per element (an empty array gives `undefined`, nested arrays stay whole); arrays in
two fields of one key -> CannotIndexParallelArrays (171); numeric path components
index array positions (``a.0``); a sparse index skips documents missing every
indexed field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import bson
from bson import Decimal128, Int64

from storage.bson_order import values_equal
from storage.bsontext import to_mongo_string
from storage.errors import MongoError
from storage.keystring import UNDEFINED, encode_key, encode_value
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

__all__ = [
    "IndexSpec",
    "KeyGenerator",
    "KeySet",
    "PartialFilterCompiler",
    "validate_index_spec",
    "id_index_spec",
    "default_index_name",
    "compare_index_specs",
    "is_id_key_pattern",
    "MAX_INDEXES",
    "ID_INDEX_NAME",
]

PartialFilterCompiler = Callable[[dict[str, Any]], Callable[[Mapping[str, Any]], bool]]

ID_INDEX_NAME: Final = "_id_"
MAX_INDEXES: Final = 64  # kMaxNumIndexesAllowed

_ALLOWED_FIELDS: Final = frozenset({
    "2dsphereIndexVersion", "bits", "max", "min", "coarsestIndexedLevel",
    "finestIndexedLevel", "background", "collation", "default_language", "dropDups",
    "expireAfterSeconds", "hidden", "name", "v", "key", "language_override", "ns",
    "partialFilterExpression", "wildcardProjection", "columnstoreProjection", "sparse",
    "storageEngine", "textIndexVersion", "unique", "weights", "originalSpec", "prepareUnique",
    "_id", "clustered",
})
_ID_INDEX_FIELDS: Final = frozenset({"collation", "name", "v", "key", "ns", "_id"})
_BOOL_FIELDS: Final = frozenset({"background", "unique", "sparse", "dropDups", "prepareUnique",
                                 "clustered"})
_NUMBER_FIELDS: Final = frozenset({"2dsphereIndexVersion", "textIndexVersion", "bits", "min",
                                   "max", "coarsestIndexedLevel", "finestIndexedLevel"})
_KNOWN_PLUGINS: Final = frozenset({"2d", "2dsphere", "text", "hashed", "wildcard",
                                   "columnstore"})
# Options that do not distinguish two indexes with the same key (MongoDB's
# populateOptionsMapForEqualityCheck exclusions).
_NOT_COMPARED: Final = frozenset({"key", "ns", "name", "v", "textIndexVersion",
                                  "2dsphereIndexVersion", "background", "dropDups", "collation",
                                  "hidden", "unique", "sparse", "partialFilterExpression",
                                  "wildcardProjection", "originalSpec"})


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | Decimal128) and not isinstance(v, bool)


def _as_float(v: Any) -> float:
    return float(v.to_decimal()) if isinstance(v, Decimal128) else float(v)


def is_id_key_pattern(key: Mapping[str, Any]) -> bool:
    """MongoDB's isIdIndexPattern: exactly ``{_id: 1}`` (any numeric 1)."""
    if len(key) != 1 or "_id" not in key:
        return False
    v = key["_id"]
    return _is_number(v) and math.isfinite(_as_float(v)) and int(_as_float(v)) == 1


def default_index_name(key: Mapping[str, Any]) -> str:
    """The name drivers give an index: ``a_1_b_-1``."""
    parts = []
    for name, value in key.items():
        if isinstance(value, Int64 | bool):
            value = int(value)
        parts.append(f"{name}_{value}")
    return "_".join(parts)


def _plugin_name(key: Mapping[str, Any]) -> str:
    for v in key.values():
        if type(v) is str:
            return v
    for name in key:
        if name == "$**" or name.endswith(".$**"):
            return "wildcard"
    return ""


@dataclass(frozen=True)
class IndexSpec:
    """A validated index specification."""

    name: str
    key: dict[str, Any]
    fields: tuple[str, ...]
    directions: tuple[int, ...]
    unique: bool
    sparse: bool
    hidden: bool
    partial_filter: dict[str, Any] | None
    expire_after_seconds: Any | None
    version: int
    #: the spec as listIndexes shows it
    document: dict[str, Any] = field(compare=False)

    @property
    def is_id_index(self) -> bool:
        return self.name == ID_INDEX_NAME and is_id_key_pattern(self.key)

    @property
    def is_ttl(self) -> bool:
        return self.expire_after_seconds is not None

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> IndexSpec:
        """Rebuild from a stored (already validated) spec document."""
        key = dict(doc["key"])
        return cls(
            name=doc["name"], key=key, fields=tuple(key),
            directions=tuple(-1 if _as_float(v) < 0 else 1 for v in key.values()),
            unique=bool(doc.get("unique")) or is_id_key_pattern(key),
            sparse=bool(doc.get("sparse")), hidden=bool(doc.get("hidden")),
            partial_filter=doc.get("partialFilterExpression"),
            expire_after_seconds=doc.get("expireAfterSeconds"), version=int(doc.get("v", 2)),
            document=dict(doc))


def id_index_spec() -> IndexSpec:
    """The ``_id_`` index every collection has."""
    return IndexSpec.from_document({"v": 2, "key": {"_id": 1}, "name": ID_INDEX_NAME})


class _Bad(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _validate_key_pattern(key: Mapping[str, Any]) -> None:
    code = ErrorCode.CannotCreateIndex
    if len(bson.encode(key)) > 2048:
        raise _Bad(code, "Index key pattern too large.")
    if not key:
        raise _Bad(code, "Index keys cannot be empty.")
    plugin = _plugin_name(key)
    if plugin:
        if plugin == "geoHaystack":
            raise _Bad(code, "GeoHaystack indexes cannot be created in version 5.0 and above")
        if plugin not in _KNOWN_PLUGINS:
            raise _Bad(code, f"Unknown index plugin '{plugin}'")
    for name, value in key.items():
        if _is_number(value):
            f = _as_float(value)
            if math.isnan(f):
                raise _Bad(code, "Values in the index key pattern cannot be NaN.")
            if f == 0.0:
                raise _Bad(code, "Values in the index key pattern cannot be 0.")
        elif type(value) is not str:
            raise _Bad(code, f"Values in v:2 index key pattern cannot be of type "
                             f"{type_name(value)}. Only numbers > 0, numbers < 0, and strings "
                             f"are allowed.")
        if type(value) is str and value != plugin:
            raise _Bad(code, "Can't use more than one index plugin for a single index.")
        if type(value) is str and value == "wildcard":
            raise _Bad(code, "The key pattern value for an 'wildcard' index must be a non-zero "
                             "number, not a string.")
        if name == "":
            raise _Bad(code, "Index keys cannot be an empty field.")
        if name == "$**" and (_is_number(value) or value in ("text", "columnstore")):
            continue
        if name == "_fts" and value != "text":
            raise _Bad(code, "Index key contains an illegal field name: '_fts'")
        parts = name.split(".")
        for i, part in enumerate(parts):
            if part == "":
                raise _Bad(code, "Index keys cannot contain an empty field.")
            if not part.startswith("$"):
                continue
            dbref = i != 0 and part in ("$db", "$id", "$ref")
            wildcard = i == len(parts) - 1 and part == "$**" and plugin == "wildcard"
            if not dbref and not wildcard:
                raise _Bad(code, "Index key contains an illegal field name: field name starts "
                                 "with '$'.")
    for value in key.values():
        if type(value) is str and value == "":
            raise _Bad(code, "Values in the index key pattern cannot be empty strings")


def _check_stage1(raw: dict[str, Any], compile_filter: PartialFilterCompiler | None) -> None:
    """validateIndexSpec: option names and types, in spec order."""
    for name in raw:
        if name not in _ALLOWED_FIELDS:
            raise MongoError(
                ErrorCode.InvalidIndexSpecificationOption,
                f"The field '{name}' is not valid for an index specification. "
                f"Specification: {to_mongo_string(raw)}")
    tm = ErrorCode.TypeMismatch
    for name, value in raw.items():
        if name == "key":
            if not isinstance(value, Mapping):
                raise _Bad(tm, f"The field 'key' must be an object, but got {type_name(value)}")
            _validate_key_pattern(value)
        elif name == "name":
            if type(value) is not str:
                raise _Bad(tm, f"The field 'name' must be a string, but got {type_name(value)}")
        elif name == "hidden":
            if not isinstance(value, bool):
                # (MongoDB names the wrong field in this message.)
                raise _Bad(tm, f"The field 'name' must be a bool, but got {type_name(value)}")
        elif name == "v":
            if not _is_number(value):
                raise _Bad(tm, f"The field 'v' must be a number, but got {type_name(value)}")
            f = _as_float(value)
            if not math.isfinite(f) or f != int(f) or not -(2**31) <= f < 2**31:
                raise _Bad(ErrorCode.BadValue, f"Index version must be representable as a "
                                               f"32-bit integer, but got {to_mongo_string(value)}")
            if int(f) not in (1, 2):
                raise _Bad(ErrorCode.CannotCreateIndex,
                           f"Invalid index specification {to_mongo_string(raw)}; cannot create "
                           f"an index with v={int(f)}")
        elif name in ("collation", "originalSpec"):
            if not isinstance(value, Mapping):
                raise _Bad(tm, f"The field '{name}' must be an object, but got "
                               f"{type_name(value)}")
            if not value:
                raise _Bad(ErrorCode.BadValue, f"The field '{name}' cannot be an empty object.")
        elif name == "partialFilterExpression":
            if not isinstance(value, Mapping):
                raise _Bad(tm, f"The field 'partialFilterExpression' must be an object, but "
                               f"got {type_name(value)}")
            if compile_filter is None:
                raise MongoError(ErrorCode.NotImplemented,
                                 "partialFilterExpression needs a filter compiler, and none "
                                 "is configured")
            try:
                compile_filter(dict(value))
            except MongoError as e:
                raise _Bad(e.code, e.errmsg) from None
        elif name == "weights":
            if not isinstance(value, Mapping | str):
                raise _Bad(tm, f"The field 'weights' must be an object, but got "
                               f"{type_name(value)}")
        elif name in _BOOL_FIELDS:
            if not (_is_number(value) or isinstance(value, bool)):
                raise _Bad(tm, f"The field '{name} has value {name}: {to_mongo_string(value)}, "
                               f"which is not convertible to bool")
        elif name in ("default_language", "language_override"):
            if type(value) is not str:
                raise _Bad(tm, f"The field '{name}' must be a string, but got "
                               f"{type_name(value)}")
        elif name in _NUMBER_FIELDS and not _is_number(value):
            raise _Bad(tm, f"The field '{name}' must be a number, but got {type_name(value)}")
    if "key" not in raw:
        raise _Bad(ErrorCode.FailedToParse,
                   "The 'key' field is a required property of an index specification")
    if "name" not in raw:
        raise _Bad(ErrorCode.FailedToParse,
                   "The 'name' field is a required property of an index specification")
    if "clustered" in raw:  # names a clustered collection's cluster key (storage.clustered)
        if not _truthy(raw["clustered"]):
            raise _Bad(6492800, "Value 'false' for field 'clustered' is invalid")
        if not _truthy(raw.get("unique")):
            raise _Bad(ErrorCode.CannotCreateIndex,
                       "The 'unique' field is required when 'clustered' is specified")
    if "weights" in raw and _plugin_name(raw["key"]) != "text":
        raise _Bad(ErrorCode.CannotCreateIndex,
                   f"Invalid index specification {to_mongo_string(raw)}; the field 'weights' "
                   f"can only be specified with text indexes")
    if _truthy(raw.get("unique")) and _truthy(raw.get("prepareUnique")):
        raise _Bad(ErrorCode.CannotCreateIndex,
                   f"Invalid index specification {to_mongo_string(raw)}; cannot create an "
                   f"index with the 'unique' option and the 'prepareUnique' option")


def _truthy(v: Any) -> bool:
    if v is None:
        return False
    if isinstance(v, Decimal128):
        return not v.to_decimal().is_zero()
    return bool(v)


def _check_ttl(spec: dict[str, Any]) -> None:
    value = spec["expireAfterSeconds"]
    code = ErrorCode.CannotCreateIndex
    where = f". Index spec: {to_mongo_string(spec)}"
    if not _is_number(value):
        raise MongoError(code, f"TTL index 'expireAfterSeconds' option must be numeric, but "
                               f"received a type of '{type_name(value)}'{where}")
    f = _as_float(value)
    if math.isnan(f):
        raise MongoError(code, f"TTL index 'expireAfterSeconds' option must not be NaN{where}")
    if not -(2**31) <= int(f) < 2**31:
        raise MongoError(code, f"TTL index 'expireAfterSeconds' must be within the range of a "
                               f"32-bit integer{where}")
    if f < 0:
        raise MongoError(code, f"TTL index 'expireAfterSeconds' option cannot be less than "
                               f"0{where}")
    if len(spec["key"]) != 1:
        raise MongoError(code, f"TTL indexes are single-field indexes, compound indexes do not "
                               f"support TTL. Index spec: {to_mongo_string(spec)}")


def validate_index_spec(raw: Mapping[str, Any], *,
                        compile_filter: PartialFilterCompiler | None = None) -> IndexSpec:
    """Validate one createIndexes spec; MongoError on anything MongoDB refuses."""
    raw = dict(raw)
    try:
        _check_stage1(raw, compile_filter)
    except _Bad as e:
        raise MongoError(e.code, f"Error in specification {to_mongo_string(raw)} :: caused by "
                                 f":: {e.reason}") from None
    key: dict[str, Any] = dict(raw["key"])
    name: str = raw["name"]
    if is_id_key_pattern(key):
        for f in raw:
            if f not in _ID_INDEX_FIELDS and "clustered" not in raw:
                raise MongoError(ErrorCode.InvalidIndexSpecificationOption,
                                 f"The field '{f}' is not valid for an _id index specification."
                                 f" Specification: {to_mongo_string(raw)}")
    else:
        if name == ID_INDEX_NAME:
            raise MongoError(ErrorCode.BadValue,
                             f"The index name '_id_' is reserved for the _id index, which must "
                             f"have key pattern {{_id: 1}}, found key: {to_mongo_string(key)}")
        if name == "*":
            raise MongoError(ErrorCode.BadValue, "The index name '*' is not valid.")
    if "expireAfterSeconds" in raw:
        _check_ttl(raw)
    with_v = raw if "v" in raw else {**raw, "v": 2}
    try:
        _check_stage2(with_v, key, name)
    except _Bad as e:
        raise MongoError(e.code, f"Error in specification {to_mongo_string(with_v)} :: caused "
                                 f"by :: {e.reason}") from None
    plugin = _plugin_name(key)
    if plugin:
        raise MongoError(ErrorCode.NotImplemented,
                         f"bucketd does not build '{plugin}' indexes (index '{name}')")
    return _normalize(raw, key, name)


def _check_stage2(spec: dict[str, Any], key: dict[str, Any], name: str) -> None:
    """IndexCatalogImpl::_isSpecOk."""
    code = ErrorCode.CannotCreateIndex
    if name == "":
        raise _Bad(code, "index name cannot be empty")
    if "\x00" in name:  # it would be a field name in validate's and collStats' replies
        raise _Bad(code, "index name cannot contain null bytes")
    collation = spec.get("collation")
    if collation is not None and dict(collation) != {"locale": "simple"}:
        raise MongoError(ErrorCode.NotImplemented,
                         f"bucketd supports only the simple collation; index '{name}' asks for "
                         f"{to_mongo_string(collation)}")
    sparse = _truthy(spec.get("sparse"))
    if "partialFilterExpression" in spec and sparse:
        raise _Bad(code, 'cannot mix "partialFilterExpression" and "sparse" options')
    if is_id_key_pattern(key):
        if "unique" in spec and not _truthy(spec["unique"]):
            raise _Bad(code, "_id index cannot be non-unique")
        if "partialFilterExpression" in spec:
            raise _Bad(code, "_id index cannot be a partial index")
        if sparse:
            raise _Bad(code, "_id index cannot be sparse")
    if "storageEngine" in spec:
        se = spec["storageEngine"]
        if not isinstance(se, Mapping):
            raise _Bad(code, '"storageEngine" options must be a document if present')
        if not se:
            raise _Bad(code, 'Empty "storageEngine" options are invalid. Please remove the '
                             'field or include valid options.')


def _normalize(raw: dict[str, Any], key: dict[str, Any], name: str) -> IndexSpec:
    """The stored form (MongoDB's _fixIndexSpec): v, unique, hidden, prepareUnique, key,
    name, then the remaining options as given (ns/dropDups/_id dropped)."""
    v = int(_as_float(raw.get("v", 2)))
    doc: dict[str, Any] = {"v": v}
    for flag in ("unique", "hidden", "prepareUnique"):
        if _truthy(raw.get(flag)):
            doc[flag] = True
    if is_id_key_pattern(key):
        name = ID_INDEX_NAME
    doc["key"] = key
    doc["name"] = name
    skip = {"v", "unique", "hidden", "prepareUnique", "key", "name", "ns", "dropDups", "_id"}
    for f, value in raw.items():
        if f in skip:
            continue
        if f == "collation":  # only the simple collation gets here: MongoDB omits it
            continue
        doc[f] = value
    spec = IndexSpec.from_document(doc)
    return spec


def compare_index_specs(new: IndexSpec, existing: IndexSpec
                        ) -> Literal["identical", "equivalent", "different"]:
    """MongoDB's IndexDescriptor::compareIndexOptions: the key pattern and the
    identifying options (unique, sparse, partial filter) decide whether two specs
    describe the same index; the other options whether it is identical."""
    if not _same_value(new.key, existing.key):
        return "different"
    if new.unique != existing.unique or new.sparse != existing.sparse:
        return "different"
    if (new.partial_filter is None) != (existing.partial_filter is None):
        return "different"
    if new.partial_filter is not None and not _same_value(new.partial_filter,
                                                         existing.partial_filter):
        return "different"
    a = {k: v for k, v in new.document.items() if k not in _NOT_COMPARED}
    b = {k: v for k, v in existing.document.items() if k not in _NOT_COMPARED}
    if a.keys() != b.keys() or not all(_same_value(a[k], b[k]) for k in a):
        return "equivalent"
    return "identical"


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return list(a.keys()) == list(b.keys()) and all(_same_value(a[k], b[k]) for k in a)
    return values_equal(a, b)


# --- key generation ----------------------------------------------------------------------

class KeySet:
    """The keys of one document for one index."""

    __slots__ = ("entries", "is_multikey", "multikey_paths")

    def __init__(self, entries: list[tuple[bytes, tuple[Any, ...]]],
                 multikey_paths: tuple[frozenset[int], ...], is_multikey: bool | None = None
                 ) -> None:
        #: distinct keys: (encoded key bytes, one value per indexed field; missing -> None)
        self.entries = entries
        #: per indexed field, the path components (0-based) that held arrays
        self.multikey_paths = multikey_paths
        #: the index must be marked multikey for this document (MongoDB's rule: several
        #: keys, or an array on an indexed path)
        self.is_multikey = (len(entries) > 1 or any(multikey_paths)) if is_multikey is None \
            else is_multikey

    @property
    def values(self) -> list[tuple[Any, ...]]:
        return [v for _, v in self.entries]

    def __repr__(self) -> str:
        return f"KeySet({self.values!r}, multikey={self.is_multikey})"


@dataclass(slots=True)
class _Positional:
    has_elt: bool = False
    elt: Any = None
    arr: Any = None
    remaining: str = ""
    dotted: Any = MISSING


_NO_POSITIONAL: Final = _Positional()


def _array_field(arr: Sequence[Any], part: str) -> Any:
    """``arr[part]`` the way a BSON array answers a field name ("0", "1", ...)."""
    if part.isdigit() and (part == "0" or not part.startswith("0")):
        i = int(part)
        if i < len(arr):
            return arr[i]
    return MISSING


def _extract_along_path(obj: Any, path: str) -> tuple[Any, str, str]:
    """dotted_path_support::extractElementAtPathOrArrayAlongPath: the value at `path`,
    or the first array met on the way with the rest of the path; also the field name
    of the returned element."""
    parts = path.split(".")
    cur = obj
    for j, part in enumerate(parts):
        if isinstance(cur, Mapping):
            v = cur.get(part, MISSING)
        elif isinstance(cur, list):
            v = _array_field(cur, part)
        else:
            return MISSING, "", part
        if v is MISSING:
            return MISSING, "", part
        if isinstance(v, list):
            return v, ".".join(parts[j + 1:]), part
        cur = v
    return cur, "", parts[-1]


class KeyGenerator:
    """Keys of documents for one index spec (b-tree indexes)."""

    __slots__ = ("_dirs", "_empty", "_fields", "_is_id", "_n", "_path_lengths", "_single",
                 "_sparse", "_split", "_top_level")

    def __init__(self, spec: IndexSpec) -> None:
        self._fields = spec.fields
        self._dirs = spec.directions
        self._n = len(spec.fields)
        self._path_lengths = tuple(f.count(".") + 1 for f in spec.fields)
        self._split = tuple(tuple(f.split(".")) for f in spec.fields)
        self._top_level = all("." not in f for f in spec.fields)
        self._single = self._n == 1 and spec.directions[0] > 0
        self._sparse = spec.sparse
        self._is_id = spec.is_id_index
        self._empty: tuple[frozenset[Any], ...] = (frozenset(),) * self._n

    def keys(self, doc: Mapping[str, Any]) -> KeySet:
        if self._is_id:
            v = doc.get("_id")
            return KeySet([(encode_value(v), (v,))], self._empty, False)
        fast = self._keys_without_arrays(doc)
        if fast is not None:
            return fast
        keys: dict[bytes, tuple[Any, ...]] = {}
        multikey: list[set[int]] = [set() for _ in range(self._n)]
        self._with_array(list(self._fields), [None] * self._n, doc, 0,
                         [_NO_POSITIONAL] * self._n, keys, multikey)
        if not keys and not self._sparse:
            nulls = (None,) * self._n
            keys[encode_key(nulls, self._dirs)] = nulls
        return KeySet(list(keys.items()), tuple(frozenset(s) for s in multikey))

    def _keys_without_arrays(self, doc: Mapping[str, Any]) -> KeySet | None:
        """The single key of a document with no array on any indexed path (else None)."""
        values = []
        not_found = 0
        if self._top_level:
            for f in self._fields:
                v = doc.get(f, MISSING)
                if v is MISSING:
                    not_found += 1
                    v = None
                elif isinstance(v, list):
                    return None
                values.append(v)
        else:
            for parts in self._split:
                cur: Any = doc
                for part in parts:
                    if isinstance(cur, Mapping):
                        cur = cur.get(part, MISSING)
                        if isinstance(cur, list):
                            return None
                        if cur is MISSING:
                            break
                    elif isinstance(cur, list):
                        return None
                    else:
                        cur = MISSING
                        break
                if cur is MISSING:
                    not_found += 1
                    cur = None
                values.append(cur)
        if self._sparse and not_found == self._n:
            return KeySet([], self._empty, False)
        key = tuple(values)
        enc = encode_value(key[0]) if self._single else encode_key(key, self._dirs)
        return KeySet([(enc, key)], self._empty, False)

    def _with_array(self, paths: list[str], fixed: list[Any], obj: Any, not_found: int,
                    positional: list[_Positional], keys: dict[bytes, tuple[Any, ...]],
                    multikey: list[set[int]]) -> None:
        arr: list[Any] | None = None
        arr_name = ""
        arr_idxs: list[int] = []
        may_expand = True
        for i in range(self._n):
            if paths[i] == "":
                continue
            e, rest, name, nested = self._next_element(obj, positional[i], paths[i])
            paths[i] = rest
            if e is MISSING:
                fixed[i] = None
                paths[i] = ""
                not_found += 1
            elif isinstance(e, list):
                arr_idxs.append(i)
                if arr is None:
                    arr, arr_name = e, name
                elif e is not arr:
                    raise MongoError(ErrorCode.CannotIndexParallelArrays,
                                     f"cannot index parallel arrays [{name}] [{arr_name}]")
                if nested:
                    may_expand = False
            else:
                fixed[i] = e
        if arr is None:
            if self._sparse and not_found == self._n:
                return
            key = tuple(fixed)
            keys.setdefault(encode_key(key, self._dirs), key)
            return
        if not arr:
            if may_expand:
                for i in arr_idxs:
                    suffix = paths[i].count(".") + 1 if paths[i] else 0
                    multikey[i].add(self._path_lengths[i] - suffix - 1)
            self._element(paths, fixed, UNDEFINED, not_found, arr, arr_idxs, True,
                          [_NO_POSITIONAL] * self._n, keys, multikey)
            return
        sub_positional = [_NO_POSITIONAL] * self._n
        for i in range(self._n):
            is_arr = i in arr_idxs
            if paths[i] == "":
                if is_arr and may_expand:
                    multikey[i].add(self._path_lengths[i] - 1)
                continue
            part = paths[i].split(".", 1)[0]
            elt = _array_field(arr, part)
            if elt is MISSING:
                suffix = paths[i].count(".") + 1
                multikey[i].add(self._path_lengths[i] - suffix - 1)
                continue
            dotted, remaining, _name = _extract_along_path(arr, paths[i])
            sub_positional[i] = _Positional(True, elt, arr, remaining, dotted)
        for entry in arr:
            self._element(paths, fixed, entry, not_found, arr, arr_idxs, may_expand,
                          sub_positional, keys, multikey)

    def _element(self, paths: list[str], fixed: list[Any], entry: Any, not_found: int,
                 arr: list[Any], arr_idxs: list[int], may_expand: bool,
                 positional: list[_Positional], keys: dict[bytes, tuple[Any, ...]],
                 multikey: list[set[int]]) -> None:
        paths2 = list(paths)
        fixed2 = list(fixed)
        for i in arr_idxs:
            if paths2[i] == "":
                fixed2[i] = entry if may_expand else arr
        obj = entry if isinstance(entry, Mapping) else {}
        self._with_array(paths2, fixed2, obj, not_found, positional, keys, multikey)

    @staticmethod
    def _next_element(obj: Any, pos: _Positional, path: str) -> tuple[Any, str, str, bool]:
        """(element, rest of path, element's field name, element is an array nested in
        an array)."""
        first = path.split(".", 1)[0]
        have = isinstance(obj, Mapping) and first in obj
        if have and pos.has_elt:
            shown = {str(i): v for i, v in enumerate(pos.arr)}
            raise MongoError(16746, "Ambiguous field name found in array (do not use numeric "
                                    "field names in embedded elements in an array), field: "
                                    f"'{first}' for array: {to_mongo_string(shown)}")
        if have:
            e, rest, name = _extract_along_path(obj, path)
            return e, rest, name, False
        if pos.has_elt:
            return pos.dotted, pos.remaining, first, isinstance(pos.elt, list)
        return MISSING, "", first, False

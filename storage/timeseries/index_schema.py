"""Index specifications: time-series form <-> buckets-collection form.

createIndexes on the view is rewritten for system.buckets.<coll>
(timeseries_index_schema_conversion_functions.cpp, makeTimeseriesCreateIndexesCommand):

    {<time>: 1}        -> {control.min.<time>: 1, control.max.<time>: 1}
    {<time>: -1}       -> {control.max.<time>: -1, control.min.<time>: -1}
    {<meta>: k}        -> {meta: k}           (k may be any index type: 2dsphere, hashed...)
    {<meta>.a.b: k}    -> {meta.a.b: k}
    {a: 1}             -> {control.min.a: 1, control.max.a: 1}
    {a: -1}            -> {control.max.a: -1, control.min.a: -1}
    {a: "2dsphere"}    -> {data.a: "2dsphere_bucket"}

Refusals: `unique: true` and text indexes (InvalidOptions 72); non-numeric key types on
the time field or measurements (CannotCreateIndex 67 wrapping MongoDB's BadValue
message); sparse on measurements (InvalidOptions); TTL only on the time field together
with a partialFilterExpression on the metaField; partialFilterExpression together with
collation (IndexOptionsConflict 85). Specs whose key cannot be mapped back, and every
spec with a partialFilterExpression, keep the user's spec as `originalSpec`, which
listIndexes returns as is; other buckets indexes are mapped back from their key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bson import Decimal128

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from .bucket_predicates import meta_only_filter
from .constants import CONTROL, CONTROL_MAX, CONTROL_MIN, DATA, META
from .metadata import is_meta_path
from .options import TimeseriesOptions

if TYPE_CHECKING:
    from storage.indexes import IndexSpec

__all__ = [
    "bucket_index_key",
    "bucket_index_spec",
    "default_index_spec",
    "drop_index_key",
    "index_keys_time_bounds",
    "index_name",
    "index_reads_data",
    "supports_reopening_query",
    "time_bound_paths",
    "timeseries_index_key",
    "timeseries_index_spec",
]

_MIN = f"{CONTROL}.{CONTROL_MIN}."
_MAX = f"{CONTROL}.{CONTROL_MAX}."


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | Decimal128) and not isinstance(v, bool)


def _num(v: Any) -> float:
    return float(v.to_decimal()) if isinstance(v, Decimal128) else float(v)


def bucket_index_key(options: TimeseriesOptions, key: Mapping[str, Any]) -> dict[str, Any]:
    """createBucketsIndexSpecFromTimeseriesIndexSpec; raises BadValue MongoErrors."""
    if not key:
        raise MongoError(ErrorCode.BadValue, "Empty object is not a valid index spec")
    first = next(iter(key))
    if first in ("$hint", "$natural"):
        raise MongoError(ErrorCode.BadValue,
                         "Invalid index spec (perhaps it's a valid hint, that was incorrectly "
                         f"passed to createBucketsSpecFromTimeseriesSpec): {dict(key)}")
    tf, mf = options.time_field, options.meta_field
    out: dict[str, Any] = {}
    for name, v in key.items():
        if name == tf:
            if not _is_number(v):
                raise MongoError(ErrorCode.BadValue,
                                 f"Invalid index spec for time-series collection: {dict(key)}. "
                                 "Indexes on the time field must be ascending or descending "
                                 f"(numbers only): {name}: {v!r}")
            if _num(v) >= 0:
                out[_MIN + tf] = v
                out[_MAX + tf] = v
            else:
                out[_MAX + tf] = v
                out[_MIN + tf] = v
            continue
        if mf is not None:
            if name == mf:
                out[META] = v
                continue
            if name.startswith(mf + "."):
                out[META + name[len(mf):]] = v
                continue
        if v == "2dsphere":
            out[f"{DATA}.{name}"] = "2dsphere_bucket"
            continue
        if not _is_number(v):
            raise MongoError(ErrorCode.BadValue,
                             f"Invalid index spec for time-series collection: {dict(key)}. "
                             "Indexes on measurement fields must be ascending or descending "
                             f"(numbers only), or '2dsphere': {name}: {v!r}")
        if _num(v) >= 0:
            out[_MIN + name] = v
            out[_MAX + name] = v
        else:
            out[_MAX + name] = v
            out[_MIN + name] = v
    return out


def _control_parts(name: str) -> tuple[str, str] | None:
    if name.startswith(_MIN):
        return _MIN, name[len(_MIN):]
    if name.startswith(_MAX):
        return _MAX, name[len(_MAX):]
    return None


def timeseries_index_key(options: TimeseriesOptions, bucket_key: Mapping[str, Any]
                         ) -> dict[str, Any] | None:
    """createTimeseriesIndexSpecFromBucketsIndexSpec: the user's key, or None."""
    tf, mf = options.time_field, options.meta_field
    items = list(bucket_key.items())
    out: dict[str, Any] = {}
    i = 0
    while i < len(items):
        name, v = items[i]
        i += 1
        if name == _MIN + tf:
            if not _is_number(v):
                return None
            out[tf] = v
            continue
        if name == _MAX + tf:
            continue
        if mf is not None:
            if name == META:
                out[mf] = v
                continue
            if name.startswith(META + "."):
                out[mf + name[len(META):]] = v
                continue
        if name.startswith(DATA + ".") and v == "2dsphere_bucket":
            out[name[len(DATA) + 1:]] = "2dsphere"
            continue
        first = _control_parts(name)
        if first is None or i >= len(items) or not _is_number(v):
            return None
        name2, v2 = items[i]
        i += 1
        second = _control_parts(name2)
        if second is None or not _is_number(v2) or _num(v) != _num(v2):
            return None
        if first[1] != second[1]:
            return None
        if (first[0] == _MIN and second[0] == _MAX and _num(v) >= 0) or (first[0] == _MAX and second[0] == _MIN and _num(v) < 0):
            out[first[1]] = v2
        else:
            return None
    return out


def bucket_index_spec(options: TimeseriesOptions, spec: Mapping[str, Any]) -> dict[str, Any]:
    """One index of createIndexes on the view, as the buckets collection's index spec."""
    out: dict[str, Any] = {}
    original_key: Mapping[str, Any] | None = None
    bucket_key: dict[str, Any] | None = None
    include_original = False
    is_ttl = False
    meta_partial = False
    tf, mf = options.time_field, options.meta_field
    for name, v in spec.items():
        if name == "partialFilterExpression":
            include_original = True
            if "collation" in spec:
                raise MongoError(ErrorCode.IndexOptionsConflict,
                                 "On a time-series collection, partialFilterExpression and "
                                 "collation arguments are incompatible")
            if not isinstance(v, Mapping):
                raise MongoError(ErrorCode.TypeMismatch,
                                 "BSON field 'partialFilterExpression' is the wrong type, "
                                 "expected type 'object'")
            translated = meta_only_filter(v, options)
            if translated is None:
                raise MongoError(ErrorCode.NotImplemented,
                                 "partialFilterExpression on time-series measurements is not "
                                 "supported by bucketd; only predicates on the metaField are")
            meta_partial = True
            out[name] = translated
            continue
        if name == "sparse":
            key = spec.get("key")
            if isinstance(key, Mapping):
                for k in key:
                    if k == tf or is_meta_path(k, mf):
                        continue
                    raise MongoError(ErrorCode.InvalidOptions,
                                     "Sparse indexes are not supported on time-series "
                                     "measurements")
        if name == "expireAfterSeconds":
            is_ttl = True
            out[name] = v
            continue
        if name == "unique" and bool(v):
            raise MongoError(ErrorCode.InvalidOptions,
                             "Unique indexes are not supported on time-series collections")
        if name == "key":
            if not isinstance(v, Mapping):
                raise MongoError(ErrorCode.TypeMismatch,
                                 "The 'key' field must be an object")
            original_key = v
            if any(x == "text" for x in v.values()):
                raise MongoError(ErrorCode.InvalidOptions,
                                 "Text indexes are not supported on time-series collections")
            try:
                bucket_key = bucket_index_key(options, v)
            except MongoError as e:
                raise MongoError(ErrorCode.CannotCreateIndex,
                                 f"{e.code_name}: {e.errmsg} Command request: "
                                 f"{{key: {dict(v)}}}") from None
            if timeseries_index_key(options, bucket_key) is None:
                include_original = True
            continue
        out[name] = v
    if is_ttl:
        if not meta_partial:
            raise MongoError(ErrorCode.InvalidOptions,
                             "TTL indexes on time-series collections require a "
                             "partialFilterExpression on the metaField")
        assert original_key is not None
        if len(original_key) != 1:
            raise MongoError(ErrorCode.CannotCreateIndex,
                             "TTL indexes are single-field indexes, compound indexes do not "
                             f"support TTL. Index spec: {dict(original_key)}")
        first, direction = next(iter(original_key.items()))
        if first != tf:
            raise MongoError(ErrorCode.InvalidOptions,
                             "TTL indexes on non-time fields are not supported on time-series "
                             "collections")
        bucket_key = {_MIN + tf: direction}
    out["key"] = bucket_key if bucket_key is not None else {}
    if include_original:
        out["originalSpec"] = dict(spec)
    return out


def timeseries_index_spec(options: TimeseriesOptions, bucket_spec: Mapping[str, Any]
                          ) -> dict[str, Any] | None:
    """createTimeseriesIndexFromBucketsIndex: the listIndexes entry of a buckets index."""
    original = bucket_spec.get("originalSpec")
    if isinstance(original, Mapping):
        return dict(original)
    key = bucket_spec.get("key")
    if not isinstance(key, Mapping):
        return None
    ts_key = timeseries_index_key(options, key)
    if ts_key is None:
        return None
    return {k: (ts_key if k == "key" else v) for k, v in bucket_spec.items()
            if k != "originalSpec"}


def drop_index_key(options: TimeseriesOptions, key: Mapping[str, Any]) -> dict[str, Any]:
    """dropIndexes by key on the view: the buckets key (IndexNotFound when unmappable)."""
    try:
        return bucket_index_key(options, key)
    except MongoError as e:
        raise MongoError(ErrorCode.IndexNotFound,
                         f"{e.code_name}: {e.errmsg} Command request: {{index: {dict(key)}}}"
                         ) from None


def index_reads_data(spec: IndexSpec) -> bool:
    """Whether an index of a buckets collection reads `data` (in its keys or its partial
    filter): a bucket's view without `data` gives its keys only when it does not."""
    def clean(path: str) -> bool:
        return path.split(".", 1)[0] in ("_id", CONTROL, META)

    def filter_clean(f: Any) -> bool:
        if isinstance(f, dict):
            return all((k.startswith("$") or clean(k)) and filter_clean(v) for k, v in f.items())
        if isinstance(f, list):
            return all(filter_clean(v) for v in f)
        return True

    return not (all(clean(p) for p in spec.fields)
                and (spec.partial_filter is None or filter_clean(spec.partial_filter)))


def time_bound_paths(time_field: str) -> tuple[str, str]:
    """The paths of a bucket's time bounds: control.min.<time field>, control.max.<...>."""
    return f"{CONTROL}.{CONTROL_MIN}.{time_field}", f"{CONTROL}.{CONTROL_MAX}.{time_field}"


def index_keys_time_bounds(spec: IndexSpec, time_field: str) -> bool:
    """Whether an index of a buckets collection keys nothing but `_id`, the meta value
    (or fields in it) and control.min/max.<time field>, with no partial filter: a
    bucket's keys there follow from its id, meta and time bounds alone."""
    bounds = time_bound_paths(time_field)
    return spec.partial_filter is None and all(
        p == "_id" or p == META or p.startswith(META + ".") or p in bounds
        for p in spec.fields)


def index_keys_meta_whole(spec: IndexSpec) -> bool:
    """Whether an index reads the meta value of a bucket, if at all, whole (no field in
    it) and without a collation: its keys take the meta's keystring as it is."""
    return spec.collator is None and not any(p.startswith(META + ".") for p in spec.fields)


def index_name(key: Mapping[str, Any]) -> str:
    """The default index name MongoDB derives from a key pattern ("a_1_b_-1")."""
    return "_".join(f"{k}_{v}" for k, v in key.items())


def default_index_spec(options: TimeseriesOptions) -> dict[str, Any] | None:
    """The {<meta>: 1, <time>: 1} index MongoDB creates with a new collection that has a
    metaField, in buckets form (None without metaField)."""
    if options.meta_field is None:
        return None
    user_key = {options.meta_field: 1, options.time_field: 1}
    return {"v": 2, "key": bucket_index_key(options, user_key), "name": index_name(user_key)}


def supports_reopening_query(options: TimeseriesOptions, bucket_key: Mapping[str, Any],
                             partial: bool = False) -> bool:
    """collectionHasIndexSupportingReopeningQuery for one index (non-partial, prefix
    {meta, control.min.<time>} or, without metaField, {control.min.<time>})."""
    if partial:
        return False
    expected = ([META] if options.meta_field is not None else []) + [_MIN + options.time_field]
    names = list(bucket_key)
    return names[:len(expected)] == expected

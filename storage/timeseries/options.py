"""Time-series collection options: parsing, validation, defaults and `collMod` changes.

Owns the `timeseries` option of `create` (and `expireAfterSeconds` as a time-series
collection takes it), the options document `listCollections` shows, the buckets
collection's options (validator, clusteredIndex), and `collMod` transitions. Errors carry
MongoDB's codes: the IDL layer's TypeMismatch (14), IDLFailedToParse (40414),
IDLUnknownField (40415), BadValue (2) for enum and range violations, then the semantic
checks' InvalidOptions (72).

MongoDB facts this follows (timeseries.idl, timeseries_options.cpp, create command):
granularity presets seconds 60/3600, minutes 3600/86400, hours 86400/2592000 (rounding /
max span); `bucketMaxSpanSeconds` may accompany `granularity` only with the preset value;
`bucketRoundingSeconds` never accompanies `granularity`; fixed bucketing needs both
parameters equal, in 1..31536000; with `granularity` only `bucketMaxSpanSeconds` is stored
and shown (no `bucketRoundingSeconds`). Rounding is a floor in milliseconds, also for
dates before 1970.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from bson import Decimal128, Int64

from storage.errors import MongoError
from storage.vocabulary.bson_types import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    safe_number,
    type_name,
)
from storage.vocabulary.error_codes import ErrorCode

__all__ = [
    "GRANULARITIES",
    "MAX_BUCKET_SPAN_SECONDS",
    "TimeseriesOptions",
    "buckets_collection_options",
    "buckets_validator",
    "coll_mod_timeseries",
    "granularity_max_span_seconds",
    "granularity_rounding_seconds",
    "options_equal",
    "parse_coll_mod_expire_after_seconds",
    "parse_expire_after_seconds",
    "parse_timeseries_options",
    "round_timestamp_ms",
    "view_pipeline",
]

# granularity -> (bucketRoundingSeconds, bucketMaxSpanSeconds)
GRANULARITIES: Final[dict[str, tuple[int, int]]] = {
    "seconds": (60, 60 * 60),
    "minutes": (60 * 60, 60 * 60 * 24),
    "hours": (60 * 60 * 24, 60 * 60 * 24 * 30),
}
_GRANULARITY_RANK: Final = {"seconds": 0, "minutes": 1, "hours": 2}

# 365 days: the IDL validator's upper bound for both bucketing parameters.
MAX_BUCKET_SPAN_SECONDS: Final = 60 * 60 * 24 * 365


_TS_FIELDS: Final = ("timeField", "metaField", "granularity", "bucketRoundingSeconds",
                     "bucketMaxSpanSeconds")
_COLLMOD_TS_FIELDS: Final = ("granularity", "bucketRoundingSeconds", "bucketMaxSpanSeconds")


def granularity_rounding_seconds(granularity: str) -> int:
    return GRANULARITIES[granularity][0]


def granularity_max_span_seconds(granularity: str) -> int:
    return GRANULARITIES[granularity][1]


@dataclass(frozen=True, slots=True)
class TimeseriesOptions:
    """A collection's validated time-series options, as MongoDB stores them.

    `granularity` is None for fixed bucketing (then `bucket_rounding_seconds` is set);
    `bucket_rounding_seconds` is None when a granularity is set.
    """

    time_field: str
    meta_field: str | None = None
    granularity: str | None = "seconds"
    bucket_max_span_seconds: int = 3600
    bucket_rounding_seconds: int | None = None

    @property
    def rounding_seconds(self) -> int:
        """Seconds the first measurement's time is rounded down by (bucket _id, control.min)."""
        if self.granularity is not None:
            return GRANULARITIES[self.granularity][0]
        if self.bucket_rounding_seconds is not None:
            return self.bucket_rounding_seconds
        return GRANULARITIES["seconds"][0]

    @property
    def max_span_ms(self) -> int:
        return self.bucket_max_span_seconds * 1000

    @property
    def fixed_bucketing(self) -> bool:
        return self.bucket_rounding_seconds is not None and (
            self.bucket_rounding_seconds == self.bucket_max_span_seconds)

    def to_document(self) -> dict[str, Any]:
        """The `timeseries` options document as listCollections shows it (IDL field order)."""
        doc: dict[str, Any] = {"timeField": self.time_field}
        if self.meta_field is not None:
            doc["metaField"] = self.meta_field
        if self.granularity is not None:
            doc["granularity"] = self.granularity
        if self.bucket_rounding_seconds is not None:
            doc["bucketRoundingSeconds"] = self.bucket_rounding_seconds
        doc["bucketMaxSpanSeconds"] = self.bucket_max_span_seconds
        return doc

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> TimeseriesOptions:
        """Rebuild stored options (no validation: the document was produced by us)."""
        return cls(
            time_field=doc["timeField"],
            meta_field=doc.get("metaField"),
            granularity=doc.get("granularity"),
            bucket_max_span_seconds=int(doc["bucketMaxSpanSeconds"]),
            bucket_rounding_seconds=(int(doc["bucketRoundingSeconds"])
                                     if doc.get("bucketRoundingSeconds") is not None else None),
        )


# -- IDL-style field parsing -------------------------------------------------------------------

def _wrong_type(path: str, v: Any, expected: str) -> MongoError:
    return MongoError(ErrorCode.TypeMismatch,
                      f"BSON field '{path}' is the wrong type '{type_name(v)}', "
                      f"expected type '{expected}'")


def _wrong_number_type(path: str, v: Any) -> MongoError:
    return MongoError(ErrorCode.TypeMismatch,
                      f"BSON field '{path}' is the wrong type '{type_name(v)}', "
                      "expected types '[long, int, decimal, double]'")


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | Decimal128) and not isinstance(v, bool)


def _bounded_int(path: str, v: Any) -> int:
    if not _is_number(v):
        raise _wrong_number_type(path, v)
    n = safe_number(v, INT32_MIN, INT32_MAX)
    if n < 1:
        raise MongoError(ErrorCode.BadValue,
                         f"BSON field '{path}' value must be >= 1, actual value '{n}'")
    if n > MAX_BUCKET_SPAN_SECONDS:
        raise MongoError(ErrorCode.BadValue,
                         f"BSON field '{path}' value must be <= {MAX_BUCKET_SPAN_SECONDS}, "
                         f"actual value '{n}'")
    return n


def _granularity(path: str, v: Any) -> str:
    if type(v) is not str:
        raise _wrong_type(path, v, "string")
    if v not in GRANULARITIES:
        raise MongoError(ErrorCode.BadValue,
                         f"Enumeration value '{v}' for field '{path}' is not a valid value.")
    return v


def _check_field_name(which: str, name: str, ns: str) -> None:
    if "\x00" in name:
        raise MongoError(ErrorCode.BadValue,
                         "The 'timeField' or the 'metaField' cannot contain embedded null bytes")
    if "." in name:
        raise MongoError(ErrorCode.InvalidOptions,
                         f"{ns}: '{which}' must be a top-level field and not contain a '.'")
    if name.startswith("$"):
        # MongoDB 8.3 refuses this (BF-40520); earlier versions accept a name no insert
        # could use. We follow the fix.
        raise MongoError(ErrorCode.BadValue, "The 'timeField' or 'metaField' cannot start with '$'")


def _check_bucketing(granularity: str | None, max_span: int | None,
                     rounding: int | None) -> tuple[str | None, int, int | None]:
    """timeseries::validateAndSetBucketingParameters: returns the stored triple."""
    if granularity is not None:
        preset_span = GRANULARITIES[granularity][1]
        if max_span is not None and max_span != preset_span:
            raise MongoError(ErrorCode.InvalidOptions,
                             "Time-series 'bucketMaxSpanSeconds' cannot be set to a value other "
                             f"than the default of {preset_span} for the provided granularity")
        if rounding is not None:
            raise MongoError(ErrorCode.InvalidOptions,
                             "Time-series 'bucketRoundingSeconds' cannot be set alongside the "
                             "granularity parameter")
        return granularity, preset_span, None
    if max_span is not None or rounding is not None:
        if max_span != rounding:
            raise MongoError(ErrorCode.InvalidOptions,
                             "Time-series 'bucketRoundingSeconds' must be equal to "
                             "'bucketMaxSpanSeconds'")
        assert max_span is not None
        return None, max_span, rounding
    return "seconds", GRANULARITIES["seconds"][1], None


def parse_timeseries_options(spec: Any, *, ns: str = "", command: str = "create"
                             ) -> TimeseriesOptions:
    """Validate `create`'s `timeseries` value and fill defaults, as MongoDB does.

    `ns` ("db.coll") appears in some of MongoDB's messages; `command` prefixes IDL paths.
    """
    base = f"{command}.timeseries"
    if not isinstance(spec, dict):
        raise _wrong_type(base, spec, "object")
    for key in spec:
        if key not in _TS_FIELDS:
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field '{base}.{key}' is an unknown field.")
    if "timeField" not in spec:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         f"BSON field '{base}.timeField' is missing but a required field")
    time_field = spec["timeField"]
    if type(time_field) is not str:
        raise _wrong_type(f"{base}.timeField", time_field, "string")
    meta_field = spec.get("metaField")
    if "metaField" in spec and type(meta_field) is not str:
        raise _wrong_type(f"{base}.metaField", meta_field, "string")
    granularity = (_granularity(f"{base}.granularity", spec["granularity"])
                   if "granularity" in spec else None)
    rounding = (_bounded_int(f"{base}.bucketRoundingSeconds", spec["bucketRoundingSeconds"])
                if "bucketRoundingSeconds" in spec else None)
    max_span = (_bounded_int(f"{base}.bucketMaxSpanSeconds", spec["bucketMaxSpanSeconds"])
                if "bucketMaxSpanSeconds" in spec else None)

    _check_field_name("timeField", time_field, ns)
    if meta_field is not None:
        if meta_field == "_id":
            raise MongoError(ErrorCode.InvalidOptions, "'metaField' cannot be \"_id\"")
        if meta_field == time_field:
            raise MongoError(ErrorCode.InvalidOptions,
                             "'metaField' cannot be the same as 'timeField'")
        _check_field_name("metaField", meta_field, ns)

    granularity, span, rounding = _check_bucketing(granularity, max_span, rounding)
    return TimeseriesOptions(time_field=time_field, meta_field=meta_field,
                             granularity=granularity, bucket_max_span_seconds=span,
                             bucket_rounding_seconds=rounding)


def options_equal(a: TimeseriesOptions, b: TimeseriesOptions) -> bool:
    """timeseries::optionsAreEqual: same fields and same effective bucketing."""
    return (a.time_field == b.time_field and a.meta_field == b.meta_field
            and (a.granularity or "seconds") == (b.granularity or "seconds")
            and a.bucket_max_span_seconds == b.bucket_max_span_seconds
            and a.rounding_seconds == b.rounding_seconds)


# -- expireAfterSeconds ------------------------------------------------------------------------

_TOO_LARGE: Final = ("TTL index 'expireAfterSeconds' option must be within an acceptable range, "
                     "try a lower number")


def _validate_ttl_seconds(n: int, now_ms: int | None) -> int:
    if n < 0:
        raise MongoError(ErrorCode.InvalidOptions,
                         "TTL index 'expireAfterSeconds' option cannot be less than 0")
    if n > INT64_MAX // 1000:
        raise MongoError(ErrorCode.InvalidOptions, _TOO_LARGE)
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    # Buckets are clustered by an ObjectId whose time is 32-bit seconds since the epoch, so a
    # limit longer than the time since the epoch cannot be honoured.
    if n * 1000 > now_ms:
        raise MongoError(ErrorCode.InvalidOptions, _TOO_LARGE)
    return n


def parse_expire_after_seconds(value: Any, *, command: str = "create",
                               now_ms: int | None = None) -> int:
    """`create`'s expireAfterSeconds (IDL safeInt64), validated as a clustered TTL."""
    if not _is_number(value):
        raise _wrong_number_type(f"{command}.expireAfterSeconds", value)
    return _validate_ttl_seconds(safe_number(value, INT64_MIN, INT64_MAX), now_ms)


def parse_coll_mod_expire_after_seconds(value: Any, *, now_ms: int | None = None) -> int | None:
    """`collMod`'s expireAfterSeconds on a time-series collection: seconds, or None for "off"."""
    if type(value) is str:
        if value != "off":
            raise MongoError(ErrorCode.InvalidOptions,
                             "Invalid string value for the 'clusteredIndex::expireAfterSeconds' "
                             "option. Got: '" + value + "'. Accepted value is 'off'")
        return None
    if not _is_number(value):
        raise MongoError(ErrorCode.InvalidOptions,
                         "'expireAfterSeconds' must be a number or the string 'off'")
    return _validate_ttl_seconds(safe_number(value, INT64_MIN, INT64_MAX), now_ms)


# -- collMod -----------------------------------------------------------------------------------

def coll_mod_timeseries(current: TimeseriesOptions, spec: Any
                        ) -> tuple[TimeseriesOptions, bool]:
    """Apply `collMod`'s `timeseries` value; returns (new options, whether they changed).

    Follows isTimeseriesGranularityValidAndUnchanged and applyTimeseriesOptionsModifications:
    granularity only moves seconds -> minutes -> hours, bucketing parameters never decrease,
    fixed bucketing and granularity convert into each other when nothing decreases.
    """
    base = "collMod.timeseries"
    if not isinstance(spec, dict):
        raise _wrong_type(base, spec, "object")
    for key in spec:
        if key not in _COLLMOD_TS_FIELDS:
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field '{base}.{key}' is an unknown field.")
    target_gran = (_granularity(f"{base}.granularity", spec["granularity"])
                   if "granularity" in spec else None)
    target_rounding = (_bounded_int(f"{base}.bucketRoundingSeconds",
                                    spec["bucketRoundingSeconds"])
                       if "bucketRoundingSeconds" in spec else None)
    target_span = (_bounded_int(f"{base}.bucketMaxSpanSeconds", spec["bucketMaxSpanSeconds"])
                   if "bucketMaxSpanSeconds" in spec else None)

    if target_gran is None and target_span is None and target_rounding is None:
        return current, False

    if target_gran is not None:
        if target_span is not None and target_span != GRANULARITIES[target_gran][1]:
            raise MongoError(ErrorCode.InvalidOptions,
                             "Timeseries 'bucketMaxSpanSeconds' is not configurable to a value "
                             "other than the default for the provided granularity")
        if target_rounding is not None:
            raise MongoError(ErrorCode.InvalidOptions,
                             "Timeseries 'bucketRoundingSeconds' is not configurable alongside "
                             "the granularity parameter")
        if current.granularity is not None:
            if current.granularity == target_gran:
                return current, False
            if _GRANULARITY_RANK[target_gran] < _GRANULARITY_RANK[current.granularity] or (
                    current.granularity == "minutes" and target_gran != "hours"):
                raise MongoError(ErrorCode.InvalidOptions,
                                 "Invalid transition for timeseries.granularity. Can only "
                                 "transition from 'seconds' to 'minutes' or 'minutes' to "
                                 "'hours'.")
            # A preset upgrade never decreases the parameters.
            new = replace(current, granularity=target_gran,
                          bucket_max_span_seconds=GRANULARITIES[target_gran][1],
                          bucket_rounding_seconds=None)
            return new, True
        new_span, new_rounding = GRANULARITIES[target_gran][1], GRANULARITIES[target_gran][0]
    else:
        if target_span is None or target_rounding is None:
            raise MongoError(ErrorCode.InvalidOptions,
                             "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' "
                             "need to be set alongside each other")
        if target_span != target_rounding:
            raise MongoError(ErrorCode.InvalidOptions,
                             "Timeseries 'bucketRoundingSeconds' needs to be equal to "
                             "'bucketMaxSpanSeconds'")
        new_span, new_rounding = target_span, target_rounding

    cur_span = current.bucket_max_span_seconds
    cur_rounding = current.rounding_seconds
    if cur_span == new_span and cur_rounding == new_rounding:
        return current, False
    if cur_span > new_span:
        raise MongoError(ErrorCode.InvalidOptions,
                         "Timeseries 'bucketMaxSpanSeconds' needs to be equal or greater to "
                         "transition")
    if cur_rounding > new_rounding:
        raise MongoError(ErrorCode.InvalidOptions,
                         "Timeseries 'bucketRoundingSeconds' needs to be equal or greater to "
                         "transition")
    if target_gran is not None:
        return replace(current, granularity=target_gran, bucket_max_span_seconds=new_span,
                       bucket_rounding_seconds=None), True
    return replace(current, granularity=None, bucket_max_span_seconds=new_span,
                   bucket_rounding_seconds=new_rounding), True


# -- derived documents -------------------------------------------------------------------------

def round_timestamp_ms(time_ms: int, rounding_seconds: int) -> int:
    """roundTimestampBySeconds: floor to a multiple of the rounding (also before 1970)."""
    r = rounding_seconds * 1000
    return time_ms - (time_ms % r)  # Python's % floors, which is what MongoDB corrects to


def view_pipeline(options: TimeseriesOptions) -> list[dict[str, Any]]:
    """The view's pipeline as stored in system.views."""
    spec: dict[str, Any] = {"timeField": options.time_field}
    if options.meta_field is not None:
        spec["metaField"] = options.meta_field
    spec["bucketMaxSpanSeconds"] = options.bucket_max_span_seconds
    return [{"$_internalUnpackBucket": spec}]


def buckets_validator(options: TimeseriesOptions) -> dict[str, Any]:
    """The $jsonSchema validator MongoDB puts on system.buckets.<coll>."""
    time_props = {options.time_field: {"bsonType": "date"}}
    bound = {"bsonType": "object", "required": [options.time_field], "properties": time_props}
    return {"$jsonSchema": {
        "bsonType": "object",
        "required": ["_id", "control", "data"],
        "properties": {
            "_id": {"bsonType": "objectId"},
            "control": {
                "bsonType": "object",
                "required": ["version", "min", "max"],
                "properties": {
                    "version": {"bsonType": "number"},
                    "min": bound,
                    "max": {"bsonType": "object", "required": [options.time_field],
                            "properties": dict(time_props)},
                    "closed": {"bsonType": "bool"},
                    "count": {"bsonType": "number", "minimum": 1},
                },
                "additionalProperties": False,
            },
            "data": {"bsonType": "object"},
            "meta": {},
        },
        "additionalProperties": False,
    }}


def buckets_collection_options(options: TimeseriesOptions,
                               expire_after_seconds: int | None = None,
                               collation: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`options` of the buckets collection as listCollections shows it (in MongoDB's
    CollectionOptions order); `collation`: the time-series collection's, which MongoDB
    gives its buckets collection too."""
    doc: dict[str, Any] = {"validator": buckets_validator(options)}
    if collation is not None:
        doc["collation"] = dict(collation)
    doc["clusteredIndex"] = True
    if expire_after_seconds is not None:
        doc["expireAfterSeconds"] = Int64(expire_after_seconds)
    doc["timeseries"] = options.to_document()
    return doc

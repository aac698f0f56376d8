"""Bucket documents as MongoDB 8.0 stores them in system.buckets.<coll>.

    {_id: ObjectId(<control.min.time seconds> + 8-byte counter),
     control: {version: 2 | 3, min: {...}, max: {...}, count: <int32>, closed?: bool},
     meta: <normalized metaField value>        (absent without metaField / meta value)
     data: {<time>: BinData(7, ...), <field>: BinData(7, ...), ...}}

Version 1 (uncompressed, written by MongoDB before 8.0) has `data.<field>` objects
`{"0": v0, "1": v1, ...}` with missing rows left out and no `control.count`; version 2 is
compressed with rows sorted by time; version 3 is compressed and unsorted.

`build_bucket_document` encodes a compressed bucket; `parse_bucket` reads any version;
`compress_bucket` turns a v1 bucket into the v2 document MongoDB's `compressBucket`
writes (rows sorted by time, time column first, control fields kept, `count` appended);
`decompress_bucket` is the inverse view (v1 form of a compressed bucket).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import bson
from bson import ObjectId
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS

from storage.bsoncolumn import BSONColumnBuilder, BSONColumnError, decompress
from storage.bsoncolumn.reader import VALUES_CODEC_OPTIONS
from storage.bsonutil import decode, encode
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .constants import (
    CONTROL,
    CONTROL_CLOSED,
    CONTROL_COUNT,
    CONTROL_MAX,
    CONTROL_MIN,
    CONTROL_VERSION,
    DATA,
    META,
    VERSION_COMPRESSED_SORTED,
    VERSION_COMPRESSED_UNSORTED,
    VERSION_UNCOMPRESSED,
)

__all__ = [
    "BUCKET_COLUMN_SUBTYPE",
    "ParsedBucket",
    "build_bucket_document",
    "compress_bucket",
    "decode_column",
    "decompress_bucket",
    "is_compressed_bucket",
    "parse_bucket",
]

BUCKET_COLUMN_SUBTYPE = 7


def build_bucket_document(bucket_id: ObjectId, *, version: int, min_doc: Mapping[str, Any],
                          max_doc: Mapping[str, Any], count: int, meta: Any,
                          columns: list[tuple[str, bytes]], closed: bool | None = None
                          ) -> bytes:
    """BSON bytes of a compressed bucket (field order as MongoDB's inserts write it)."""
    control: dict[str, Any] = {CONTROL_VERSION: version, CONTROL_MIN: min_doc,
                               CONTROL_MAX: max_doc, CONTROL_COUNT: count}
    if closed is not None:
        control[CONTROL_CLOSED] = closed
    doc: dict[str, Any] = {"_id": bucket_id, CONTROL: control}
    if meta is not MISSING:
        doc[META] = meta
    doc[DATA] = {name: Binary(col, BUCKET_COLUMN_SUBTYPE) for name, col in columns}
    return encode(doc)


class BucketDocumentParts(NamedTuple):
    """What `build_bucket_document` makes a compressed bucket from, kept so the bytes
    can be built later (or never, when a newer version supersedes them)."""

    bucket_id: ObjectId
    version: int
    min_doc: Mapping[str, Any]
    max_doc: Mapping[str, Any]
    measurement_count: int
    meta: Any
    columns: list[tuple[str, bytes]]

    def build(self) -> bytes:
        return build_bucket_document(self.bucket_id, version=self.version,
                                     min_doc=self.min_doc, max_doc=self.max_doc,
                                     count=self.measurement_count, meta=self.meta,
                                     columns=self.columns)


def is_compressed_bucket(doc: Mapping[str, Any]) -> bool:
    control = doc.get(CONTROL)
    if not isinstance(control, Mapping):
        return False
    return control.get(CONTROL_VERSION) in (VERSION_COMPRESSED_SORTED,
                                            VERSION_COMPRESSED_UNSORTED)


def decode_column(column: bytes) -> dict[str, Any]:
    """{"<row>": value} of a BSONColumn (skipped rows absent)."""
    return bson.decode(decompress(bytes(column)), VALUES_CODEC_OPTIONS)


@dataclass(slots=True)
class ParsedBucket:
    """The parts of a stored bucket the catalog and the unpacker need."""

    bucket_id: Any
    version: int
    control: dict[str, Any]
    min_doc: dict[str, Any]
    max_doc: dict[str, Any]
    count: int | None
    closed: bool
    meta: Any
    data: dict[str, Any]  # name -> column bytes (v2/v3) or {"i": v} (v1)

    @property
    def compressed(self) -> bool:
        return self.version != VERSION_UNCOMPRESSED


def _bad(msg: str) -> MongoError:
    return MongoError(ErrorCode.BadValue, msg)


def parse_bucket(doc: Mapping[str, Any] | bytes) -> ParsedBucket:
    """Structural parse of a bucket document; raises BadValue MongoErrors when malformed."""
    if isinstance(doc, bytes | bytearray | memoryview):
        doc = decode(bytes(doc))
    control = doc.get(CONTROL)
    if not isinstance(control, Mapping):
        raise _bad("Time-series bucket document is missing 'control' field")
    version = control.get(CONTROL_VERSION)
    if type(version) not in (int, float) or version not in (1, 2, 3):
        raise _bad("Invalid value for 'control.version'. Expected 1, 2, or 3, but got "
                   f"{version}.")
    min_doc, max_doc = control.get(CONTROL_MIN), control.get(CONTROL_MAX)
    if not isinstance(min_doc, Mapping) or not isinstance(max_doc, Mapping):
        raise _bad("Time-series bucket document is missing 'control.min' or 'control.max'")
    data = doc.get(DATA)
    if not isinstance(data, Mapping):
        raise _bad("Time-series bucket document is missing 'data' field")
    count = control.get(CONTROL_COUNT)
    count = int(count) if isinstance(count, int | float) and not isinstance(count, bool) else None
    version = int(version)
    cols: dict[str, Any] = {}
    for name, col in data.items():
        if version == VERSION_UNCOMPRESSED:
            if not isinstance(col, Mapping):
                raise _bad(f"Bucket data field '{name}' is not an object")
            cols[name] = col
        else:
            if not isinstance(col, Binary) or col.subtype != BUCKET_COLUMN_SUBTYPE:
                raise _bad(f"Compressed bucket contains uncompressed data field: {name}")
            cols[name] = bytes(col)
    return ParsedBucket(bucket_id=doc.get("_id"), version=version, control=dict(control),
                        min_doc=dict(min_doc), max_doc=dict(max_doc), count=count,
                        # closed only when `true`, as MongoDB reads it (booleanSafe)
                        closed=control.get(CONTROL_CLOSED) is True,
                        meta=doc.get(META, MISSING), data=cols)


def compress_bucket(doc: Mapping[str, Any], time_field: str) -> dict[str, Any]:
    """A v1 bucket as the v2 document MongoDB's compressBucket produces.

    Rows are sorted by time (stable); the time column comes first, then the other data
    fields in their order; `control` keeps its fields with version 2 and gains `count`.
    Raises BadValue when the bucket cannot be compressed (e.g. rows not matching the
    time column).
    """
    parsed = parse_bucket(doc)
    if parsed.version != VERSION_UNCOMPRESSED:
        return dict(doc)
    times = parsed.data.get(time_field)
    if times is None:
        raise _bad("Bucket data field is malformed (missing a valid time column)")
    row_keys = list(times.keys())
    for name, col in parsed.data.items():
        if name != time_field and not set(col).issubset(row_keys):
            raise _bad(f"Bucket data field '{name}' has rows the time column does not have")
    for k in row_keys:
        if not isinstance(times[k], DatetimeMS):
            raise _bad("Bucket time column holds a value that is not a date")
    order = sorted(range(len(row_keys)), key=lambda i: int(times[row_keys[i]]))

    out: dict[str, Any] = {}
    if "_id" in doc:
        out["_id"] = doc["_id"]
    control: dict[str, Any] = {}
    version_set = False
    for k, v in doc[CONTROL].items():
        if k == CONTROL_VERSION:
            control[k] = VERSION_COMPRESSED_SORTED
            version_set = True
        else:
            control[k] = v
    if not version_set:
        control[CONTROL_VERSION] = VERSION_COMPRESSED_SORTED
    control[CONTROL_COUNT] = len(row_keys)
    out[CONTROL] = control
    for k, v in doc.items():
        if k not in ("_id", CONTROL, DATA):
            out[k] = v
    data: dict[str, Binary] = {}
    names = [time_field] + [n for n in parsed.data if n != time_field]
    for name in names:
        col = parsed.data[name]
        builder = BSONColumnBuilder()
        for i in order:
            key = row_keys[i]
            if key in col:
                builder.append(col[key])
            else:
                builder.skip()
        data[name] = Binary(builder.finalize(), BUCKET_COLUMN_SUBTYPE)
    out[DATA] = data
    return out


def decompress_bucket(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The v1 view of a compressed bucket (data columns as {"0": v, ...} objects)."""
    parsed = parse_bucket(doc)
    if not parsed.compressed:
        return dict(doc)
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if k == CONTROL:
            control = {ck: cv for ck, cv in v.items() if ck != CONTROL_COUNT}
            control[CONTROL_VERSION] = VERSION_UNCOMPRESSED
            out[k] = control
        elif k == DATA:
            try:
                out[k] = {name: decode_column(col) for name, col in parsed.data.items()}
            except BSONColumnError as e:
                raise _bad(f"Bucket could not be decompressed: {e}") from None
        else:
            out[k] = v
    return out

"""Rewriting a stored bucket after some of its measurements were deleted or updated.

MongoDB (makeNewDocumentForWrite with the bucket's current min time) rebuilds the bucket
under the same `_id` from the measurements that stay: control.min/max recomputed from
them (in the order given) with `control.min.<time>` kept at the bucket's original value,
rows sorted by time into v2 columns (time column first). When no measurement stays, the
bucket is deleted instead (the caller's job). Updated measurements go to *new* buckets:
run them through a separate `BucketCatalog` (MongoDB's side bucket catalog) with no
`BucketSource`, commit it, and fold its statistics in with `BucketCatalog.merge_stats`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bsoncolumn.rawbson import iter_elements
from storage.bsonutil import encode
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .bucket_document import build_bucket_document
from .columns import Columns
from .constants import VERSION_COMPRESSED_SORTED
from .metadata import normalize_meta
from .minmax import MinMax
from .options import TimeseriesOptions, round_timestamp_ms

__all__ = ["rebuild_bucket"]


def rebuild_bucket(bucket_id: ObjectId, measurements: Sequence[Mapping[str, Any]],
                   options: TimeseriesOptions, *, min_time_ms: int | None = None) -> bytes:
    """The v2 document of bucket `bucket_id` holding exactly `measurements` (non-empty).

    `min_time_ms` is the bucket's current control.min time (kept as is); when None the
    first time rounded down is used, as for a new bucket.
    """
    if not measurements:
        raise MongoError(ErrorCode.BadValue, "a bucket needs at least one measurement")
    tf, mf = options.time_field, options.meta_field
    minmax = MinMax()
    rows = []
    for m in measurements:
        t = m.get(tf)
        if type(t) is not DatetimeMS:
            raise MongoError(ErrorCode.BadValue,
                             f"'{tf}' must be present and contain a valid BSON UTC datetime "
                             "value")
        minmax.update(m, mf)
        raw = encode(m)
        elems = [(n.decode("utf-8"), et, raw[vs:ve])
                 for et, n, vs, ve in iter_elements(raw, 0, len(raw))]
        rows.append((int(t), [e for e in elems if e[0] != mf]))
    if min_time_ms is None:
        min_time_ms = round_timestamp_ms(min(r[0] for r in rows), options.rounding_seconds)
    minmax.update({tf: DatetimeMS(min_time_ms)})
    rows.sort(key=lambda r: r[0])
    columns = Columns(tf)
    columns.append([r[1] for r in rows])
    meta = MISSING
    if mf is not None and mf in measurements[0]:
        meta = normalize_meta(measurements[0][mf])
    return build_bucket_document(bucket_id, version=VERSION_COMPRESSED_SORTED,
                                 min_doc=minmax.min(), max_doc=minmax.max(),
                                 count=len(rows), meta=meta,
                                 columns=columns.column_bytes())

"""Which implementation holds an open bucket's columns and its control.min/max and schema,
and the one way from the native core's to the Python reference's.

A bucket allocated or reopened (`reopening.rehydrate`) for a measurement of a native scan
(`Measurement.raw`) keeps its columns in the native core (`native_columns.NativeColumns`
as `Bucket.columns`) and its control.min/max and schema there too (`native_control.NativeControl` as
`Bucket.control`); every other bucket holds the reference's `Columns`, `MinMax` and
`Schema`. The catalog's rules do not know which: they ask this module.

A native bucket hands a part over to the reference, for good, the first time that part
meets what the native core does not take: a measurement that was decoded rather than
scanned, or a batch the core declines (for the columns an object or array with fields, code
with scope; for control.min/max and the schema nothing a scan accepts). The reference then
continues from the committed state as reopening a stored bucket does (`MinMax` and `Schema`
from control.min/max, the columns from their bytes), plus the schema of what is staged.
Each part goes over alone: columns may stay native under a reference `MinMax`.

While all parts are native, `fold_all` does the buckets' whole prepareCommit (columns,
min/max, the document without `data` and, when asked, with it) in one call to the core,
which folds the buckets of a batch (in parallel on more than two cores); `fold_control`,
`fold_columns` and `native_documents` are the part-by-part way it falls back to. A
document not built then is a `NativeDocumentParts`, built from the bucket's native state
when first read.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from bson.datetime_ms import DatetimeMS

from storage import native
from storage.bsonutil import decode
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from .columns import ColumnChange, Columns
from .measurements import Measurement, ScannedDocuments, document
from .minmax import MinMax, Schema, SchemaChange
from .native_columns import Declined as ColumnsDeclined
from .native_columns import NativeColumnChange, NativeColumns
from .native_control import Declined as ControlDeclined
from .native_control import NativeControl
from .native_control import new as new_native_control

if TYPE_CHECKING:
    from .bucket import Bucket

_INT32 = struct.Struct("<i")
_INT64 = struct.Struct("<q")

__all__ = ["AnyColumnChange", "Folded", "NativeDocumentParts", "control_documents", "fold_all", "fold_columns", "fold_control", "make_native", "native_documents",
           "reference_columns", "schema_compatible", "schema_learn", "set_time_bound"]

# the column changes a write may hold (a native fold's or the reference's)
AnyColumnChange = ColumnChange | NativeColumnChange


def make_native(b: Bucket) -> None:
    """Give new bucket `b` (nothing in it yet) native columns and control, if the native
    core is built."""
    control = new_native_control()
    columns = NativeColumns.new(b.time_field)
    if control is not None and columns is not None:
        b.control = control
        b.columns = columns
        b.meta_from_key()  # its documents take the series key


def set_time_bound(b: Bucket, time_field: str, rounded_ms: int) -> None:
    """A new bucket's control.min/max start with its rounded time."""
    if b.control is not None:
        # {time_field: Date(rounded_ms)} as BSON, without encoding a dict
        body = b"\x09" + time_field.encode() + b"\x00" + _INT64.pack(rounded_ms)
        b.control.update_doc(_INT32.pack(len(body) + 5) + body + b"\x00")
    else:
        b.minmax.update({time_field: DatetimeMS(rounded_ms)})


def schema_compatible(b: Bucket, m: Measurement, meta_field: str | None) -> bool:
    """`Schema.compatible` of `m` with `b`'s schema: records `m`'s types, False when a
    path changes type."""
    control = b.control
    if control is not None:
        if m.raw is not None:
            return control.compatible(bytes(m.raw.documents.document(m.index)), meta_field)
        _reference_control(b, meta_field)
    return b.schema.compatible(document(m), meta_field)


def schema_learn(b: Bucket, m: Measurement, meta_field: str | None) -> None:
    """`Schema.update` with the first measurement of a new bucket (SchemaChange when its
    own paths disagree)."""
    control = b.control
    if control is not None and m.raw is not None:
        if not control.compatible(bytes(m.raw.documents.document(m.index)), meta_field):
            raise SchemaChange("a path of the measurement changes type")
        return
    if control is not None:
        _reference_control(b, meta_field)
    b.schema.update(document(m), meta_field)


def _scan_of(b: Bucket) -> ScannedDocuments | None:
    """The native scan `b`'s staged rows come from (None: a batch that was decoded)."""
    return b.rows.source if b.rows is not None else None


def fold_control(b: Bucket, rows: Sequence[int], meta_field: str | None) -> bool:
    """Fold the staged `rows` (in commit order) into `b`'s native control.min/max: True
    when done, False when the caller must update the reference's `MinMax` (which `b`
    holds from now on)."""
    control = b.control
    if control is None:
        return False
    scan = _scan_of(b)
    if scan is not None:
        offsets = scan.documents.offsets
        starts = array("q", [offsets[i] for i in rows]).tobytes()
        try:
            control.update(scan.documents.buffer, starts, meta_field)
            return True
        except ControlDeclined:
            pass
    _reference_control(b, meta_field)
    return False


def fold_columns(b: Bucket, rows: Sequence[int], meta_field: str | None
                 ) -> tuple[list[tuple[str, bytes, bool, int]], int] | None:
    """Append the staged `rows` (in commit order) to `b`'s native columns: the changed
    columns (`NativeColumnChange` fields as a tuple) and the change in size, or None when
    the caller must append with the reference's `Columns` (which `b` holds from now on)."""
    columns = b.columns
    if not isinstance(columns, NativeColumns):
        return None
    scan = _scan_of(b)
    if scan is not None:
        try:
            return columns.append_raw(scan.documents, rows, meta_field)
        except ColumnsDeclined:
            pass
    b.columns = columns.to_python()
    return None


class NativeDocumentParts(NamedTuple):
    """A bucket document left to be built from its bucket's native control and columns
    (`build`), as they stood after the write that made it: the group commit writes only a
    bucket's latest write, so most are never built. Valid while the columns hold `rows`
    rows: a bucket's native state changes only when its next batch is folded, and that
    batch's write replaces this one among the pending writes when it commits. `size` is
    the document's size, `view` the document without `data` (the fold's): the document
    is built from it and the columns."""

    control: NativeControl
    columns: NativeColumns
    bucket_id: bytes
    version: int
    rows: int
    meta_key: bytes | None
    size: int
    view: bytes

    def build(self) -> bytes:
        if self.columns.count != self.rows:
            # a later batch changed the bucket before this write's document was built
            raise MongoError(ErrorCode.InternalError,
                             f"bucket document of {self.rows} measurements asked after "
                             f"the bucket took {self.columns.count}")
        return self.columns.document_with_data(self.view)


# what the core's fold gives for one bucket: its column changes (int64 triples of field
# index, is_new and offset: `write_batch.BucketWrite.column_changes` reads them), the
# change in size, its document (or the parts it is built from when not built) and
# data-less view (None: the control declined, and the reference holds it now), and what
# the rows add to the bucket's uncompressed size
Folded = tuple[bytes, int, tuple[bytes | NativeDocumentParts, bytes] | None, int]


def fold_all(buckets: Sequence[Bucket], staged: Sequence[Sequence[int]],
             counts: Sequence[int], meta_field: str | None, *, whole: bool = True
             ) -> list[Folded | None]:
    """`fold_columns`, `fold_control` and `native_documents` of each bucket's staged
    rows (`Bucket.staged`, in commit order; `counts`: its measurements after them) in one
    call to the core, which folds the buckets (in parallel on more than two cores): per
    bucket, what `Folded` says, or None, with nothing of it changed, where the caller
    must fold part by part (a part held by the reference, a batch that was decoded, not
    scanned, the columns declined). Unless `whole`, the documents are
    `NativeDocumentParts`, built when read."""
    out: list[Folded | None] = [None] * len(buckets)
    jobs: list[tuple[Any, ...]] = []
    where: list[int] = []
    documents = batch = None
    for i, (b, rows, count) in enumerate(zip(buckets, staged, counts)):
        control, columns = b.control, b.columns
        if control is None or not isinstance(columns, NativeColumns):
            continue
        source = _scan_of(b)
        if source is None:
            continue
        if documents is None:
            documents, batch = source.documents, source.batch
        elif source.documents is not documents:
            continue
        jobs.append((control.native, columns.native, rows, b.bucket_id.binary, b.version,
                     count, _meta_key(b)))
        where.append(i)
    if not jobs or documents is None or native.core is None:
        return out
    # the scan's table tells where each field's value lies: the core need not iterate
    # the documents again
    results = native.check(native.core.fold_buckets, documents.buffer, documents.offsets,
                           meta_field, jobs, whole, batch)
    for i, r in zip(where, results):
        if r is None:
            continue
        changes, delta, doc, index, size, uncompressed = r
        b = buckets[i]
        if index is None:
            _reference_control(b, meta_field)
            out[i] = (changes, delta, None, uncompressed)
            continue
        if doc is None:
            control, columns = b.control, b.columns
            assert control is not None and isinstance(columns, NativeColumns)
            doc = NativeDocumentParts(control, columns, b.bucket_id.binary, b.version,
                                      counts[i], _meta_key(b), size, index)
        out[i] = (changes, delta, (doc, index), uncompressed)
    return out


def reference_columns(b: Bucket) -> Columns:
    """`b`'s columns as the reference's `Columns` (handed over if they were native)."""
    columns = b.columns
    if isinstance(columns, NativeColumns):
        b.columns = columns = columns.to_python()
    return columns


def control_documents(b: Bucket) -> tuple[dict[str, Any], dict[str, Any]]:
    """control.min and control.max of `b`, decoded."""
    control = b.control
    if control is None:
        return b.minmax.min(), b.minmax.max()
    return decode(control.min_bson()), decode(control.max_bson())


def _meta_key(b: Bucket) -> bytes | None:
    """What the core's bucket document takes as the meta: the series key, None without
    a meta value."""
    return b.key or None  # b"" without a meta value


def native_documents(b: Bucket, count: int) -> tuple[bytes, bytes] | None:
    """The bucket document of `b` holding `count` measurements and the same without
    `data`, built by the native core from `b`'s native control and columns (None when
    either is the reference's)."""
    control, columns = b.control, b.columns
    if control is None or not isinstance(columns, NativeColumns):
        return None
    key = _meta_key(b)
    return (control.bucket_document(b.bucket_id.binary, b.version, count, key, columns),
            control.bucket_document(b.bucket_id.binary, b.version, count, key, None))


def _reference_control(b: Bucket, meta_field: str | None) -> None:
    """Hand `b`'s control.min/max and schema over to the reference: rebuilt from the
    native control.min/max (which hold what is committed: staging changes only the
    schema), the schema then taught what is staged."""
    control = b.control
    if control is None:
        return
    b.control = None
    lo, hi = control.min(), control.max()
    b.minmax = MinMax.from_control(lo, hi)
    schema = Schema.from_control(lo, hi)
    for m in b.staged_measurements():
        schema.update(document(m), meta_field)
    b.schema = schema

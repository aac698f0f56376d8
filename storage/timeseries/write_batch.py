"""The write batch: the state of one `insert_batch` call, the bucket writes it asks the
caller to perform, and the preparation of each touched bucket's document (MongoDB's
WriteBatch and prepareCommit).

Preparing a bucket folds its staged measurements into `control.min/max`, appends them
to the column builders (a v2 bucket becomes v3 when the batch starts before its last
time), and describes the new document: whole (`BucketWrite.document`), as a DocDiff for
engines that patch in place (`column_changes`, `control_changes`), and without `data`
for index maintenance (`index_doc`). A bucket whose parts are all native, and a bucket of
fixed-width fields far below the size limit, keep what their document is made of and
build the bytes only when `document` is first read: the group commit writes only the
last of several writes of one bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bsonutil import decode
from storage.errors import MongoError
from storage.keystring import EncodedValue, Keyed, encode_date_ms, encode_value
from storage.vocabulary.missing import MISSING

from .bucket import Bucket, StoredKeys
from .bucket_document import BucketDocumentParts
from .bucket_keys import KeyPlans, bucket_keys
from .bucket_registry import BucketRegistry
from .bucket_state import (
    AnyColumnChange,
    Folded,
    NativeDocumentParts,
    control_documents,
    fold_all,
    fold_columns,
    fold_control,
    native_documents,
    reference_columns,
)
from .columns import ColumnChange
from .constants import (
    CONTROL,
    CONTROL_MAX,
    CONTROL_MIN,
    MAX_BUCKET_DOCUMENT_SIZE,
    META,
    VERSION_COMPRESSED_UNSORTED,
)
from .measurements import BatchRows, Measurement, document, elements, gather
from .metadata import document_meta_keystring, meta_of_key
from .native_columns import NativeColumnChange
from .options import TimeseriesOptions
from .stats import CatalogStats, ExecutionStats

if TYPE_CHECKING:
    from .reopening import BucketSource

__all__ = ["BatchContext", "BatchResult", "BucketWrite", "prepare_writes"]

_LAZY_DOCUMENT_MAX_COLUMNS: Final = 8 * 1024 * 1024


@dataclass(slots=True)
class BucketWrite:
    """One bucket document to write.

    `kind` is "insert" for a new bucket, "update" to replace an existing one with
    `document`. For updates, `column_changes` and `control_changes` describe the same
    change as MongoDB's DocDiff (binary column diffs `{o: offset, d: bytes}`, new columns,
    `control.count`/`control.version`); engines may store `document` whole instead.
    """

    kind: Literal["insert", "update"]
    bucket_id: ObjectId
    _document: bytes | None  # None until `document` builds it from `_parts`
    previous_count: int
    measurement_indexes: list[int]
    # (a native append's changes stay plain tuples, a fused fold's packed int64 triples
    # of field index, is_new and offset, until `column_changes` is read)
    _column_changes: Sequence[AnyColumnChange | tuple[str, bytes, bool, int]] | bytes = \
        field(default_factory=list)
    control_changes: dict[str, Any] = field(default_factory=dict)
    # `document` decoded without `data` (all an index on a buckets collection reads),
    # and the same of the stored version it replaces (None: decode the stored bytes);
    # either may be kept as what gives it (see `index_doc`)
    _index: dict[str, Any] | bytes | None = None
    _previous_index: dict[str, Any] | bytes | None = None
    # set by the catalog for its own bookkeeping at commit
    _compressed_delta: int = 0
    _new_fields: list[str] = field(default_factory=list)
    _estimate: int = 0
    _last_time_ms: int | None = None
    # what the document is built from, kept instead of the bytes until they are asked for
    # (a group commit writes only the last of several writes of one bucket)
    _parts: BucketDocumentParts | NativeDocumentParts | None = None
    # the bucket's series key (metadata.series_key of its meta); None when not known
    series: bytes | None = None
    # an update's stored document as the catalog last read or wrote it, when other
    # processes share the storage: the write checks that storage still holds it (another
    # process changed the bucket otherwise: WriteConflict, the batch is retried)
    expected: bytes | None = None
    # the bucket's `control.min.<time>` (its rounded start), when the catalog knows it
    min_time_ms: int | None = None
    # the keys of the stored version this write replaces, when the group commit wrote it
    # (the bucket's `Bucket.stored_keys`)
    stored_keys: StoredKeys | None = None

    @property
    def document(self) -> bytes:
        """The bucket document to store (built on first use)."""
        if self._document is None:
            parts = self._parts
            assert parts is not None
            self._document = parts.build()
            if not isinstance(parts, NativeDocumentParts):
                self._parts = None
        return self._document

    def release_document(self) -> None:
        """Written: drop the bytes of a document the native core built when first read
        (its parts stay). The write stays its bucket's last until the next one, and its
        bytes would double what the bucket holds."""
        if isinstance(self._parts, NativeDocumentParts):
            self._document = None

    @property
    def column_changes(self) -> list[AnyColumnChange]:
        changes = self._column_changes
        if isinstance(changes, bytes):
            # a fused fold's: every field has its column in the document, in field order
            data = decode(self.document)["data"]
            names = list(data)
            v = memoryview(changes).cast("q").tolist()
            return [NativeColumnChange(names[f], bytes(data[names[f]]), bool(new), offset)
                    for f, new, offset in zip(v[0::3], v[1::3], v[2::3])]
        return [c if isinstance(c, ColumnChange | NativeColumnChange) else NativeColumnChange(*c)
                for c in changes]

    @property
    def index_doc(self) -> dict[str, Any] | None:
        """The document without `data`, decoded on first use when the native core built
        it as bytes."""
        index = self._index
        if type(index) is bytes:
            index = self._index = decode(index)
        return index  # type: ignore[return-value]

    @index_doc.setter
    def index_doc(self, doc: dict[str, Any] | None) -> None:
        self._index = doc

    @property
    def previous_index_doc(self) -> dict[str, Any] | None:
        """`index_doc` of the stored version this write replaces (decoded on first use)."""
        prev = self._previous_index
        if type(prev) is bytes:
            prev = self._previous_index = decode(prev)
        return prev  # type: ignore[return-value]

    @previous_index_doc.setter
    def previous_index_doc(self, doc: dict[str, Any] | None) -> None:
        self._previous_index = doc

    def take_previous_index(self, older: BucketWrite) -> None:
        """Replace `older` (pending for the same bucket): this write replaces the stored
        version that one did, whose index view it takes as it is (still undecoded)."""
        self._previous_index = older._previous_index

    @property
    def index_source(self) -> dict[str, Any] | bytes | None:
        """`index_doc` as kept: decoded, or the bytes the native core built."""
        return self._index

    @property
    def previous_index_source(self) -> dict[str, Any] | bytes | None:
        """`previous_index_doc` as kept (the bytes: the `index_source` of the write that
        stored that version, when this catalog made it)."""
        return self._previous_index

    @property
    def size_hint(self) -> int:
        """The document's size, or an estimate (columns plus 1 KiB) while it is unbuilt."""
        size = self.known_size
        if size is not None:
            return size
        assert isinstance(self._parts, BucketDocumentParts)
        return 1024 + sum(len(c) for _n, c in self._parts.columns)

    @property
    def last_time_ms(self) -> int | None:
        """The time of the last measurement the bucket took (None: not known)."""
        return self._last_time_ms

    @property
    def native_state(self) -> NativeDocumentParts | None:
        """The native control and columns the document is built from, while they hold
        exactly it: the bucket's state as this write left it (None: a document made
        otherwise, or a bucket that took more rows since)."""
        parts = self._parts
        if isinstance(parts, NativeDocumentParts) and parts.columns.count == parts.rows:
            return parts
        return None

    def key_document(self, time_field: str, *, meta_whole: bool = False
                     ) -> dict[str, Any] | None:
        """What an index keying only `_id`, the meta and control.min/max.<time_field>
        (`index_schema.index_keys_time_bounds`) reads of the document, made from the
        native state without building or decoding anything but the meta (None: no
        native state, or time bounds that are not dates). With `meta_whole` (every
        index that reads it keys the meta whole without a collation:
        `index_schema.index_keys_meta_whole`) a document meta is its kept keystring
        (`keystring.EncodedValue`), not decoded."""
        state = self.native_state
        if state is None:
            return None
        bounds = state.control.date_bounds(time_field)
        if bounds is None:
            return None
        doc: dict[str, Any] = {"_id": self.bucket_id, CONTROL: {
            CONTROL_MIN: {time_field: DatetimeMS(bounds[0])},
            CONTROL_MAX: {time_field: DatetimeMS(bounds[1])}}}
        if state.meta_key:
            keystring = self._meta_keystring(state.meta_key)
            if meta_whole and keystring is not None:
                doc[META] = EncodedValue(keystring)
                return doc
            meta = meta_of_key(state.meta_key)
            if type(meta) is dict and keystring is not None:
                meta = Keyed(meta, keystring)
            doc[META] = meta
        return doc

    def index_keys(self, time_field: str, plans: KeyPlans) -> tuple[tuple[bytes], ...] | None:
        """The document's keys in the indexes `plans` describe (`bucket_keys`), made from
        the native state and the keystrings kept with the bucket (None: no native state or
        bucket, a meta that is not a document, or time bounds that are not dates)."""
        state, kept = self.native_state, self.stored_keys
        if state is None or not state.meta_key or kept is None:
            return None
        keystring = self._meta_keystring(state.meta_key)
        bounds = state.control.date_bounds(time_field)
        if keystring is None or bounds is None:
            return None
        if kept.id_keystring is None:
            kept.id_keystring = encode_value(self.bucket_id)
        start = kept.start_keystring
        if start is None or start[0] != bounds[0]:
            start = kept.start_keystring = (bounds[0], encode_date_ms(bounds[0]))
        return bucket_keys(plans, kept.id_keystring, keystring, start[1], bounds[1])

    def _meta_keystring(self, meta_key: bytes) -> bytes | None:
        """The keystring of the bucket's meta when it is a document (None otherwise, or
        with no bucket to keep it with), kept with the bucket for each write's keys."""
        kept = self.stored_keys
        if kept is None:
            return None
        if kept.meta_keystring is None:
            kept.meta_keystring = document_meta_keystring(meta_key)
        return kept.meta_keystring

    @property
    def known_size(self) -> int | None:
        """The document's size when known without building it (None: not known)."""
        if self._document is not None:
            return len(self._document)
        if isinstance(self._parts, NativeDocumentParts):
            return self._parts.size
        return None


@dataclass(slots=True)
class BatchResult:
    """What `insert_batch` asks the caller to write, and the measurements it refused."""

    coll: str
    writes: list[BucketWrite]
    errors: list[tuple[int, MongoError]]
    num_inserted: int
    _touched: list[Bucket] = field(default_factory=list)
    _finished: bool = False


@dataclass(frozen=True, slots=True)
class BatchContext:
    """State of one insert_batch call (its collections grow as it stages)."""

    coll: str
    options: TimeseriesOptions
    source: BucketSource | None
    stats: ExecutionStats     # the collection's
    threshold: int            # timeseriesIdleBucketExpiryMemoryUsageThreshold, in bytes
    rows: BatchRows           # the batch's measurements by row
    touched: list[Bucket] = field(default_factory=list)
    touched_ids: set[int] = field(default_factory=set)
    # v1 buckets reopened (compressed to v2): id -> (the v2 bytes, count, the stored v1)
    rewrites: dict[ObjectId, tuple[bytes, int, bytes]] = field(default_factory=dict)
    # other processes share the storage: updates carry the document they replace
    check_versions: bool = False


def prepare_writes(ctx: BatchContext, registry: BucketRegistry, stats: CatalogStats
                   ) -> tuple[list[BucketWrite], list[int]]:
    """The writes of every bucket the batch touched, and the indexes of the measurements
    refused because their bucket would be too large (that bucket is dropped). The
    buckets whose parts are all native are folded by the core first, together."""
    writes: list[BucketWrite] = []
    too_large: list[int] = []
    buckets = list(ctx.touched)
    staged = [_begin_prepare(ctx, b, stats) for b in buckets]
    # documents are built when first read, unless other processes share the storage
    # (each write is then written at once, checked against what it replaces)
    fused = fold_all(buckets, [rows for rows, _prev, _unsorted in staged],
                     [prev + len(rows) for rows, prev, _unsorted in staged],
                     ctx.options.meta_field, whole=ctx.check_versions)
    for b, (rows, prev, unsorted), f in zip(buckets, staged, fused):
        w = _finish_prepare(ctx, b, rows, prev, unsorted, f)
        size = w.known_size
        if size is not None and size > MAX_BUCKET_DOCUMENT_SIZE:
            too_large.extend(w.measurement_indexes)
            ctx.touched.remove(b)
            registry.remove_open(b)
            continue
        writes.append(w)
    touched_ids = {b.bucket_id for b in buckets} if ctx.rewrites else set()
    for oid, (raw, count, stored) in ctx.rewrites.items():
        if oid not in touched_ids:
            # A v1 bucket reopened (and compressed) but then not used.
            writes.append(BucketWrite("update", oid, raw, count, [],
                                      expected=stored if ctx.check_versions else None))
    return writes, too_large


def _begin_prepare(ctx: BatchContext, b: Bucket, stats: CatalogStats
                   ) -> tuple[list[int], int, bool]:
    """The staged rows of `b` in commit order (by time), its committed count, and whether
    the batch made it unsorted (version 3 from now on)."""
    rows = b.staged
    assert b.rows is not None
    times = b.rows.times
    rows.sort(key=times.__getitem__)
    prev = b.num_committed
    if (prev and b.sorted_by_time and b.last_time_ms is not None
            and times[rows[0]] < b.last_time_ms):
        b.sorted_by_time = False
        b.version = VERSION_COMPRESSED_UNSORTED
        stats.inc(ctx.stats, "numCompressedBucketsConvertedToUnsorted")
        return rows, prev, True
    return rows, prev, False


def _finish_prepare(ctx: BatchContext, b: Bucket, rows: list[int], prev: int,
                    changed_to_unsorted: bool, fused: Folded | None) -> BucketWrite:
    """The rest of prepareCommit for `b`, given what the core's fold did (`fold_all`;
    None: fold part by part). The staged rows become Measurements only where a part is
    folded by the reference."""
    mf = ctx.options.meta_field
    table = b.rows
    assert table is not None
    count = prev + len(rows)
    lazy = False
    changes: Sequence[AnyColumnChange | tuple[str, bytes, bool, int]] | bytes
    built: tuple[bytes | NativeDocumentParts, bytes] | None = None
    folded: tuple[Sequence[Any], int] | None
    # the rows as Measurements where the reference folds a part (the core did not, or
    # declined the control)
    ms = table.measurements(rows) if fused is None or fused[2] is None else []
    if fused is not None:
        folded, built = (fused[0], fused[1]), fused[2]
        control_folded = built is not None
    else:
        control_folded = fold_control(b, rows, mf)
        folded = fold_columns(b, rows, mf)
    if folded is not None:
        changes, delta = folded
        if not control_folded:
            b.minmax.update_many([document(m) for m in ms], mf, _common_names(ms))
    else:
        columns = reference_columns(b)
        shape = ms[0].shape
        if shape is not None and all([m.shape is shape for m in ms]):
            # fixed-width fields: control.min/max stay small, so a bucket whose columns
            # are far below the limit cannot be too large and its document can wait
            lazy = columns.compressed_size < _LAZY_DOCUMENT_MAX_COLUMNS
            docs = [document(m) for m in ms]
            values_of, values, extremes = gather(shape, docs)
            b.minmax.update_many(docs, mf, shape.names, values, extremes)
            changes, delta = columns.append_values(values_of, shape.type_bytes, len(docs))
        else:
            names = _common_names(ms)
            if not control_folded:
                b.minmax.update_many([document(m) for m in ms], mf, names)
            changes, delta = columns.append([elements(m) for m in ms], names)
    # the committed names are some of the columns' names: new ones only when they differ
    new_fields = [] if b.columns.num_fields == len(b.field_names) else \
        [f for f in b.columns.names() if f not in b.field_names]
    if built is None:
        built = native_documents(b, count)
    parts: BucketDocumentParts | NativeDocumentParts | None = None
    bucket_doc: bytes | None
    index_doc: dict[str, Any] | bytes
    if built is not None:
        doc, index_doc = built
        if isinstance(doc, NativeDocumentParts):
            bucket_doc, parts, lazy = None, doc, True
        else:
            bucket_doc, lazy = doc, False
    else:
        min_doc, max_doc = control_documents(b)
        parts = BucketDocumentParts(b.bucket_id, b.version, min_doc, max_doc, count, b.meta,
                                    b.columns.column_bytes())
        bucket_doc = None if lazy else parts.build()
        index_doc = {"_id": b.bucket_id, "control": {
            "version": b.version, "min": min_doc, "max": max_doc, "count": count}}
        if b.meta is not MISSING:
            index_doc["meta"] = b.meta
    b.uncompressed_size += fused[3] if fused is not None else \
        _uncompressed_growth(table, rows, prev)
    control: dict[str, Any] = {"count": count}
    if changed_to_unsorted:
        control["version"] = VERSION_COMPRESSED_UNSORTED
    rewritten = bool(ctx.rewrites) and b.bucket_id in ctx.rewrites
    return BucketWrite(
        kind="update" if prev or rewritten else "insert",
        bucket_id=b.bucket_id, _document=bucket_doc,
        previous_count=prev,
        measurement_indexes=list(rows),
        _column_changes=[] if rewritten else changes,
        control_changes=control, _index=index_doc,
        _previous_index=None if rewritten or not prev else b.index_doc,
        _compressed_delta=delta, _new_fields=new_fields,
        _estimate=b.staged_estimate, _last_time_ms=table.times[rows[-1]],
        _parts=parts if lazy else None, series=b.key,
        expected=b.stored if ctx.check_versions and (prev or rewritten) else None,
        min_time_ms=b.min_time_ms, stored_keys=b.stored_keys)


def _uncompressed_growth(table: BatchRows, rows: Sequence[int], first_row: int) -> int:
    """Bytes the measurements of `rows` (bucket rows `first_row`...) add to the bucket as
    an uncompressed (v1) bucket would hold them: per field an element named by its row
    number, and the values."""
    widths = list(map(len, map(table.names.__getitem__, rows)))
    values = sum(map(table.value_bytes.__getitem__, rows))
    width = widths[0]
    if widths.count(width) == len(widths):  # the usual case: one width
        n = len(rows)
        return width * (2 * n + _digits_in_range(first_row, first_row + n)) + values
    return values + sum([(2 + len(str(row))) * w for row, w in enumerate(widths, first_row)])


def _digits_in_range(lo: int, hi: int) -> int:
    """sum(len(str(r)) for r in range(lo, hi)), by decades."""
    if lo >= hi:
        return 0
    digits = len(str(lo))
    if len(str(hi - 1)) == digits:  # the usual case: one decade
        return (hi - lo) * digits
    total, digits, start = 0, 1, 0
    while start < hi:
        end = start * 10 if start else 10
        a, b = max(lo, start), min(hi, end)
        if a < b:
            total += (b - a) * digits
        start, digits = end, digits + 1
    return total


def _common_names(ms: Sequence[Measurement]) -> tuple[str, ...] | None:
    """The field names all of `ms` share in one order, or None."""
    names: tuple[str, ...] | None = ms[0].names
    if not all(m.names == names for m in ms):
        names = None
    return names

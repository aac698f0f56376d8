"""Measurements headed for buckets, and their preparation (validation, series, shapes).

`Measurement` is one validated insert: its time, series key, decoded document (for
min/max and schema) and raw elements (for the columns). A measurement whose `Shape` is
known (field names and types seen before, all fixed-width scalars) leaves its raw
elements unbuilt: the write batch packs its values column by column instead (`gather`),
and `elements()` builds them only where one measurement must be looked at alone.

`BatchRows` holds a batch's measurements by row, as the catalog stages them: per-row lists
for the rules it applies to a series' run at once, and a `Measurement` made only for a
row looked at alone (a scanned batch's rows come from the scan's arrays).

`MeasurementPreparer` turns a batch's documents into measurements: a BSON date in the
time field (else BadValue for that index), the meta value normalized and its series key
(cached for scalar and flat meta values), the raw elements with their sizes; and it
learns each (field names, value types) signature whose fields are fixed-width, so later
measurements of that shape skip the per-field work.
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bsoncolumn import native
from storage.bsonutil import CODEC_OPTIONS, decode
from storage.errors import MongoError
from storage.vocabulary.bson_types import (
    T_ARRAY,
    T_DATE,
    T_DOUBLE,
    T_INT32,
    T_INT64,
    T_OBJECT,
    T_OID,
)
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING
from storage.vocabulary.nesting import nesting_exceeds, too_deep_to_decode
from storage.vocabulary.raw_documents import MalformedDocument, RawDocuments

from . import native_scan
from .columns import RawElement
from .elements import DOUBLE_STRUCT, ELEMENT_PACKERS, INT64_STRUCT, int_value_size, to_element
from .metadata import normalize_meta, series_key
from .options import TimeseriesOptions

if TYPE_CHECKING:
    from storage._native import ScannedBatch

__all__ = ["BatchRows", "Measurement", "MeasurementPreparer", "ScannedDocuments", "Shape", "document", "elements", "gather",
           "time_of"]

# Python types a Shape takes as fixed-width values (Python int is sized by value).
_SHAPE_TYPES: Final = frozenset((Int64, float, DatetimeMS, ObjectId, bool, type(None)))
_SHAPES_MAX: Final = 4096
_META_CACHE_MAX: Final = 65536
# The meta caches are also bounded by what they hold, estimated per entry from the
# series key (an entry holds the key, the normalized meta value and a map slot; a TSBS
# tag object of a 200-byte key takes about 1.4 kB, measured with tracemalloc) and
# counted in the catalog's memory (`MeasurementPreparer.cache_bytes`).
_META_CACHE_MAX_BYTES: Final = 16 * 1024 * 1024
_CACHE_ENTRY_OVERHEAD: Final = 150
_CACHE_PER_KEY_BYTE: Final = 6.4


def _cache_entry_bytes(key: bytes) -> int:
    return _CACHE_ENTRY_OVERHEAD + int(_CACHE_PER_KEY_BYTE * len(key))
_UNKNOWN: Final = object()


@dataclass(frozen=True, slots=True)
class Shape:
    """What measurements with one (field names, value types) signature have in common,
    when every field but the meta is a fixed-width scalar (int64, int32, double, date,
    ObjectId, bool, null) and the time is a BSON date."""

    names: tuple[str, ...]        # fields other than the meta, in document order
    type_bytes: tuple[int | None, ...]  # BSON type per name; None: Python int (by value)
    py_types: tuple[type, ...]    # Python type per name
    signature: tuple              # (names with the meta, types): Measurement.signature
    max_value_len: int
    fixed_bytes: int              # value bytes of the fields other than Python ints
    int_fields: tuple[str, ...]   # Python int fields: 4 bytes (int32) or 8 (int64) each
    value_lens: tuple[int | None, ...] = ()  # value bytes per name; None: a Python int


_NOT_FIXED: Final = Shape((), (), (), (), 0, 0, ())  # a signature seen, not fixed-width


@dataclass(slots=True)
class Measurement:
    """One measurement of an insert batch, validated and split for the catalog."""

    index: int                 # position in the user's batch
    time_ms: int
    doc: dict[str, Any] | None  # decoded document (meta included; min/max skip it);
                                # None until `document()` for a scanned measurement
    elems: list[RawElement] | None  # raw elements without the meta field, in document
                                    # order (None until `elements()` when `shape` is set)
    key: bytes                 # series key of the normalized meta value
    meta: Any                  # normalized meta value, or metadata.MISSING
    meta_value_size: int = 0   # bytes of the meta value (type byte + value)
    names: tuple[str, ...] = ()  # names of `elems`
    max_value_len: int = 0     # longest value in `elems`
    signature: tuple | None = None  # ((name, type), ...) when no value is an object/array
    value_bytes: int = 0       # total bytes of the values of `elems`
    shape: Shape | None = None
    # the batch's documents and their native scan when the measurement came from one
    # (its document is raw.documents.document(index)): native bucket state reads them
    raw: ScannedDocuments | None = None


@dataclass(frozen=True, slots=True, eq=False)
class ScannedDocuments:
    """A document sequence and its native scan (`native_scan.scan`)."""

    documents: RawDocuments
    batch: ScannedBatch


class BatchRows:
    """A batch's prepared measurements by row (a row is the measurement's index in the
    user's batch), as the catalog stages them: per-row lists that the rules applied to
    a series' runs (`Stager.stage_run`) and the preparation of writes read, and a
    `Measurement` only for a row looked at alone (`measurement`). The rows of a scanned
    batch come from the scan's arrays: a measurement staged in a run never becomes a
    Python object."""

    __slots__ = ("_key_of", "_made", "_of_row", "max_value_lens", "names", "signatures",
                 "source", "times", "value_bytes")

    def __init__(self, times: list[int], names: list[tuple[str, ...]],
                 signatures: list[tuple | None], max_value_lens: list[int],
                 value_bytes: list[int], source: ScannedDocuments | None,
                 made: dict[int, Measurement],
                 of_row: Callable[[int], Measurement] | None = None,
                 key_of: Callable[[int], bytes] | None = None) -> None:
        self.times = times
        self.names = names
        self.signatures = signatures
        self.max_value_lens = max_value_lens
        self.value_bytes = value_bytes
        self.source = source  # the scan the rows come from (None: decoded measurements)
        self._made = made     # the rows made into measurements so far: one object each
        self._of_row = of_row
        self._key_of = key_of  # a row's series key, read without making its measurement

    @classmethod
    def of(cls, prepared: Sequence[Measurement], size: int) -> BatchRows:
        """The rows of measurements prepared already (`size`: the batch's length)."""
        times, max_lens, value_bytes = [0] * size, [0] * size, [0] * size
        names: list[tuple[str, ...]] = [()] * size
        sigs: list[tuple | None] = [None] * size
        for m in prepared:
            i = m.index
            times[i], names[i], sigs[i] = m.time_ms, m.names, m.signature
            max_lens[i], value_bytes[i] = m.max_value_len, m.value_bytes
        return cls(times, names, sigs, max_lens, value_bytes, None,
                   {m.index: m for m in prepared})

    def measurement(self, row: int) -> Measurement:
        """The measurement of `row` (the same object each time)."""
        m = self._made.get(row)
        if m is None:
            assert self._of_row is not None
            m = self._made[row] = self._of_row(row)
        return m

    def key(self, row: int) -> bytes:
        """The series key of `row`'s measurement, without making it (rows of measurements
        prepared already: theirs)."""
        if self._key_of is None:
            return self.measurement(row).key
        return self._key_of(row)

    def measurements(self, rows: Sequence[int]) -> list[Measurement]:
        return [self.measurement(r) for r in rows]


def document(m: Measurement) -> dict[str, Any]:
    """The decoded document of `m` (decoded on first use for a scanned measurement)."""
    if m.doc is None:
        assert m.raw is not None
        m.doc = decode(m.raw.documents.document(m.index))
    return m.doc


def elements(m: Measurement) -> list[RawElement]:
    """The raw elements of `m` (built on first use for a measurement with a shape)."""
    if m.elems is None:
        if m.raw is not None:
            m.elems = m.raw.batch.fields(m.index)
        else:
            d = document(m)
            m.elems = [(n, *to_element(d[n])) for n in m.names]
    return m.elems


def time_of(m: Measurement) -> int:
    """The sort key of measurements (their time)."""
    return m.time_ms


class MeasurementPreparer:
    """Prepares measurements; remembers shapes and series keys across batches."""

    def __init__(self) -> None:
        self._meta_cache: dict[Any, tuple[bytes, Any, int]] = {}
        # (time field, meta field) -> measurement signature -> its Shape; None turns the
        # shaped path off (tests compare both paths)
        self.shapes: dict[tuple[str, str | None], dict[tuple, Shape]] | None = {}
        self._key_metas: dict[bytes, Any] = {}   # series key -> normalized meta
        self._key_metas_bytes = 0
        self._meta_cache_bytes = 0
        # a scanned shape's (names, signature), the same objects from batch to batch (the
        # staging's identity checks, `Bucket.run_signature`): `_known_shape`
        self._scanned_shapes: dict[tuple[tuple[str, int], ...],
                                   tuple[tuple[str, ...], tuple | None]] = {}
        # document sequences go through the native scan (tests compare both paths)
        self.scan = native_scan.AVAILABLE

    def clear_caches(self) -> None:
        """Forget the meta caches (memory pressure)."""
        self._key_metas.clear()
        self._meta_cache.clear()
        self._key_metas_bytes = self._meta_cache_bytes = 0

    @property
    def cache_bytes(self) -> int:
        """What the meta caches hold (estimated)."""
        return self._key_metas_bytes + self._meta_cache_bytes

    def prepare_all(self, measurements: Sequence[Mapping[str, Any] | bytes] | RawDocuments,
                    options: TimeseriesOptions, ordered: bool,
                    prescanned: native_scan.Prescan | None = None
                    ) -> tuple[list[Measurement], list[tuple[int, MongoError]]]:
        """The batch's measurements prepared, and those refused (with `ordered`, the first
        refusal ends the batch). A `RawDocuments` (a document sequence off the wire) is
        decoded first, whole; one that is not valid BSON refuses the whole batch with
        InvalidBSON before anything is prepared. `prescanned`: the native scan of that
        sequence, done already (`native_scan.prescan`)."""
        if isinstance(measurements, RawDocuments):
            scanned = self._prepare_scanned(measurements, options, ordered, prescanned)
            if scanned is not None:
                return scanned
            measurements = _decoded_sequence(measurements)
        prepared: list[Measurement] = []
        errors: list[tuple[int, MongoError]] = []
        shapes = self.shapes.setdefault((options.time_field, options.meta_field), {}) \
            if self.shapes is not None else None
        append = prepared.append
        shaped = self._prepare_shaped
        for i, m in enumerate(measurements):
            try:
                doc = m if type(m) is dict and "_id" in m else _as_document(m)
                shape = None if shapes is None else \
                    shapes.get((tuple(doc), tuple(map(type, doc.values()))))
                if shape is not None and shape is not _NOT_FIXED:
                    fast = shaped(i, doc, shape, options)
                    if fast is not None:
                        append(fast)
                        continue
                append(self._prepare_general(i, doc, options,
                                             shapes is not None and shape is not _NOT_FIXED))
            except MongoError as e:
                errors.append((i, e))
                if ordered:
                    break
        return prepared, errors

    def prepare_rows(self, measurements: Sequence[Mapping[str, Any] | bytes] | RawDocuments,
                     options: TimeseriesOptions, ordered: bool,
                     prescanned: native_scan.Prescan | None = None
                     ) -> tuple[BatchRows, list[list[int]], list[tuple[int, MongoError]]]:
        """`prepare_all` as the catalog stages it: the batch's rows, the accepted rows
        grouped by series (in order of first appearance, each by time, stable) and the
        refused. A document sequence the native scan takes makes no `Measurement`."""
        if isinstance(measurements, RawDocuments):
            scanned = self._scan_rows(measurements, options, ordered, prescanned)
            if scanned is not None:
                return scanned
            measurements = _decoded_sequence(measurements)  # not scanned a second time
        prepared, errors = self.prepare_all(measurements, options, ordered)
        groups: dict[bytes, list[int]] = {}
        for m in prepared:
            g = groups.get(m.key)
            if g is None:
                groups[m.key] = [m.index]
            else:
                g.append(m.index)
        size = max((m.index for m in prepared), default=-1) + 1
        rows = BatchRows.of(prepared, size)
        times = rows.times
        out = list(groups.values())
        for g in out:
            g.sort(key=times.__getitem__)
        return rows, out, errors

    def _prepare_scanned(self, raw: RawDocuments, options: TimeseriesOptions, ordered: bool,
                         prescanned: native_scan.Prescan | None = None
                         ) -> tuple[list[Measurement], list[tuple[int, MongoError]]] | None:
        """`prepare_all` of a document sequence by the native scan, without decoding a
        document; None where the decoding path must do it (see `_scan_rows`)."""
        scanned = self._scan_rows(raw, options, ordered, prescanned)
        if scanned is None:
            return None
        rows, groups, errors = scanned
        return rows.measurements(sorted([r for g in groups for r in g])), errors

    def _scan_rows(self, raw: RawDocuments, options: TimeseriesOptions, ordered: bool,
                   prescanned: native_scan.Prescan | None = None
                   ) -> tuple[BatchRows, list[list[int]], list[tuple[int, MongoError]]] | None:
        """`prepare_rows` of a document sequence by the native scan, without decoding a
        document; None where the decoding path must do it: no native core, a document the
        scan declines, one without an `_id` (the decoding path gives it one), or one the
        scan refuses for a reason other than its time (malformed BSON refuses the whole
        batch there, as it always did)."""
        batch: ScannedBatch | None = None
        if not self.scan:
            pass
        elif (prescanned is not None and prescanned.buffer is raw.buffer
              and prescanned[1:4] == (options.time_field, options.meta_field, ordered)):
            batch = prescanned.batch
        else:
            batch = native_scan.scan(raw.buffer, options, ordered, offsets=raw.offsets)
        if batch is None:
            return None
        errors = native_scan.errors(batch)
        if any(e.code != ErrorCode.BadValue for _i, e in errors):
            return None
        a = native_scan.arrays(batch)
        accepted = a.series_of >= 0
        if not a.has_id[accepted].all():
            return None
        keys = batch.series_keys()
        meta_sizes = batch.series_meta_sizes()
        # decoded when a row is made into a Measurement: a series' run staged in bulk
        # needs none
        meta_of = functools.partial(self._series_meta, batch, keys)
        shapes = [self._known_shape(fields) for fields in batch.shapes()]
        source = ScannedDocuments(raw, batch)
        times = a.times.tolist()
        if len(shapes) == 1:  # the common batch: every row (refused ones too) has it
            names, sigs = [shapes[0][0]] * len(times), [shapes[0][1]] * len(times)
        else:
            # a refused row's shape index is -1: the last shape, never read
            shape_of = np.frombuffer(batch.shape_of(), dtype="<i4").tolist()
            names = list(map([n for n, _sig in shapes].__getitem__, shape_of)) if shapes else []
            sigs = list(map([sig for _n, sig in shapes].__getitem__, shape_of)) if shapes else []
        max_lens = a.max_value_lens.tolist()
        value_bytes = a.value_bytes.tolist()
        series_of = a.series_of.tolist()

        def of_row(i: int) -> Measurement:
            s = series_of[i]
            return Measurement(i, times[i], None, None, keys[s], meta_of(s), meta_sizes[s],
                               names[i], max_lens[i], sigs[i], value_bytes[i], None, source)

        def key_of(i: int) -> bytes:
            return keys[series_of[i]]

        rows = BatchRows(times, names, sigs, max_lens, value_bytes, source, {}, of_row, key_of)
        return rows, native_scan.groups(batch), errors

    def _known_shape(self, fields: list[tuple[str, int]]
                     ) -> tuple[tuple[str, ...], tuple | None]:
        """`_scanned_shape` of `fields`, made once (bounded: a client can send many), so
        its signature is the same object from batch to batch."""
        key = tuple(fields)
        shape = self._scanned_shapes.get(key)
        if shape is None:
            if len(self._scanned_shapes) >= _SHAPES_MAX:
                self._scanned_shapes.clear()
            shape = self._scanned_shapes[key] = _scanned_shape(fields)
        return shape

    def _series_meta(self, batch: ScannedBatch, keys: list[bytes], j: int) -> Any:
        """The normalized meta of series `j` of `batch`, decoded once per series key
        across batches (bounded as the meta cache)."""
        cache = self._key_metas
        key = keys[j]
        meta = cache.get(key, _UNKNOWN)
        if meta is _UNKNOWN:
            if len(cache) >= _META_CACHE_MAX or \
                    self._key_metas_bytes >= _META_CACHE_MAX_BYTES:
                cache.clear()
                self._key_metas_bytes = 0
            meta = cache[key] = native_scan.series_meta(batch, j)
            self._key_metas_bytes += _cache_entry_bytes(key)
        return meta

    def _prepare_shaped(self, index: int, doc: dict[str, Any], shape: Shape,
                        options: TimeseriesOptions) -> Measurement | None:
        """A measurement of a known shape: no per-field work beyond sizing Python ints
        (None when one is beyond int64, which the general path reports)."""
        value_bytes = shape.fixed_bytes
        for f in shape.int_fields:
            size = int_value_size(doc[f])
            if size is None:
                return None
            value_bytes += size
        mf = options.meta_field
        key, meta, meta_size = (b"", MISSING, 0) if mf is None or mf not in doc \
            else self._series_of(doc[mf])
        return Measurement(index, int(doc[options.time_field]), doc, None, key, meta,
                           meta_size, shape.names, shape.max_value_len, shape.signature,
                           value_bytes, shape)

    def _prepare_general(self, index: int, doc: dict[str, Any],
                         options: TimeseriesOptions, learn: bool) -> Measurement:
        tf = options.time_field
        t: Any = doc.get(tf)
        time_is_date = type(t) is DatetimeMS
        if not time_is_date:
            if isinstance(t, _dt.datetime):
                t = DatetimeMS(t)
                doc = dict(doc)
                doc[tf] = t
            else:
                raise MongoError(ErrorCode.BadValue,
                                 f"'{tf}' must be present and contain a valid BSON UTC "
                                 "datetime value")
        mf = options.meta_field
        elems: list[tuple[str, int, bytes]] = []
        append = elems.append
        max_len = 0
        value_bytes = 0
        meta_v: Any = MISSING
        pack = ELEMENT_PACKERS
        qpack, dpack = INT64_STRUCT.pack, DOUBLE_STRUCT.pack
        for name, v in doc.items():
            if name == mf:
                meta_v = v
                continue
            tv = type(v)
            if tv is Int64:
                append((name, T_INT64, qpack(v)))
                value_bytes += 8
            elif tv is float:
                append((name, T_DOUBLE, dpack(v)))
                value_bytes += 8
            elif tv is DatetimeMS:
                append((name, T_DATE, qpack(int(v))))
                value_bytes += 8
            elif tv is ObjectId:
                append((name, T_OID, v.binary))
                value_bytes += 12
                if max_len < 12:
                    max_len = 12
            else:
                f = pack.get(tv)
                t_, b_ = f(v) if f is not None else to_element(v)
                append((name, t_, b_))
                n = len(b_)
                value_bytes += n
                if n > max_len:
                    max_len = n
        if max_len < 8 and elems:
            max_len = 8
        types = tuple(map(type, doc.values()))
        nested = types.count(dict) + types.count(list)
        if meta_v is not MISSING and type(meta_v) in (dict, list):
            nested -= 1
        sig = (tuple(doc), types) if nested == 0 else None
        key, meta, meta_size = (b"", MISSING, 0) if meta_v is MISSING \
            else self._series_of(meta_v)
        names = tuple([e[0] for e in elems])
        shape = None
        if sig is not None and time_is_date and learn:
            shape = self._learn_shape(options, sig, names, elems, max_len)
        return Measurement(index, int(t), doc, elems, key, meta, meta_size, names, max_len,
                           sig, value_bytes, shape)

    def _learn_shape(self, options: TimeseriesOptions, sig: tuple, names: tuple[str, ...],
                     elems: list[tuple[str, int, bytes]], max_len: int) -> Shape | None:
        """Remember `sig` as a shape when all its fields (meta aside) are fixed-width."""
        assert self.shapes is not None
        shapes = self.shapes.setdefault((options.time_field, options.meta_field), {})
        if len(shapes) >= _SHAPES_MAX:
            shapes.clear()
        keys, types = sig
        by_name = dict(zip(keys, types))
        type_bytes: list[int | None] = []
        py_types: list[type] = []
        lens: list[int | None] = []
        fixed = 0
        ints = []
        for name, t, v in elems:
            tv = by_name[name]
            py_types.append(tv)
            if tv is int:
                type_bytes.append(None)
                lens.append(None)
                ints.append(name)
            elif tv in _SHAPE_TYPES:
                type_bytes.append(t)
                lens.append(len(v))
                fixed += len(v)
            else:
                shapes[sig] = _NOT_FIXED
                return None
        shape = shapes[sig] = Shape(names, tuple(type_bytes), tuple(py_types), sig, max_len,
                                    fixed, tuple(ints), tuple(lens))
        return shape

    def _series_of(self, meta_v: Any) -> tuple[bytes, Any, int]:
        """(series key, normalized meta, meta element size) of a meta value (cached)."""
        ck = _meta_cache_key(meta_v)
        cached = self._meta_cache.get(ck) if ck is not None else None
        if cached is None:
            meta = normalize_meta(meta_v)
            cached = (series_key(meta), meta, 1 + len(to_element(meta_v)[1]))
            if ck is not None:
                if len(self._meta_cache) >= _META_CACHE_MAX or \
                        self._meta_cache_bytes >= _META_CACHE_MAX_BYTES:
                    self._meta_cache.clear()
                    self._meta_cache_bytes = 0
                self._meta_cache[ck] = cached
                # the value as given and normalized, the key
                self._meta_cache_bytes += 2 * _cache_entry_bytes(cached[0])
        return cached


# marks the signatures of scanned measurements (their shapes: (name, type byte) pairs)
_SCANNED: Final = "bson"


def _scanned_shape(fields: list[tuple[str, int]]) -> tuple[tuple[str, ...], tuple | None]:
    """(names, signature) of the measurements of one shape of a scanned batch: the
    signature (`Measurement.signature`, which the schema check trusts) only when no
    field is an object or an array."""
    names = tuple([name for name, _t in fields])
    nested = any(t in (T_OBJECT, T_ARRAY) for _n, t in fields)
    return names, None if nested else (_SCANNED, tuple(fields))


def _decoded_sequence(raw: RawDocuments) -> list[dict[str, Any]]:
    """The measurements of a document sequence, decoded in one `bson.decode_all` over its
    buffer with the storage codec. This is the seam for a native scan, which will read
    `raw.buffer` at `raw.offsets` (every document's size and trailing NUL already checked
    by the wire layer) instead of decoding here."""
    try:
        docs = raw.decode(CODEC_OPTIONS)
    except MalformedDocument as exc:
        if too_deep_to_decode(exc):
            raise _too_deep() from None
        raise MongoError(ErrorCode.InvalidBSON, exc.message) from None
    for doc in docs:  # as mongod refuses a message with such a document, whole
        if nesting_exceeds(doc, native_scan.MAX_BSON_DEPTH + 1):
            raise _too_deep()
    return docs


def _too_deep() -> MongoError:
    return MongoError(ErrorCode.Overflow, "BSONObj exceeded maximum nested object depth: "
                      f"{native_scan.MAX_BSON_DEPTH}")


def _as_document(m: Any) -> dict[str, Any]:
    """A measurement as a dict with an `_id` (decoded from BSON bytes or copied, and given
    a new ObjectId when it has none). Anything else is refused as mongod refuses a value
    that is not a document."""
    if isinstance(m, bytes | bytearray | memoryview):
        try:
            doc = decode(bytes(m))
        except Exception as exc:
            if too_deep_to_decode(exc):
                raise _too_deep() from None
            raise
        if nesting_exceeds(doc, native_scan.MAX_BSON_DEPTH + 1):
            raise _too_deep()
    elif isinstance(m, Mapping):
        doc = dict(m)
    else:
        raise MongoError(ErrorCode.TypeMismatch, "documents must be objects")
    return doc if "_id" in doc else {"_id": ObjectId(), **doc}


# module globals read at each call (tests turn the native packing off)
_PACK_VALUES: Final = native.pack_values
_NATIVE_TYPES: Final = native.SUPPORTED_TYPES


def gather(shape: Shape, docs: list[dict[str, Any]]
            ) -> tuple[dict[str, bytes | list[Any]], dict[str, list[Any]],
                       dict[str, tuple[Any, Any]]]:
    """Each field of same-shape measurements, for the columns and for min/max: the
    values packed by the native extension with their first minimum and maximum, or (a
    bool or null field, a Python int beyond int32, a NaN, no extension) as a list."""
    columns: dict[str, bytes | list[Any]] = {}
    values: dict[str, list[Any]] = {}
    extremes: dict[str, tuple[Any, Any]] = {}
    pack = _PACK_VALUES
    for name, t, pt in zip(shape.names, shape.type_bytes, shape.py_types):
        got = None
        if pack is not None and (t is None or t in _NATIVE_TYPES):
            got = pack(docs, name, T_INT32 if t is None else t, pt)
        if got is None:
            columns[name] = values[name] = [d[name] for d in docs]
            continue
        columns[name], lo, hi = got
        if lo < 0:
            values[name] = [d[name] for d in docs]
        else:
            extremes[name] = (docs[lo][name], docs[hi][name])
    return columns, values, extremes


_SCALAR_META: Final = frozenset((str, int, float, Int64, bool, type(None), DatetimeMS, ObjectId))


def _meta_cache_key(v: Any) -> Any:
    """A hashable key that tells apart every meta value the cache may see (types included,
    so 1 and 1.0 differ), or None to skip the cache (nested values)."""
    tv = type(v)
    if tv in _SCALAR_META:
        return (tv, DOUBLE_STRUCT.pack(v)) if tv is float else (tv, v)   # -0.0 is not 0.0 here
    if tv is dict:
        types = tuple(map(type, v.values()))
        if float in types:
            items = []
            for k, x in v.items():
                tx = type(x)
                if tx not in _SCALAR_META:
                    return None
                items.append((k, tx, DOUBLE_STRUCT.pack(x) if tx is float else x))
            return (dict, tuple(items))
        if not _SCALAR_META.issuperset(types):
            return None
        return (dict, tuple(v.items()), types)
    return None



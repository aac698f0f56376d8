"""An open bucket and the measurements headed for it.

`Measurement` is one validated insert: its time, series key, decoded document (for
min/max and schema) and raw elements (for the columns). A measurement whose `Shape` is
known (field names and types seen before, all fixed-width scalars) leaves its raw
elements unbuilt: the catalog packs its values column by column instead, and
`elements()` builds them only where one measurement must be looked at alone.

`Bucket` is the in-memory state of an open bucket: identity, min time, `MinMax`,
`Schema`, `Columns`, counts, the size MongoDB tracks against `timeseriesBucketMaxSize`,
and the measurements staged by the batch in progress.

Size accounting follows MongoDB 8's compressed buckets (calculateBucketFieldsAndSizeChange):
while staging, a measurement adds the meta value once (on a bucket's first measurement),
`12 + len(name) + 2 * element size` for each field the bucket has not committed yet (the
data entry and its control.min/max), and an *estimate* of its uncompressed element size
only for elements larger than timeseriesLargeMeasurementThreshold; on commit the estimate
is replaced by the actual growth of the compressed columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bson import ObjectId

from .columns import Columns, RawElement
from .elements import int_value_size, to_element
from .minmax import MinMax, Schema
from .rollover import RolloverAction

__all__ = ["Bucket", "Measurement", "Shape", "SizeChange", "elements", "size_change"]


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


@dataclass(slots=True)
class Measurement:
    """One measurement of an insert batch, validated and split for the catalog."""

    index: int                 # position in the user's batch
    time_ms: int
    doc: dict[str, Any]        # decoded document (meta included; min/max skip it)
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


def elements(m: Measurement) -> list[RawElement]:
    """The raw elements of `m` (built on first use for a measurement with a shape)."""
    if m.elems is None:
        d = m.doc
        m.elems = [(n, *to_element(d[n])) for n in m.names]
    return m.elems


@dataclass(slots=True)
class SizeChange:
    """Sizes in MongoDB's `Sizes` struct: verified overheads and an estimate."""

    verified: int = 0
    estimate: int = 0
    new_fields: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.verified + self.estimate


def _num_digits(n: int) -> int:
    d = 0
    while n:
        n //= 10
        d += 1
    return d


def size_change(bucket: Bucket, m: Measurement, large_threshold: int) -> SizeChange:
    """What adding `m` to `bucket` adds to the bucket's tracked size."""
    sc = SizeChange()
    if m.meta_value_size and bucket.size == 0:
        sc.verified += 4 + m.meta_value_size  # "meta" + type byte + value
    digits = _num_digits(bucket.num_measurements)
    committed = bucket.field_names
    if committed.issuperset(m.names) and m.max_value_len + digits + 2 <= large_threshold:
        return sc  # the common case: known fields, small values
    uncommitted = bucket.uncommitted_field_names
    for name, value_len in _value_lens(m):
        name_len = len(name) if name.isascii() else len(name.encode("utf-8"))
        if name not in committed:
            sc.new_fields.append(name)
            if name not in uncommitted:
                elem_size = 2 + name_len + value_len
                sc.verified += 12 + name_len + 2 * elem_size
        element_size = 1 + value_len + digits + 1
        if element_size > large_threshold:
            sc.estimate += element_size
    return sc


def _value_lens(m: Measurement) -> list[tuple[str, int]]:
    """(name, value bytes) of each field of `m` but the meta; from its shape while its
    elements are not built."""
    shape = m.shape
    if m.elems is not None or shape is None:
        return [(name, len(v)) for name, _t, v in elements(m)]
    d = m.doc
    return [(name, n if n is not None else int_value_size(d[name]))  # type: ignore[misc]
            for name, n in zip(shape.names, shape.value_lens)]


class Bucket:
    """In-memory state of one open bucket."""

    __slots__ = (
        "bucket_id", "coll", "columns", "committed_write", "field_names", "index_doc",
        "kept_open_large",
        "key", "last_time_ms", "memory_usage", "meta", "min_time_ms", "minmax",
        "num_committed", "num_measurements", "opened_due_to_metadata", "reopened",
        "rollover_action", "schema", "schema_signatures", "size", "sorted_by_time", "staged",
        "staged_estimate",
        "time_field", "uncommitted_field_names", "uncompressed_size", "version",
    )

    def __init__(self, bucket_id: ObjectId, coll: Any, key: bytes, meta: Any,
                 time_field: str, min_time_ms: int) -> None:
        self.bucket_id = bucket_id
        self.coll = coll
        self.key = key
        self.meta = meta
        self.time_field = time_field
        self.min_time_ms = min_time_ms
        self.minmax = MinMax()
        self.schema = Schema()
        # Top-level signatures already folded into `schema` (see Measurement.signature).
        self.schema_signatures: set[tuple] = set()
        self.columns = Columns(time_field)
        self.num_measurements = 0          # committed + staged
        self.num_committed = 0
        self.size = 0
        self.field_names: set[str] = set()
        self.uncommitted_field_names: set[str] = set()
        self.sorted_by_time = True
        self.version = 2
        self.rollover_action = RolloverAction.kNone
        self.kept_open_large = False
        self.reopened = False
        self.staged: list[Measurement] = []
        self.staged_estimate = 0
        self.opened_due_to_metadata = False
        self.last_time_ms: int | None = None
        # the last BucketWrite committed, or the stored document of a reopened bucket
        self.committed_write: Any = None
        # the stored document without `data` (see BucketWrite.index_doc), when known
        self.index_doc: dict[str, Any] | None = None
        self.uncompressed_size = 0
        self.memory_usage = 0

    @property
    def all_committed(self) -> bool:
        return not self.staged

    def __repr__(self) -> str:
        return (f"Bucket({self.bucket_id}, n={self.num_measurements}, "
                f"committed={self.num_committed}, action={self.rollover_action.name})")

"""An open bucket's in-memory state, and what a measurement adds to its size.

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

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from bson import ObjectId

from .columns import Columns
from .elements import int_value_size
from .measurements import BatchRows, Measurement, document, elements
from .metadata import meta_of_key
from .minmax import MinMax, Schema
from .rollover import RolloverAction

if TYPE_CHECKING:
    from storage.collection_results import IndexKeys
    from storage.engine.base import RecordId

    from .native_columns import NativeColumns
    from .native_control import NativeControl
    from .write_batch import BucketWrite

__all__ = ["NO_NAMES", "Bucket", "SizeChange", "StoredKeys", "num_digits", "shared_names",
           "size_change"]

NO_NAMES: Final[frozenset[str]] = frozenset()
# one frozenset per set of field names, shared by the buckets holding those fields
_NAME_SETS: dict[frozenset[str], frozenset[str]] = {}
_NAME_SETS_MAX: Final = 4096
# Bucket.meta of a bucket that keeps its meta value as its series key only
_FROM_KEY: Final = object()


def shared_names(names: Iterable[str]) -> frozenset[str]:
    """`names` as the frozenset (of interned strings) that every bucket holding the same
    fields shares: a high-cardinality workload's many buckets of one shape hold one."""
    s = frozenset(map(sys.intern, names))
    shared = _NAME_SETS.get(s)
    if shared is None:
        if len(_NAME_SETS) >= _NAME_SETS_MAX:
            _NAME_SETS.clear()
        shared = _NAME_SETS[s] = s
    return shared


@dataclass(slots=True)
class SizeChange:
    """Sizes in MongoDB's `Sizes` struct: verified overheads and an estimate."""

    verified: int = 0
    estimate: int = 0
    new_fields: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.verified + self.estimate


def num_digits(n: int) -> int:
    """Decimal digits of `n` (0 for 0): the length of a row's field name in a v1 bucket."""
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
    digits = num_digits(bucket.num_measurements)
    committed = bucket.field_names
    small = m.max_value_len + digits + 2 <= large_threshold
    if small and committed.issuperset(m.names):
        return sc  # the common case: known fields, small values
    uncommitted = bucket.uncommitted_field_names
    if small and not committed and not uncommitted:
        # a new bucket's first measurement: every field new, no estimate; the loop below
        # summed from the names and the values' total
        sc.new_fields = list(m.names)
        sc.verified += _names_overhead(m.names) + 2 * m.value_bytes
        return sc
    if small:
        new = [name for name in m.names if name not in committed]
        if uncommitted.issuperset(new):
            # every new field already staged (counted then), no estimate: what the loop
            # below gives, without the values' sizes
            sc.new_fields = new
            return sc
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


_NAMES_OVERHEAD: dict[tuple[str, ...], int] = {}


def _names_overhead(names: tuple[str, ...]) -> int:
    """What new fields `names` add to a bucket's size besides twice their values:
    12 + len(name) + 2 * (2 + len(name)) each."""
    n = _NAMES_OVERHEAD.get(names)
    if n is None:
        if len(_NAMES_OVERHEAD) >= 4096:
            _NAMES_OVERHEAD.clear()
        n = _NAMES_OVERHEAD[names] = sum(16 + 3 * len(name.encode("utf-8", "surrogatepass"))
                                         for name in names)
    return n


def _value_lens(m: Measurement) -> list[tuple[str, int]]:
    """(name, value bytes) of each field of `m` but the meta; from its shape while its
    elements are not built."""
    shape = m.shape
    if m.elems is not None or shape is None:
        return [(name, len(v)) for name, _t, v in elements(m)]
    d = document(m)
    return [(name, n if n is not None else int_value_size(d[name]))  # type: ignore[misc]
            for name, n in zip(shape.names, shape.value_lens)]


@dataclass(slots=True)
class StoredKeys:
    """The index keys a bucket's stored version was written with by the group commit, its
    record and length, and that version's data-less view as its write kept it (the bytes
    object): the bucket's next update replaces that view, and takes these instead of
    computing or reading them (`pending_writes.write_buckets`). Empty until the group
    commit writes the bucket."""

    view: object = None
    keys: IndexKeys | None = None
    rid: RecordId | None = None
    size: int | None = None
    # the keystring of the bucket's meta value when it is a document (`keystring.Keyed`):
    # the part of its keys each write's would encode again
    meta_keystring: bytes | None = None
    # the keystrings of the bucket's `_id` and of its start (with the start in ms), the
    # other parts every write's keys share (`bucket_keys`)
    id_keystring: bytes | None = None
    start_keystring: tuple[int, bytes] | None = None

    def forget(self) -> None:
        self.view = self.keys = self.rid = self.size = None


class Bucket:
    """In-memory state of one open bucket."""

    __slots__ = (
        "_meta", "_minmax", "_schema", "bucket_id", "coll", "columns", "committed_size",
        "committed_write", "control", "field_names", "index_doc", "kept_open_large",
        "key", "last_time_ms", "memory_usage", "min_time_ms",
        "num_committed", "num_measurements", "opened_due_to_metadata", "reopened",
        "rollover_action", "rows", "run_signature", "schema_signatures", "size",
        "sorted_by_time",
        "staged",
        "staged_estimate", "stored", "stored_keys",
        "time_field", "uncommitted_field_names", "uncompressed_size", "version",
    )

    def __init__(self, bucket_id: ObjectId, coll: str, key: bytes, meta: Any,
                 time_field: str, min_time_ms: int) -> None:
        self.bucket_id = bucket_id
        self.coll = coll
        self.key = key
        self._meta = meta
        self.time_field = time_field
        self.min_time_ms = min_time_ms
        # the reference's control.min/max and schema, made when first read: a native
        # bucket never reads them (see `control`)
        self._minmax: MinMax | None = None
        self._schema: Schema | None = None
        # Top-level signatures already folded into `schema` (see Measurement.signature).
        self.schema_signatures: set[tuple] = set()
        # the signature `Stager.stage_run` last found known here, with all its fields
        self.run_signature: tuple | None = None
        self.columns: Columns | NativeColumns = Columns(time_field)
        # control.min/max and schema in the native core (then `minmax` and `schema` are
        # unused), see bucket_state
        self.control: NativeControl | None = None
        self.num_measurements = 0          # committed + staged
        self.num_committed = 0
        self.size = 0
        # committed: a shared set (`shared_names`), replaced when fields are added
        self.field_names: frozenset[str] = NO_NAMES
        # staged, not committed yet (NO_NAMES until a batch stages a new field)
        self.uncommitted_field_names: set[str] | frozenset[str] = NO_NAMES
        self.sorted_by_time = True
        self.version = 2
        self.rollover_action = RolloverAction.kNone
        self.kept_open_large = False
        self.reopened = False
        # the rows of the batch in progress staged here, in the order staged, and that
        # batch's rows (`BatchRows.measurement` makes a row a Measurement where needed)
        self.staged: list[int] = []
        self.rows: BatchRows | None = None
        self.staged_estimate = 0
        self.opened_due_to_metadata = False
        self.last_time_ms: int | None = None
        # the size of the last document committed, or of the stored one of a reopened
        # bucket; the last BucketWrite committed instead while its size is not known
        # without building it
        self.committed_size: int | None = None
        self.committed_write: BucketWrite | None = None
        # the bytes storage holds for this bucket as this catalog last read or wrote them:
        # set when reopened and, when other processes share the storage, at each commit
        # (the next update checks that storage still holds them; see BucketWrite.expected)
        self.stored: bytes | None = None
        # the stored document without `data` (see BucketWrite.index_doc), when known
        self.index_doc: dict[str, Any] | bytes | None = None  # bytes: native, undecoded
        self.stored_keys = StoredKeys()
        self.uncompressed_size = 0
        self.memory_usage = 0

    @property
    def meta(self) -> Any:
        """The normalized meta value (MISSING without one)."""
        meta = self._meta
        return meta_of_key(self.key) if meta is _FROM_KEY else meta

    @meta.setter
    def meta(self, meta: Any) -> None:
        self._meta = meta

    def meta_from_key(self) -> None:
        """Keep the meta value as the series key only, decoded when read: what a native
        bucket reads of it is the key."""
        self._meta = _FROM_KEY

    @property
    def minmax(self) -> MinMax:
        """control.min/max in the Python reference."""
        if self._minmax is None:
            self._minmax = MinMax()
        return self._minmax

    @minmax.setter
    def minmax(self, minmax: MinMax) -> None:
        self._minmax = minmax

    @property
    def schema(self) -> Schema:
        """The schema in the Python reference."""
        if self._schema is None:
            self._schema = Schema()
        return self._schema

    @schema.setter
    def schema(self, schema: Schema) -> None:
        self._schema = schema

    @property
    def all_committed(self) -> bool:
        return not self.staged

    def committed_document_size(self) -> int:
        """The size of the last document committed (or stored, when reopened)."""
        if self.committed_size is not None:
            return self.committed_size
        assert self.committed_write is not None
        return len(self.committed_write.document)

    def staged_measurements(self) -> list[Measurement]:
        """The staged measurements, in the order staged."""
        if not self.staged:
            return []
        assert self.rows is not None
        return self.rows.measurements(self.staged)

    def __repr__(self) -> str:
        return (f"Bucket({self.bucket_id}, n={self.num_measurements}, "
                f"committed={self.num_committed}, action={self.rollover_action.name})")

"""A bucket's control.min / control.max and schema computed by the native core.

The same results as `storage.timeseries.minmax` (`MinMax`, `Schema`), over the raw BSON
of the measurements instead of decoded values: `NativeControl` folds a batch of raw
measurements per call (the GIL released for the work), gives control.min / control.max
as BSON bytes (exactly `bson.encode(MinMax.min())` under `storage.bsonutil.CODEC_OPTIONS`)
or decoded, and checks and learns the schema (`kSchemaChange`).

`AVAILABLE` is False, and `new()` / `from_control()` give None, when `storage.native.core`
was not built. Where the native path cannot reproduce the reference for a batch (a symbol,
undefined, a DBPointer, code with scope, unnormalised regex options, a sub-document with
`$ref`, a repeated field name, nesting past 200 levels; for the schema only undefined, a
DBPointer, `$ref`, repeated names and depth matter) it raises
`Declined` and changes nothing: the caller keeps the Python reference for that bucket.
Malformed BSON raises `MongoError(InvalidBSON)`, also without changing anything.

Batches: `documents` is BSON documents back to back, or a buffer with `offsets` (a list
of start offsets, or little-endian int64 bytes such as `array("q").tobytes()` of a
RawDocuments' offsets) naming the ones that go into this bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from storage import native
from storage.bsonutil import decode, encode

from .minmax import SchemaChange

if TYPE_CHECKING:
    from .native_columns import NativeColumns

__all__ = ["AVAILABLE", "Declined", "NativeControl", "from_control", "new"]

AVAILABLE: Final = native.core is not None and hasattr(native.core, "Control")

Declined = native.Declined

Offsets = bytes | list[int] | None


class NativeControl:
    """The native `MinMax` and `Schema` of one bucket."""

    __slots__ = ("_c",)

    def __init__(self, control: Any = None) -> None:
        assert native.core is not None
        self._c = control if control is not None else native.core.Control()

    # -- min / max ------------------------------------------------------------------------

    def update(self, documents: bytes, offsets: Offsets = None,
               skip_field: str | None = None) -> None:
        """`MinMax.update_many` of a batch of raw measurements; `skip_field` is the meta."""
        native.check(self._c.update, documents, offsets, skip_field)

    def update_doc(self, doc: Mapping[str, Any] | bytes, skip_field: str | None = None) -> None:
        """`MinMax.update` of one document (encoded first, in its order, when decoded)."""
        native.check(self._c.update, _raw(doc), None, skip_field)

    def min_bson(self) -> bytes:
        return native.check(self._c.min_bson)

    def max_bson(self) -> bytes:
        return native.check(self._c.max_bson)

    def min(self) -> dict[str, Any]:
        return decode(self.min_bson())

    def max(self) -> dict[str, Any]:
        return decode(self.max_bson())

    def date_bounds(self, field: str) -> tuple[int, int] | None:
        """control.min.<field> and control.max.<field> in milliseconds when both are
        dates (the time field's), else None."""
        return self._c.date_bounds(field)

    # -- schema ---------------------------------------------------------------------------

    def schema_update(self, documents: bytes, offsets: Offsets = None,
                      skip_field: str | None = None) -> int | None:
        """`Schema.compatible` of each document in turn: the index of the first that
        changes a path's type (kSchemaChange, the schema partly updated with it), else None."""
        return native.check(self._c.schema_update, documents, offsets, skip_field)

    def compatible(self, doc: Mapping[str, Any] | bytes, skip_field: str | None = None) -> bool:
        """`Schema.compatible`: records `doc`'s types, False when a path changes type."""
        return native.check(self._c.schema_compatible, _raw(doc), skip_field)

    # -- the bucket document ------------------------------------------------------------

    def bucket_document(self, bucket_id: bytes, version: int, count: int,
                        meta_key: bytes | None, columns: NativeColumns | None) -> bytes:
        """The compressed bucket document with this control.min/max and `columns`' data
        (`bucket_document.build_bucket_document`'s bytes), or without `data` when
        `columns` is None. `meta_key`: the series key, None without a meta."""
        assert native.core is not None
        return native.check(native.core.bucket_document, bucket_id, version, count, meta_key,
                            self._c, None if columns is None else columns.native)

    # -- the object -----------------------------------------------------------------------

    @property
    def native(self) -> Any:
        """The core's object (for `storage._native.fold_buckets`)."""
        return self._c

    def copy(self) -> NativeControl:
        return NativeControl(self._c.copy())

    def reopened(self) -> NativeControl:
        """`from_control` of this control's own control.min and control.max: what a
        bucket written from it gets when reopened from storage (SchemaChange where that
        refuses a mixed schema)."""
        try:
            return NativeControl(native.check(self._c.reopened))
        except ValueError as e:
            raise SchemaChange(str(e)) from None

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + self._c.__sizeof__()


def _raw(doc: Mapping[str, Any] | bytes) -> bytes:
    """`doc`'s BSON in its own field order (bson.encode would move a top-level _id first,
    and the field order is part of control.min/max)."""
    if isinstance(doc, bytes):
        return doc
    return encode({"": doc})[6:-1]


def new() -> NativeControl | None:
    """An empty bucket's control, or None without the native core."""
    return NativeControl() if AVAILABLE else None


def from_control(min_doc: Mapping[str, Any] | bytes, max_doc: Mapping[str, Any] | bytes
                 ) -> NativeControl | None:
    """`MinMax.from_control` and `Schema.from_control` of a stored bucket's control.min and
    control.max (decoded or raw); SchemaChange for a mixed-schema bucket; None without the
    native core."""
    if not AVAILABLE:
        return None
    assert native.core is not None
    try:
        return NativeControl(native.check(native.core.Control.from_control, _raw(min_doc),
                                          _raw(max_doc)))
    except ValueError as e:
        raise SchemaChange(str(e)) from None

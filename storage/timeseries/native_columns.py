"""The columns of an open bucket in the native core, fed with raw measurement documents.

`BucketColumns` is `storage._native.BucketColumns` (native/src/bucket/), or None when
the core is not built. It keeps what `columns.Columns` keeps (one BSONColumn builder per
data field, the time field first, then first appearance; a field first seen at row k
starts with k skips, a missing field gets a skip) and gives the same bytes, names,
changes and size deltas, but takes the measurements as the raw BSON they arrived in: no
element is built in Python and no value crosses into Python.

`append(columns, documents, rows, meta_field)` is what `write_batch.prepare_writes`
calls: `documents` a `RawDocuments` (or anything with `buffer: bytes` and `offsets`, an
`array('q')` of document starts), `rows` the indexes of the documents of the bucket in
commit order (an `array('i')` or a sequence of ints). It returns the changed columns as
`NativeColumnChange` (the `ColumnChange` fields but the previous bytes, replaced by the
offset of the first byte that differs from them, which is all `diff` needs) and the
change in total column size.

Declined (`storage._native.Declined`, the columns unchanged) means the reference must do
this batch: an object or array with fields in a measurement (interleaved columns), code
with scope, a malformed document or value, a field twice in one document, an encoder
state the native builder cannot reproduce. The caller then rebuilds the Python columns
with `to_python(columns)` and appends through `Columns.append`. `BucketColumns.
from_data(data, count)` reopens stored columns and declines those the native builder
cannot continue (use `Columns.from_data`).

`sys.getsizeof(columns)` (`__sizeof__`) is the heap the columns hold: the builders'
buffers and pending values and the committed columns.
"""

from __future__ import annotations

import functools
import sys
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from storage import native
from storage.bsoncolumn import BinaryDiff

from .columns import Columns
from .native_control import NativeControl

if TYPE_CHECKING:
    from storage._native import BucketColumns as _BucketColumns

__all__ = ["AVAILABLE", "BucketColumns", "Declined", "NativeColumnChange", "NativeColumns",
           "append", "to_python"]

BucketColumns: type[_BucketColumns] | None = (
    native.core.BucketColumns if native.core is not None else None)
AVAILABLE: bool = BucketColumns is not None
Declined = native.Declined


def _gc_header() -> int:
    """What sys.getsizeof adds to a BucketColumns' __sizeof__ (a GC header, if any)."""
    if BucketColumns is None:
        return 0
    c = BucketColumns("t")
    return sys.getsizeof(c) - c.__sizeof__()


_GC_HEADER: Final = _gc_header()


@functools.cache
def _control_shell() -> int:
    """What sys.getsizeof adds to a NativeControl's core's __sizeof__ (its Python object
    and GC header)."""
    c = NativeControl()
    return sys.getsizeof(c) - c.native.__sizeof__()


class RawBatch(Protocol):
    """What `append` reads of a batch's documents (`RawDocuments` has it)."""

    @property
    def buffer(self) -> bytes: ...
    @property
    def offsets(self) -> Any: ...  # array('q') of document starts


class NativeColumnChange(NamedTuple):
    """One column touched by an append (`columns.ColumnChange` with the offset of the
    first changed byte instead of the previous bytes)."""

    name: str
    column: bytes
    is_new: bool
    offset: int = 0

    @property
    def diff(self) -> BinaryDiff:
        if self.is_new:
            return BinaryDiff(0, self.column)
        return BinaryDiff(self.offset, self.column[self.offset:])


def append(columns: _BucketColumns, documents: RawBatch, rows: Sequence[int] | array[int],
           meta_field: str | None) -> tuple[list[NativeColumnChange], int]:
    """Append the documents `rows` names (in that order) to `columns`, the meta field
    left out: the changed columns in column order and the change in total size. Raises
    Declined with `columns` unchanged (see the module docstring)."""
    # the starts of these documents only: the native call then reads O(len(rows)), not
    # the whole batch's offsets, for each bucket
    starts = array("q", map(documents.offsets.__getitem__, rows))
    changes, delta = columns.append(documents.buffer, starts, None, meta_field)
    return [NativeColumnChange(*c) for c in changes], delta


def to_python(columns: _BucketColumns) -> Columns:
    """The Python `Columns` continuing `columns` (for a batch the native path declines):
    the committed columns reopened, the names of fields without a column yet (the time
    field before the first append) kept in place."""
    py = Columns.from_data(columns.column_bytes(), columns.count)
    if len(py.names()) != len(columns.names()):
        # only the time field can lack a column, and only before the first append
        py = Columns(columns.names()[0])
    return py


class NativeColumns:
    """An open bucket's columns held by the native core: what `Bucket.columns` reads of
    a `columns.Columns` (names, bytes, sizes), and `append_raw` instead of its appends."""

    __slots__ = ("_c",)

    def __init__(self, columns: _BucketColumns) -> None:
        self._c = columns

    @classmethod
    def new(cls, time_field: str) -> NativeColumns | None:
        """Empty columns of a new bucket, or None without the native core."""
        return None if BucketColumns is None else cls(BucketColumns(time_field))

    @classmethod
    def from_data(cls, data: Sequence[tuple[str, bytes]], count: int) -> NativeColumns | None:
        """A stored bucket's columns (`data`: (name, column bytes) in column order) continued
        by the native builders; None without the native core, or when a column is one they
        cannot continue (the caller then uses `Columns.from_data`)."""
        if BucketColumns is None:
            return None
        try:
            return cls(BucketColumns.from_data(data, count))
        except Declined:
            return None

    def names(self) -> list[str]:
        return self._c.names()

    @property
    def native(self) -> _BucketColumns:
        """The core's object (for `storage._native.bucket_document`)."""
        return self._c

    @property
    def num_fields(self) -> int:
        return len(self._c)

    @property
    def count(self) -> int:
        return self._c.count

    @property
    def compressed_size(self) -> int:
        return self._c.compressed_size

    @property
    def memory_size(self) -> int:
        """The heap the builders and the committed columns hold (`__sizeof__`)."""
        return sys.getsizeof(self._c)

    def footprint(self, control: NativeControl | None = None) -> tuple[int, int, int, int]:
        """(memory_size, num_fields, compressed_size, sys.getsizeof(control) or 0) in one
        call to the core."""
        size, fields, compressed, control_size = self._c.footprint(
            None if control is None else control.native)
        if control is not None:
            control_size += _control_shell()
        return size + _GC_HEADER, fields, compressed, control_size

    def column_bytes(self) -> list[tuple[str, bytes]]:
        return self._c.column_bytes()

    def document_with_data(self, view: bytes) -> bytes:
        """The bucket document whose data-less view is `view` (a fold's, of the state
        these columns are in), with these columns as its `data`."""
        assert native.core is not None
        return native.check(native.core.bucket_document_with_data, view, self._c)

    def __contains__(self, name: str) -> bool:
        return name in self._c

    def append_raw(self, documents: RawBatch, rows: Sequence[int], meta_field: str | None
                   ) -> tuple[list[tuple[str, bytes, bool, int]], int]:
        """`append`, the changes as plain tuples (`NativeColumnChange(*change)` when one
        is looked at). Declined leaves the columns as they were."""
        starts = array("q", map(documents.offsets.__getitem__, rows))
        return self._c.append(documents.buffer, starts, None, meta_field)

    def to_python(self) -> Columns:
        return to_python(self._c)

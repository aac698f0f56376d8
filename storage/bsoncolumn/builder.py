"""BSONColumnBuilder: appends values one by one and produces MongoDB's exact bytes.

Regular mode is one `EncodingState` writing into the column buffer. Objects and arrays
that contain scalars switch to interleaved mode: while *determining the reference*,
objects are buffered and merged into a candidate reference object (until there are more
than twice as many buffered objects as reference scalars); then the interleaved start
byte (0xF1 object root, 0xF2 array root) and the reference are written and each scalar
field gets its own `EncodingState` with a private buffer. An incompatible object, a
non-object or `finalize` ends the section: the sub-streams are flushed and their control
blocks merged into the column in the order a decoder will ask for them (fewest values
decoded first, ties by field order), followed by 0x00.

Beyond MongoDB's API, `finalize()` does not end the builder (it finalizes a copy of the
state), so a bucket can be committed and appended to again; `intermediate()` returns the
bytes changed since the previous call as a `BinaryDiff`; `from_column()` reopens a
column without re-encoding what precedes its last literal.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, cast

import bson
import numpy as np
from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bsonutil import CODEC_OPTIONS
from storage.vocabulary.bson_types import (
    T_ARRAY,
    T_BOOL,
    T_CODE,
    T_DATE,
    T_DOUBLE,
    T_INT32,
    T_INT64,
    T_OBJECT,
    T_OID,
    T_STRING,
    T_TIMESTAMP,
)
from storage.vocabulary.missing import MISSING

from .control import is_literal
from .decoder import decode_with_anchor
from .encoding import INT_RUN_TYPES, EncodingState
from .errors import BSONColumnError
from .objects import (
    EMPTY_OBJECT,
    contains_scalars,
    has_empty_object,
    merge_objects,
    traverse_lock_step,
)
from .rawbson import VALID_TYPES, iter_elements, validate_value
from .simple8b.decoding import block_count

__all__ = ["BSONColumnBuilder", "BinaryDiff", "encode_value"]

_DETERMINING: Final = 0
_APPENDING: Final = 1


@dataclass(frozen=True, slots=True)
class BinaryDiff:
    """Bytes to write at `offset` of the previous binary; everything after is replaced."""

    offset: int
    data: bytes

    def apply(self, previous: bytes) -> bytes:
        return previous[: self.offset] + self.data


_PACK_D = struct.Struct("<d").pack
_PACK_I = struct.Struct("<i").pack
_PACK_Q = struct.Struct("<q").pack


def encode_value(value: Any) -> tuple[int, bytes]:
    """A Python value as a raw BSON (type, value bytes), following CODEC_OPTIONS."""
    tv = type(value)
    # the common measurement types without a round trip through bson
    if tv is float:
        return T_DOUBLE, _PACK_D(value)
    if tv is int and -(2**31) <= value < 2**31:
        return T_INT32, _PACK_I(value)
    if tv is Int64:
        return T_INT64, _PACK_Q(value)
    if tv is DatetimeMS:
        return T_DATE, _PACK_Q(int(value))
    if tv is bool:
        return T_BOOL, b"\x01" if value else b"\x00"
    if tv is ObjectId:
        return T_OID, value.binary
    raw = bson.encode({"": value}, codec_options=CODEC_OPTIONS)
    return raw[4], raw[6:-1]


class _SubObj:
    __slots__ = ("blocks", "buf", "state")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.blocks: list[tuple[int, int]] = []
        self.state = EncodingState(self.buf, self.blocks)

    def clone(self) -> _SubObj:
        c = _SubObj.__new__(_SubObj)
        c.buf = bytearray(self.buf)
        c.blocks = self.blocks[:]
        c.state = self.state.clone(c.buf, c.blocks)
        return c


class _Interleaved:
    __slots__ = ("buffered", "mode", "ref", "ref_type", "subobjs")

    def __init__(self, ref: bytes, ref_type: int) -> None:
        self.mode = _DETERMINING
        self.subobjs: list[_SubObj] = []
        self.ref = ref
        self.ref_type = ref_type
        self.buffered: list[bytes] = [ref]  # b"" is a skipped row

    def clone(self) -> _Interleaved:
        c = _Interleaved.__new__(_Interleaved)
        c.mode = self.mode
        c.subobjs = [s.clone() for s in self.subobjs]
        c.ref = self.ref
        c.ref_type = self.ref_type
        c.buffered = self.buffered[:]
        return c


def _elems_in_control_block(data: bytes | bytearray, offset: int, size: int) -> int:
    if is_literal(data[offset]):
        return 1
    n = 0
    for p in range(offset + 1, offset + size, 8):
        n += block_count(int.from_bytes(data[p : p + 8], "little"))
    return n


class BSONColumnBuilder:
    """Builds a BSONColumn (BinData subtype 7 payload) byte-identical to MongoDB's."""

    __slots__ = ("_buf", "_count", "_inter", "_n_interleaved", "_prev_tail", "_regular", "_stable")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._regular: EncodingState | None = EncodingState(self._buf)
        self._inter: _Interleaved | None = None
        self._count = 0
        # intermediate(): bytes before `_stable` never change; `_prev_tail` is what the
        # previous diff produced from `_stable` on (None before the first call).
        self._stable = 0
        self._prev_tail: bytes | None = None
        self._n_interleaved = 0

    # -- appending -------------------------------------------------------------------------

    def __len__(self) -> int:
        """Rows appended so far, skipped rows included."""
        return self._count

    def append(self, value: Any) -> BSONColumnBuilder:
        """Append a Python value (int → int32 when it fits, Int64, float, DatetimeMS, ...).

        `MISSING` appends a skipped row.
        """
        if value is MISSING:
            return self.skip()
        t, v = encode_value(value)
        if t in _TRUSTED_FROM_PYTHON:
            self._append_trusted(t, v)  # fixed-size values made here need no validation
            return self
        return self.append_element(t, v)

    def append_many(self, values: Iterable[Any]) -> BSONColumnBuilder:
        """Append Python values (MISSING = skipped row); same bytes as `append` one by one.

        Runs of int (all fitting int32), Int64, float, bool or DatetimeMS values, with
        MISSING among them, go through the vectorised `append_array`.
        """
        values = list(values)
        n = len(values)
        i = 0
        while i < n:
            kind = _py_kind(values[i])
            if kind is None or kind == _SKIPPED_KIND:
                if values[i] is MISSING:
                    self.skip()
                else:
                    self.append(values[i])
                i += 1
                continue
            j = i + 1
            while j < n:
                k = _py_kind(values[j])
                if k != kind and k != _SKIPPED_KIND:
                    break
                j += 1
            run = values[i:j]
            if j - i < _MIN_BULK:
                for v in run:
                    self.skip() if v is MISSING else self.append(v)
                i = j
                continue
            if kind == T_STRING:
                self.append_strings(
                    T_STRING, [None if v is MISSING else _string_value(v) for v in run]
                )
                i = j
                continue
            present = np.fromiter((v is not MISSING for v in run), dtype=bool, count=len(run))
            filled = [0 if v is MISSING else v for v in run]
            t = kind
            arr: np.ndarray
            if kind == T_INT32:
                if any(v > 2**31 - 1 or v < -(2**31) for v in filled):
                    for v in run:  # some need int64: bson decides per value
                        self.skip() if v is MISSING else self.append(v)
                    i = j
                    continue
                arr = np.array(filled, dtype=np.int64)
            elif kind == T_DATE:
                arr = np.array([int(v) for v in filled], dtype=np.int64)
            elif kind == T_DOUBLE:
                arr = np.array(filled, dtype=np.float64)
            elif kind == T_BOOL:
                arr = np.array(filled, dtype=bool)
            elif kind == T_OID:
                zero = bytes(12)
                arr = np.frombuffer(
                    b"".join(zero if v is MISSING else v.binary for v in run), dtype=np.uint8
                )
            else:
                arr = np.array([int(v) for v in filled], dtype=np.int64)
            self.append_array(t, arr, None if present.all() else present)
            i = j
        return self

    def append_array(
        self, t: int, values: np.ndarray, present: np.ndarray | None = None
    ) -> BSONColumnBuilder:
        """Append a run of values of one BSON type from a numpy array (fast path).

        `t` is the BSON type: int32 (0x10), int64 (0x12), date (0x09, milliseconds),
        timestamp (0x11, the uint64 bits), bool (0x08), double (0x01) or ObjectId (0x07,
        n x 12 bytes). Rows where `present` is False are skipped. Same bytes as appending
        the values one by one.
        """
        if t == T_OID:
            values = np.asarray(values, dtype=np.uint8).reshape(-1, 12)
        n = len(values)
        if present is not None:
            present = np.asarray(present, dtype=bool)
            if len(present) != n:
                raise ValueError("present must have one flag per value")
        if self._inter is not None:
            # skips before the first value still belong to the interleaved section
            first = 0
            if present is not None:
                first = int(np.argmax(present)) if present.any() else n
                if first:
                    self.skip(first)
                    values = values[first:]
                    present = present[first:]
                    n -= first
            if not n:
                return self
            self._flush_interleaved()
        regular = self._regular
        assert regular is not None
        if t in INT_RUN_TYPES:
            if t == T_BOOL:
                arr = np.asarray(values).astype(bool).astype(np.int64)
            elif t == T_INT32:
                arr = np.asarray(values, dtype=np.int64)
                if len(arr) and (arr.min() < -(2**31) or arr.max() >= 2**31):
                    raise ValueError("int32 values out of range")
            else:
                arr = np.asarray(values).astype(np.int64, copy=False)
            regular.extend_ints(t, arr, present)
        elif t == T_DOUBLE:
            regular.extend_doubles(np.asarray(values, dtype="<f8"), present)
        elif t == T_OID:
            regular.extend_oids(values, present)
        else:
            raise ValueError(f"append_array does not take BSON type {t}")
        self._count += n
        return self

    def append_strings(self, t: int, values: list[bytes | None]) -> BSONColumnBuilder:
        """Append string (0x02) or code (0x0D) values given as BSON value bytes (int32
        length, UTF-8, NUL), None for a skipped row. Same bytes as one by one."""
        n = len(values)
        if self._inter is not None:
            first = next((k for k, v in enumerate(values) if v is not None), n)
            if first:
                self.skip(first)
                values = values[first:]
                n -= first
            if not n:
                return self
            self._flush_interleaved()
        regular = self._regular
        assert regular is not None
        regular.extend_strings(t, values)
        self._count += n
        return self

    def append_uniform_objects(
        self, t: int, first: bytes, columns: list[tuple[int, np.ndarray]]
    ) -> BSONColumnBuilder:
        """Append n objects (t = object or array) that all have the layout of `first`:
        per scalar field of `first`, in order, its BSON type and n values (the first being
        the value in `first`). Same result as appending the objects one by one: they form
        one interleaved section whose reference is `first`, one stream per field.
        """
        n = len(columns[0][1])
        nscalars = len(columns)
        if self._regular is None or n <= 2 * nscalars + 1:
            # few objects: the reference is still being determined; do it one by one
            for obj in _rebuild_objects(first, columns, n):
                self._append_trusted(t, obj)
            return self
        self._start_determine(first, t)
        inter = self._inter
        assert inter is not None
        buf = self._buf
        buf.append(0xF1 if t == T_OBJECT else 0xF2)
        buf += first
        self._n_interleaved += 1
        refs: list[tuple[int, bytes]] = []
        traverse_lock_step(first, first, lambda r, _e: refs.append(r))
        for (rt, rv), (ct, col) in zip(refs, columns):
            sub = _SubObj()
            inter.subobjs.append(sub)
            st = sub.state
            st.ptype, st.pvalue = rt, rv
            st.init_from_previous()
            if ct == T_DOUBLE:
                st.extend_doubles(col)
            else:
                st.extend_ints(ct, col.astype(np.int64))
        inter.mode = _APPENDING
        inter.buffered = []
        self._count += n
        return self

    def append_element(self, t: int, value: bytes) -> BSONColumnBuilder:
        """Append a raw BSON value: its type byte and value bytes (no field name).

        Type 0 (EOO) is a skip. The value is validated (bounds, terminators, UTF-8).
        """
        if t == 0:
            return self.skip()
        value = bytes(value)
        if t not in VALID_TYPES:
            raise BSONColumnError(f"Invalid BSON type {t} appended to BSON Column")
        if validate_value(t, value, 0, len(value)) != len(value):
            raise BSONColumnError("Malformed BSON value appended to BSON Column")
        self._append_trusted(t, value)
        return self

    def _append_trusted(self, t: int, value: bytes) -> None:
        self._count += 1
        if (t != T_OBJECT and t != T_ARRAY) or len(value) == 5:
            if self._inter is not None:
                self._flush_interleaved()
            self._regular.append(t, value)  # type: ignore[union-attr]
            return
        self._append_obj(t, value)

    def skip(self, n: int = 1) -> BSONColumnBuilder:
        """Append `n` skipped (missing) rows."""
        for _ in range(n):
            self._count += 1
            self._skip_one()
        return self

    def _skip_one(self) -> None:
        if self._regular is not None:
            self._regular.skip()
            return
        inter = self._inter
        assert inter is not None
        # Skipping every sub-stream would not read back as a skipped row when the
        # reference has an empty sub-object (it is always materialised).
        if has_empty_object(inter.ref):
            self._flush_interleaved().skip()
            return
        if inter.mode == _DETERMINING:
            inter.buffered.append(b"")
        else:
            for sub in inter.subobjs:
                sub.state.skip()

    # -- interleaved mode -------------------------------------------------------------------

    def _append_obj(self, t: int, obj: bytes) -> None:
        scalars = contains_scalars(obj)
        if self._regular is not None:
            if not scalars:
                self._regular.append(t, obj)
            else:
                self._start_determine(obj, t)
            return
        inter = self._inter
        assert inter is not None
        if t != inter.ref_type:
            regular = self._flush_interleaved()
            if not scalars:
                regular.append(t, obj)
            else:
                self._start_determine(obj, t)
            return
        if inter.mode == _DETERMINING:
            count = 0

            def counter(_ref: object, _elem: object) -> None:
                nonlocal count
                count += 1

            if not traverse_lock_step(inter.ref, obj, counter):
                merged = merge_objects(inter.ref, obj)
                if merged is None:
                    regular = self._flush_interleaved()
                    if not scalars:
                        regular.append(t, obj)
                        return
                    self._regular = None
                    self._inter = _Interleaved(obj, t)
                    return
                inter.ref = merged
            # Keep buffering while there are at most twice as many objects as scalars.
            if count * 2 >= len(inter.buffered):
                inter.buffered.append(obj)
                return
            self._finish_determine()
        if not self._append_sub_elements(obj):
            if not scalars:
                # _append_sub_elements flushed the section: back in regular mode
                cast(EncodingState, self._regular).append(t, obj)
            else:
                self._start_determine(obj, t)

    def _start_determine(self, obj: bytes, t: int) -> None:
        assert self._regular is not None
        self._regular.flush()
        self._regular = None
        self._inter = _Interleaved(obj, t)

    def _finish_determine(self) -> None:
        inter = self._inter
        assert inter is not None
        buf = self._buf
        buf.append(0xF1 if inter.ref_type == T_OBJECT else 0xF2)
        buf += inter.ref
        self._n_interleaved += 1

        def start_stream(ref_elem: tuple[int, bytes], elem: tuple[int, bytes] | None) -> None:
            sub = _SubObj()
            inter.subobjs.append(sub)
            st = sub.state
            # The reference holds the first value: begin with a delta, not a literal.
            st.ptype, st.pvalue = ref_elem
            st.init_from_previous()
            if elem is not None:
                st.append(*elem)
            else:
                st.skip()

        first = inter.buffered[0]
        ok = traverse_lock_step(inter.ref, first or EMPTY_OBJECT, start_stream)
        assert ok, "first buffered object must fit the reference"
        inter.mode = _APPENDING
        for obj in inter.buffered[1:]:
            ok = self._append_sub_elements(obj or EMPTY_OBJECT)
            assert ok, "buffered objects must fit the reference"
        inter.buffered = []

    def _append_sub_elements(self, obj: bytes) -> bool:
        inter = self._inter
        assert inter is not None
        flat: list[tuple[int, bytes] | None] = []
        if not traverse_lock_step(inter.ref, obj, lambda _r, e: flat.append(e)):
            self._flush_interleaved()
            return False
        if len(flat) != len(inter.subobjs):
            raise AssertionError("sub-field count does not match the reference object")
        for sub, elem in zip(inter.subobjs, flat):
            if elem is not None:
                sub.state.append(*elem)
            else:
                sub.state.skip()
        return True

    def _flush_interleaved(self) -> EncodingState:
        """End the interleaved section; returns the new regular-mode state."""
        inter = self._inter
        assert inter is not None
        if inter.mode == _DETERMINING:
            self._finish_determine()
        for sub in inter.subobjs:
            sub.state.flush()
        # Merge control blocks in the order the decoder consumes them: the stream that
        # has produced the fewest values reads next; ties go to the earlier field.
        buf = self._buf
        heap = [(0, i, 0) for i in range(len(inter.subobjs))]
        heapq.heapify(heap)
        while heap:
            written, i, bi = heapq.heappop(heap)
            sub = inter.subobjs[i]
            if bi >= len(sub.blocks):
                continue
            offset, size = sub.blocks[bi]
            buf += sub.buf[offset : offset + size]
            if bi + 1 < len(sub.blocks):
                written += _elems_in_control_block(sub.buf, offset, size)
                heapq.heappush(heap, (written, i, bi + 1))
        buf.append(0)
        self._inter = None
        regular = self._regular = EncodingState(self._buf)
        return regular

    # -- output ----------------------------------------------------------------------------

    def _snapshot(self) -> tuple:
        regular = self._regular.clone(self._buf, None) if self._regular is not None else None
        inter = self._inter.clone() if self._inter is not None else None
        return regular, inter, len(self._buf), self._n_interleaved

    def _restore(self, snap: tuple) -> None:
        regular, inter, length, n_inter = snap
        del self._buf[length:]
        self._regular = regular
        self._inter = inter
        self._n_interleaved = n_inter

    def finalize(self) -> bytes:
        """The complete column (ending in 0x00). The builder stays usable for appends."""
        snap = self._snapshot()
        ctrl = self._regular.ctrl if self._regular is not None else None
        ctrl_byte = self._buf[ctrl] if ctrl is not None else 0
        if self._regular is not None:
            self._regular.flush()
        else:
            self._flush_interleaved()
        self._buf.append(0)
        out = bytes(self._buf)
        self._restore(snap)
        if ctrl is not None:
            self._buf[ctrl] = ctrl_byte
        return out

    def intermediate(self) -> BinaryDiff:
        """Bytes changed since the previous call (offset 0 and everything the first time).

        Applying each diff (`previous[:offset] + data`) to the previous binary yields
        exactly `finalize()`.
        """
        full = self.finalize()
        if self._prev_tail is None:
            offset = 0
        else:
            s = self._stable
            prev = self._prev_tail
            n = min(len(prev), len(full) - s)
            k = 0
            while k < n and prev[k] == full[s + k]:
                k += 1
            offset = s + k
        if self._regular is not None and self._regular.ctrl is not None:
            self._stable = self._regular.ctrl
        else:
            self._stable = len(self._buf)
        self._prev_tail = full[self._stable :]
        return BinaryDiff(offset, full[offset:])

    @property
    def num_interleaved_start_written(self) -> int:
        return self._n_interleaved

    def state_key(self) -> tuple:
        """Everything that determines future output (for tests comparing builders)."""
        if self._regular is not None:
            state: tuple = ("regular", self._regular.state_key())
        else:
            inter = self._inter
            assert inter is not None
            state = (
                "interleaved",
                inter.mode,
                inter.ref,
                inter.ref_type,
                tuple(inter.buffered),
                tuple((s.state.state_key(), bytes(s.buf), tuple(s.blocks)) for s in inter.subobjs),
            )
        return (bytes(self._buf), state)

    # -- reopening ----------------------------------------------------------------------------

    @classmethod
    def from_column(cls, column: bytes | bytearray | memoryview) -> BSONColumnBuilder:
        """A builder in the state of the one that wrote `column`, after `intermediate()`.

        Appending to it produces the bytes appending to the original would have. The part
        of the column before its last top-level literal is kept as is; only the values
        after it are decoded and appended again (everything, when the column ends in
        interleaved mode, as MongoDB does).
        """
        column = bytes(column)
        elements, anchor, anchor_row = decode_with_anchor(column)
        builder = cls()
        if anchor is not None:
            builder._buf += column[:anchor]
            builder._count = anchor_row
            elements = elements[anchor_row:]
        builder.extend_elements(elements)
        builder.intermediate()
        return builder

    def extend_elements(self, elements: Iterable[tuple[int, bytes] | None]) -> BSONColumnBuilder:
        """Append trusted raw elements; None is a skipped row. Runs of one fixed-size
        numeric type go through the vectorised `append_array`."""
        rows = list(elements)
        n = len(rows)
        i = 0
        while i < n:
            e = rows[i]
            t = e[0] if e is not None else 0
            if t not in _RAW_BULK and t not in (T_STRING, T_CODE):
                if e is None:
                    self._count += 1
                    self._skip_one()
                else:
                    self._append_trusted(e[0], e[1])
                i += 1
                continue
            j = i + 1
            while j < n and (rows[j] is None or rows[j][0] == t):  # type: ignore[index]
                j += 1
            if j - i < _MIN_BULK:
                for e2 in rows[i:j]:
                    if e2 is None:
                        self._count += 1
                        self._skip_one()
                    else:
                        self._append_trusted(e2[0], e2[1])
                i = j
                continue
            if t in (T_STRING, T_CODE):
                self.append_strings(t, [None if r is None else r[1] for r in rows[i:j]])
                i = j
                continue
            size, dtype = _RAW_BULK[t]
            zero = bytes(size)
            raw = b"".join(zero if r is None else r[1] for r in rows[i:j])
            arr = np.frombuffer(raw, dtype=dtype)
            present = np.fromiter((r is not None for r in rows[i:j]), dtype=bool, count=j - i)
            self.append_array(t, arr, None if present.all() else present)
            i = j
        return self

    def extend_rows(
        self, rows: Iterable[tuple[int, int, bytes]], count: int | None = None
    ) -> BSONColumnBuilder:
        """Append (row index, type, value) entries of validated values, skipping rows
        missing between them; with `count`, skip trailing rows up to that many rows."""
        elements: list[tuple[int, bytes] | None] = []
        for row, t, v in rows:
            gap = row - len(elements)
            if gap < 0:
                raise BSONColumnError("Row indexes must be increasing", code=2)
            if gap:
                elements.extend([None] * gap)
            elements.append((t, v))
        if count is not None:
            gap = count - len(elements)
            if gap < 0:
                raise BSONColumnError("count is smaller than the number of rows", code=2)
            elements.extend([None] * gap)
        return self.extend_elements(elements)


_MIN_BULK: Final = 16  # shorter runs are cheaper one by one
_TRUSTED_FROM_PYTHON: Final = frozenset({T_DOUBLE, T_INT32, T_INT64, T_DATE, T_BOOL, T_OID})
_SKIPPED_KIND: Final = -1
_RAW_BULK: Final = {
    T_OID: (12, "u1"),
    T_INT32: (4, "<i4"),
    T_INT64: (8, "<i8"),
    T_DOUBLE: (8, "<f8"),
    T_DATE: (8, "<i8"),
    T_TIMESTAMP: (8, "<i8"),
    T_BOOL: (1, "u1"),
}


def _string_value(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<i", len(b) + 1) + b + b"\x00"


def _py_kind(v: Any) -> int | None:
    """BSON type a Python value gets under CODEC_OPTIONS, for the bulk-capable types."""
    tv = type(v)
    if tv is float:
        return T_DOUBLE
    if tv is int:
        return T_INT32  # checked for range by the caller
    if tv is Int64:
        return T_INT64
    if tv is bool:
        return T_BOOL
    if tv is DatetimeMS:
        return T_DATE
    if tv is ObjectId:
        return T_OID
    if tv is str:
        return T_STRING
    if v is MISSING:
        return _SKIPPED_KIND
    return None


def _rebuild_objects(first: bytes, columns: list[tuple[int, np.ndarray]], n: int) -> list[bytes]:
    """The n objects described by `first` and its field columns (for small n)."""
    offsets: list[int] = []
    pos = [0]

    def collect(obj: bytes, start: int, end: int) -> None:
        for t, _name, vs, ve in iter_elements(obj, start, end):
            if t in (T_OBJECT, T_ARRAY):
                collect(obj, vs, ve)
            else:
                offsets.append(vs)
        pos[0] += 1

    collect(first, 0, len(first))
    raws = [col.astype(col.dtype.newbyteorder("<"), copy=False).tobytes() for _t, col in columns]
    sizes = [col.dtype.itemsize for _t, col in columns]
    out = []
    for i in range(n):
        obj = bytearray(first)
        for off, raw, size in zip(offsets, raws, sizes):
            obj[off : off + size] = raw[i * size : (i + 1) * size]
        out.append(bytes(obj))
    return out

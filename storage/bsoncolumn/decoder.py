"""Decoding a BSONColumn into raw elements, strictly and within bounds.

`decode_elements(column)` returns one entry per row: `(type, value bytes)` or None for a
skipped row. It follows MongoDB's `BSONColumn::Iterator` (including legacy 0xF0
interleaved sections, where arrays are scalars) and rejects every malformed input with
`BSONColumnError`: unknown control bytes, truncated literals or blocks, invalid
selectors, deltas without a preceding value (e.g. RLE at the start of a column), deltas
on types that only allow repeats, scale bytes that do not fit the value type,
interleaved sub-streams that run out unevenly, a missing or early final 0x00.

Work is linear in the input and output; the output is bounded: at most `max_values`
rows (default 2**22), since an 8-byte RLE block alone stands for up to 1920 rows, and at
most 64 MiB of objects rebuilt from interleaved sections.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

import numpy as np

from storage.vocabulary.bson_types import (
    T_ARRAY,
    T_BINARY,
    T_BOOL,
    T_CODE,
    T_DATE,
    T_DECIMAL,
    T_DOUBLE,
    T_INT32,
    T_INT64,
    T_OBJECT,
    T_OID,
    T_STRING,
    T_TIMESTAMP,
)

from .control import (
    DELTA_OF_DELTA_TYPES,
    INTERLEAVED_ARRAY,
    INTERLEAVED_LEGACY,
    INVALID_SCALE,
    TYPES_128,
    is_interleaved_start,
    is_literal,
    scale_index_for_control,
)
from .errors import BSONColumnError
from .numeric import NUMERIC_64, expand, unzigzag, value_bytes
from .rawbson import check_old_binary, iter_elements, validate_value
from .simple8b.decoding import DECODE_INFO, decode_block, decode_blocks_np
from .type_util import (
    MEMORY_AS_INTEGER,
    SCALE_MULTIPLIER,
    decode_binary,
    decode_double,
    decode_int64,
    decode_int128,
    decode_object_id,
    decode_string,
    encode_binary,
    encode_decimal128,
    encode_double,
    encode_object_id,
    encode_string,
    wrap64,
    wrap128,
)

__all__ = [
    "DEFAULT_MAX_VALUES",
    "Element",
    "decode_elements",
    "decode_with_anchor",
]

DEFAULT_MAX_VALUES: Final = 1 << 22
# Objects rebuilt from interleaved sections are new bytes (repeated scalars are shared).
DEFAULT_MAX_OBJECT_BYTES: Final = 64 << 20

Element = tuple[int, bytes]

_D = struct.Struct("<d")
_I = struct.Struct("<i")
_Q = struct.Struct("<q")


_MIN64: Final = -(1 << 63)
_MAX64: Final = (1 << 63) - 1


def _pack_int32(v: int) -> bytes:
    return _I.pack(((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000)


def _pack_bool(v: int) -> bytes:
    return b"\x01" if v else b"\x00"


def _double_packer(scale: int) -> Callable[[int], bytes]:
    if scale == MEMORY_AS_INTEGER:
        return lambda v: _Q.pack(v)
    mult = SCALE_MULTIPLIER[scale]
    pack = _D.pack
    return lambda v: pack(v / mult)


def _err(msg: str) -> BSONColumnError:
    return BSONColumnError(msg)


class _Stream:
    """Decoding state of one stream (MongoDB's DecodingState)."""

    __slots__ = (
        "dod",
        "dod_enc",
        "enc",
        "is128",
        "lt",
        "lv",
        "qlen",
        "qpos",
        "queue",
        "repeat_elem",
        "s8b_last",
        "scale",
    )

    def __init__(self) -> None:
        self.lt = 0  # type of the last value; 0 = none yet
        self.lv = b""
        self.is128 = False
        self.enc = 0
        self.dod_enc = 0
        self.dod = False
        self.scale = MEMORY_AS_INTEGER
        self.s8b_last: int | None = 0  # what an RLE block repeats
        self.queue: list | None = []
        self.qpos = 0
        self.qlen = 0
        self.repeat_elem: Element | None = None

    def load_literal(self, t: int, v: bytes) -> None:
        self.lt = t
        self.lv = v
        self.s8b_last = 0
        self.scale = MEMORY_AS_INTEGER
        if t in TYPES_128:
            self.is128 = True
            self.dod = False
            if t in (T_STRING, T_CODE):
                self.enc = encode_string(v[4:-1]) or 0
            elif t == T_BINARY:
                self.enc = encode_binary(v[5:]) or 0
            else:
                self.enc = encode_decimal128(v)
            return
        self.is128 = False
        self.dod = t in DELTA_OF_DELTA_TYPES
        if t == T_OID:
            enc = encode_object_id(v)
        elif t in (T_DATE, T_INT64, T_TIMESTAMP):
            enc = _Q.unpack(v)[0]
        elif t == T_BOOL:
            enc = 1 if v[0] else 0
        elif t == T_INT32:
            enc = _I.unpack(v)[0]
        else:
            enc = 0
        if self.dod:
            self.dod_enc = enc
            self.enc = 0
        else:
            self.enc = enc

    def after_interleaved(self, last: Element | None) -> None:
        # MongoDB keeps the last decoded object as the value zero deltas repeat.
        if last is not None:
            self.lt, self.lv = last

    def check_control(self, control: int) -> None:
        scale = scale_index_for_control(control)
        if scale == INVALID_SCALE:
            raise _err("Invalid control byte in BSON Column")
        if self.is128:
            if scale != MEMORY_AS_INTEGER:
                raise _err("Invalid control byte in 128-bit BSON Column")
            return
        if self.lt == T_DOUBLE:
            enc = encode_double(_D.unpack(self.lv)[0], scale)
            if enc is None:
                raise _err("Invalid double encoding in BSON Column")
            self.enc = enc
        elif scale != MEMORY_AS_INTEGER:
            raise _err("Unexpected control for type in BSON Column")
        self.scale = scale

    def _repeat(self) -> Element:
        # one shared tuple for a run of repeats (an RLE block stands for 1920 rows)
        last = self.repeat_elem
        if last is None or last[1] is not self.lv or last[0] != self.lt:
            last = self.repeat_elem = (self.lt, self.lv)
        return last

    def value(self, delta: int | None) -> Element | None:
        """The element for one decoded Simple-8b value (None = skipped row)."""
        if delta is None:
            return None
        lt = self.lt
        if lt == 0:
            raise _err("Delta in BSON Column without a preceding value")
        if self.is128:
            if delta == 0:
                return self._repeat()
            self.enc = enc = wrap128(self.enc + decode_int128(delta))
            lv = self.lv
            if lt in (T_STRING, T_CODE):
                # bytes, not text: MongoDB's BSONColumn does not validate UTF-8
                s = decode_string(enc)
                v = _I.pack(len(s) + 1) + s + b"\x00"
            elif lt == T_BINARY:
                size = _I.unpack_from(lv)[0]
                if size > 16:
                    raise _err("BinData length should not exceed 16 in a delta encoding")
                v = lv[:5] + decode_binary(enc, size)
                if v[4] == 2:
                    check_old_binary(v)
            elif lt == T_DECIMAL:
                v = (enc & ((1 << 128) - 1)).to_bytes(16, "little")
            else:
                raise _err("Invalid delta in 128-bit BSON Column encoding")
            self.lv = v
            return (lt, v)
        if delta == 0 and not self.dod:
            return self._repeat()
        self.enc = enc = wrap64(self.enc + decode_int64(delta))
        if self.dod:
            self.dod_enc = enc = wrap64(self.dod_enc + enc)
        if lt in (T_INT64, T_DATE, T_TIMESTAMP):
            v = _Q.pack(enc)
        elif lt == T_DOUBLE:
            v = _D.pack(decode_double(enc, self.scale))
        elif lt == T_INT32:
            v = _I.pack(((enc + 0x80000000) & 0xFFFFFFFF) - 0x80000000)
        elif lt == T_OID:
            v = decode_object_id(enc, self.lv[4:9])
        elif lt == T_BOOL:
            v = b"\x01" if enc else b"\x00"
        else:
            raise _err("Invalid delta in 64-bit BSON Column encoding")
        self.lv = v
        return (lt, v)

    def values_py(self, values: list[int | None]) -> list[Element | None]:
        """`value` for every entry of a 64-bit numeric control (one tight loop)."""
        lt = self.lt
        enc = self.enc
        denc = self.dod_enc
        dod = self.dod
        last = (lt, self.lv)
        if lt in (T_INT64, T_DATE, T_TIMESTAMP):
            pack = _Q.pack
        elif lt == T_INT32:
            pack = _pack_int32
        elif lt == T_DOUBLE:
            pack = _double_packer(self.scale)
        elif lt == T_BOOL:
            pack = _pack_bool
        else:
            unique = self.lv[4:9]

            def pack(v: int) -> bytes:
                return decode_object_id(v, unique)

        out: list[Element | None] = []
        append = out.append
        for d in values:
            if d is None:
                append(None)
                continue
            if d == 0 and not dod:
                append(last)
                continue
            enc += (d >> 1) ^ -(d & 1)
            if not _MIN64 <= enc <= _MAX64:
                enc = wrap64(enc)
            if dod:
                denc += enc
                if not _MIN64 <= denc <= _MAX64:
                    denc = wrap64(denc)
                last = (lt, pack(denc))
            else:
                last = (lt, pack(enc))
            append(last)
        self.enc = enc
        self.dod_enc = denc
        self.lv = last[1]
        return out

    def values_np(self, zz: np.ndarray, missing: np.ndarray) -> list[Element | None]:
        """Like `value` for every entry of a decoded 64-bit control, vectorised."""
        n = len(zz)
        present = ~missing
        npres = int(np.count_nonzero(present))
        if npres == 0:
            return [None] * n
        lt = self.lt
        if lt == 0:
            raise _err("Delta in BSON Column without a preceding value")
        pz = zz[present] if npres != n else zz
        if lt in NUMERIC_64:
            deltas = unzigzag(pz)
            if not self.dod and not deltas.any():
                elems = [(lt, self.lv)] * npres
            else:
                vals, self.enc, self.dod_enc = expand(deltas, self.enc, self.dod_enc, self.dod)
                chunks = value_bytes(lt, vals, self.scale, self.lv[4:9])
                self.lv = chunks[-1]
                elems = [(lt, c) for c in chunks]
        else:
            if pz.any():
                raise _err("Invalid delta in 64-bit BSON Column encoding")
            elems = [(lt, self.lv)] * npres
        if npres == n:
            return elems  # type: ignore[return-value]
        out: list[Element | None] = [None] * n
        for i, e in zip(np.flatnonzero(present).tolist(), elems):
            out[i] = e
        return out


class _Budget:
    __slots__ = ("bytes_left", "left")

    def __init__(self, max_values: int) -> None:
        self.left = max_values
        self.bytes_left = DEFAULT_MAX_OBJECT_BYTES

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise _err("BSON Column decodes to too many values")

    def take_bytes(self, n: int) -> None:
        self.bytes_left -= n
        if self.bytes_left < 0:
            raise _err("BSON Column decodes to too much data")


_NUMPY_MIN_VALUES: Final = 128  # below this, plain Python decoding is faster


def _control_elements(
    data: bytes, pos: int, end: int, stream: _Stream, budget: _Budget
) -> tuple[list[Element | None], int]:
    """Rows of the Simple-8b control at `pos` for `stream`: (elements, next position)."""
    control = data[pos]
    nblocks = (control & 0x0F) + 1
    size = 8 * nblocks
    if pos + size + 1 >= end:
        raise _err("Control block would overflow buffer")
    stream.check_control(control)
    p = pos + 1
    blocks = [int.from_bytes(data[q : q + 8], "little") for q in range(p, p + size, 8)]
    total = 0
    for block in blocks:
        info = DECODE_INFO[block & 0xFF]
        if info is None:
            raise _err("Invalid Simple-8b selector in BSON Column")
        total += info[0] if isinstance(info, tuple) else (((block >> 4) & 0xF) + 1) * 120
    budget.take(total)
    if not stream.is128 and total >= _NUMPY_MIN_VALUES:
        arr = np.frombuffer(data, dtype="<u8", count=nblocks, offset=p)
        zz, missing, stream.s8b_last = decode_blocks_np(arr, stream.s8b_last, total)
        return stream.values_np(zz, missing), p + size
    prev = stream.s8b_last
    values: list[int | None] = []
    for block in blocks:
        vals = decode_block(block, prev, stream.is128)
        prev = vals[-1]
        values += vals
    stream.s8b_last = prev
    if not stream.is128 and stream.lt in NUMERIC_64:
        return stream.values_py(values), p + size
    value = stream.value
    return [value(d) for d in values], p + size


def _literal(data: bytes, pos: int, end: int) -> tuple[Element, int]:
    t = data[pos]
    if pos + 1 >= end or data[pos + 1] != 0:
        raise _err("Invalid literal in BSON Column")
    vs = pos + 2
    # The literal must be followed by at least the final EOO.
    size = validate_value(t, data, vs, end - 1)
    return (t, data[vs : vs + size]), vs + size


# -- interleaved mode -----------------------------------------------------------------

_ENTER, _SCALAR, _EXIT = 0, 1, 2


def _schema(
    ref: bytes,
    start: int,
    end: int,
    name: bytes,
    t: int,
    arrays: bool,
    entries: list,
    scalars: list,
) -> None:
    entries.append((_ENTER, name, t, end - start == 5))
    for et, ename, vs, ve in iter_elements(ref, start, end):
        if et == T_OBJECT or (arrays and et == T_ARRAY):
            _schema(ref, vs, ve, ename, et, arrays, entries, scalars)
        else:
            entries.append((_SCALAR, ename, len(scalars)))
            scalars.append((et, ref[vs:ve]))
    entries.append((_EXIT,))


_SKIPPED: Final = object()  # value of a stream that is advanced but not decoded


def _control_count(
    data: bytes, pos: int, end: int, stream: _Stream, budget: _Budget
) -> tuple[int, int]:
    """Validate a Simple-8b control and count its values without decoding them."""
    control = data[pos]
    nblocks = (control & 0x0F) + 1
    size = 8 * nblocks
    if pos + size + 1 >= end:
        raise _err("Control block would overflow buffer")
    scale = scale_index_for_control(control)
    if scale == INVALID_SCALE or (scale != MEMORY_AS_INTEGER and stream.lt != T_DOUBLE):
        raise _err("Invalid control byte in BSON Column")
    total = 0
    for q in range(pos + 1, pos + 1 + size, 8):
        block = int.from_bytes(data[q : q + 8], "little")
        info = DECODE_INFO[block & 0xFF]
        if info is None:
            raise _err("Invalid Simple-8b selector in BSON Column")
        total += info[0] if isinstance(info, tuple) else (((block >> 4) & 0xF) + 1) * 120
    budget.take(total)
    return total, pos + 1 + size


class _InterleavedSection:
    """One interleaved section being decoded, row by row.

    Each row takes the next value of every sub-field stream, in reference order; a
    stream that has used up its control block reads the next control byte from the
    shared position. With `wanted`, streams not wanted are only counted, not decoded.
    """

    def __init__(
        self, data: bytes, pos: int, end: int, budget: _Budget, wanted: list[bool] | None = None
    ) -> None:
        control = data[pos]
        self.data = data
        self.end = end
        self.budget = budget
        ref_start = pos + 1
        if ref_start + 4 > end:
            raise _err("Truncated interleaved reference object in BSON Column")
        size = validate_value(T_OBJECT, data, ref_start, end - 1)
        ref = data[ref_start : ref_start + size]
        self.root_type = T_ARRAY if control == INTERLEAVED_ARRAY else T_OBJECT
        arrays = control != INTERLEAVED_LEGACY
        self.entries: list = []
        scalars: list[Element] = []
        _schema(ref, 0, size, b"", self.root_type, arrays, self.entries, scalars)
        if not scalars:
            raise _err("Invalid BSON Column encoding during initialization of interleaved mode")
        self.streams: list[_Stream] = []
        for t, v in scalars:
            st = _Stream()
            st.load_literal(t, v)
            self.streams.append(st)
        self.wanted = wanted
        self.pos = ref_start + size
        if self.pos >= end or data[self.pos] == 0:
            raise _err("BSON Column interleaved encoding should contain at least one object")

    def _next(self, i: int) -> object:
        """Next value of stream i; False when the section ends (only legal for stream 0)."""
        s = self.streams[i]
        if s.qpos < s.qlen:
            s.qpos += 1
            return s.queue[s.qpos - 1] if s.queue is not None else _SKIPPED
        data = self.data
        pos = self.pos
        if pos >= self.end:
            raise _err("Invalid BSON Column encoding has overflowed buffer")
        control = data[pos]
        if control == 0:
            if i != 0:
                raise _err("Interleaved BSON Column streams end unevenly")
            for other in self.streams[1:]:
                if other.qpos < other.qlen:
                    raise _err("Not all BSON Column interleaved decoders are exhausted")
            self.pos = pos + 1
            return False
        if is_literal(control):
            (t, v), self.pos = _literal(data, pos, self.end)
            s.load_literal(t, v)
            s.queue = [(t, v)]
            s.qpos = s.qlen = 1
            self.budget.take(1)
            return (t, v)
        if is_interleaved_start(control):
            raise _err("Invalid control byte in interleaved BSON Column")
        if self.wanted is None or self.wanted[i]:
            # The whole control is materialised now; its values belong to this stream.
            s.queue, self.pos = _control_elements(data, pos, self.end, s, self.budget)
            s.qlen = len(s.queue)
            s.qpos = 1
            return s.queue[0]
        s.qlen, self.pos = _control_count(data, pos, self.end, s, self.budget)
        s.queue = None
        s.qpos = 1
        return _SKIPPED

    def next_values(self) -> list | None:
        """Next row's value of every stream (None at the end of the section)."""
        first = self._next(0)
        if first is False:
            return None
        return [first, *(self._next(i) for i in range(1, len(self.streams)))]

    def assemble(self, vals: list, lo: int = 0, hi: int | None = None) -> Element | None:
        """The object of entries[lo:hi] (an ENTER ... EXIT span) for one row's values."""
        entries = self.entries
        hi = len(entries) if hi is None else hi
        stack: list[list[bytes]] = []
        frames: list[tuple[bytes, int, bool]] = []
        parts: list[bytes] = []
        for k in range(lo, hi):
            entry = entries[k]
            op = entry[0]
            if op == _SCALAR:
                elem = vals[entry[2]]
                if elem is not None:
                    t, v = elem
                    parts.append(bytes((t,)) + entry[1] + b"\x00" + v)
            elif op == _ENTER:
                stack.append(parts)
                frames.append((entry[1], entry[2], entry[3]))
                parts = []
            else:
                name, t, allow_empty = frames.pop()
                parent = stack.pop()
                if parts or allow_empty:
                    body = b"".join(parts)
                    value = _I.pack(len(body) + 5) + body + b"\x00"
                    if not stack:
                        self.budget.take_bytes(len(value))
                        return (t, value)
                    parent.append(bytes((t,)) + name + b"\x00" + value)
                elif not stack:
                    return None
                parts = parent
        raise AssertionError("unbalanced interleaved schema")

    def next_row(self) -> Element | bool | None:
        """The next row's object (None if every field is missing), or False at the end."""
        vals = self.next_values()
        if vals is None:
            return False
        return self.assemble(vals)


# -- the column ---------------------------------------------------------------------------


def _decode(
    column: bytes | bytearray | memoryview,
    max_values: int,
    on_anchor: Callable[[int, int], None] | None = None,
) -> list[Element | None]:
    data = bytes(column)
    end = len(data)
    if end == 0:
        raise _err("BSON Column encoding is empty")
    budget = _Budget(max_values)
    out: list[Element | None] = []
    stream = _Stream()
    pos = 0
    while True:
        if pos >= end:
            raise _err("Invalid BSON Column encoding has overflowed buffer")
        control = data[pos]
        if control == 0:
            if pos + 1 != end:
                raise _err("Final EOO found before reaching end of buffer")
            return out
        if is_literal(control):
            if on_anchor is not None:
                on_anchor(pos, len(out))
            elem, pos = _literal(data, pos, end)
            budget.take(1)
            stream.load_literal(*elem)
            out.append(elem)
        elif is_interleaved_start(control):
            if on_anchor is not None:
                on_anchor(-1, len(out))
            section = _InterleavedSection(data, pos, end, budget)
            last: Element | None = None
            while True:
                row = section.next_row()
                if row is False:
                    break
                budget.take(1)
                out.append(row)  # type: ignore[arg-type]
                last = row  # type: ignore[assignment]
            pos = section.pos
            stream = _Stream()
            stream.after_interleaved(last)
        else:
            elems, pos = _control_elements(data, pos, end, stream, budget)
            out += elems


def decode_elements(
    column: bytes | bytearray | memoryview, max_values: int = DEFAULT_MAX_VALUES
) -> list[Element | None]:
    """Every row of the column: (type, value bytes), or None for a skipped row."""
    return _decode(column, max_values)


def decode_with_anchor(
    column: bytes, max_values: int = DEFAULT_MAX_VALUES
) -> tuple[list[Element | None], int | None, int]:
    """Rows plus the offset and row index of the last top-level literal, if no
    interleaved section follows it (the point from which a builder can be replayed)."""
    anchor: list[int] = [-1, 0]

    def record(pos: int, row: int) -> None:
        anchor[0] = pos
        anchor[1] = row

    rows = _decode(column, max_values, record)
    if anchor[0] < 0:
        return rows, None, 0
    return rows, anchor[0], anchor[1]

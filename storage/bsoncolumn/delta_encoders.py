"""The delta encoders of one stream: `Encoder64` (int32, int64, bool, date, timestamp,
ObjectId and doubles, with MongoDB's double scaling) and `Encoder128` (Decimal128, short
binData and strings), each feeding a Simple-8b builder through its `EncodingState`.

Doubles are the subtle part (`Encoder64._append_double`): every value is scaled by the
smallest power of ten at or above the current scale that makes it an exact integer. If a
new value needs a larger scale, the pending (unwritten) values are re-scaled when that
still fits the current block, otherwise the pending values are flushed and a new control
byte with the larger scale begins. After a block is written, the scale is lowered again
as far as the values still pending allow.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from storage.vocabulary.bson_types import (
    T_ARRAY,
    T_BINARY,
    T_BOOL,
    T_CODE,
    T_CODEWSCOPE,
    T_DATE,
    T_DBPOINTER,
    T_DECIMAL,
    T_DOUBLE,
    T_INT32,
    T_INT64,
    T_NULL,
    T_OBJECT,
    T_OID,
    T_REGEX,
    T_STRING,
    T_SYMBOL,
    T_TIMESTAMP,
    T_UNDEFINED,
)

from .control import DELTA_OF_DELTA_TYPES
from .errors import BSONColumnError
from .simple8b.builder import Simple8bBuilder
from .type_util import (
    MEMORY_AS_INTEGER,
    decode_double,
    decode_int64,
    encode_binary,
    encode_decimal128,
    encode_double,
    encode_int64,
    encode_int128,
    encode_object_id,
    encode_string,
    scale_and_encode_double,
    wrap64,
    wrap128,
)

if TYPE_CHECKING:
    from .encoding import EncodingState

__all__ = ["Encoder64", "Encoder128"]

_D = struct.Struct("<d")
_I = struct.Struct("<i")
_Q = struct.Struct("<q")

_NOT_DELTA_ENCODABLE: Final = frozenset(
    {T_REGEX, T_DBPOINTER, T_CODEWSCOPE, T_SYMBOL, T_OBJECT, T_ARRAY}
)


class Encoder64:
    """Deltas of values that map to 64-bit integers (all non-128-bit types)."""

    __slots__ = ("last_in_prev_block", "prev_delta", "prev_encoded", "s8b", "scale")

    def __init__(self) -> None:
        self.s8b = Simple8bBuilder(False)
        self.prev_delta = 0
        self.prev_encoded = 0
        self.last_in_prev_block = 0.0
        self.scale = MEMORY_AS_INTEGER

    def clone(self) -> Encoder64:
        c = Encoder64.__new__(Encoder64)
        c.s8b = self.s8b.clone()
        c.prev_delta = self.prev_delta
        c.prev_encoded = self.prev_encoded
        c.last_in_prev_block = self.last_in_prev_block
        c.scale = self.scale
        return c

    def state_key(self) -> tuple:
        return (
            64,
            self.s8b.state_key(),
            self.prev_delta,
            self.prev_encoded,
            _Q.unpack(_D.pack(self.last_in_prev_block))[0],
            self.scale,
        )

    def initialize(self, t: int, v: bytes) -> None:
        if t == T_DOUBLE:
            x = _D.unpack(v)[0]
            self.last_in_prev_block = x
            self.prev_encoded, self.scale = scale_and_encode_double(x, 0)
        elif t == T_OID:
            self.prev_encoded = encode_object_id(v)

    def append_delta(self, st: EncodingState, t: int, v: bytes, prev: bytes) -> bool:
        if t == T_DOUBLE:
            return self._append_double(st, _D.unpack(v)[0], _D.unpack(prev)[0])
        possible = True
        value = 0
        if t == T_INT32:
            value = _I.unpack(v)[0] - _I.unpack(prev)[0]
        elif t in (T_INT64, T_DATE, T_TIMESTAMP):
            value = wrap64(_Q.unpack(v)[0] - _Q.unpack(prev)[0])
        elif t == T_OID:
            if v[4:9] != prev[4:9]:
                possible = False
            else:
                cur = encode_object_id(v)
                value = wrap64(cur - self.prev_encoded)
                self.prev_encoded = cur
        elif t == T_BOOL:
            value = (v[0] != 0) - (prev[0] != 0)
        elif t in (T_UNDEFINED, T_NULL):
            value = 0
        elif t in _NOT_DELTA_ENCODABLE:
            possible = False
        else:  # MinKey/MaxKey are always equal to their previous value
            raise BSONColumnError(f"Unexpected BSON type {t} for delta encoding")
        if t in DELTA_OF_DELTA_TYPES:
            current = value
            value = wrap64(current - self.prev_delta)
            self.prev_delta = current
        if possible:
            return self.s8b.append(encode_int64(value), st.write_block)
        return False

    def _try_rescale_pending(self, encoded: int, new_scale: int) -> Simple8bBuilder | None:
        prev = encode_double(self.last_in_prev_block, self.scale)
        assert prev is not None
        prev_rescaled = encode_double(self.last_in_prev_block, new_scale)
        if prev_rescaled is None:
            return None
        wrote = False

        def write(_block: int) -> None:
            nonlocal wrote
            wrote = True

        builder = Simple8bBuilder(False)
        builder.initialize_rle_from(self.s8b)
        for pending in self.s8b.pending_values():
            if pending is None:
                builder.skip(write)
                continue
            prev = wrap64(prev + decode_int64(pending))
            rescaled = encode_double(decode_double(prev, self.scale), new_scale)
            if rescaled is None:
                return None
            if not builder.append(encode_int64(wrap64(rescaled - prev_rescaled)), write) or wrote:
                return None
            prev_rescaled = rescaled
        if not builder.append(encode_int64(wrap64(encoded - prev_rescaled)), write) or wrote:
            return None
        return builder

    def _append_double(self, st: EncodingState, value: float, previous: float) -> bool:
        encoded, scale = scale_and_encode_double(value, self.scale)
        if scale != self.scale:
            # Either re-scale what is pending to the larger scale, or close the block run.
            rescaled = self._try_rescale_pending(encoded, scale)
            if rescaled is not None:
                self.s8b = rescaled
                self.prev_encoded = encoded
                self.scale = scale
                return True
            self.s8b.flush(st.write_block)
            if st.ctrl is not None:
                st.record(st.ctrl, len(st.buf) - st.ctrl)
            st.ctrl = None
            self.prev_encoded, prev_scale = scale_and_encode_double(previous, scale)
            if scale != prev_scale:
                encoded, scale = scale_and_encode_double(value, prev_scale)
                self.prev_encoded, prev_scale = scale_and_encode_double(previous, scale)
            self.scale = scale

        before = len(st.buf)
        if not self.s8b.append(encode_int64(wrap64(encoded - self.prev_encoded)), st.write_block):
            return False
        if len(st.buf) == before:
            self.prev_encoded = encoded
            return True

        self._restart_after_block(st)
        return True

    def _restart_after_block(self, st: EncodingState) -> None:
        """A block was written: restart from the lowest scale and re-append what is pending."""
        prev_scale = self.scale
        self.prev_encoded, self.scale = scale_and_encode_double(self.last_in_prev_block, 0)
        old = self.s8b
        self.s8b = Simple8bBuilder(False)
        self.s8b.initialize_rle_from(old)
        prev = self.last_in_prev_block
        prev_encoded = encode_double(prev, prev_scale)
        assert prev_encoded is not None
        for pending in old.pending_values():
            if pending is not None:
                prev_encoded = wrap64(prev_encoded + decode_int64(pending))
                val = decode_double(prev_encoded, prev_scale)
                self._append_double(st, val, prev)
                prev = val
            else:
                self.s8b.skip(st.write_block)


class Encoder128:
    """Deltas of decimal128, binData and strings/code of at most 16 bytes."""

    __slots__ = ("prev_encoded", "s8b")

    def __init__(self) -> None:
        self.s8b = Simple8bBuilder(True)
        self.prev_encoded: int | None = None

    def clone(self) -> Encoder128:
        c = Encoder128.__new__(Encoder128)
        c.s8b = self.s8b.clone()
        c.prev_encoded = self.prev_encoded
        return c

    def state_key(self) -> tuple:
        return (128, self.s8b.state_key(), self.prev_encoded)

    def initialize(self, t: int, v: bytes) -> None:
        if t in (T_STRING, T_CODE):
            self.prev_encoded = encode_string(v[4:-1])
        elif t == T_BINARY:
            self.prev_encoded = encode_binary(v[5:])
        elif t == T_DECIMAL:
            self.prev_encoded = encode_decimal128(v)

    def _append_encoded(self, st: EncodingState, encoded: int) -> bool:
        # A zero after an unencodable literal would read as a repeat of that literal.
        if self.prev_encoded is not None or encoded != 0:
            delta = wrap128(encoded - (self.prev_encoded or 0))
            appended = self.s8b.append(encode_int128(delta), st.write_block)
            self.prev_encoded = encoded
            return appended
        return False

    def append_delta(self, st: EncodingState, t: int, v: bytes, prev: bytes) -> bool:
        if t in (T_STRING, T_CODE):
            encoded = encode_string(v[4:-1])
            if encoded is not None:
                return self._append_encoded(st, encoded)
            return False
        if t == T_BINARY:
            # Only same length and subtype: a length change cannot be told from leading zeros.
            if v[:5] != prev[:5]:
                return False
            encoded = encode_binary(v[5:])
            if encoded is not None:
                return self._append_encoded(st, encoded)
            return False
        if t == T_DECIMAL:
            return self._append_encoded(st, encode_decimal128(v))
        raise BSONColumnError(f"Unexpected BSON type {t} for 128-bit delta encoding")

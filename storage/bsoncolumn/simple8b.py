"""Simple-8b blocks as MongoDB writes them: selector tables, the greedy builder, decoders.

A block is a little-endian uint64. Its low 4 bits are the selector:

    selector        0 | 1  2  3  4  5  6 7 8 9 10 11 12 13 14 | 15
    values          - |60 30 20 15 12 10 8 7 6  5  4  3  2  1 | RLE
    bits per value  - | 1  2  3  4  5  6 7 8 10 12 15 20 30 60 |

Selectors 7 and 8 leave 4 bits unused; bits 4-7 then hold an *extension*: 0 keeps the
plain meaning, otherwise the block is "seven" (extension 1-9: each slot is a 4-bit
trailing-zero count + value bits), "eight small" (1-7: 4-bit count of trailing zero
nibbles) or "eight large" (8-13: 5-bit count of nibbles). Selector 15 repeats the last
value of the previous block (ext+1)*120 times. A slot of all ones is a missing value.

`Simple8bBuilder` is a faithful port of MongoDB's greedy `Simple8bBuilder` (pending
values are buffered until the next one no longer fits, then the largest block without
unused slots is written; runs of one value after a written block become RLE). Its
output decides byte-identity, so it follows the original's order of checks exactly.

Decoding: `decode_block` (one block, pure Python) and `decode_blocks_np` (many blocks
at once with numpy: selector-wise unpacking with shifts and masks, RLE by forward fill).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from .errors import BSONColumnError
from .type_util import MASK64, MASK128

__all__ = [
    "RLE_SELECTOR",
    "Simple8bBuilder",
    "DECODE_INFO",
    "block_count",
    "decode_block",
    "decode_blocks_np",
    "pending_columns_np",
    "run_ends",
    "unpack_blocks_np",
]

RLE_SELECTOR: Final = 15
RLE_MULTIPLIER: Final = 120
MAX_RLE_COUNT: Final = 16

# Extension types, in the priority order the builder tries them.
BASE, SEVEN, EIGHT_SMALL, EIGHT_LARGE = 0, 1, 2, 3
_DATA_BITS: Final = (60, 56, 56, 56)
_TZ_BITS: Final = (0, 4, 4, 5)
_MIN_DATA_BITS: Final = (1, 2, 4, 4)
_MIN_SELECTOR: Final = (1, 1, 1, 8)
_MAX_SELECTOR: Final = (14, 9, 7, 13)
_INTS: Final = (
    (0, 60, 30, 20, 15, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1, 0),
    (0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0),
    (0, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0),
    (0, 0, 0, 0, 0, 0, 0, 0, 6, 5, 4, 3, 2, 1, 0, 0),
)
_BITS: Final = (
    (64, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 60, 64),
    (64, 2, 3, 4, 5, 7, 10, 14, 24, 52, 64, 64, 64, 64, 64, 64),
    (64, 4, 5, 7, 10, 14, 24, 52, 0, 0, 64, 64, 64, 64, 64, 64),
    (64, 0, 0, 0, 0, 0, 0, 0, 4, 6, 9, 13, 23, 51, 64, 64),
)


def _selector_for_count(n: int, ext: int) -> int:
    ints = _INTS[ext]
    for idx in range(_MIN_SELECTOR[ext], _MAX_SELECTOR[ext]):
        if n >= ints[idx]:
            return idx
    return _MAX_SELECTOR[ext]


# _SEL_FOR_COUNT[ext][n]: selector index of the largest block without unused slots for n
# pending values.
_SEL_FOR_COUNT: Final = tuple(
    tuple(_selector_for_count(n, ext) for n in range(61)) for ext in range(4)
)


def _word_layout(ext: int, idx: int) -> tuple[int, int, int, int, int]:
    """(base selector, values, slot width, first shift, word header) for writing a block."""
    base_sel = idx if ext == BASE else (7 if ext == SEVEN else 8)
    first = 4 + (4 if base_sel in (7, 8) else 0)
    width = _BITS[ext][idx] + _TZ_BITS[ext]
    header = base_sel | ((idx << 4) if ext != BASE else 0)
    return base_sel, _INTS[ext][idx], width, first, header


_LAYOUT: Final = tuple(tuple(_word_layout(ext, idx) for idx in range(16)) for ext in range(4))

# A pending value: (value or None for a skip, bits for base/seven/eight-small/eight-large,
# trailing zeros stored for seven/eight-small/eight-large).
Pending = tuple[int | None, int, int, int, int, int, int, int]
_SKIP: Final[Pending] = (None, 0, 0, 0, 0, 0, 0, 0)
_SKIP_FIT_BITS: Final = _MIN_DATA_BITS

BlockWriter = Callable[[int], None]


def _count_bits(v: int, is128: bool) -> int:
    # Bits needed so that the value is not all ones (all ones marks a skip). For 128-bit
    # values with a non-zero high half MongoDB counts the plain bit length.
    if is128 and v >> 64:
        return v.bit_length()
    return (v + 1).bit_length()


def _pending_value(v: int, is128: bool) -> Pending | None:
    if v == (MASK128 if is128 else MASK64):
        return None
    tz = (v & -v).bit_length() - 1 if v else 0
    bits = _count_bits(v, is128)
    t7 = tz if tz < 15 else 15
    m7 = bits - t7
    t8s = (tz if tz < 60 else 60) & ~3
    m8s = bits - t8s
    t8l = (tz if tz < 124 else 124) & ~3
    m8l = bits - t8l
    # A value whose stored bits and zero count would both be all ones looks like a skip.
    if tz == 15:
        m7 = _count_bits(v >> tz, is128)
    elif tz == 60:
        m8s = _count_bits(v >> tz, is128)
    if is128 and tz == 124:
        m8l = _count_bits(v >> tz, is128)
    if bits > 60 and m7 + 4 > 56 and m8s + 4 > 56 and m8l + 5 > 56:
        return None
    return (v, bits, m7, m8s, m8l, t7, t8s, t8l)


def _bit_length_np(x: np.ndarray) -> np.ndarray:
    """Exact bit length of uint64 values (frexp is exact below 2**53, so split halves)."""
    hi = (x >> np.uint64(32)).astype(np.float64)
    lo = (x & np.uint64(0xFFFFFFFF)).astype(np.float64)
    return np.where(hi > 0, 32 + np.frexp(hi)[1], np.frexp(lo)[1]).astype(np.int64)


def pending_columns_np(
    v: np.ndarray,
) -> tuple[list[Pending | None], tuple[list[int], list[int], list[int], list[int]]]:
    """Pending tuples and the four bit-count columns (61 where not storable)."""
    return _pending_np(v)


def _pending_np(
    v: np.ndarray,
) -> tuple[list[Pending | None], tuple[list[int], list[int], list[int], list[int]]]:
    one = np.uint64(1)
    nz = v != 0
    low = v & (~v + one)
    tz = np.where(nz, np.frexp(low.astype(np.float64))[1] - 1, 0).astype(np.int64)
    bits = _bit_length_np(v + one)
    t7 = np.minimum(tz, 15)
    m7 = bits - t7
    t8 = np.minimum(tz, 60) & ~3
    m8 = bits - t8
    if (tz == 15).any():
        m7 = np.where(tz == 15, _bit_length_np((v >> np.uint64(15)) + one), m7)
    m8s = m8
    if (tz == 60).any():
        m8s = np.where(tz == 60, _bit_length_np((v >> np.uint64(60)) + one), m8)
    storable = (v != np.uint64(MASK64)) & ~(
        (bits > 60) & (m7 + 4 > 56) & (m8s + 4 > 56) & (m8 + 5 > 56)
    )
    t8l = t8.tolist()
    b0, b1, b2, b3 = bits.tolist(), m7.tolist(), m8s.tolist(), m8.tolist()
    out: list[Pending | None] = list(zip(v.tolist(), b0, b1, b2, b3, t7.tolist(), t8l, t8l))
    if not storable.all():
        for k in np.flatnonzero(~storable).tolist():
            out[k] = None
            b0[k] = b1[k] = b2[k] = b3[k] = 61
    return out, (b0, b1, b2, b3)


def run_ends(v: np.ndarray) -> list[int]:
    """For each index, the index just past its run of equal consecutive values."""
    n = len(v)
    if not n:
        return []
    change = np.flatnonzero(v[1:] != v[:-1]) + 1
    bounds = np.append(change, n)
    lengths = np.diff(np.concatenate(([0], bounds)))
    return np.repeat(bounds, lengths).tolist()


class Simple8bBuilder:
    """Greedy Simple-8b encoder with RLE (port of MongoDB's `Simple8bBuilder`)."""

    __slots__ = (
        "curr_max",
        "is128",
        "last",
        "last_valid_ext",
        "pending",
        "possible",
        "rle_count",
    )

    def __init__(self, is128: bool = False) -> None:
        self.is128 = is128
        self.rle_count = 0
        # Last value of the previous block for RLE; None means "skip". Starts at 0.
        self.last: int | None = 0
        self.curr_max = list(_MIN_DATA_BITS)
        self.last_valid_ext = BASE
        self.possible = [True, True, True, True]
        self.pending: list[Pending] = []

    def clone(self) -> Simple8bBuilder:
        c = Simple8bBuilder.__new__(Simple8bBuilder)
        c.is128 = self.is128
        c.rle_count = self.rle_count
        c.last = self.last
        c.curr_max = self.curr_max[:]
        c.last_valid_ext = self.last_valid_ext
        c.possible = self.possible[:]
        c.pending = self.pending[:]
        return c

    def state_key(self) -> tuple:
        """Everything that influences future output (for equality checks in tests)."""
        return (
            self.rle_count,
            self.last,
            tuple(self.curr_max),
            self.last_valid_ext,
            tuple(self.possible),
            tuple(self.pending),
        )

    # -- public operations ------------------------------------------------------------

    def rle_possible(self) -> bool:
        return not self.pending or self.rle_count != 0

    def append(self, value: int, write: BlockWriter) -> bool:
        """Append a value; False (and no change) when it cannot be stored in Simple-8b."""
        if not self.pending or self.rle_count:
            if self.last == value:
                self.rle_count += 1
                self.last_valid_ext = BASE
                self.possible = [True, True, True, True]
                return True
            self._rle_terminate(write)
        return self._append_value(value, True, write)

    def skip(self, write: BlockWriter) -> None:
        if not self.pending or self.rle_count:
            if self.last is None:
                self.rle_count += 1
                self.last_valid_ext = BASE
                self.possible = [True, True, True, True]
                return
            self._rle_terminate(write)
        self._append_skip(True, write)

    def flush(self, write: BlockWriter) -> None:
        self._rle_terminate(write)
        if self.pending:
            while self.pending:
                write(self._encode_largest(self.last_valid_ext))
            self.rle_count = 0

    def initialize_rle_from(self, other: Simple8bBuilder) -> None:
        if other.rle_possible():
            self.last = other.last

    def pending_values(self) -> list[int | None]:
        """Values not yet written, in order (an ongoing RLE run first)."""
        out: list[int | None] = [self.last] * self.rle_count
        out.extend(p[0] for p in self.pending)
        return out

    # -- internals --------------------------------------------------------------------

    def _fits(self, b0: int, b1: int, b2: int, b3: int) -> bool:
        n = len(self.pending) + 1
        possible = self.possible
        cm = self.curr_max
        if possible[0]:
            if (cm[0] if cm[0] > b0 else b0) * n <= 60:
                self.last_valid_ext = 0
                return True
            possible[0] = False
        if possible[1]:
            if ((cm[1] if cm[1] > b1 else b1) + 4) * n <= 56:
                self.last_valid_ext = 1
                return True
            possible[1] = False
        if possible[2]:
            if ((cm[2] if cm[2] > b2 else b2) + 4) * n <= 56:
                self.last_valid_ext = 2
                return True
            possible[2] = False
        if possible[3]:
            if ((cm[3] if cm[3] > b3 else b3) + 5) * n <= 56:
                self.last_valid_ext = 3
                return True
            possible[3] = False
        return False

    def _push(self, pv: Pending) -> None:
        self.pending.append(pv)
        cm = self.curr_max
        if pv[1] > cm[0]:
            cm[0] = pv[1]
        if pv[2] > cm[1]:
            cm[1] = pv[2]
        if pv[3] > cm[2]:
            cm[2] = pv[3]
        if pv[4] > cm[3]:
            cm[3] = pv[4]

    def extend(
        self,
        values: list[int | None],
        pendings: list[Pending | None],
        run_end: list[int],
        write: BlockWriter,
        start: int = 0,
        end: int | None = None,
        bits: tuple[list[int], list[int], list[int], list[int]] | None = None,
        after_write: Callable[[int], bool] | None = None,
        before_write: Callable[[int], None] | None = None,
    ) -> int:
        """`append`/`skip` for values[start:end] (None = skip) with precomputed pending
        tuples (None = not storable) and, for each index, the end of its run of equal
        values. With `bits` (per-index bit counts of the four selector types, above 60
        for skips and unstorable values) runs of values that just join the pending block
        are taken in one step.

        Stops before the first value that cannot be stored, or just after a value whose
        append wrote a block when `after_write(i)` returns False; returns the index
        reached. Produces exactly the state and blocks of the one-by-one calls.
        `before_write(i)` is called before appending value i in any way that may write.
        """
        n = len(values) if end is None else end
        i = start
        written = 0
        if after_write is not None:
            inner = write

            def write(block: int) -> None:
                nonlocal written
                written += 1
                inner(block)

        b0s = bits[0] if bits is not None else None
        while i < n:
            v = values[i]
            if v is None:
                self.skip(write)
                i += 1
                if written:
                    written = 0
                    if not after_write(i - 1):  # type: ignore[misc]
                        return i
                continue
            pending = self.pending
            if not pending or self.rle_count:
                if self.last == v:
                    # a run of repeats continues (or starts) the RLE count
                    j = run_end[i]
                    if j > n:
                        j = n
                    self.rle_count += j - i
                    self.last_valid_ext = BASE
                    self.possible = [True, True, True, True]
                    i = j
                    continue
                if before_write is not None:
                    before_write(i)
                self._rle_terminate(write)  # (blocks written here count for value i)
            pv = pendings[i]
            if pv is None:
                return i
            if b0s is not None and pending and self.possible[0] and not written:
                # values joining the pending block under the plain selectors
                cm = self.curr_max
                cm0 = cm[0]
                cnt = len(pending)
                k = i
                while k < n:
                    b = b0s[k]
                    if b > cm0:
                        if b * (cnt + 1) > 60:
                            break
                        cm0 = b
                    elif cm0 * (cnt + 1) > 60:
                        break
                    cnt += 1
                    k += 1
                if k > i:
                    pending.extend(pendings[i:k])  # type: ignore[arg-type]
                    cm[0] = cm0
                    _, b1s, b2s, b3s = bits  # type: ignore[misc]
                    m = max(b1s[i:k])
                    if m > cm[1]:
                        cm[1] = m
                    m = max(b2s[i:k])
                    if m > cm[2]:
                        cm[2] = m
                    m = max(b3s[i:k])
                    if m > cm[3]:
                        cm[3] = m
                    self.last_valid_ext = 0
                    i = k
                    continue
            if before_write is not None:
                before_write(i)
            self.append_pending_nocheck(pv, write)
            i += 1
            if written:
                written = 0
                if not after_write(i - 1):  # type: ignore[misc]
                    return i
        return n

    def append_pending(self, pv: Pending, write: BlockWriter) -> None:
        """`append(pv[0])` with its pending tuple already computed."""
        value = pv[0]
        if not self.pending or self.rle_count:
            if self.last == value:
                self.rle_count += 1
                self.last_valid_ext = BASE
                self.possible = [True, True, True, True]
                return
            self._rle_terminate(write)
        self.append_pending_nocheck(pv, write)

    def append_pending_nocheck(self, pv: Pending, write: BlockWriter) -> None:
        """Second half of `append_pending` (the RLE check is done)."""
        pending = self.pending
        cm = self.curr_max
        b0 = pv[1]
        if self.possible[0] and (cm[0] if cm[0] > b0 else b0) * (len(pending) + 1) <= 60:
            self.last_valid_ext = 0
            pending.append(pv)
            if b0 > cm[0]:
                cm[0] = b0
            if pv[2] > cm[1]:
                cm[1] = pv[2]
            if pv[3] > cm[2]:
                cm[2] = pv[3]
            if pv[4] > cm[3]:
                cm[3] = pv[4]
        else:
            self._append_pending(pv, True, write)

    def _append_value(self, value: int, try_rle: bool, write: BlockWriter) -> bool:
        pv = _pending_value(value, self.is128)
        if pv is None:
            return False
        return self._append_pending(pv, try_rle, write)

    def _append_pending(self, pv: Pending, try_rle: bool, write: BlockWriter) -> bool:
        value = pv[0]
        if self._fits(pv[1], pv[2], pv[3], pv[4]):
            self._push(pv)
            return True
        last_pending = self.pending[-1][0]
        while True:
            write(self._encode_largest(self.last_valid_ext))
            if self._fits(pv[1], pv[2], pv[3], pv[4]):
                break
        if try_rle and not self.pending and last_pending == value:
            self.rle_count = 1
            self.last = last_pending
            self.last_valid_ext = BASE
            self.possible = [True, True, True, True]
        else:
            self._push(pv)
        return True

    def _append_skip(self, try_rle: bool, write: BlockWriter) -> None:
        if self.pending:
            last_is_skip = self.pending[-1][0] is None
            if not self._fits(*_SKIP_FIT_BITS):
                write(self._encode_largest(self.last_valid_ext))
                self.last_valid_ext = BASE
            if not self.pending and last_is_skip and try_rle:
                self.rle_count = 1
                self.last = None
                return
        self.pending.append(_SKIP)

    def _rle_terminate(self, write: BlockWriter) -> None:
        count = self.rle_count // RLE_MULTIPLIER
        if count >= 1:
            while count > MAX_RLE_COUNT:
                write(RLE_SELECTOR | ((MAX_RLE_COUNT - 1) << 4))
                self.rle_count -= RLE_MULTIPLIER * MAX_RLE_COUNT
                count -= MAX_RLE_COUNT
            write(RLE_SELECTOR | ((count - 1) << 4))
            self.rle_count -= RLE_MULTIPLIER * count
        while self.rle_count > 0:
            if self.last is None:
                self._append_skip(False, write)
            else:
                self._append_value(self.last, False, write)
            self.rle_count -= 1
        self.last = 0
        if not self.pending:
            self.last_valid_ext = BASE
            self.possible = [True, True, True, True]

    def _encode_largest(self, ext: int) -> int:
        pending = self.pending
        idx = _SEL_FOR_COUNT[ext][len(pending) if len(pending) < 60 else 60]
        _base, ints, width, shift, word = _LAYOUT[ext][idx]
        mask = (1 << width) - 1
        if ext == BASE:
            for i in range(ints):
                v = pending[i][0]
                word |= (mask if v is None else v) << shift
                shift += width
        elif ext == SEVEN:
            for i in range(ints):
                p = pending[i]
                v = p[0]
                if v is None:
                    slot = mask
                else:
                    tz = p[5]
                    slot = tz | ((v >> tz) << 4)
                word |= slot << shift
                shift += width
        else:
            tzbits = _TZ_BITS[ext]
            for i in range(ints):
                p = pending[i]
                v = p[0]
                if v is None:
                    slot = mask
                else:
                    nib = p[4 + ext] >> 2
                    slot = nib | ((v >> (nib << 2)) << tzbits)
                word |= slot << shift
                shift += width
        del pending[:ints]
        cm = list(_MIN_DATA_BITS)
        for p in pending:
            if p[1] > cm[0]:
                cm[0] = p[1]
            if p[2] > cm[1]:
                cm[1] = p[2]
            if p[3] > cm[2]:
                cm[2] = p[3]
            if p[4] > cm[3]:
                cm[3] = p[4]
        self.curr_max = cm
        self.possible = [True, True, True, True]
        return word & MASK64


# -- decoding ---------------------------------------------------------------------------

# For each low byte of a block (selector + extension nibble): None when invalid, "rle" for
# RLE, else (values, slot width, first shift, slot mask, count bits, count mask, count
# multiplier). Slots are read while the next one fits in 64 bits, like MongoDB's iterator.
_RLE: Final = "rle"


def _decode_info(low: int) -> tuple[int, int, int, int, int, int, int] | str | None:
    selector = low & 0xF
    nibble = low >> 4
    if selector == 0:
        return None
    if selector == RLE_SELECTOR:
        return _RLE
    ext = BASE
    ext_bits = 0
    if selector in (7, 8):
        table = (
            (0, 1, 1, 1, 1, 1, 1, 1, 1, 1, None, None, None, None, None, None),
            (0, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, None, None),
        )[selector - 7]
        e = table[nibble]
        if e is None:
            return None
        ext = e
        if ext != BASE:
            selector = nibble
        ext_bits = 4
    cbits = _TZ_BITS[ext]
    width = _BITS[ext][selector] + cbits
    mask = (1 << width) - 1
    cmask = (1 << cbits) - 1
    mult = (0, 1, 4, 4)[ext]
    shift = 4 + ext_bits
    n = 0
    s = shift
    while True:
        n += 1
        s += width
        if s + width > 64:
            break
    return (n, width, shift, mask, cbits, cmask, mult)


DECODE_INFO: Final = tuple(_decode_info(low) for low in range(256))


def block_count(block: int) -> int:
    """Number of values (skips included) in one block; raises on an invalid selector."""
    info = DECODE_INFO[block & 0xFF]
    if info is None:
        raise BSONColumnError("Invalid Simple-8b selector in BSON Column")
    if info is _RLE:
        return (((block >> 4) & 0xF) + 1) * RLE_MULTIPLIER
    return info[0]  # type: ignore[index]


def decode_block(block: int, prev: int | None, is128: bool) -> list[int | None]:
    """Values of one block; `prev` is the value an RLE block repeats."""
    info = DECODE_INFO[block & 0xFF]
    if info is None:
        raise BSONColumnError("Invalid Simple-8b selector in BSON Column")
    if info is _RLE:
        return [prev] * ((((block >> 4) & 0xF) + 1) * RLE_MULTIPLIER)
    n, width, shift, mask, cbits, cmask, mult = info  # type: ignore[misc]
    out: list[int | None] = []
    append = out.append
    if not cbits:
        for _ in range(n):
            slot = (block >> shift) & mask
            append(None if slot == mask else slot)
            shift += width
        return out
    vmask = MASK128 if is128 else MASK64
    for _ in range(n):
        slot = (block >> shift) & mask
        if slot == mask:
            append(None)
        else:
            zeros = (slot & cmask) * mult
            if not is128:
                zeros &= 63
            append(((slot >> cbits) << zeros) & vmask)
        shift += width
    return out


# -- vectorised decoding -------------------------------------------------------------------
#
# Each output value is located by (block, slot): its bits are found through per-low-byte
# tables of slot shifts and masks, so decoding is a fixed number of whole-array operations
# whatever the mix of selectors. An RLE block's values point at the last slot of the
# nearest earlier non-RLE block (of the same segment), or at a sentinel zero.

_MAX_SLOTS: Final = 60
_SENTINEL_BLOCK: Final = 14  # selector 14, one 60-bit slot holding 0


def _np_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # int64 columns: valid, slots, rle, first shift, slot width, extended (trailing zeros)
    tab = np.zeros((256, 6), dtype=np.int64)
    masks = np.zeros(256, dtype=np.uint64)
    ext = np.zeros((256, 3), dtype=np.uint64)  # count bits, count mask, multiplier
    for low, info in enumerate(DECODE_INFO):
        if info is None:
            continue
        tab[low, 0] = 1
        if info is _RLE:
            tab[low, 2] = 1
            continue
        n, width, shift, mask, cb, cm, mu = info  # type: ignore[misc]
        tab[low, 1] = n
        tab[low, 3] = shift
        tab[low, 4] = width
        tab[low, 5] = 1 if cb else 0
        masks[low] = mask
        ext[low] = (cb, cm, mu)
    return tab, masks, ext


_NP_TAB, _NP_MASK, _NP_EXT = _np_tables()
_U63 = np.uint64(63)
_U4 = np.uint64(4)
_U15 = np.uint64(15)
_UFF = np.uint64(0xFF)


def unpack_blocks_np(
    blocks: np.ndarray, segments: np.ndarray | None = None, max_values: int = 1 << 62
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Values (uint64) and missing flags of 64-bit blocks, which values repeat the
    sentinel (None when none do), and the value count of each block.

    An RLE block repeats the last slot of the latest earlier non-RLE block of its
    segment, or a sentinel 0 when there is none. `segments` (non-decreasing, one per
    block) restarts that search, as a literal does. Raises BSONColumnError on an invalid
    selector or when there would be more than `max_values` values.
    """
    if len(blocks) <= _SMALL_BLOCKS:
        return _unpack_small(blocks, segments, max_values)
    low = blocks.view(np.uint8)[::8] if blocks.dtype.str == "<u8" else (blocks & _UFF)
    tab = _NP_TAB[low]
    if not tab[:, 0].all():
        raise BSONColumnError("Invalid Simple-8b selector in BSON Column")
    counts = tab[:, 1]
    sentinel = None
    nb = len(blocks)
    if tab[:, 2].any():
        # An RLE block reads the last slot of its source block again and again.
        is_rle = tab[:, 2].astype(bool)
        counts = np.where(
            is_rle, (((blocks >> _U4) & _U15).astype(np.int64) + 1) * RLE_MULTIPLIER, counts
        )
        idx = np.arange(nb)
        last_nr = np.maximum.accumulate(np.where(is_rle, -1, idx))
        if segments is not None:
            has_src = last_nr >= np.searchsorted(segments, segments, side="left")
        else:
            has_src = last_nr >= 0
        src = np.where(is_rle, np.where(has_src, last_nr, nb), idx)
        low = np.append(low, np.uint8(_SENTINEL_BLOCK))[src]
        blocks = np.append(blocks, np.uint64(_SENTINEL_BLOCK))[src]
        tab = _NP_TAB[low]
        shift0 = tab[:, 3] + np.where(is_rle, (tab[:, 1] - 1) * tab[:, 4], 0)
        width = np.where(is_rle, 0, tab[:, 4])
        if not has_src.all() and (src == nb).any():
            sentinel = np.repeat(src == nb, counts)
    else:
        shift0 = tab[:, 3]
        width = tab[:, 4]
    ends = np.cumsum(counts)
    total = int(ends[-1]) if nb else 0
    if total > max_values:
        raise BSONColumnError("BSON Column decodes to too many values")
    starts = ends - counts
    w = np.repeat(width.astype(np.uint64), counts)
    shifts = np.repeat((shift0 - starts * width).astype(np.uint64), counts)
    shifts += np.arange(total, dtype=np.uint64) * w
    mask = np.repeat(_NP_MASK[low], counts)
    vals = (np.repeat(blocks, counts) >> shifts) & mask
    missing = vals == mask
    ext_blocks = tab[:, 5]
    if ext_blocks.any():
        is_ext = np.repeat(ext_blocks.astype(bool), counts)
        e = np.flatnonzero(is_ext)
        params = np.repeat(_NP_EXT[low], counts, axis=0)[e]
        ve = vals[e]
        zeros = ((ve & params[:, 1]) * params[:, 2]) & _U63
        vals[e] = (ve >> params[:, 0]) << zeros
    return vals, missing, sentinel, counts


_SMALL_BLOCKS = 40  # below this, block metadata is cheaper in plain Python


def _unpack_small(
    blocks: np.ndarray, segments: np.ndarray | None, max_values: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """`unpack_blocks_np` with per-block bookkeeping in Python (few blocks)."""
    bl = blocks.tolist()
    segs = segments.tolist() if segments is not None else None
    counts: list[int] = []
    src_blocks: list[int] = []
    shift0: list[int] = []
    width: list[int] = []
    masks: list[int] = []
    ext: list[int] = []
    sentinel_blocks: list[int] = []
    last = -1  # latest non-RLE block of the current segment
    for i, b in enumerate(bl):
        info = DECODE_INFO[b & 0xFF]
        if info is None:
            raise BSONColumnError("Invalid Simple-8b selector in BSON Column")
        if segs is not None and i and segs[i] != segs[i - 1]:
            last = -1
        if info is _RLE:
            counts.append((((b >> 4) & 0xF) + 1) * RLE_MULTIPLIER)
            if last < 0:
                src_blocks.append(_SENTINEL_BLOCK)
                shift0.append(4)
                masks.append((1 << 60) - 1)
                ext.append(-1)
                sentinel_blocks.append(i)
            else:
                sb = bl[last]
                n, w, sh, m, cb, _cm, _mu = DECODE_INFO[sb & 0xFF]  # type: ignore[misc]
                src_blocks.append(sb)
                shift0.append(sh + (n - 1) * w)
                masks.append(m)
                ext.append(sb & 0xFF if cb else -1)
            width.append(0)
        else:
            n, w, sh, m, cb, _cm, _mu = info  # type: ignore[misc]
            counts.append(n)
            src_blocks.append(b)
            shift0.append(sh)
            width.append(w)
            masks.append(m)
            ext.append(b & 0xFF if cb else -1)
            last = i
    total = sum(counts)
    if total > max_values:
        raise BSONColumnError("BSON Column decodes to too many values")
    c = np.array(counts, dtype=np.int64)
    starts = np.cumsum(c) - c
    w_arr = np.array(width, dtype=np.int64)
    shifts = np.repeat((np.array(shift0, dtype=np.int64) - starts * w_arr).astype(np.uint64), c)
    if any(width):
        shifts += np.arange(total, dtype=np.uint64) * np.repeat(w_arr.astype(np.uint64), c)
    mask = np.repeat(np.array(masks, dtype=np.uint64), c)
    vals = (np.repeat(np.array(src_blocks, dtype=np.uint64), c) >> shifts) & mask
    missing = vals == mask
    if any(e >= 0 for e in ext):
        e_low = np.repeat(np.array(ext, dtype=np.int64), c)
        e = np.flatnonzero(e_low >= 0)
        params = _NP_EXT[e_low[e]]
        ve = vals[e]
        zeros = ((ve & params[:, 1]) * params[:, 2]) & _U63
        vals[e] = (ve >> params[:, 0]) << zeros
    sentinel = None
    if sentinel_blocks:
        flags = np.zeros(len(bl), dtype=bool)
        flags[sentinel_blocks] = True
        sentinel = np.repeat(flags, c)
    return vals, missing, sentinel, c


def decode_blocks_np(
    blocks: np.ndarray, prev: int | None, max_values: int
) -> tuple[np.ndarray, np.ndarray, int | None]:
    """Decode 64-bit Simple-8b blocks at once.

    Returns (values uint64, missing bool, last value for a following RLE). `prev` is what a
    leading RLE block repeats (None = missing). Raises BSONColumnError on an invalid
    selector or when more than `max_values` values would be produced.
    """
    vals, missing, sentinel, _counts = unpack_blocks_np(blocks, None, max_values)
    if prev != 0 and sentinel is not None:
        if prev is None:
            missing[sentinel] = True
        else:
            vals[sentinel] = prev
    if not len(vals):
        return vals, missing, prev
    return vals, missing, (None if missing[-1] else int(vals[-1]))

"""The Simple-8b builder, a faithful port of MongoDB's greedy `Simple8bBuilder`: pending
values are buffered until the next one no longer fits, then the largest block without
unused slots is written; runs of one value after a written block become RLE. Its output
decides byte-identity, so it follows the original's order of checks exactly. `extend` is
the bulk append; `pending_columns_np` and `run_ends` prepare its numpy input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from ..type_util import MASK64, MASK128
from .selectors import (
    BASE,
    BITS,
    INTS,
    MAX_RLE_COUNT,
    MAX_SELECTOR,
    MIN_DATA_BITS,
    MIN_SELECTOR,
    RLE_MULTIPLIER,
    RLE_SELECTOR,
    SEVEN,
    TZ_BITS,
)

__all__ = ["Pending", "BlockWriter", "Simple8bBuilder", "pending_columns_np", "pending_value",
           "run_ends"]


def _selector_for_count(n: int, ext: int) -> int:
    ints = INTS[ext]
    for idx in range(MIN_SELECTOR[ext], MAX_SELECTOR[ext]):
        if n >= ints[idx]:
            return idx
    return MAX_SELECTOR[ext]


# _SEL_FOR_COUNT[ext][n]: selector index of the largest block without unused slots for n
# pending values.
_SEL_FOR_COUNT: Final = tuple(
    tuple(_selector_for_count(n, ext) for n in range(61)) for ext in range(4)
)


def _word_layout(ext: int, idx: int) -> tuple[int, int, int, int, int]:
    """(base selector, values, slot width, first shift, word header) for writing a block."""
    base_sel = idx if ext == BASE else (7 if ext == SEVEN else 8)
    first = 4 + (4 if base_sel in (7, 8) else 0)
    width = BITS[ext][idx] + TZ_BITS[ext]
    header = base_sel | ((idx << 4) if ext != BASE else 0)
    return base_sel, INTS[ext][idx], width, first, header


_LAYOUT: Final = tuple(tuple(_word_layout(ext, idx) for idx in range(16)) for ext in range(4))

# A pending value: (value or None for a skip, bits for base/seven/eight-small/eight-large,
# trailing zeros stored for seven/eight-small/eight-large).
Pending = tuple[int | None, int, int, int, int, int, int, int]
_SKIP: Final[Pending] = (None, 0, 0, 0, 0, 0, 0, 0)
_SKIP_FIT_BITS: Final = MIN_DATA_BITS

BlockWriter = Callable[[int], None]


def _count_bits(v: int, is128: bool) -> int:
    # Bits needed so that the value is not all ones (all ones marks a skip). For 128-bit
    # values with a non-zero high half MongoDB counts the plain bit length.
    if is128 and v >> 64:
        return v.bit_length()
    return (v + 1).bit_length()


def pending_value(v: int, is128: bool) -> Pending | None:
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
        self.curr_max = list(MIN_DATA_BITS)
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
        pv = pending_value(value, self.is128)
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
            # the block's values leave the count before the writer sees the builder: the
            # double encoder walks back over what is still pending to find the value
            # ending the block
            while count > MAX_RLE_COUNT:
                self.rle_count -= RLE_MULTIPLIER * MAX_RLE_COUNT
                write(RLE_SELECTOR | ((MAX_RLE_COUNT - 1) << 4))
                count -= MAX_RLE_COUNT
            self.rle_count -= RLE_MULTIPLIER * count
            write(RLE_SELECTOR | ((count - 1) << 4))
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
            # eight-small / eight-large: p[6] / p[7] holds the trailing zeros stored
            tz_index = 4 + ext
            tzbits = TZ_BITS[ext]
            for i in range(ints):
                p = pending[i]
                v = p[0]
                if v is None:
                    slot = mask
                else:
                    # entries 1..7 of a Pending are ints; mypy types p[i] as the union
                    nib = p[tz_index] >> 2  # type: ignore[operator]
                    slot = nib | ((v >> (nib << 2)) << tzbits)
                word |= slot << shift
                shift += width
        del pending[:ints]
        cm = list(MIN_DATA_BITS)
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

"""Decoding Simple-8b blocks: `decode_block` (one block, pure Python), `block_count`, and
`decode_blocks_np` / `unpack_blocks_np` (many blocks at once with numpy: selector-wise
unpacking with shifts and masks, RLE by forward fill)."""

from __future__ import annotations

from enum import Enum
from typing import Final, Literal

import numpy as np

from ..errors import BSONColumnError
from ..type_util import MASK64, MASK128
from .selectors import BASE, BITS, RLE_MULTIPLIER, RLE_SELECTOR, TZ_BITS

__all__ = ["DECODE_INFO", "block_count", "decode_block", "decode_blocks_np", "unpack_blocks_np"]

# For each low byte of a block (selector + extension nibble): None when invalid, "rle" for
# RLE, else (values, slot width, first shift, slot mask, count bits, count mask, count
# multiplier). Slots are read while the next one fits in 64 bits, like MongoDB's iterator.
class _Rle(Enum):
    RLE = "rle"


# A one-member enum rather than a string, so that `info is _RLE` narrows for mypy.
_RLE: Final = _Rle.RLE
_Info = tuple[int, int, int, int, int, int, int]


def _decode_info(low: int) -> _Info | Literal[_Rle.RLE] | None:
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
    cbits = TZ_BITS[ext]
    width = BITS[ext][selector] + cbits
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
    return info[0]


def decode_block(block: int, prev: int | None, is128: bool) -> list[int | None]:
    """Values of one block; `prev` is the value an RLE block repeats."""
    info = DECODE_INFO[block & 0xFF]
    if info is None:
        raise BSONColumnError("Invalid Simple-8b selector in BSON Column")
    if info is _RLE:
        return [prev] * ((((block >> 4) & 0xF) + 1) * RLE_MULTIPLIER)
    n, width, shift, mask, cbits, cmask, mult = info
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
        n, width, shift, mask, cb, cm, mu = info
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
    last: _Info | None = None  # DECODE_INFO of the latest non-RLE block of the segment
    last_block = 0  # and that block
    for i, b in enumerate(bl):
        info = DECODE_INFO[b & 0xFF]
        if info is None:
            raise BSONColumnError("Invalid Simple-8b selector in BSON Column")
        if segs is not None and i and segs[i] != segs[i - 1]:
            last = None
        if info is _RLE:
            counts.append((((b >> 4) & 0xF) + 1) * RLE_MULTIPLIER)
            if last is None:
                src_blocks.append(_SENTINEL_BLOCK)
                shift0.append(4)
                masks.append((1 << 60) - 1)
                ext.append(-1)
                sentinel_blocks.append(i)
            else:
                sb = last_block
                n, w, sh, m, cb, _cm, _mu = last
                src_blocks.append(sb)
                shift0.append(sh + (n - 1) * w)
                masks.append(m)
                ext.append(sb & 0xFF if cb else -1)
            width.append(0)
        else:
            n, w, sh, m, cb, _cm, _mu = info
            counts.append(n)
            src_blocks.append(b)
            shift0.append(sh)
            width.append(w)
            masks.append(m)
            ext.append(b & 0xFF if cb else -1)
            last = info
            last_block = b
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

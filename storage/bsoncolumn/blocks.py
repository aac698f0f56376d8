"""Block decoding of numeric, date, bool and timestamp columns straight into numpy.

`decode_numeric(column)` returns the values of every row as one numpy array plus a
presence mask and the BSON type of each row, without creating a Python object per
value. All Simple-8b blocks of the column are unpacked at once (see
`simple8b.decoding.unpack_blocks_np`); runs of deltas are expanded with segmented cumulative sums (one
segment per literal); doubles are rescaled per run of control bytes sharing a scale.
The results equal those of the element decoder bit for bit; it raises the same
`BSONColumnError` on malformed input and `NotNumericColumn` when a row holds another
type (or the column uses interleaved mode).

The common column (one of int64, int32, date, double in every row, no skips) is decoded
by the native extension when it is built (`native.decode_uniform`); any other column,
or a malformed one, goes through the numpy path below.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

import numpy as np

from storage.vocabulary.bson_types import T_BOOL, T_DATE, T_DOUBLE, T_INT32, T_INT64, T_TIMESTAMP

from .control import INVALID_SCALE, is_interleaved_start, is_literal, scale_index_for_control
from .decoder import DEFAULT_MAX_VALUES, _literal
from .errors import BSONColumnError
from .native import AVAILABLE as _NATIVE
from .native import DECODED_DTYPES, decode_uniform
from .numeric import to_float, unzigzag
from .simple8b.decoding import unpack_blocks_np
from .type_util import MEMORY_AS_INTEGER, encode_double, wrap64

__all__ = ["NotNumericColumn", "NumericColumn", "decode_numeric"]

_D = struct.Struct("<d")
_I = struct.Struct("<i")
_Q = struct.Struct("<q")

# kind of column for each literal type
_KIND: Final = {
    T_INT32: "int",
    T_INT64: "int",
    T_DOUBLE: "double",
    T_DATE: "date",
    T_BOOL: "bool",
    T_TIMESTAMP: "timestamp",
}
_SAFE: Final = 1 << 52  # merged runs re-encode exactly well within 2**53


_NO_SEGMENTS: Final = np.zeros(0, dtype=np.int64)


class NotNumericColumn(ValueError):
    """The column holds values the numeric block decoder does not produce."""


@dataclass(frozen=True, slots=True)
class NumericColumn:
    """Rows of a column as arrays.

    `kind` is "int" (int32/int64 → int64), "double" (doubles, with any ints converted
    → float64), "date" (int64 milliseconds since the epoch), "bool" or "timestamp"
    (uint64, seconds << 32 | increment). Missing rows hold 0 and are False in `present`.
    `types` holds each row's BSON type byte (0 when missing).
    """

    values: np.ndarray
    present: np.ndarray
    types: np.ndarray
    kind: str

    def __len__(self) -> int:
        return len(self.values)


_MASKS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def _uniform_masks(n: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """`present` and `types` of n values of type t without skips: shared read-only arrays
    for the usual bucket sizes (a time-series scan decodes thousands of such columns)."""
    key = (n, t)
    got = _MASKS.get(key)
    if got is None:
        present, types = np.ones(n, dtype=bool), np.full(n, t, dtype=np.uint8)
        if n > 4096 or len(_MASKS) >= 4096:
            return present, types
        present.flags.writeable = False
        types.flags.writeable = False
        got = _MASKS[key] = (present, types)
    return got


def _err(msg: str) -> BSONColumnError:
    return BSONColumnError(msg)


def _literal_encoded(t: int, v: bytes) -> int:
    if t == T_INT32:
        return _I.unpack(v)[0]
    if t == T_BOOL:
        return 1 if v[0] else 0
    if t == T_DOUBLE:
        return 0  # set per control from the scale
    return _Q.unpack(v)[0]




def decode_numeric(
    column: bytes | bytearray | memoryview, max_values: int = DEFAULT_MAX_VALUES
) -> NumericColumn:
    if _NATIVE:
        got = decode_uniform(column, max_values)
        if got is not None:
            t, raw, n = got
            values = np.frombuffer(raw, dtype=DECODED_DTYPES[t], count=n)
            present, types = _uniform_masks(n, t)
            return NumericColumn(values, present, types, _KIND[t])
    data = bytes(column)
    end = len(data)
    if end == 0:
        raise _err("BSON Column encoding is empty")

    # 1. Scan control bytes: literals, and Simple-8b controls with their scale.
    lit_types: list[int] = []
    lit_values: list[bytes] = []
    lit_blocks: list[int] = []  # blocks before each literal
    ctrl_blocks: list[int] = []  # blocks per control
    ctrl_scale: list[int] = []
    ctrl_seg: list[int] = []  # literals before each control (0 = none yet)
    parts: list[bytes] = []
    nblocks_total = 0
    pos = 0
    while True:
        if pos >= end:
            raise _err("Invalid BSON Column encoding has overflowed buffer")
        c = data[pos]
        if c == 0:
            if pos + 1 != end:
                raise _err("Final EOO found before reaching end of buffer")
            break
        if is_literal(c):
            (t, v), pos = _literal(data, pos, end)
            if t not in _KIND:
                raise NotNumericColumn(f"BSON type {t} in a numeric block decode")
            lit_types.append(t)
            lit_values.append(v)
            lit_blocks.append(nblocks_total)
        elif is_interleaved_start(c):
            raise NotNumericColumn("interleaved (object) column")
        else:
            n = (c & 0x0F) + 1
            if pos + 8 * n + 1 >= end:
                raise _err("Control block would overflow buffer")
            scale = scale_index_for_control(c)
            if scale == INVALID_SCALE:
                raise _err("Invalid control byte in BSON Column")
            ctrl_blocks.append(n)
            ctrl_scale.append(scale)
            ctrl_seg.append(len(lit_types))
            parts.append(data[pos + 1 : pos + 1 + 8 * n])
            nblocks_total += n
            pos += 8 * n + 1

    kinds = {_KIND[t] for t in lit_types}
    if len(kinds) > 1 and kinds != {"int", "double"}:
        raise NotNumericColumn(f"column mixes {sorted(kinds)}")
    kind = "double" if "double" in kinds else (kinds.pop() if kinds else "int")
    nlit = len(lit_types)

    # 2. Unpack every block at once.
    if parts:
        blocks = np.frombuffer(b"".join(parts), dtype="<u8")
        # RLE sources restart at literals: only one segment when the literal comes first
        one_segment = nlit == 0 or (nlit == 1 and lit_blocks[0] == 0)
        block_seg = (
            _NO_SEGMENTS
            if one_segment
            else np.repeat(np.array(ctrl_seg, dtype=np.int64), ctrl_blocks)
        )
        vals, missing, _sentinel, counts = unpack_blocks_np(
            blocks, None if one_segment else block_seg, max_values - nlit
        )
    else:
        vals = np.zeros(0, dtype=np.uint64)
        missing = np.zeros(0, dtype=bool)
        counts = np.zeros(0, dtype=np.int64)
        block_seg = counts
    nvals = len(vals)
    present_v = ~missing
    for sg, scale in zip(ctrl_seg, ctrl_scale):
        if scale != MEMORY_AS_INTEGER and (sg == 0 or lit_types[sg - 1] != T_DOUBLE):
            raise _err("Unexpected control for type in BSON Column")
    dtype = {"int": np.int64, "double": np.float64, "date": np.int64, "bool": np.bool_}.get(
        kind, np.uint64
    )
    deltas = unzigzag(vals)
    all_present = bool(present_v.all()) if nvals else True
    if not all_present:
        deltas[missing] = 0

    if nlit == 1 and lit_blocks[0] == 0:
        # The usual column: one literal, then deltas. Rows are [literal, values...].
        t = lit_types[0]
        if t == T_DOUBLE:
            out_v = _expand_doubles(
                deltas,
                missing,
                None,
                lit_types,
                lit_values,
                ctrl_blocks,
                ctrl_scale,
                ctrl_seg,
                counts,
            )
        else:
            out_v = _expand_single(deltas, missing, all_present, t, lit_values[0])
        values = np.empty(nvals + 1, dtype=dtype)
        values[0] = _literal_values(lit_types, lit_values, dtype)[0]
        values[1:] = out_v
        present = np.empty(nvals + 1, dtype=bool)
        present[0] = True
        present[1:] = present_v
        types = np.empty(nvals + 1, dtype=np.uint8)
        types[0] = t
        if all_present:
            types[1:] = t
        else:
            types[1:] = np.where(present_v, t, 0)
            values[1:][missing] = 0
        return NumericColumn(values, present, types, kind)

    if nlit > 1:
        seg = np.repeat(block_seg, counts)  # segment (literals before) of each value
    else:
        first = int(counts[: lit_blocks[0]].sum()) if nlit else nvals
        seg = np.zeros(nvals, dtype=np.int64)
        seg[first:] = 1
    if present_v[seg == 0].any():
        raise _err("Delta in BSON Column without a preceding value")
    if kind == "double":
        out_v = _expand_doubles(
            deltas, missing, seg, lit_types, lit_values, ctrl_blocks, ctrl_scale, ctrl_seg, counts
        )
    else:
        out_v = _expand_ints(deltas, missing, seg, lit_types, lit_values, kind)
    lit_arr = _literal_values(lit_types, lit_values, dtype)
    lit_types_arr = np.array(lit_types, dtype=np.uint8)
    total = nvals + nlit
    cum = np.concatenate(([0], np.cumsum(counts)))
    lit_rows = np.arange(nlit, dtype=np.int64) + cum[np.array(lit_blocks, dtype=np.int64)]
    val_rows = np.arange(nvals, dtype=np.int64) + seg
    seg_type = np.array([0, *lit_types], dtype=np.uint8)
    values = np.zeros(total, dtype=dtype)
    present = np.zeros(total, dtype=bool)
    types = np.zeros(total, dtype=np.uint8)
    values[val_rows] = out_v
    present[val_rows] = present_v
    types[val_rows] = np.where(present_v, seg_type[seg], 0)
    if nlit:
        values[lit_rows] = lit_arr
        present[lit_rows] = True
        types[lit_rows] = lit_types_arr
    values[~present] = 0
    return NumericColumn(values, present, types, kind)


def _literal_values(types: list[int], values: list[bytes], dtype: type) -> np.ndarray:
    out: list[float | int | bool] = []
    for t, v in zip(types, values):
        if t == T_DOUBLE:
            out.append(_D.unpack(v)[0])
        elif t == T_BOOL:
            out.append(bool(v[0]))
        elif t == T_INT32:
            out.append(_I.unpack(v)[0])
        elif t == T_TIMESTAMP:
            out.append(_Q.unpack(v)[0] & ((1 << 64) - 1))
        else:
            out.append(_Q.unpack(v)[0])
    return np.array(out, dtype=dtype)


def _expand_single(
    deltas: np.ndarray, missing: np.ndarray, all_present: bool, t: int, literal: bytes
) -> np.ndarray:
    base = np.int64(_literal_encoded(t, literal))
    with np.errstate(over="ignore"):
        enc = np.cumsum(deltas, dtype=np.int64)
        if t in (T_DATE, T_TIMESTAMP):  # delta of delta
            if not all_present:
                enc[missing] = 0
            enc = np.cumsum(enc, dtype=np.int64)
        enc += base
    if t == T_INT32:
        return enc.astype(np.int32)
    if t == T_BOOL:
        return enc != 0
    if t == T_TIMESTAMP:
        return enc.view(np.uint64)
    return enc


def _seg_cumsum(x: np.ndarray, seg: np.ndarray, nseg: int) -> np.ndarray:
    """Cumulative sum restarting at each segment (wrapping int64)."""
    with np.errstate(over="ignore"):
        cs = np.cumsum(x, dtype=np.int64)
        excl = cs - x
        starts = np.searchsorted(seg, np.arange(nseg), side="left")
        starts = np.minimum(starts, max(len(x) - 1, 0))
        base = excl[starts] if len(x) else np.zeros(nseg, dtype=np.int64)
        return cs - base[seg]


def _expand_ints(
    deltas: np.ndarray,
    missing: np.ndarray,
    seg: np.ndarray,
    lit_types: list[int],
    lit_values: list[bytes],
    kind: str,
) -> np.ndarray:
    nseg = len(lit_types) + 1
    bases = np.array(
        [0, *(_literal_encoded(t, v) for t, v in zip(lit_types, lit_values))], dtype=np.int64
    )
    if not len(deltas):
        return np.zeros(0, dtype=np.int64)
    enc = _seg_cumsum(deltas, seg, nseg)
    with np.errstate(over="ignore"):
        if kind in ("date", "timestamp"):  # delta of delta
            enc = np.where(missing, 0, enc)
            out = _seg_cumsum(enc, seg, nseg) + bases[seg]
        else:
            out = enc + bases[seg]
    if kind == "int":
        seg_is_int32 = np.array([False, *(t == T_INT32 for t in lit_types)])
        int32_rows = seg_is_int32[seg]
        if int32_rows.any():
            out = np.where(int32_rows, out.astype(np.int32).astype(np.int64), out)
        return out
    if kind == "bool":
        return out != 0
    if kind == "timestamp":
        return out.view(np.uint64)
    return out


def _expand_doubles(
    deltas: np.ndarray,
    missing: np.ndarray,
    seg: np.ndarray | None,
    lit_types: list[int],
    lit_values: list[bytes],
    ctrl_blocks: list[int],
    ctrl_scale: list[int],
    ctrl_seg: list[int],
    counts: np.ndarray,
) -> np.ndarray:
    out = np.zeros(len(deltas), dtype=np.float64)
    # Integer segments of a mixed column go through the integer path.
    if any(t != T_DOUBLE for t in lit_types):
        assert seg is not None
        ints = _expand_ints(deltas, missing, seg, lit_types, lit_values, "int")
        seg_is_int = np.array([True, *(t != T_DOUBLE for t in lit_types)])
        int_rows = seg_is_int[seg]
        out[int_rows] = ints[int_rows]
    # Values per control, then runs of controls of one segment sharing a scale. Missing
    # values have zero deltas, so the encoded value at the end of a run is that of its
    # last present value (or the base when none), as the per-value decoder keeps it.
    starts = [0]
    for nb in ctrl_blocks[:-1]:
        starts.append(starts[-1] + nb)
    per_ctrl = np.add.reduceat(counts, starts).tolist() if len(counts) else []
    with np.errstate(over="ignore"):
        cs = np.cumsum(deltas, dtype=np.int64)
    last = 0.0
    cur_seg = -1
    i = 0
    lo = 0
    nctrl = len(ctrl_blocks)
    while i < nctrl:
        s = ctrl_seg[i]
        if s == 0 or lit_types[s - 1] != T_DOUBLE:
            lo += per_ctrl[i]
            i += 1
            continue
        if s != cur_seg:
            cur_seg = s
            last = _D.unpack(lit_values[s - 1])[0]
        scale = ctrl_scale[i]
        j = i
        hi = lo + per_ctrl[i]
        inner = []
        while j + 1 < nctrl and ctrl_seg[j + 1] == s and ctrl_scale[j + 1] == scale:
            inner.append(hi - 1)
            j += 1
            hi += per_ctrl[j]
        base = encode_double(last, scale)
        if base is None:
            raise _err("Invalid double encoding in BSON Column")
        with np.errstate(over="ignore"):
            seq = cs[lo:hi] + np.int64(wrap64(base - (int(cs[lo - 1]) if lo else 0)))
        if (
            inner
            and scale != MEMORY_AS_INTEGER
            and (np.abs(seq[np.array(inner) - lo]) > _SAFE).any()
        ):
            # Each control re-encodes the previous value at its scale: exact only well
            # within 2**53; otherwise decode control by control to fail where MongoDB does.
            j = i
            hi = lo + per_ctrl[i]
            seq = seq[: hi - lo]
        if hi > lo:
            vals = to_float(seq, scale)
            out[lo:hi] = vals
            last = float(vals[-1])
        lo = hi
        i = j + 1
    return out

"""Encoding of one stream of scalar values: literals, deltas and Simple-8b blocks.

`EncodingState` is the regular-mode state of MongoDB's BSONColumnBuilder (and the state
of each sub-field stream in interleaved mode). It keeps the previous value, writes a
literal whenever the type changes or a delta is impossible, and otherwise feeds deltas
(or deltas of deltas for ObjectId, date, timestamp) to a Simple-8b builder through the
delta encoders (`delta_encoders`), maintaining the control byte in front of the blocks.
The bulk paths (`extend_ints`, `extend_strings`, `extend_oids`, `extend_doubles`) give
the same bytes as value-by-value appends.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from typing import Final, cast

import numpy as np

from storage.vocabulary.bson_types import (
    T_BOOL,
    T_DATE,
    T_DOUBLE,
    T_INT32,
    T_INT64,
    T_OID,
    T_TIMESTAMP,
)

from .control import CONTROL_FOR_SCALE, DELTA_OF_DELTA_TYPES, TYPES_128
from .delta_encoders import Encoder64, Encoder128
from .simple8b.builder import Pending, Simple8bBuilder, pending_columns_np, pending_value, run_ends
from .type_util import (
    MASK64,
    MEMORY_AS_INTEGER,
    SCALE_MULTIPLIER,
    decode_double,
    decode_int64,
    encode_int128,
    encode_object_id,
    encode_string,
    scale_and_encode_double,
    wrap64,
    wrap128,
)

__all__ = ["EncodingState", "INT_RUN_TYPES"]

_I = struct.Struct("<i")
_Q = struct.Struct("<q")

ControlBlocks = list[tuple[int, int]]

_PACK_INT: Final = {
    T_INT32: _I.pack,
    T_INT64: _Q.pack,
    T_DATE: _Q.pack,
    T_TIMESTAMP: _Q.pack,
    T_BOOL: lambda v: b"\x01" if v else b"\x00",
}
INT_RUN_TYPES: Final = frozenset(_PACK_INT)


def _unpack_int(t: int, v: bytes) -> int:
    if t == T_INT32:
        return _I.unpack(v)[0]
    if t == T_BOOL:
        return 1 if v[0] else 0
    return _Q.unpack(v)[0]


def _run_ends_list(values: list) -> list[int]:
    out = [0] * len(values)
    end = len(values)
    for k in range(len(values) - 1, -1, -1):
        if k + 1 < len(values) and values[k + 1] != values[k]:
            end = k + 1
        out[k] = end
    return out


_DEFERRED_DOUBLE: Final = -1  # wtype while the bulk double path tracks the written value


def _has_skip(s8b: Simple8bBuilder) -> bool:
    if s8b.rle_count and s8b.last is None:
        return True
    return any(p[0] is None for p in s8b.pending)


def _value_before_pending(enc: Encoder64) -> float:
    """The double just before the pending values: walk back from the last appended
    value over the pending deltas."""
    current = enc.prev_encoded
    for pending in reversed(enc.s8b.pending_values()):
        if pending is not None:
            current = wrap64(current - decode_int64(pending))
    return decode_double(current, enc.scale)


class _Lazy:
    """A list of per-scale values computed on first access."""

    __slots__ = ("_items", "_make")

    def __init__(self, make: Callable[[int], list]) -> None:
        self._make = make
        self._items: list[list | None] = [None] * 6

    def __getitem__(self, k: int) -> list:
        item = self._items[k]
        if item is None:
            item = self._items[k] = self._make(k)
        return item


class _ScaleTable:
    """Encodings of an array of doubles at every scale, computed with numpy.

    `enc[s][j]`: value j encoded at scale s (meaningless where not encodable);
    `bad_prefix[s][j]`: how many of values 0..j-1 do not encode at scale s;
    `bad[s]`: the sorted indexes of those values; `lane(s)`: per value, the zigzag
    delta from value j-1 at scale s with its Simple-8b pending tuple, bit columns and
    run ends (the arguments of `Simple8bBuilder.extend`).
    """

    __slots__ = ("_encs", "_lanes", "_oks", "bad", "bad_prefix", "enc", "floats", "minscale")

    def __init__(self, x: np.ndarray) -> None:
        n = len(x)
        bits = x.view(np.int64)
        self._encs: list[np.ndarray] = []
        self._oks: list[np.ndarray] = []
        minscale = np.full(n, MEMORY_AS_INTEGER, dtype=np.int64)
        with np.errstate(invalid="ignore", over="ignore"):
            for k in range(MEMORY_AS_INTEGER):
                mult = SCALE_MULTIPLIER[k]
                scaled = x * mult
                inrange = (scaled >= -_SAFE53) & (scaled <= _SAFE53)
                safe = np.where(inrange, scaled, 0.0)
                # llround: nearest, halves away from zero
                n_k = np.trunc(safe)
                frac = safe - n_k
                n_k = n_k + (frac >= 0.5) - (frac <= -0.5)
                enc = n_k.astype(np.int64)
                ok = inrange & ((enc / mult).view(np.int64) == bits)
                self._encs.append(enc)
                self._oks.append(ok)
        for k in range(MEMORY_AS_INTEGER - 1, -1, -1):
            minscale[self._oks[k]] = k
        self._encs.append(bits)
        self._oks.append(np.ones(n, dtype=bool))
        self.minscale: list[int] = minscale.tolist()
        self.floats: list[float] = x.tolist()
        # per scale, built on first use: encodings, bad-value prefix counts and indexes
        self.enc = _Lazy(lambda k: self._encs[k].tolist())
        self.bad_prefix = _Lazy(lambda k: np.concatenate(([0], np.cumsum(~self._oks[k]))).tolist())
        self.bad = _Lazy(lambda k: np.flatnonzero(~self._oks[k]).tolist())
        self._lanes: list[tuple | None] = [None] * 6

    def lane(self, s: int) -> tuple:
        lane = self._lanes[s]
        if lane is None:
            enc = self._encs[s]
            with np.errstate(over="ignore"):
                d = np.diff(enc, prepend=enc[:1])
            zz = (d.view(np.uint64) << np.uint64(1)) ^ (d >> 63).view(np.uint64)
            entries, cols = pending_columns_np(zz)
            lane = self._lanes[s] = (zz.tolist(), entries, run_ends(zz), cols)
        return lane

    def entries(self, s: int) -> list[Pending | None]:
        return self.lane(s)[1]


_SAFE53: Final = 9007199254740992.0


class EncodingState:
    """One stream: previous value, encoder, and the control byte being filled.

    `buf` is the byte buffer written to (the column itself in regular mode, a private
    buffer per sub-field in interleaved mode). When `blocks` is a list, every completed
    control block (control byte + its blocks, or a literal) is recorded there as
    (offset, size) so interleaved mode can later merge streams in decoding order.
    """

    __slots__ = ("blocks", "buf", "ctrl", "enc", "ptype", "pvalue", "write_block", "wtype")

    def __init__(self, buf: bytearray, blocks: ControlBlocks | None = None) -> None:
        self.ptype = 0  # EOO: nothing appended yet
        self.pvalue = b""
        self.enc: Encoder64 | Encoder128 = Encoder64()
        self.ctrl: int | None = None
        self.buf = buf
        self.blocks = blocks
        self.wtype = 0
        self.write_block = self._write_block

    def clone(self, buf: bytearray, blocks: ControlBlocks | None) -> EncodingState:
        c = EncodingState.__new__(EncodingState)
        c.ptype = self.ptype
        c.pvalue = self.pvalue
        c.enc = self.enc.clone()
        c.ctrl = self.ctrl
        c.buf = buf
        c.blocks = blocks
        c.wtype = self.wtype
        c.write_block = c._write_block
        return c

    def state_key(self) -> tuple:
        return (self.ptype, self.pvalue, self.ctrl, self.enc.state_key())

    # -- block and control byte output ------------------------------------------------

    def record(self, offset: int, size: int) -> None:
        if self.blocks is not None:
            self.blocks.append((offset, size))

    def _increment_count(self, scale: int) -> int | None:
        """Count one more block in the current control byte (opening one if needed).

        Returns the offset of a control byte that just became full (16 blocks).
        """
        control = CONTROL_FOR_SCALE[scale]
        buf = self.buf
        if self.ctrl is None:
            self.ctrl = len(buf)
            buf.append(0)
            count = 0
        else:
            byte = buf[self.ctrl]
            if (byte & 0xF0) != control:
                self.record(self.ctrl, len(buf) - self.ctrl)
                self.ctrl = None
                self._increment_count(scale)
                return None
            count = (byte & 0x0F) + 1
        buf[self.ctrl] = control | count
        if count + 1 == 16:
            full = self.ctrl
            self.ctrl = None
            return full
        return None

    def _write_block(self, block: int) -> None:
        enc = self.enc
        full = self._increment_count(enc.scale if type(enc) is Encoder64 else MEMORY_AS_INTEGER)
        buf = self.buf
        buf += block.to_bytes(8, "little")
        if full is not None:
            self.record(full, len(buf) - full)
        if self.wtype == T_DOUBLE and type(enc) is Encoder64:
            # Remember the value at the end of the written block.
            enc.last_in_prev_block = _value_before_pending(enc)

    def _write_literal(self) -> None:
        buf = self.buf
        if self.ctrl is not None:
            self.record(self.ctrl, len(buf) - self.ctrl)
        start = len(buf)
        buf.append(self.ptype)
        buf.append(0)
        buf += self.pvalue
        self.record(start, len(buf) - start)
        self.ctrl = None
        self.init_from_previous()

    def init_from_previous(self) -> None:
        enc: Encoder64 | Encoder128 = Encoder128() if self.ptype in TYPES_128 else Encoder64()
        enc.initialize(self.ptype, self.pvalue)
        self.enc = enc

    # -- operations ---------------------------------------------------------------------

    def append(self, t: int, v: bytes) -> None:
        if t != self.ptype:
            self.ptype = t
            self.pvalue = v
            self.wtype = t
            self.enc.s8b.flush(self.write_block)
            self._write_literal()
            return
        enc = self.enc
        self.wtype = t
        if t not in DELTA_OF_DELTA_TYPES and v == self.pvalue:
            enc.s8b.append(0, self.write_block)
            compressed = True
        else:
            compressed = enc.append_delta(self, t, v, self.pvalue)
        self.pvalue = v
        if not compressed:
            enc.s8b.flush(self.write_block)
            self._write_literal()

    def extend_ints(
        self,
        t: int,
        vals: np.ndarray,
        present: np.ndarray | None = None,
        raw: list[bytes] | None = None,
        breaks: list[int] | None = None,
    ) -> None:
        """Append many values of one integer-like type (int32, int64, date, timestamp as
        int64 bits, bool as 0/1, ObjectId as its 7-byte encoding) with skips where
        `present` is False. `raw` gives the value bytes per row when they are not the
        packed integer (ObjectId); rows in `breaks` are appended one by one (ObjectIds
        whose process part changes, which makes a literal).

        Same result as appending (or skipping) them one by one: deltas are computed with
        numpy and the Simple-8b packing runs over precomputed per-value bit counts.
        """
        n = len(vals)
        i = 0
        pack = _PACK_INT.get(t)
        dod = t in DELTA_OF_DELTA_TYPES
        stops = [*sorted(set(breaks or ())), n]
        stop_at = 0

        def value(row: int) -> bytes:
            return raw[row] if raw is not None else pack(int(vals[row]))  # type: ignore[misc]

        while i < n:
            while stops[stop_at] < i:
                stop_at += 1
            if self.ptype != t or stops[stop_at] == i:
                # the first value of this type is a literal; break rows go one by one
                while i < n and present is not None and not present[i]:
                    self.skip()
                    i += 1
                if i < n:
                    self.append(t, value(i))
                    i += 1
                continue
            end = stops[stop_at]
            pres = present[i:end] if present is not None else None
            rows = np.arange(i, end) if pres is None else np.arange(i, end)[pres]
            p = vals[rows]
            if not len(p):
                for _ in range(end - i):
                    self.skip()
                i = end
                continue
            # ptype is t, an integer-like type or ObjectId: a 64-bit stream
            enc = cast(Encoder64, self.enc)
            prev = encode_object_id(self.pvalue) if t == T_OID else _unpack_int(t, self.pvalue)
            with np.errstate(over="ignore"):
                deltas = np.diff(p, prepend=np.int64(prev))
                if dod:
                    zz_src = np.diff(deltas, prepend=np.int64(enc.prev_delta))
                else:
                    zz_src = deltas
                zz = (zz_src.view(np.uint64) << np.uint64(1)) ^ (zz_src >> 63).view(np.uint64)
            pendings, cols = pending_columns_np(zz)
            if pres is None:
                row_vals: list[int | None] = zz.tolist()
                row_pend: list = pendings
                row_runs = run_ends(zz)
                row_of = None
                row_bits = cols
            else:
                row_of = np.flatnonzero(pres)
                m = len(pres)
                full = np.full(m, MASK64, dtype=np.uint64)  # skips never join a run
                full[row_of] = zz
                row_runs = run_ends(full)
                row_vals = [None] * m
                row_pend = [None] * m
                row_bits = ([61] * m, [61] * m, [61] * m, [61] * m)
                for r, zv, pv in zip(row_of.tolist(), zz.tolist(), pendings):
                    row_vals[r] = zv
                    row_pend[r] = pv
                    if pv is not None:
                        row_bits[0][r] = pv[1]
                        row_bits[1][r] = pv[2]
                        row_bits[2][r] = pv[3]
                        row_bits[3][r] = pv[4]
            self.wtype = t
            done = enc.s8b.extend(row_vals, row_pend, row_runs, self.write_block, bits=row_bits)
            # values [0, k) of `p` went in; bring the delta state up to there
            k = done if row_of is None else int(np.searchsorted(row_of, done))
            if k:
                self.pvalue = value(int(rows[k - 1]))
                if dod:
                    enc.prev_delta = int(deltas[k - 1])
                if t == T_OID:
                    enc.prev_encoded = int(p[k - 1])
            if done == len(row_vals):
                i = end
                continue
            # row `done` holds a delta Simple-8b cannot store: a literal, then go on
            self.append(t, value(int(rows[k])))
            i += done + 1

    def extend_strings(self, t: int, values: list[bytes | None]) -> None:
        """Append many string (or code) values, None being a skipped row, as one by one.

        Deltas of the 128-bit encodings are computed in one pass (encodings and pending
        tuples cached per distinct value, strings of a time series repeat) and packed with
        `Simple8bBuilder.extend`; literals take the per-value path.
        """
        n = len(values)
        i = 0
        enc_cache: dict[bytes, int | None] = {}
        pv_cache: dict[int, Pending | None] = {}
        while i < n:
            v = values[i]
            enc = self.enc
            if v is None:
                self.skip()
                i += 1
                continue
            if self.ptype != t or type(enc) is not Encoder128:
                self.append(t, v)
                i += 1
                continue
            # Plan rows i.. until one needs a literal: zero deltas for equal bytes, else
            # the delta of the encodings (None = a literal).
            prev_bytes = self.pvalue
            prev = enc.prev_encoded
            zz: list[int | None] = []
            pend: list[Pending | None] = []
            b0: list[int] = []
            b1: list[int] = []
            b2: list[int] = []
            b3: list[int] = []
            encoded_at: list[int | None] = []
            j = i
            while j < n:
                w = values[j]
                if w is None:
                    zz.append(None)
                    pend.append(None)
                    encoded_at.append(prev)
                    b0.append(61)
                    b1.append(61)
                    b2.append(61)
                    b3.append(61)
                    j += 1
                    continue
                if w == prev_bytes:
                    z = 0
                else:
                    if w in enc_cache:
                        e = enc_cache[w]
                    else:
                        e = enc_cache[w] = encode_string(w[4:-1])
                    if e is None or (prev is None and e == 0):
                        break  # a literal
                    z = encode_int128(wrap128(e - (prev or 0)))
                    prev = e
                    prev_bytes = w
                if z in pv_cache:
                    pv = pv_cache[z]
                else:
                    pv = pv_cache[z] = pending_value(z, True)
                if pv is None:
                    break  # not storable in Simple-8b: a literal
                zz.append(z)
                pend.append(pv)
                encoded_at.append(prev)
                b0.append(pv[1])
                b1.append(pv[2])
                b2.append(pv[3])
                b3.append(pv[4])
                j += 1
            if j > i:
                self.wtype = t
                k = len(zz)
                done = enc.s8b.extend(
                    zz, pend, _run_ends_list(zz), self.write_block, bits=(b0, b1, b2, b3)
                )
                assert done == k
                last_present = next((values[r] for r in range(j - 1, i - 1, -1) if values[r]), None)
                if last_present is not None:
                    self.pvalue = last_present
                enc.prev_encoded = encoded_at[-1]
                i = j
            if i < n and (w := values[i]) is not None and j == i:
                self.append(t, w)  # the literal (or unencodable delta)
                i += 1

    def extend_oids(self, raw: np.ndarray, present: np.ndarray | None = None) -> None:
        """Append many ObjectIds (an n x 12 uint8 array), as one by one."""
        u = raw.astype(np.uint64)
        enc = (
            u[:, 11]
            | (u[:, 3] << np.uint64(8))
            | (u[:, 10] << np.uint64(16))
            | (u[:, 2] << np.uint64(24))
            | (u[:, 9] << np.uint64(32))
            | (u[:, 1] << np.uint64(40))
            | (u[:, 0] << np.uint64(48))
        ).view(np.int64)
        flat = raw.tobytes()
        values = [flat[12 * k : 12 * k + 12] for k in range(len(raw))]
        rows = np.arange(len(raw)) if present is None else np.flatnonzero(present)
        unique = raw[rows, 4:9]
        # a process part differing from the previous value's makes a literal
        change = np.flatnonzero((unique[1:] != unique[:-1]).any(axis=1)) + 1
        breaks = rows[change].tolist()
        if len(rows) and self.ptype == T_OID and values[int(rows[0])][4:9] != self.pvalue[4:9]:
            breaks.append(int(rows[0]))
        self.extend_ints(T_OID, enc, present, values, breaks)

    def extend_doubles(self, vals: np.ndarray, present: np.ndarray | None = None) -> None:
        """Append many doubles (skips where `present` is False), as one by one.

        The scaled encodings of every value at every scale are computed with numpy.
        Stretches of values that keep the current scale go through
        `Simple8bBuilder.extend` in one call; after each written block the restart at
        the lowest scale is checked (`_after_block_fast`); scale changes, literals and
        skips take the exact per-value path.
        """
        raw = np.ascontiguousarray(vals, dtype="<f8")
        flags = None if present is None else np.asarray(present, dtype=bool)
        rows = raw if flags is None else raw[flags]
        m = len(rows)
        rb = rows.tobytes()
        row_bytes = [rb[8 * k : 8 * k + 8] for k in range(m)]
        table = _ScaleTable(rows)
        # runs of present rows: (first present index, end), with skips before each
        if flags is None:
            runs = [(0, 0, m)]
        else:
            runs = []
            fl = flags.tolist()
            j = 0
            r = 0
            while r < len(fl):
                skips = 0
                while r < len(fl) and not fl[r]:
                    skips += 1
                    r += 1
                start = j
                while r < len(fl) and fl[r]:
                    j += 1
                    r += 1
                runs.append((skips, start, j))
        for skips, a, b in runs:
            for _ in range(skips):
                self.skip()
            self._extend_double_run(table, row_bytes, a, b)

    def _extend_double_run(
        self, table: _ScaleTable, row_bytes: list[bytes], a: int, b: int
    ) -> None:
        write = self.write_block
        j = a
        while j < b:
            enc = self.enc
            if self.ptype != T_DOUBLE or j == 0 or type(enc) is not Encoder64:
                self.append(T_DOUBLE, row_bytes[j])
                j += 1
                continue
            s = enc.scale
            encs = table.enc[s]
            if (
                enc.prev_encoded != encs[j - 1]
                or table.bad_prefix[s][j + 1] != table.bad_prefix[s][j - 1]
            ):
                self.append(T_DOUBLE, row_bytes[j])  # a scale change: the exact path
                j += 1
                continue
            bad = table.bad[s]
            e = bisect.bisect_left(bad, j)
            e = bad[e] if e < len(bad) and bad[e] < b else b
            zz, entries, ends, cols = table.lane(s)
            # The block writer leaves the value ending the block to `after`, which knows
            # its row (the writer would walk back over the pending deltas).
            self.wtype = _DEFERRED_DOUBLE
            restarted = False

            def after(i: int, enc: Encoder64 = enc, s: int = s, encs: list[int] = encs) -> bool:
                nonlocal restarted
                enc.prev_encoded = encs[i]
                s8b = enc.s8b
                row = i - s8b.rle_count - len(s8b.pending)  # the value ending the block
                bp = table.bad_prefix[s]
                if row >= 0 and bp[i + 1] == bp[row] and not _has_skip(s8b):
                    enc.last_in_prev_block = table.floats[row]
                else:
                    enc.last_in_prev_block = _value_before_pending(enc)
                if row_bytes[i] == row_bytes[i - 1]:
                    return True  # a repeat appends a zero delta: no restart
                self.wtype = T_DOUBLE
                fast = self._after_block_fast(enc, table, i, s)
                self.wtype = _DEFERRED_DOUBLE
                if fast:
                    return True
                restarted = True  # the encoder state was rebuilt: stop here
                return False

            k = enc.s8b.extend(zz, entries, ends, write, j, e, cols, after)
            self.wtype = T_DOUBLE
            if k > j:
                self.pvalue = row_bytes[k - 1]
                if not restarted:
                    enc.prev_encoded = encs[k - 1]
                j = k
            else:  # a delta Simple-8b cannot store: the exact path writes a literal
                self.append(T_DOUBLE, row_bytes[j])
                j += 1

    def _after_block_fast(self, enc: Encoder64, table: _ScaleTable, j: int, s: int) -> bool:
        """A block was written while appending value j at scale s (see _restart_after_block).

        The exact path restarts at the lowest scale of the last written value and
        re-appends the pending values into a fresh builder. When that lands on scale s
        again and those values stay at s, the result is known: the same pending values
        (changed in place, True: the caller may go on), or a fresh builder given the same
        deltas (False: the caller must take the new builder).
        """
        old = enc.s8b
        count = old.rle_count + len(old.pending)
        row = j - count  # the value that ended the written block
        bp = table.bad_prefix[s]
        if row < 0 or table.minscale[row] != s or bp[j + 1] != bp[row] or _has_skip(old):
            enc.prev_encoded = table.enc[s][j - 1]  # as before the value was appended
            enc._restart_after_block(self)
            return False
        pending = old.pending
        # curr_max[0] is the largest plain bit count pending (values need at least 1)
        if not old.rle_count and pending[0][0] != 0 and old.curr_max[0] * len(pending) <= 60:
            # A fresh builder given these values would hold exactly them, with every
            # selector possible and no RLE value.
            old.last = 0
            old.possible = [True, True, True, True]
            old.last_valid_ext = 0
            return True
        values = old.pending_values()
        if None in values:
            enc.prev_encoded = table.enc[s][j - 1]
            enc._restart_after_block(self)
            return False
        new = Simple8bBuilder(False)
        new.initialize_rle_from(old)
        pend: list[Pending | None] = list(pending)
        if old.rle_count:
            # not None: _has_skip(old) is False, so the RLE run repeats a value
            last = cast(int, old.last)
            pend = [pending_value(last, False)] * old.rle_count + pend
        new.extend(values, pend, _run_ends_list(values), self.write_block)
        enc.s8b = new
        return False

    def skip(self) -> None:
        before = len(self.buf)
        self.wtype = self.ptype
        enc = self.enc
        enc.s8b.skip(self.write_block)
        # A block was written and only skips are pending: the double scale can start over.
        if (
            before != len(self.buf)
            and self.ptype == T_DOUBLE
            and all(p is None for p in enc.s8b.pending_values())
        ):
            enc.prev_encoded, enc.scale = scale_and_encode_double(  # type: ignore[union-attr]
                enc.last_in_prev_block,  # type: ignore[union-attr]
                0,
            )

    def flush(self) -> None:
        self.wtype = self.ptype
        self.enc.s8b.flush(self.write_block)
        if self.ctrl is not None:
            self.record(self.ctrl, len(self.buf) - self.ctrl)

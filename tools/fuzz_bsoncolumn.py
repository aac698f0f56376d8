"""Fuzz the BSONColumn decoders with random and mutated columns.

Every input must end in a result or `BSONColumnError` — never another exception, never
invalid BSON, never more rows than the input can encode (1920 per 8-byte block).

Usage: python tools/fuzz_bsoncolumn.py [--cases N] [--seed S] [--seconds T]

The unit tests run `fuzz(seed, cases)` with a fixed seed; this script runs longer.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import struct
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import bson  # noqa: E402

from storage.bsoncolumn import (  # noqa: E402
    BSONColumn,
    BSONColumnBuilder,
    BSONColumnError,
    NotNumericColumn,
    decode_numeric,
    native,
)
from storage.bsoncolumn.api import rows_to_document  # noqa: E402
from storage.bsoncolumn.decoder import decode_elements  # noqa: E402
from storage.bsoncolumn.paths import decode_paths  # noqa: E402
from storage.bsoncolumn.reader import VALUES_CODEC_OPTIONS  # noqa: E402

VECTORS = ROOT / "tests" / "data" / "bsoncolumn.json"
INTERESTING = [
    0x00,
    0x01,
    0x02,
    0x03,
    0x04,
    0x05,
    0x0F,
    0x10,
    0x7F,
    0x80,
    0x8F,
    0x90,
    0x9F,
    0xD0,
    0xE0,
    0xF0,
    0xF1,
    0xF2,
    0xFE,
    0xFF,
]


def _built_corpus() -> list[bytes]:
    """Columns exercising paths the vectors reach less: interleaving, scales, 128-bit."""
    out = []

    def column(values: list) -> bytes:
        b = BSONColumnBuilder()
        for v in values:
            b.skip() if v is None else b.append(v)
        return b.finalize()

    out.append(column([{"a": i, "b": {"c": i * 0.5, "d": "x"}} for i in range(30)]))
    out.append(column([{"a": i} if i % 3 else {"a": i, "b": [i, i]} for i in range(20)]))
    out.append(column([[i, i + 1] for i in range(10)] + [None, {"x": 1}]))
    out.append(column([1.5, 2.25, 3.125, 1e-9, 7.0, None, 8.0] * 5))
    out.append(column([bson.Int64(1 << 40) * i for i in range(50)]))
    out.append(column([bson.Decimal128(f"{i}E{i % 7}") for i in range(20)]))
    out.append(column([("abcdefghijklmnop"[i % 16 :]) for i in range(40)]))
    out.append(column([None] * 300 + [1] * 300 + [None] * 5))
    out.append(column([bson.MinKey(), bson.MaxKey(), None, bson.Regex("a", "i")] * 3))
    ref = bson.encode({"a": 1, "b": [1, 2]})
    # legacy interleaving (arrays are scalars): stream a deltas 0, +2; stream b repeats
    blk = struct.pack("<Q", 13 | 4 << 34)
    out.append(b"\xf0" + ref + b"\x80" + blk + b"\x80" + struct.pack("<Q", 13) + b"\x00\x00")
    return out


def load_corpus() -> list[bytes]:
    corpus = _built_corpus()
    if VECTORS.exists():
        data = json.loads(VECTORS.read_text())
        corpus += [base64.b64decode(v["column_b64"]) for v in data["valid"]]
        corpus += [base64.b64decode(v["column_b64"]) for v in data["invalid"]]
    return corpus


def _mutate(rnd: random.Random, col: bytearray, corpus: list[bytes]) -> bytearray:
    op = rnd.randrange(11)
    n = len(col)
    if op == 0 and n:  # flip a bit
        i = rnd.randrange(n)
        col[i] ^= 1 << rnd.randrange(8)
    elif op == 1 and n:  # interesting byte
        col[rnd.randrange(n)] = rnd.choice(INTERESTING)
    elif op == 2 and n:  # random byte
        col[rnd.randrange(n)] = rnd.randrange(256)
    elif op == 3:  # truncate, keeping a final 0x00 half of the time
        del col[rnd.randrange(n + 1) :]
        if rnd.random() < 0.5:
            col.append(0)
    elif op == 4 and n:  # delete a range
        i = rnd.randrange(n)
        del col[i : i + rnd.randint(1, 16)]
    elif op == 5 and n:  # duplicate a range
        i = rnd.randrange(n)
        col[i:i] = col[i : i + rnd.randint(1, 24)]
    elif op == 6:  # insert random bytes
        i = rnd.randrange(n + 1)
        col[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 9)))
    elif op == 7:  # splice with another column
        other = rnd.choice(corpus)
        col[rnd.randrange(n + 1) :] = other[rnd.randrange(len(other) + 1) :]
    elif op == 8 and n >= 8:  # overwrite 8 bytes with an RLE or a random block
        i = rnd.randrange(n - 7)
        blk = (15 | rnd.randrange(16) << 4) if rnd.random() < 0.5 else rnd.getrandbits(64)
        col[i : i + 8] = struct.pack("<Q", blk)
    elif op == 9 and n:  # change a block count nibble / selector nibble
        i = rnd.randrange(n)
        col[i] = (col[i] & 0xF0) | rnd.randrange(16)
    elif op == 10 and n >= 4:  # perturb a little-endian int32 (sizes, lengths)
        i = rnd.randrange(n - 3)
        v = struct.unpack_from("<i", col, i)[0] + rnd.choice([-2, -1, 1, 2, 1 << 20, -(1 << 30)])
        struct.pack_into("<i", col, i, max(-(2**31), min(2**31 - 1, v)))
    return col


def case(rnd: random.Random, corpus: list[bytes]) -> bytes:
    r = rnd.random()
    if r < 0.05:
        return bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 40)))
    if r < 0.10:  # random blocks behind a valid literal
        head = rnd.choice(
            [
                b"\x10\x00\x01\x00\x00\x00",
                b"\x01\x00" + struct.pack("<d", 1.5),
                b"\x02\x00\x02\x00\x00\x00a\x00",
                b"",
            ]
        )
        nblocks = rnd.randint(1, 4)
        ctrl = rnd.choice([0x80, 0x90, 0xA0, 0xD0]) | (nblocks - 1)
        blocks = b"".join(struct.pack("<Q", rnd.getrandbits(64)) for _ in range(nblocks))
        return head + bytes((ctrl,)) + blocks + b"\x00"
    # the shorter of two picks: small columns decode fast and still reach every path
    col = bytearray(min(rnd.choice(corpus), rnd.choice(corpus), key=len))
    for _ in range(rnd.choice((1, 1, 1, 2, 3))):
        col = _mutate(rnd, col, corpus)
    return bytes(col)


@dataclass
class Stats:
    cases: int = 0
    decoded: int = 0
    rejected: int = 0
    failures: list[tuple[bytes, str]] = field(default_factory=list)


def check(column: bytes, stats: Stats, others: bool = True) -> None:
    try:
        try:
            rows = decode_elements(column)
        except BSONColumnError:
            stats.rejected += 1
            rows = None
        if rows is not None:
            # linear bound: 1920 rows per 8-byte block, one per literal byte
            if len(rows) > 240 * len(column) + 1:
                raise AssertionError(f"{len(rows)} rows from {len(column)} bytes")
            doc = rows_to_document(rows)
            bson.decode(doc, codec_options=VALUES_CODEC_OPTIONS)  # output is valid BSON
            stats.decoded += 1
        if others:
            _check_other_decoders(column, rows)
    except Exception:
        stats.failures.append((column, traceback.format_exc()))


def _check_other_decoders(column: bytes, rows: list | None) -> None:
    """The numpy, path, reader and native decoders agree with the element decoder."""
    doc = native.decompress(column)
    if doc is not None:
        if rows is None:
            raise AssertionError("native decompress accepted a column the element decoder rejects")
        if doc != rows_to_document(rows):
            raise AssertionError("native decompress disagrees with rows_to_document")
    try:
        nc = decode_numeric(column)
    except NotNumericColumn:
        nc = None
    except BSONColumnError:
        if rows is not None:
            raise
        nc = None
    if nc is not None:
        if rows is None:
            raise AssertionError("numeric decoder accepted a column the element decoder rejects")
        if len(nc) != len(rows) or [r is not None for r in rows] != nc.present.tolist():
            raise AssertionError("numeric decoder disagrees on rows")
    try:
        paths = decode_paths(column, ["a", "b.c"])
        if rows is not None and len(paths["a"]) != len(rows):
            raise AssertionError("path decoder disagrees on rows")
    except BSONColumnError:
        pass
    try:
        col = BSONColumn(column)
        col.count()
        col.min()
        col.last()
    except BSONColumnError:
        if rows is not None:
            raise


def fuzz(seed: int, cases: int, seconds: float | None = None, others_every: int = 1) -> Stats:
    """Run `cases` inputs; the other decoders see every `others_every`-th input."""
    rnd = random.Random(seed)
    corpus = load_corpus()
    stats = Stats()
    deadline = None if seconds is None else time.monotonic() + seconds
    for i in range(cases):
        check(case(rnd, corpus), stats, others=i % others_every == 0)
        stats.cases += 1
        if deadline is not None and time.monotonic() > deadline:
            break
    return stats


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cases", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--seconds", type=float, default=None)
    args = p.parse_args()
    t0 = time.monotonic()
    stats = fuzz(args.seed, args.cases, args.seconds)
    dt = time.monotonic() - t0
    print(
        f"seed {args.seed}: {stats.cases} cases in {dt:.1f}s "
        f"({stats.decoded} decoded, {stats.rejected} rejected, {len(stats.failures)} failures)"
    )
    for column, tb in stats.failures[:5]:
        print(base64.b64encode(column).decode())
        print(tb)
    return 1 if stats.failures else 0


if __name__ == "__main__":
    sys.exit(main())

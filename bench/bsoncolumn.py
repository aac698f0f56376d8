"""Benchmark the BSONColumn codec against plain and zstd-compressed BSON.

For each data set (columns of `--values` values, a full bucket by default) it prints:
bytes per value as BSONColumn, as the plain BSON document {"0": v0, ...} and as that
document compressed with zstd (cramjam); and throughput in values per second (CPU time,
best of several runs) for `compress`, `decompress` (to the BSON document), reading
Python values (`BSONColumn.values`), the numpy block decoder (`decode_numeric`, numeric
columns), and for comparison zstd compress/decompress of the BSON document.

A second table compares the native uniform-column encoder (`storage.bsoncolumn.native`,
the optional native core, Rust) with the Python builder on the same raw values. A third shows
the time-series insert pattern: a bucket growing to `--values` values in batches of
`--batch`, the column finalized after every batch, by (a) the Python builder
(`extend_elements` + `finalize`), (b) `native.encode_uniform` of the whole column so far,
(c) `native.UniformBuilder` (`extend` + `finalize`); CPU microseconds per batch, mean
over the growth and for the last batch. A last table times `decode_numeric` of uniform
columns with the native decoder (`native.decode_uniform`) and with the numpy path, in
CPU microseconds per column, for `--values` values and for 10 values (the fixed cost).

Usage: python bench/bsoncolumn.py [--values 1000] [--repeat 7] [--batch 10]
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import bson  # noqa: E402
import cramjam  # noqa: E402

from storage.bsoncolumn import (  # noqa: E402
    BSONColumn,
    BSONColumnBuilder,
    NotNumericColumn,
    blocks,
    compress,
    decode_numeric,
    decompress,
    native,
)


def datasets(n: int, seed: int = 42) -> dict[str, list]:
    rnd = random.Random(seed)
    walk = []
    x = 100.0
    for _ in range(n):
        x = round(x + rnd.uniform(-1, 1), 2)
        walk.append(x)
    oid_base = bson.ObjectId()
    oids = [
        bson.ObjectId(oid_base.binary[:4] + oid_base.binary[4:9] + (i).to_bytes(3, "big"))
        for i in range(n)
    ]
    states = ["idle", "busy", "down", "starting"]
    return {
        "int64 counter": [bson.Int64(1_000_000 + i) for i in range(n)],
        "double 2-dec walk": walk,
        "date every 1 s": [bson.DatetimeMS(1_700_000_000_000 + 1000 * i) for i in range(n)],
        "ObjectId": oids,
        "short strings": [rnd.choice(states) for _ in range(n)],
        "object 5 numbers": objects(n, rnd),
    }


def objects(n: int, rnd: random.Random) -> list[dict]:
    """Measurements with 5 numeric fields, each a random walk (as sensor data goes)."""
    cpu, mem, temp, load, procs = 50.0, 4 << 30, 40, 1.0, 200
    out = []
    for _ in range(n):
        cpu = round(min(100.0, max(0.0, cpu + rnd.uniform(-2, 2))), 2)
        mem += rnd.randint(-(1 << 20), 1 << 20)
        temp += rnd.randint(-1, 1)
        load = round(max(0.0, load + rnd.uniform(-0.3, 0.3)), 1)
        procs += rnd.randint(-3, 3)
        out.append({"cpu": cpu, "mem": bson.Int64(mem), "temp": temp, "load": load, "procs": procs})
    return out


def native_datasets(n: int, seed: int = 42) -> dict[str, tuple[int, bytes]]:
    """(BSON type, concatenated little-endian values) for the native vs Python rows."""
    rnd = random.Random(seed)
    walk = []
    x = 50
    for _ in range(n):  # TSBS cpu-like: an int random walk clamped to 0..100
        x = min(100, max(0, x + rnd.randint(-5, 5)))
        walk.append(x)
    doubles = []
    y = 100.0
    for _ in range(n):
        y = round(y + rnd.uniform(-1, 1), 2)
        doubles.append(y)
    q, d = struct.Struct("<q").pack, struct.Struct("<d").pack
    # one process's ObjectIds: 10 a second, counter +1 (as a driver makes _id values)
    process = bytes.fromhex("a1b2c3d4e5")
    oids = b"".join(
        (1_700_000_000 + i // 10).to_bytes(4, "big") + process + (4242 + i).to_bytes(3, "big")
        for i in range(n)
    )
    return {
        "int64 counter": (0x12, b"".join(q(1_000_000 + i) for i in range(n))),
        "int64 walk 0-100": (0x12, b"".join(q(v) for v in walk)),
        "double 2 decimals": (0x01, b"".join(d(v) for v in doubles)),
        "date every 10 s": (0x09, b"".join(q(1_700_000_000_000 + 10_000 * i) for i in range(n))),
        "ObjectId counter": (0x07, oids),
    }


def native_rows(n: int, repeat: int) -> None:
    print()
    if not native.AVAILABLE:
        print("native encoder: not built (pip install -e . builds the Rust crate native/ when cargo is on the PATH)")
        return
    print(f"encode {n} values of one type: native (Rust) vs Python builder (values/s, CPU time)")
    header = f"{'data':18s} {'native':>9s} {'python':>9s} {'ratio':>7s}"
    print(header)
    print("-" * len(header))
    for name, (t, raw) in native_datasets(n).items():
        size = len(raw) // n
        elements = [(t, raw[i : i + size]) for i in range(0, len(raw), size)]
        python = BSONColumnBuilder().extend_elements(elements).finalize()
        assert native.encode_uniform(t, raw) == python
        t_nat = cpu_time(lambda t=t, raw=raw: native.encode_uniform(t, raw), repeat)
        t_py = cpu_time(
            lambda e=elements: BSONColumnBuilder().extend_elements(e).finalize(), repeat
        )
        print(f"{name:18s} {fmt_rate(n, t_nat):>9s} {fmt_rate(n, t_py):>9s} {t_py / t_nat:6.0f}x")


def batch_rows(n: int, batch: int, repeat: int) -> None:
    """Per-batch cost of finalizing a growing column (the time-series insert pattern)."""
    print()
    if not native.AVAILABLE:
        return
    print(
        f"bucket growing to {n} values in batches of {batch}, finalized after each batch: "
        "CPU us per batch, mean over the growth / last batch"
    )
    header = f"{'data':18s} {'python builder':>16s} {'encode whole':>16s} {'native builder':>16s}"
    print(header)
    print("-" * len(header))
    for name, (t, raw) in native_datasets(n).items():
        if name == "int64 counter":
            continue
        size = len(raw) // n
        step = batch * size
        batches = [raw[i : i + step] for i in range(0, len(raw), step)]
        elements = [[(t, b[j : j + size]) for j in range(0, len(b), size)] for b in batches]

        def python_grow(upto: int, elements: list = elements) -> BSONColumnBuilder:
            b = BSONColumnBuilder()
            for eb in elements[:upto]:
                b.extend_elements(eb)
                b.finalize()
            return b

        def python_step(b: BSONColumnBuilder, eb: list = elements[-1]) -> bytes:
            b.extend_elements(eb)
            return b.finalize()

        def whole_grow(upto: int, t: int = t, batches: list = batches) -> bytearray:
            acc = bytearray()
            for b in batches[:upto]:
                acc += b
                native.encode_uniform(t, bytes(acc))
            return acc

        def whole_step(acc: bytearray, t: int = t, last: bytes = batches[-1]) -> bytes | None:
            acc += last
            return native.encode_uniform(t, bytes(acc))

        def native_grow(upto: int, t: int = t, batches: list = batches) -> native.UniformBuilder:
            u = native.UniformBuilder(t)
            for b in batches[:upto]:
                u.extend(b)
                u.finalize()
            return u

        def native_step(u: native.UniformBuilder, last: bytes = batches[-1]) -> bytes:
            u.extend(last)
            return u.finalize()

        m = len(batches)
        expected = python_step(python_grow(m - 1))
        assert whole_step(whole_grow(m - 1)) == expected == native_step(native_grow(m - 1))
        cells = []
        for grow, last in ((python_grow, python_step), (whole_grow, whole_step),
                           (native_grow, native_step)):
            mean = cpu_time(lambda grow=grow, m=m: grow(m), repeat) / m
            end = cpu_time_with_setup(lambda grow=grow, m=m: grow(m - 1), last, repeat)
            cells.append(f"{mean * 1e6:7.1f} / {end * 1e6:6.1f}")
        print(f"{name:18s} " + " ".join(f"{c:>16s}" for c in cells))


def decode_rows(n: int, repeat: int) -> None:
    print()
    if not native.AVAILABLE:
        print("native decoder: not built (pip install -e . builds the Rust crate native/ when cargo is on the PATH)")
        return
    print("decode_numeric of one column: native (Rust) vs numpy path (CPU microseconds per column)")
    header = f"{'data':18s} {'rows':>5s} {'native':>8s} {'numpy':>8s} {'ratio':>7s}"
    print(header)
    print("-" * len(header))
    wanted = ("int64 walk 0-100", "double 2 decimals", "date every 10 s")
    for rows in (n, 10):
        sets = native_datasets(rows)
        for name in wanted:
            t, raw = sets[name]
            column = native.encode_uniform(t, raw)
            assert column is not None and native.decode_uniform(column) is not None
            t_nat = cpu_time(lambda c=column: decode_numeric(c), repeat)
            blocks._NATIVE = False  # the numpy path, as without the extension
            try:
                t_py = cpu_time(lambda c=column: decode_numeric(c), repeat)
            finally:
                blocks._NATIVE = True
            print(
                f"{name:18s} {rows:5d} {t_nat * 1e6:8.2f} {t_py * 1e6:8.2f} {t_py / t_nat:6.0f}x"
            )


def cpu_time_with_setup(
    setup: Callable[[], object], fn: Callable[[object], object], repeat: int
) -> float:
    """Best CPU seconds of fn(setup()) over several runs, setup not timed."""
    best = float("inf")
    for _ in range(max(repeat, 20)):
        state = setup()
        t0 = time.process_time()
        fn(state)
        best = min(best, time.process_time() - t0)
    return best


def cpu_time(fn: Callable[[], object], repeat: int, min_time: float = 0.05) -> float:
    """Best CPU seconds per call (calls batched so each measure lasts ~min_time)."""
    t0 = time.process_time()
    fn()
    once = max(time.process_time() - t0, 1e-6)
    number = max(1, int(min_time / once))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - t0) / number)
    return best


def fmt_rate(values: int, seconds: float | None) -> str:
    if seconds is None:
        return "-"
    rate = values / seconds
    return f"{rate / 1e6:.2f}M" if rate >= 1e6 else f"{rate / 1e3:.0f}k"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--values", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--batch", type=int, default=10, help="values per batch (growth table)")
    args = p.parse_args()
    n = args.values
    print(f"{n} values per column; throughput in values/s (CPU time, best of {args.repeat});")
    print("an object counts as one value (its 5 fields are 5 interleaved streams)")
    header = (
        f"{'data':18s} {'col B/v':>7s} {'bson B/v':>8s} {'zstd B/v':>8s} "
        f"{'compress':>9s} {'decompress':>10s} {'values':>8s} {'numpy':>8s} "
        f"{'zstd c':>8s} {'zstd d':>8s}"
    )
    print(header)
    print("-" * len(header))
    for name, values in datasets(n).items():
        doc = bson.encode({str(i): v for i, v in enumerate(values)})
        column = compress(doc)
        assert decompress(column) == doc
        zst = bytes(cramjam.zstd.compress(doc))
        t_comp = cpu_time(lambda doc=doc: compress(doc), args.repeat)
        t_dec = cpu_time(lambda c=column: decompress(c), args.repeat)
        t_vals = cpu_time(lambda c=column: BSONColumn(c).values(), args.repeat)
        try:
            decode_numeric(column)
            t_np: float | None = cpu_time(lambda c=column: decode_numeric(c), args.repeat)
        except NotNumericColumn:
            t_np = None
        t_zc = cpu_time(lambda doc=doc: cramjam.zstd.compress(doc), args.repeat)
        t_zd = cpu_time(lambda z=zst: cramjam.zstd.decompress(z), args.repeat)
        print(
            f"{name:18s} {len(column) / n:7.2f} {len(doc) / n:8.2f} {len(zst) / n:8.2f} "
            f"{fmt_rate(n, t_comp):>9s} {fmt_rate(n, t_dec):>10s} {fmt_rate(n, t_vals):>8s} "
            f"{fmt_rate(n, t_np):>8s} {fmt_rate(n, t_zc):>8s} {fmt_rate(n, t_zd):>8s}"
        )
    native_rows(n, args.repeat)
    batch_rows(n, args.batch, args.repeat)
    decode_rows(n, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Storage-layer throughput: batched inserts, point reads, a full scan, peak RSS.

    python bench/storage_engine.py [--docs 1000000] [--engine sqlite|memory] [--dbpath DIR]

Drives `storage.catalog`/`storage.collection` directly (no server, no wire): inserts
`--docs` small documents in batches of 1000 into a collection with a secondary index,
then times point lookups by ``_id`` and by the secondary index, a scan of every
document (raw bytes, then decoded), and prints peak RSS. Figures guide the engine's
design; they are not assertions.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bson import ObjectId

from storage import bsonutil
from storage.bounds import Interval
from storage.catalog import Catalog

BATCH = 1000


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_batch(start: int) -> list[dict]:
    return [{"_id": ObjectId(), "n": i, "host": f"host_{i % 100}", "v": i * 0.5,
             "tag": "abcdefgh"} for i in range(start, start + BATCH)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--engine", default="sqlite", choices=["sqlite", "memory"])
    ap.add_argument("--dbpath", default=None)
    ap.add_argument("--lookups", type=int, default=20_000)
    args = ap.parse_args()
    tmp = None
    path = args.dbpath
    if path is None and args.engine == "sqlite":
        tmp = tempfile.mkdtemp(prefix="bucketd-bench-")
        path = tmp
    cat = Catalog.open(path, engine=args.engine)
    try:
        run(cat, args)
    finally:
        cat.close()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def run(cat: Catalog, args: argparse.Namespace) -> None:
    coll = cat.get_or_create_collection("bench", "docs")
    coll.create_indexes([{"key": {"n": 1}, "name": "n_1"}])
    print(f"engine={args.engine} docs={args.docs} batch={BATCH}")

    # Inserts: the first 100k timed separately with only the _id index, then the rest
    # with the secondary index as well (the realistic case).
    plain = cat.get_or_create_collection("bench", "plain")
    elapsed = 0.0
    n_plain = min(100_000, args.docs)
    for start in range(0, n_plain, BATCH):
        batch = make_batch(start)
        t1 = time.perf_counter()
        plain.insert_many(batch)
        elapsed += time.perf_counter() - t1
    print(f"insert (_id index only):       {n_plain / elapsed:10,.0f} docs/s")
    cat.drop_collection("bench", "plain")

    gen_time = 0.0
    t0 = time.perf_counter()
    for start in range(0, args.docs, BATCH):
        g = time.perf_counter()
        batch = make_batch(start)
        gen_time += time.perf_counter() - g
        res = coll.insert_many(batch)
        assert not res.errors
    dt = time.perf_counter() - t0 - gen_time
    print(f"insert (+1 secondary index):   {args.docs / dt:10,.0f} docs/s")

    # The server has the BSON bytes from the wire: pass them along (no re-encoding).
    pre = cat.get_or_create_collection("bench", "pre")
    elapsed = 0.0
    n_pre = min(100_000, args.docs)
    for start in range(0, n_pre, BATCH):
        batch = make_batch(start)
        encoded = [bsonutil.encode(d) for d in batch]
        t1 = time.perf_counter()
        pre.insert_many(batch, encoded=encoded)
        elapsed += time.perf_counter() - t1
    print(f"insert, pre-encoded (_id only): {n_pre / elapsed:9,.0f} docs/s")
    cat.drop_collection("bench", "pre")

    with cat.transaction(durable=True):
        pass
    t0 = time.perf_counter()
    n_j = 200
    for i in range(n_j):
        with cat.transaction(durable=True):
            tmpc = cat.get_or_create_collection("bench", "j")
            tmpc.insert_one({"_id": i})
    dt = time.perf_counter() - t0
    print(f"insert_one with j:true:        {n_j / dt:10,.0f} commits/s")
    cat.drop_collection("bench", "j")

    ids = []
    for i, (_rid, raw) in enumerate(coll.scan()):
        if i % max(1, args.docs // args.lookups) == 0:
            ids.append(bsonutil.decode(raw)["_id"])
    random.Random(1).shuffle(ids)
    t0 = time.perf_counter()
    for oid in ids:
        assert coll.find_id(oid) is not None
    dt = time.perf_counter() - t0
    print(f"point get by _id:              {len(ids) / dt:10,.0f} gets/s")

    rnd = random.Random(2)
    ns = [rnd.randrange(args.docs) for _ in range(len(ids))]
    t0 = time.perf_counter()
    for n in ns:
        got = list(coll.index_scan("n_1", [[Interval.point(n)]]))
        assert len(got) == 1
    dt = time.perf_counter() - t0
    print(f"point get by secondary index:  {len(ns) / dt:10,.0f} gets/s")

    t0 = time.perf_counter()
    count = sum(1 for _ in coll.scan())
    dt = time.perf_counter() - t0
    print(f"full scan, raw bytes:          {count / dt:10,.0f} docs/s ({count:,} docs, "
          f"{dt:.2f} s)")
    t0 = time.perf_counter()
    total = 0
    for _rid, raw in coll.scan():
        total += bsonutil.decode(raw)["n"] & 1
    dt = time.perf_counter() - t0
    print(f"full scan, decoded:            {count / dt:10,.0f} docs/s ({dt:.2f} s)")

    t0 = time.perf_counter()
    lo = args.docs // 3
    got = sum(1 for _ in coll.index_scan("n_1", [[Interval(lo, True, lo + 100_000, False)]]))
    dt = time.perf_counter() - t0
    print(f"index range scan + fetch:      {got / dt:10,.0f} docs/s ({got:,} docs)")

    st = coll.stats()
    print(f"collection: count={st.count:,} size={st.size / 2**20:.1f} MiB "
          f"storage={st.storage_size / 2**20:.1f} MiB indexes={st.total_index_size / 2**20:.1f} MiB")
    print(f"peak RSS:                      {rss_mb():10,.0f} MiB")


if __name__ == "__main__":
    main()

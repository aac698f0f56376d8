"""The cost of the catalog-version check several processes on one PostgreSQL database
pay before each command (`StorageService.sync_catalog`).

    python bench/catalog_version.py --uri postgresql://... [--n 5000]

Opens a catalog on a fresh schema of the database at `--uri` and times, per call: the
check itself on the storage thread (`Catalog.refresh_if_changed`: one short query), the
check as a command pays it (a hop to the storage thread and the query), and a hop alone
(a no-op on the storage thread) for comparison. The schema is dropped at the end.
Figures, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from server.storage_service import StorageService, StorageThread
from storage.catalog import Catalog


def _per_call_us(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


async def _async_per_call_us(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await fn()
    return (time.perf_counter() - start) / n * 1e6


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uri", required=True)
    ap.add_argument("--n", type=int, default=5000)
    args = ap.parse_args()
    schema = f"bench_{secrets.token_hex(4)}"
    thread = StorageThread()
    catalog = await thread.run(lambda: Catalog.open(engine="postgresql", uri=args.uri,
                                                    schema=schema))
    storage = StorageService(catalog, thread, "", "postgresql")
    try:
        await storage.run(catalog.create_collection, "bench", "c")
        direct = await thread.run(_per_call_us, catalog.refresh_if_changed, args.n)
        synced = await _async_per_call_us(storage.sync_catalog, args.n)
        hop = await _async_per_call_us(lambda: thread.run(lambda: None), args.n)
        print(f"version check on the storage thread: {direct:8.1f} us per call")
        print(f"sync_catalog as a command pays it:   {synced:8.1f} us per call")
        print(f"storage-thread hop alone:            {hop:8.1f} us per call")
    finally:
        await thread.run(catalog.engine._exec, f'DROP SCHEMA "{schema}" CASCADE')
        await storage.close()


if __name__ == "__main__":
    asyncio.run(main())

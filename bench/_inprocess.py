"""The storage thread's time-series ingest, in process (`bench/reopening.py`,
`bench/bucket_writes.py`): a buckets collection on SQLite with the default index, and
batches through the bucket catalog, `StoredBuckets` and the group commit, a flush every
`flush_every` batches, as the storage thread does. No server, no wire."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from query.match import compile_filter  # noqa: E402
from storage.catalog import Catalog  # noqa: E402
from storage.collection import Collection  # noqa: E402
from storage.timeseries import default_index_spec, parse_timeseries_options  # noqa: E402
from storage.timeseries.bucket_catalog import BucketCatalog  # noqa: E402
from storage.timeseries.pending_writes import DeferredBucketWrites  # noqa: E402
from storage.timeseries.stored_buckets import StoredBuckets  # noqa: E402
from storage.vocabulary.raw_documents import RawDocuments  # noqa: E402

OPTIONS = {"timeField": "time", "metaField": "tags"}


def open_catalog(path: str) -> Catalog:
    return Catalog.open(path, compile_filter=lambda s: compile_filter(s).matches)


def create_buckets(cat: Catalog) -> Collection:
    """The buckets collection of `db.c` (OPTIONS) with MongoDB's default index."""
    opts = parse_timeseries_options(OPTIONS)
    index = default_index_spec(opts)
    assert index is not None
    with cat.transaction():
        cat.create_collection("db", "system.buckets.c", {"timeseries": OPTIONS})
    buckets = cat.get_collection("db", "system.buckets.c")
    assert buckets is not None
    with cat.transaction():
        buckets.create_indexes([index])
    return buckets


def ingest(cat: Catalog, batches: list[RawDocuments], flush_every: int
           ) -> tuple[float, BucketCatalog]:
    """Ingest `batches` into `db.c` of `cat` (created): the CPU seconds it took, and the
    bucket catalog (its statistics)."""
    opts = parse_timeseries_options(OPTIONS)
    buckets = cat.get_collection("db", "system.buckets.c")
    assert buckets is not None
    pending = DeferredBucketWrites()

    def flush() -> None:
        pending.flush(cat)

    catalog = BucketCatalog()
    source = StoredBuckets(buckets, opts, pending, flush)
    t0 = time.process_time()
    for i, batch in enumerate(batches):
        result = catalog.insert_batch("db.c", opts, batch, source, ordered=False)
        pending.add("db", "system.buckets.c", result.writes)
        catalog.commit(result)
        if i % flush_every == flush_every - 1:
            flush()
    flush()
    return time.process_time() - t0, catalog

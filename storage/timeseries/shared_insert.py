"""Time-series inserts when other processes write the same buckets collection.

With a storage engine several processes share (`StorageEngine.multi_process`:
PostgreSQL), each process has a bucket catalog of its own and none knows the others'
open buckets, so the group commit's order (commit in the catalog, acknowledge, write
later) could overwrite a bucket another process changed meanwhile. Here a batch's bucket
writes are written first, in one transaction, each update checking that storage still
holds the bucket as this catalog last read or wrote it (`BucketWrite.expected`); only
then does the catalog commit the batch. When another process changed a bucket
(WriteConflict), nothing was written: the catalog aborts the batch, which forgets every
bucket it touched, and stages it again, into buckets it opens anew or reopens from
storage as they are now; mongod retries a batch after a write conflict the same way.

Two processes do not append to one bucket by design: each process's bucket ids carry its
instance tag (`bucket_id.tag_of`, the engine's `instance_tag`), and query-based
reopening takes only buckets of this process or of processes no longer alive
(`StorageEngine.instance_alive`), so after a restart a process goes on filling the
buckets it left open. Two open buckets for one meta value in two processes are allowed:
reads see all buckets. What the check catches is every other write of another
process to a bucket (updates, deletes, TTL, raw writes to the buckets collection). A new
bucket whose _id another process took (their counters of bucket ids met) is a duplicate
key: the counter is reseeded and the batch retried, as MongoDB does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from bson import ObjectId

from storage.engine.base import retry_write_conflicts, write_conflict
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.raw_documents import RawDocuments

from .bucket_id import tag_of
from .pending_writes import DeferredBucketWrites, write_buckets
from .stored_buckets import StoredBuckets

if TYPE_CHECKING:
    from storage.catalog import Catalog
    from storage.collection import Collection

    from .bucket_catalog import BucketCatalog
    from .options import TimeseriesOptions
    from .write_batch import BatchResult

__all__ = ["insert_shared"]


def insert_shared(bucket_catalog: BucketCatalog, catalog: Catalog, buckets: Collection,
                  ns: str, options: TimeseriesOptions,
                  measurements: Sequence[Any] | RawDocuments, *, ordered: bool,
                  durable: bool, prescanned: Any = None,
                  before_write: Callable[[BatchResult], None] | None = None) -> BatchResult:
    """Stage `measurements`, write their buckets (durably when `durable`) and commit them
    in `bucket_catalog`, again from the start after each write conflict. Returns the
    committed batch. `before_write(result)` sees the writes first."""
    scans = [prescanned]  # the scan of the first attempt; later ones scan again
    no_pending = DeferredBucketWrites()
    engine = catalog.engine
    own = bucket_catalog.id_tag

    def reopenable(bucket_id: ObjectId) -> bool:
        tag = tag_of(bucket_id)
        return tag == own or not engine.instance_alive(tag)

    def attempt() -> BatchResult:
        source = StoredBuckets(buckets, options, no_pending, _nothing, reopenable=reopenable)
        result = bucket_catalog.insert_batch(ns, options, measurements, source,
                                             ordered=ordered,
                                             prescanned=scans.pop() if scans else None)
        try:
            if before_write is not None:
                before_write(result)
            with catalog.transaction(durable=durable):
                write_buckets(buckets, result.writes)
        except MongoError as e:
            bucket_catalog.abort(result)
            if e.code != ErrorCode.DuplicateKey:
                raise
            # another process's counter of bucket ids met ours: MongoDB reseeds and
            # retries (the buckets collection's only unique index is _id's)
            bucket_catalog.reseed_bucket_ids()
            raise write_conflict() from None
        except BaseException:
            bucket_catalog.abort(result)
            raise
        bucket_catalog.commit(result)
        return result

    return retry_write_conflicts(attempt)


def _nothing() -> None:
    pass

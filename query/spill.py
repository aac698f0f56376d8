"""Memory accounting and spilling to temporary files for blocking stages.

`$group` and `$sort` hold at most `ctx.memory_limit_bytes` (MongoDB's 100 MB default). Over the
limit, without `allowDiskUse` they fail with QueryExceededMemoryLimitNoDiskUseAllowed (292);
with it, `$sort` writes sorted runs and merges them (k-way, stable) and `$group` sends the
documents of groups it cannot hold to hash partitions that are grouped one at a time.

Spill files hold BSON documents back to back (`bson.decode_file_iter` reads them), in
`ctx.temp_dir` (or the system temp dir) and are deleted when closed.
"""

from __future__ import annotations

import heapq
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Final

import bson

from query.context import PipelineContext
from query.expressions.reducers import approx_size
from storage.bsonutil import CODEC_OPTIONS, encode
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["SpillFile", "SizeEstimator", "external_sort", "sort_limit_error",
           "group_limit_error", "MEASURE_EVERY"]

# After the first documents, only every MEASURE_EVERY-th document is measured; the others are
# charged the running average (sizes are an approximation, as in MongoDB).
MEASURE_EVERY: Final = 16
_EXACT_FIRST: Final = 256


def sort_limit_error(limit: int) -> MongoError:
    return MongoError(ErrorCode.QueryExceededMemoryLimitNoDiskUseAllowed,
                      f"Sort exceeded memory limit of {limit} bytes, but did not opt in to "
                      "external sorting.")


def group_limit_error() -> MongoError:
    return MongoError(ErrorCode.QueryExceededMemoryLimitNoDiskUseAllowed,
                      "Exceeded memory limit for $group, but didn't allow external sort. Pass "
                      "allowDiskUse:true to opt in.")


class SizeEstimator:
    """Approximate document sizes: exact for the first documents, then sampled."""

    __slots__ = ("n", "shared", "total")

    def __init__(self) -> None:
        self.n = 0
        self.total = 0
        self.shared: dict[int, tuple[Any, int]] = {}  # embedded documents seen, by object

    def size(self, doc: Any) -> int:
        n = self.n
        self.n = n + 1
        if n < _EXACT_FIRST or n % MEASURE_EVERY == 0:
            s = approx_size(doc, self.shared) + 64
            self.total += s
            return s
        return self.total // max(1, min(n, _EXACT_FIRST + n // MEASURE_EVERY))


class SpillFile:
    """An append-then-read temporary file of BSON documents."""

    def __init__(self, temp_dir: str | None) -> None:
        self._f: IO[bytes] = tempfile.TemporaryFile(  # noqa: SIM115 - lives with the object
            dir=temp_dir, prefix="bucketd-spill-")
        self.count = 0
        self.bytes = 0

    def write(self, doc: dict) -> None:
        data = encode(doc)
        self._f.write(data)
        self.count += 1
        self.bytes += len(data)

    def write_all(self, docs: Iterable[dict]) -> None:
        for d in docs:
            self.write(d)

    def __iter__(self) -> Iterator[dict]:
        self._f.flush()
        self._f.seek(0)
        return bson.decode_file_iter(self._f, CODEC_OPTIONS)

    def close(self) -> None:
        self._f.close()


def external_sort(docs: Iterable[dict], key: Callable[[dict], Any],
                  ctx: PipelineContext) -> Iterator[dict]:
    """Sort `docs` by `key`, spilling sorted runs when over the memory limit."""
    limit = ctx.memory_limit_bytes
    est = SizeEstimator()
    buf: list[dict] = []
    append = buf.append
    used = 0
    avg = 0
    n = 0
    runs: list[SpillFile] = []
    try:
        for d in docs:
            append(d)
            n += 1
            if n < _EXACT_FIRST or n % MEASURE_EVERY == 0:
                used += est.size(d)
                avg = est.total // est.n
            else:
                used += avg
            if used > limit:
                if not ctx.allow_disk_use:
                    raise sort_limit_error(limit)
                buf.sort(key=key)
                run = SpillFile(ctx.temp_dir)
                run.write_all(buf)
                runs.append(run)
                buf = []
                append = buf.append
                used = 0
        buf.sort(key=key)
        if not runs:
            yield from buf
            return
        iters: list[Iterable[dict]] = [iter(r) for r in runs]
        iters.append(buf)
        yield from heapq.merge(*iters, key=key)
    finally:
        for r in runs:
            r.close()

"""The server's handle on storage: one worker thread that owns the engine.

The engine is `--storageEngine`'s: SQLite in `--dbpath` (the default) or PostgreSQL at
`--postgresUri`; `SERVER_ENGINES` lists them, and another name stops the start as
mongod's unknown engine does (18656).

Storage is synchronous and single-threaded (SQLite and PostgreSQL connections belong to
the thread that opened them), so every storage call goes through `StorageService.run`, which
executes it on the dedicated storage thread and awaits the result without blocking
the event loop (aiosqlite's model). Because there is exactly one such thread,
operations on storage — including the time-series bucket catalog — are serialised:
two connections can never open two buckets for one meta value.

Several processes on one PostgreSQL database: before each command (`sync_catalog`, called
by the dispatcher before the command reads the catalog) and before each operation outside
a command (TTL, timers) the thread looks once at the catalog version
(`Catalog.refresh_if_changed`, one short query) and reloads the catalog when another
process changed it, so DDL done there is seen here by the next command; caches derived
from the catalog listen (`Catalog.add_refresh_listener`).
An operation that meets a WriteConflict (another process's transaction won: a
serialization failure, a deadlock, a catalog changed under it) before it committed
anything is run again, a few times, as mongod retries write conflicts (not the
time-series insert path, whose conflicts its own layer resolves).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client.core import GaugeMetricFamily

from query.match import compile_filter
from storage import interrupt
from storage.catalog import Catalog
from storage.engine.uri import redact_uri
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from .log import LOG
from .operations import CURRENT_OP, Operation

if TYPE_CHECKING:
    from .context import ServerState

__all__ = ["StorageService"]

T = TypeVar("T")

#: the engines a server may run on (the memory engine is for unit tests only)
SERVER_ENGINES = ("sqlite", "postgresql")
#: runs of one operation that met write conflicts before it committed anything
_CONFLICT_ATTEMPTS = 8


def _compile_partial_filter(spec: dict[str, Any]) -> Callable[[Any], bool]:
    return compile_filter(spec).matches


_STOP = object()


class StorageThread:
    """One worker thread fed by a queue; results come back to the event loop.

    Cheaper per call than a ThreadPoolExecutor plus `wrap_future` (about a third of the
    hand-over latency on these machines), which matters when every command hops once.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="storage", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            loop, fut, fn, args = item
            try:
                result = fn(*args)
            except BaseException as exc:  # delivered to the awaiting coroutine
                loop.call_soon_threadsafe(_deliver_error, fut, exc)
            else:
                loop.call_soon_threadsafe(_deliver, fut, result)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._queue.put((loop, fut, fn, args))
        return await fut

    def stop(self) -> None:
        self._queue.put(_STOP)
        self._thread.join()


def _deliver(fut: asyncio.Future[Any], result: Any) -> None:
    if not fut.done():
        fut.set_result(result)


def _deliver_error(fut: asyncio.Future[Any], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


class StorageService:
    """The storage catalog and the thread that owns it; `run` is the way in."""

    def __init__(self, catalog: Catalog, thread: StorageThread, dbpath: str,
                 engine: str = "sqlite") -> None:
        self.catalog = catalog
        self.dbpath = dbpath
        self.engine = engine
        self._thread = thread
        self._closed = False
        self._before_operation: list[Callable[[], None]] = []

    @property
    def shared(self) -> bool:
        """Other processes may change the catalog (an engine with a catalog version)."""
        return self.catalog.engine.catalog_seen is not None

    async def sync_catalog(self) -> None:
        """Bring the catalog up to date with other processes' DDL (a no-op unless
        `shared`): one hop to the storage thread and one short query."""
        if self.shared and not self._closed:
            await self._thread.run(self.catalog.refresh_if_changed)

    def add_before_operation(self, fn: Callable[[], None]) -> None:
        """Call `fn()` on the storage thread before each operation `run` hands it (the
        time-series service writes its pending bucket writes there). Its errors are
        suppressed: the hook logs them and leaves storage consistent."""
        self._before_operation.append(fn)

    @classmethod
    async def open(cls, dbpath: str, state: ServerState) -> StorageService:
        engine = state.config.storage_engine
        if engine not in SERVER_ENGINES:
            raise MongoError(18656, f"Cannot start server with an unknown storage engine: "
                                    f"{engine}")
        options: dict[str, Any] = {}
        where: dict[str, Any] = {"dbPath": os.path.abspath(dbpath)}
        if engine == "postgresql":
            options["uri"] = state.config.postgres_uri
            where = {"uri": redact_uri(str(state.config.postgres_uri))}
        thread = StorageThread()
        try:
            catalog = await thread.run(lambda: Catalog.open(
                dbpath, engine=engine, compile_filter=_compile_partial_filter, **options))
        except BaseException:
            thread.stop()
            raise
        service = cls(catalog, thread, dbpath, engine)
        LOG.info("STORAGE", 22315, "initandlisten", "Opening storage engine",
                 engine=engine, **where,
                 collections=sum(len(catalog.list_collections(db))
                                 for db in catalog.list_databases()))
        return service

    async def run(self, fn: Callable[..., T], *args: Any, keep_deferred: bool = False) -> T:
        """Run `fn(*args)` on the storage thread, after the before-operation hooks (which
        write any time-series bucket writes still pending) unless `keep_deferred`: only
        the time-series insert path, which adds to them, runs without that."""
        if self._closed:
            raise MongoError(ErrorCode.InterruptedAtShutdown, "interrupted at shutdown")
        # the operation it works for: killOp stops it at the scans' safe points
        op = CURRENT_OP.get()
        if keep_deferred:
            return await self._thread.run(self._operate, fn, args, op, False)
        return await self._thread.run(self._operate, fn, args, op, True)

    def _flushed_first(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        self._run_hooks()
        return fn(*args)

    def _run_hooks(self) -> None:
        for hook in self._before_operation:
            with contextlib.suppress(Exception):  # logged; the catalog reopens from storage
                hook()

    def _operate(self, fn: Callable[..., T], args: tuple[Any, ...], op: Operation | None,
                 hooks: bool) -> T:
        """The catalog brought up to date, the hooks, then `fn` (again after a write
        conflict, while it has committed nothing). The time-series insert path
        (`hooks` False) is not run again: it changes the bucket catalog in memory, and
        its conflicts are the time-series layer's to resolve."""
        if op is None:  # commands were brought up to date by `sync_catalog`
            self.catalog.refresh_if_changed()
        if hooks:
            self._run_hooks()
        engine = self.catalog.engine
        attempt = 1
        while True:
            commits = engine.commits
            try:
                return interrupt.run_for(op, fn, *args)
            except MongoError as e:
                if (e.code != ErrorCode.WriteConflict or attempt >= _CONFLICT_ATTEMPTS
                        or engine.commits != commits or engine.in_transaction or not hooks):
                    raise
            time.sleep(min(0.002 * 2 ** attempt, 0.1))
            attempt += 1
            self.catalog.refresh_if_changed()

    def on_storage_thread(self) -> bool:
        return threading.current_thread().name == "storage"

    async def close(self) -> None:
        if self._closed:
            return
        with contextlib.suppress(Exception):
            await self._thread.run(self._flushed_first, self.catalog.close, ())
        self._closed = True
        self._thread.stop()

    # -- status -----------------------------------------------------------------------------
    def engine_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {"name": self.engine, "supportsCommittedReads": True,
                                  "persistent": True}
        if self.engine == "sqlite":
            status["dbPath"] = os.path.abspath(self.dbpath)
        return status

    def disk_bytes(self) -> int:
        size_bytes = getattr(self.catalog.engine, "size_bytes", None)
        if size_bytes is not None:  # a server engine: what its database holds for us
            with contextlib.suppress(Exception):
                return int(size_bytes())
            return 0
        total = 0
        for root, _dirs, files in os.walk(self.dbpath):
            for f in files:
                with contextlib.suppress(OSError):
                    total += os.path.getsize(os.path.join(root, f))
        return total

    def metric_families(self) -> Iterator[Any]:
        yield GaugeMetricFamily("bucketd_storage_size_bytes",
                                "Bytes of the data directory (or of the PostgreSQL schema)",
                                value=self.disk_bytes())

"""A server without sockets for the time-series service's unit tests: an in-memory
storage catalog behind the real storage thread, the service, and command requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from query.match import compile_filter
from server.config import Config
from server.context import CommandRequest, ConnectionState, ServerState
from server.cursors import CursorManager
from server.namespaces import TimeseriesTarget, resolve_namespace
from server.storage_service import StorageService, StorageThread
from server.timeseries.ddl import create_timeseries
from server.timeseries.service import TimeseriesService
from storage.bsonutil import decode
from storage.catalog import Catalog

__all__ = ["Harness", "open_harness"]


@dataclass
class Harness:
    state: ServerState
    storage: StorageService
    service: TimeseriesService
    db: str = "db"

    def request(self, name: str = "ping", **body: Any) -> CommandRequest:
        return CommandRequest(self.state, ConnectionState(1, "client", "server"), name,
                              {name: 1, **body}, self.db)

    async def create(self, name: str, **timeseries: Any) -> TimeseriesTarget:
        req = self.request("create", timeseries={"timeField": "t", **timeseries})
        await create_timeseries(req, name)
        return await self.target(name)

    async def target(self, name: str) -> TimeseriesTarget:
        ns = await self.storage.run(resolve_namespace, self.storage.catalog, self.db, name)
        assert ns.timeseries is not None
        return ns.timeseries

    async def buckets(self, target: TimeseriesTarget) -> list[dict[str, Any]]:
        """The stored bucket documents (after the pending writes: `run` flushes them)."""
        def run() -> list[dict[str, Any]]:
            coll = target.buckets(self.storage.catalog)
            return [] if coll is None else [decode(raw) for _rid, raw in coll.scan()]

        return await self.storage.run(run)

    async def close(self) -> None:
        await self.storage.close()


async def open_harness() -> Harness:
    thread = StorageThread()
    catalog = await thread.run(lambda: Catalog.open(
        engine="memory", compile_filter=lambda s: compile_filter(s).matches))
    storage = StorageService(catalog, thread, "memory")
    state = ServerState(Config())
    state.storage = storage
    state.cursors = CursorManager()
    service = TimeseriesService(state, storage)
    state.timeseries = service
    return Harness(state, storage, service)

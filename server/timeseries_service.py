"""Time-series collections in the server: create, insert, read, write, indexes, stats.

Glue between the commands and `storage.timeseries` (bucket catalog, bucket documents)
and `query` (unpacking, matching). Filled in as the time-series layer lands.
"""

from __future__ import annotations

from typing import Any, NoReturn

from storage.errors import ErrorCode, MongoError


def _not_built(what: str) -> NoReturn:
    raise MongoError(ErrorCode.NotImplemented, f"time-series collections: {what} is not built yet")


async def create_timeseries(req: Any, name: str) -> None:
    _not_built("create")


async def insert_measurements(*args: Any, **kw: Any) -> dict[str, Any]:
    _not_built("insert")


async def find_measurements(*args: Any, **kw: Any) -> dict[str, Any]:
    _not_built("find")


async def update_measurements(*args: Any, **kw: Any) -> dict[str, Any]:
    _not_built("update")


async def delete_measurements(*args: Any, **kw: Any) -> dict[str, Any]:
    _not_built("delete")


async def count_measurements(*args: Any, **kw: Any) -> int:
    _not_built("count")


async def distinct_measurements(*args: Any, **kw: Any) -> list[Any]:
    _not_built("distinct")


async def create_timeseries_indexes(*args: Any, **kw: Any) -> dict[str, Any]:
    _not_built("createIndexes")


def list_timeseries_indexes(*args: Any, **kw: Any) -> list[dict[str, Any]]:
    _not_built("listIndexes")


def drop_timeseries_indexes(*args: Any, **kw: Any) -> dict[str, Any]:
    _not_built("dropIndexes")


def timeseries_stats(*args: Any, **kw: Any) -> dict[str, Any]:
    _not_built("collStats")

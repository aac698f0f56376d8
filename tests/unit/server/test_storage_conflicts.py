"""StorageService runs an operation again after a WriteConflict (another process's
transaction won) while it has committed nothing, a bounded number of times, as mongod
retries write conflicts; after a commit, or past the bound, the client gets it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from server.storage_service import _CONFLICT_ATTEMPTS, StorageService, StorageThread
from storage.catalog import Catalog
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode


@pytest.fixture
async def storage() -> AsyncIterator[StorageService]:
    thread = StorageThread()
    catalog = await thread.run(lambda: Catalog.open(engine="memory"))
    service = StorageService(catalog, thread, "", "memory")
    yield service
    await service.close()


def _conflict() -> MongoError:
    return MongoError(ErrorCode.WriteConflict, "another transaction won")


async def test_a_conflict_before_any_commit_is_retried(storage) -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise _conflict()
        storage.catalog.create_collection("d", "c")
        return "done"

    assert await storage.run(flaky) == "done"
    assert len(calls) == 3 and storage.catalog.entry("d", "c") is not None


async def test_a_conflict_after_a_commit_reaches_the_client(storage) -> None:
    calls: list[int] = []

    def half_done() -> None:
        calls.append(1)
        storage.catalog.create_collection("d", f"c{len(calls)}")
        raise _conflict()

    with pytest.raises(MongoError) as ei:
        await storage.run(half_done)
    assert ei.value.code == ErrorCode.WriteConflict and len(calls) == 1


async def test_retries_are_bounded(storage) -> None:
    calls: list[int] = []

    def always() -> None:
        calls.append(1)
        raise _conflict()

    with pytest.raises(MongoError) as ei:
        await storage.run(always)
    assert ei.value.code == ErrorCode.WriteConflict and len(calls) == _CONFLICT_ATTEMPTS


async def test_other_errors_are_not_retried(storage) -> None:
    calls: list[int] = []

    def bad() -> None:
        calls.append(1)
        raise MongoError(ErrorCode.BadValue, "no")

    with pytest.raises(MongoError):
        await storage.run(bad)
    assert len(calls) == 1


async def test_the_time_series_insert_path_is_not_run_again(storage) -> None:
    calls: list[int] = []

    def insert() -> None:
        calls.append(1)
        raise _conflict()

    with pytest.raises(MongoError):
        await storage.run(insert, keep_deferred=True)
    assert len(calls) == 1

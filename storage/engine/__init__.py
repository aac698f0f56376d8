"""Storage engines behind one contract (`base`): `memory` for tests, `sqlite` by default.

`open_engine("sqlite", dbpath)` or `open_engine("memory")` returns a `StorageEngine`.
"""

from __future__ import annotations

from storage.engine.base import (
    FULL_RANGE,
    DuplicateKeyInIndex,
    IndexStore,
    KeyRange,
    RecordId,
    RecordStore,
    StorageEngine,
)

__all__ = [
    "FULL_RANGE",
    "DuplicateKeyInIndex",
    "IndexStore",
    "KeyRange",
    "RecordId",
    "RecordStore",
    "StorageEngine",
    "open_engine",
    "ENGINES",
]

ENGINES = ("sqlite", "memory")


def open_engine(kind: str = "sqlite", dbpath: str | None = None, **options: object) -> StorageEngine:
    """A new engine of `kind` ("sqlite" needs `dbpath`, a directory; "memory" ignores it)."""
    # Each engine is imported when chosen, so a process loads only the one it runs
    # (the SQLite engine brings sqlite3 and its group-commit thread machinery).
    if kind == "memory":
        from storage.engine.memory import MemoryEngine

        return MemoryEngine()
    if kind == "sqlite":
        from storage.engine.sqlite import SQLiteEngine

        return SQLiteEngine(dbpath, **options)  # type: ignore[arg-type]
    raise ValueError(f"unknown storage engine {kind!r}; choose one of {', '.join(ENGINES)}")

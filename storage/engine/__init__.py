"""Storage engines behind one contract (`base`): `memory` for tests, `sqlite` by default,
`postgresql` for a server database.

`open_engine("sqlite", dbpath)`, `open_engine("memory")` or
`open_engine("postgresql", uri="postgresql://...")` returns a `StorageEngine`.
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
    StorageUnavailable,
)

__all__ = [
    "FULL_RANGE",
    "DuplicateKeyInIndex",
    "IndexStore",
    "KeyRange",
    "RecordId",
    "RecordStore",
    "StorageEngine",
    "StorageUnavailable",
    "open_engine",
    "ENGINES",
]

ENGINES = ("sqlite", "memory", "postgresql")


def open_engine(kind: str = "sqlite", dbpath: str | None = None, **options: object) -> StorageEngine:
    """A new engine of `kind` ("sqlite" needs `dbpath`, a directory; "memory" ignores it;
    "postgresql" ignores it and needs the option `uri`)."""
    # Each engine is imported when chosen, so a process loads only the one it runs
    # (the SQLite engine brings sqlite3 and its group-commit thread machinery).
    if kind == "memory":
        from storage.engine.memory import MemoryEngine

        return MemoryEngine()
    if kind == "sqlite":
        from storage.engine.sqlite import SQLiteEngine

        return SQLiteEngine(dbpath, **options)  # type: ignore[arg-type]
    if kind == "postgresql":
        from storage.engine.postgresql import PostgresEngine

        return PostgresEngine(**options)  # type: ignore[arg-type]
    raise ValueError(f"unknown storage engine {kind!r}; choose one of {', '.join(ENGINES)}")

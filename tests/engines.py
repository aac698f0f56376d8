"""Which storage engine the engine-agnostic tests run on, and throwaway PostgreSQL
databases and schemas for them.

``BUCKETD_TEST_ENGINE=postgresql`` with ``BUCKETD_TEST_POSTGRES_URI=postgresql://...`` (a
user who may create databases; `.ci/postgres.sh start` prints one) runs the unit tests
that take an engine parameter on PostgreSQL only, and starts every e2e server with
``--storageEngine postgresql``. Each test run works in databases of its own
(``bucketd_t<pid>_<random>...``), dropped at the end of the session, so runs never
collide; each engine in a unit test gets a schema of its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import secrets
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["test_engine", "unit_engines", "postgres_scratch", "close_postgres_scratch",
           "engine_options", "open_test_engine", "close_test_engine"]

test_engine_env = "BUCKETD_TEST_ENGINE"
postgres_uri_env = "BUCKETD_TEST_POSTGRES_URI"


def test_engine() -> str:
    """The engine the e2e servers run on: "sqlite" (the default) or "postgresql"."""
    return os.environ.get(test_engine_env, "sqlite")


test_engine.__test__ = False  # type: ignore[attr-defined]  # not a test for pytest


def unit_engines(default: tuple[str, ...] = ("memory", "sqlite")) -> list[str]:
    """The engines an engine-parametrised unit test runs on."""
    return ["postgresql"] if test_engine() == "postgresql" else list(default)


class PostgresScratch:
    """Databases of one test run on the server at `base_uri`."""

    def __init__(self, base_uri: str) -> None:
        self.base_uri = base_uri
        self.prefix = f"bucketd_t{os.getpid()}_{secrets.token_hex(3)}"
        self._databases: dict[str, str] = {}  # key -> database name
        self._schemas = itertools.count(1)

    def _admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.base_uri, autocommit=True)

    def uri_of(self, database: str) -> str:
        parts = urlsplit(self.base_uri)
        return urlunsplit(parts._replace(path=f"/{database}"))

    def database(self, key: str = "") -> str:
        """The URI of this run's database for `key` (a dbpath: the same key, the same
        database, so a restarted server finds its data), created on first use."""
        name = self._databases.get(key)
        if name is None:
            suffix = hashlib.sha1(key.encode()).hexdigest()[:10] if key else "main"
            name = f"{self.prefix}_{suffix}"
            with self._admin() as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            self._databases[key] = name
        return self.uri_of(name)

    def new_schema(self) -> str:
        """A schema name not used before in this run (in `database()`)."""
        return f"s{next(self._schemas)}"

    def drop_schema(self, schema: str) -> None:
        import psycopg

        with psycopg.connect(self.database(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def close(self) -> None:
        with contextlib.suppress(Exception), self._admin() as conn:
            for name in self._databases.values():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._databases.clear()


_scratch: PostgresScratch | None = None


def postgres_scratch() -> PostgresScratch:
    """This run's PostgreSQL scratch space (needs BUCKETD_TEST_POSTGRES_URI)."""
    global _scratch
    if _scratch is None:
        uri = os.environ.get(postgres_uri_env)
        if not uri:
            raise RuntimeError(f"{test_engine_env}=postgresql needs {postgres_uri_env}")
        _scratch = PostgresScratch(uri)
    return _scratch


def close_postgres_scratch() -> None:
    global _scratch
    if _scratch is not None:
        _scratch.close()
        _scratch = None


def engine_options(kind: str) -> dict[str, Any]:
    """The options `open_engine`/`Catalog.open` need for `kind`: for "postgresql", this
    run's database and a fresh schema in it (drop it with `close_test_engine`)."""
    if kind != "postgresql":
        return {}
    scratch = postgres_scratch()
    return {"uri": scratch.database(), "schema": scratch.new_schema()}


def open_test_engine(kind: str, dbpath: str, **options: Any) -> Any:
    """`open_engine(kind, dbpath)`, on a fresh schema for "postgresql"."""
    from storage.engine import open_engine

    return open_engine(kind, dbpath, **engine_options(kind), **options)


def close_test_engine(engine: Any) -> None:
    engine.close()
    if getattr(engine, "name", "") == "postgresql":
        postgres_scratch().drop_schema(engine.schema)

"""Shared fixtures: a bucketd server run from this checkout, and clients for it."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pymongo
import pytest

from pytest_bucketd import BucketdProcess
from tests.engines import close_postgres_scratch, postgres_scratch, test_engine

ROOT = Path(__file__).resolve().parent.parent
SERVER_CMD = [sys.executable, "-m", "server"]


def pytest_configure(config: pytest.Config) -> None:
    # Installed, the package registers the plugin through its pytest11 entry point; from a
    # plain checkout, register it here so the example tests find its fixtures.
    import pytest_bucketd

    pm = config.pluginmanager
    if not pm.is_registered(pytest_bucketd):
        pm.register(pytest_bucketd, "pytest_bucketd")
    # A checkout whose package is not installed has no `bucketd` executable: run it from
    # the source instead (an installed one, beside this Python, always wins).
    beside = Path(sys.executable).with_name("bucketd")
    if not beside.exists() and shutil.which("bucketd") is None:
        os.environ.setdefault("BUCKETD_BIN", f"{sys.executable} -m server")


def pytest_sessionfinish(session: pytest.Session) -> None:
    close_postgres_scratch()  # this run's PostgreSQL databases, if it made any


def engine_args(dbpath: str | None) -> list[str]:
    """The flags that put a test server on BUCKETD_TEST_ENGINE (tests/engines.py): on
    PostgreSQL, one database of this run per data directory, so a restart on the same
    `dbpath` finds its data."""
    if test_engine() == "sqlite":
        return []
    if test_engine() != "postgresql":
        return ["--storageEngine", test_engine()]
    return ["--storageEngine", "postgresql", "--postgresUri",
            postgres_scratch().database(dbpath or "")]


def start_server(tmp_path: Path | None = None, *extra: str) -> BucketdProcess:
    """A server from this checkout (not an installed copy) in a child process, on the
    engine the tests run on."""
    proc = BucketdProcess(SERVER_CMD, dbpath=str(tmp_path) if tmp_path else None,
                          extra_args=[*engine_args(str(tmp_path) if tmp_path else None),
                                      *extra])
    proc.start()
    return proc


@dataclass
class ExternalServer:
    """A server someone else started (``BUCKETD_URI``), e.g. the compose scenario's."""

    uri: str
    port: int
    host: str
    credentials: tuple[str, str, str] | None = None  # user, password, authSource


def external_server(uri: str) -> ExternalServer:
    parsed = pymongo.uri_parser.parse_uri(uri)
    host, port = parsed["nodelist"][0]
    credentials = None
    if parsed["username"]:
        source = parsed["options"].get("authsource") or parsed["database"] or "admin"
        credentials = (parsed["username"], parsed["password"] or "", source)
    return ExternalServer(uri, int(port), host, credentials)


@pytest.fixture(scope="session")
def server() -> Iterator[BucketdProcess | ExternalServer]:
    external = os.environ.get("BUCKETD_URI")
    if external:
        yield external_server(external)
        return
    proc = start_server()
    try:
        yield proc
    finally:
        proc.stop()
        proc.cleanup()


@pytest.fixture(scope="session")
def uri(server: BucketdProcess) -> str:
    return server.uri


@pytest.fixture
def client(uri: str) -> Iterator[pymongo.MongoClient]:
    c: pymongo.MongoClient = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
    try:
        yield c
    finally:
        c.close()


def mongosh_path() -> str | None:
    local = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "mongosh"
    if local.exists():
        return str(local)
    return shutil.which("mongosh")

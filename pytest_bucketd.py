"""pytest plugin: start a throwaway bucketd server for your tests.

Fixtures:
- ``bucketd_server`` (session scope): starts the ``bucketd`` executable on a free port
  with a temporary ``--dbpath`` and yields its ``mongodb://`` URI; stops it afterwards.
- ``bucketd_client`` (function scope): a ``pymongo.MongoClient`` connected to it.

The executable comes from ``--bucketd-bin`` or ``$BUCKETD_BIN`` (a path, or a command
line such as ``"python -m server"``), else ``bucketd`` on ``PATH`` (or beside the running
Python) — so the server may live in its own environment (e.g. installed with pipx)
apart from the tests.

`BucketdProcess` is the launcher behind the fixtures, usable on its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["BucketdProcess", "bucketd_server", "bucketd_client"]

_READY = re.compile(rb'"msg":"Waiting for connections","attr":\{"port":(\d+)')


class BucketdProcess:
    """A bucketd server in a child process, on a free port, with its own data directory."""

    def __init__(self, command: list[str] | None = None, dbpath: str | None = None,
                 extra_args: list[str] | None = None, port: int = 0,
                 env: dict[str, str] | None = None) -> None:
        self.command = command or resolve_command(None)
        self._own_dbpath = dbpath is None
        self.dbpath = dbpath or tempfile.mkdtemp(prefix="bucketd-")
        self.extra_args = list(extra_args or [])
        self.requested_port = port
        self.port: int | None = None
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.output: list[bytes] = []
        self._reader: threading.Thread | None = None

    host = "127.0.0.1"

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 30.0) -> str:
        args = [*self.command, "--port", str(self.requested_port), "--dbpath", self.dbpath,
                *self.extra_args]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=self.env)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                m = _READY.search(line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self._reader = threading.Thread(target=pump, daemon=True)
        self._reader.start()
        if not ready.wait(timeout) or self.port is None:
            self.kill()
            raise RuntimeError("bucketd did not start:\n" + self.log_text())
        return self.uri

    def log_text(self) -> str:
        return b"".join(self.output).decode(errors="replace")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._join()
        return code

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._join()

    def _join(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5)
        self.port = None if self.proc is None or self.proc.poll() is not None else self.port

    def cleanup(self) -> None:
        if self._own_dbpath:
            shutil.rmtree(self.dbpath, ignore_errors=True)

    def __enter__(self) -> BucketdProcess:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.cleanup()


def resolve_command(option: str | None) -> list[str]:
    spec = option or os.environ.get("BUCKETD_BIN")
    if spec:
        return shlex.split(spec)
    found = shutil.which("bucketd")
    if found is None:
        # installed in the same virtual environment as pytest, but that env is not on PATH
        beside = os.path.join(os.path.dirname(sys.executable), "bucketd")
        found = beside if os.access(beside, os.X_OK) else None
    if found is None:
        raise RuntimeError("bucketd executable not found: put it on PATH, set BUCKETD_BIN, "
                           "or pass --bucketd-bin")
    return [found]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bucketd-bin", default=None,
                     help="bucketd executable (or command line) for the bucketd_server fixture")


@pytest.fixture(scope="session")
def bucketd_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URI of a bucketd server started for this test session."""
    proc = BucketdProcess(resolve_command(request.config.getoption("--bucketd-bin")))
    proc.start()
    try:
        yield proc.uri
    finally:
        proc.stop()
        proc.cleanup()


@pytest.fixture
def bucketd_client(bucketd_server: str) -> Iterator[Any]:
    """A pymongo MongoClient connected to the session's bucketd server."""
    import pymongo

    client: Any = pymongo.MongoClient(bucketd_server, serverSelectionTimeoutMS=10_000)
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close()

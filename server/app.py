"""The server's lifecycle: open storage, listen, serve connections, shut down in order.

Shutdown (SIGINT/SIGTERM, or `Server.shutdown()`): stop accepting, let in-flight
commands finish (idle connections are closed at once; awaiting hellos return), close
cursors, close storage cleanly, log and exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import socket

from storage import native
from storage.files import make_dirs, restrict_umask

from .config import Config
from .connection import serve_connection
from .context import ServerState
from .cursors import CursorManager
from .inbound import READ_SIZE
from .log import LOG
from .metrics import start_metrics_server
from .storage_service import StorageService
from .timeseries.service import TimeseriesService
from .ttl import ttl_monitor

__all__ = ["Server", "run"]

GRACEFUL_TIMEOUT = 30.0


class Server:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.state = ServerState(config)
        self._servers: list[asyncio.base_events.Server] = []
        self._conn_tasks: set[asyncio.Task[None]] = set()
        self._background: list[asyncio.Task[None]] = []
        self.ports: list[int] = []
        self._stopped = asyncio.Event()
        self._shutdown_tasks: list[asyncio.Task[None]] = []
        self.state.shutdown_hook = self.request_shutdown

    def request_shutdown(self, reason: str) -> None:
        """Start `shutdown` in its own task (the shutdown command's connection is one of
        those it closes)."""
        self._shutdown_tasks.append(asyncio.create_task(self.shutdown(reason)))

    # -- start -------------------------------------------------------------------------------
    async def start(self) -> None:
        state = self.state
        for name, value in self.config.set_parameters.items():
            state.params.set_startup(name, value)
        state.params.set_runtime({"slowOpThresholdMs": self.config.slowms})
        LOG.verbosity = state.params.get("logLevel")
        LOG.max_attribute_size_kb = state.params.get("maxLogSizeKB")
        LOG.info("CONTROL", 4615611, "initandlisten", "MongoDB starting", pid=state.pid,
                 port=self.config.port, dbPath=self.config.dbpath, architecture="64-bit",
                 host=state.host)
        LOG.info("CONTROL", 21951, "initandlisten", "Options set by command line",
                 options=self.config.parsed())
        # bucketd's own: which path the per-measurement work takes (native/ or Python)
        LOG.info("CONTROL", 9000002, "initandlisten", "Native core", **native.describe())
        state.cursors = CursorManager()
        await self._open_storage()
        if self.config.metrics_port is not None:
            state.metrics = await start_metrics_server(state, self.config.metrics_port,
                                                       self.config.bind_ip)
        for addr in self.config.bind_ip:
            family = socket.AF_INET6 if ":" in addr else socket.AF_INET
            try:
                srv = await asyncio.start_server(self._on_connection, host=addr,
                                                 port=self.config.port, family=family,
                                                 reuse_address=True, backlog=1024,
                                                 limit=READ_SIZE)
            except OSError as exc:
                if addr == "::" and "0.0.0.0" in self.config.bind_ip:
                    continue  # no IPv6 here: the IPv4 wildcard is enough
                raise OSError(exc.errno, f"cannot listen on {addr}:{self.config.port}: "
                                         f"{exc.strerror}") from None
            self._servers.append(srv)
            for s in srv.sockets:
                sockname = s.getsockname()
                self.ports.append(sockname[1])
                LOG.info("NETWORK", 23015, "listener", "Listening on",
                         address=f"{sockname[0]}:{sockname[1]}")
        if not self._servers:
            raise OSError("no address to listen on")
        self.port = self.ports[0]
        LOG.info("NETWORK", 23016, "listener", "Waiting for connections", port=self.port,
                 ssl="off")
        self._background.append(asyncio.create_task(self._reap_cursors()))
        if state.storage is not None:
            self._background.append(asyncio.create_task(ttl_monitor(state, state.storage)))
        # The collector is a quarter of insert throughput on this workload: objects made
        # at start-up never die, so move them out of its way and collect less often.
        gc.collect()
        gc.freeze()
        gc.set_threshold(50_000, 50, 100)

    async def _open_storage(self) -> None:
        make_dirs(self.config.dbpath)
        storage = await StorageService.open(self.config.dbpath, self.state)
        self.state.storage = storage
        self.state.timeseries = TimeseriesService(self.state, storage)

    async def _on_connection(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        state = self.state
        if state.shutting_down.is_set():
            writer.close()
            return
        if len(state.connections) >= self.config.max_conns:
            state.rejected_connections += 1
            LOG.info("NETWORK", 22942, "listener",
                     "Connection refused because there are too many open connections",
                     remote=str(writer.get_extra_info("peername")),
                     connectionCount=len(state.connections))
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._conn_tasks.add(task)
        try:
            await serve_connection(state, reader, writer)
        except asyncio.CancelledError:
            pass  # shutdown cancelled an idle connection; the task simply ends
        finally:
            self._conn_tasks.discard(task)

    async def _reap_cursors(self) -> None:
        while True:
            await asyncio.sleep(60)
            timeout = self.state.params.get("cursorTimeoutMillis") / 1000.0
            if self.state.cursors is not None:
                self.state.cursors.reap(timeout)

    # -- stop --------------------------------------------------------------------------------
    async def shutdown(self, reason: str = "shutdown") -> None:
        state = self.state
        if state.shutting_down.is_set():
            await self._stopped.wait()
            return
        LOG.info("CONTROL", 23138, "SignalHandler", "Shutting down", exitCode=0, reason=reason)
        state.shutting_down.set()
        for srv in self._servers:
            srv.close()
        # Idle connections are parked in read(): cancel those; busy ones finish their command
        # (the loop exits after replying because shutting_down is set).
        tasks = list(self._conn_tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=0.2)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=GRACEFUL_TIMEOUT)
        for t in self._background:
            t.cancel()
        for t in self._background:
            with contextlib.suppress(BaseException):
                await t
        if state.cursors is not None:
            state.cursors.close_all()
        if state.storage is not None:
            await state.storage.close()
            LOG.info("STORAGE", 4784907, "SignalHandler", "Storage closed cleanly")
        if state.metrics is not None:
            await state.metrics.close()
        for srv in self._servers:
            with contextlib.suppress(Exception):
                await srv.wait_closed()
        LOG.info("CONTROL", 20565, "SignalHandler", "Now exiting")
        self._stopped.set()

    async def serve_until_stopped(self) -> None:
        await self._stopped.wait()


async def _main(config: Config) -> int:
    server = Server(config)
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    signals: list[signal.Signals] = []
    shutdown_tasks: list[asyncio.Task[None]] = []

    def request_stop(signame: str) -> None:
        if stop_requested.is_set():
            return
        stop_requested.set()
        shutdown_tasks.append(loop.create_task(server.shutdown(f"received {signame}")))

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, request_stop, sig.name)
            signals.append(sig)
    try:
        await server.start()
    except Exception as exc:
        LOG.error("CONTROL", 20568, "initandlisten", "Error during startup",
                  error=f"{type(exc).__name__}: {exc}")
        await server.shutdown("startup failed")
        return 48 if isinstance(exc, OSError) else 1
    await server.serve_until_stopped()
    for signum in signals:
        loop.remove_signal_handler(signum)
    return 0


def run(config: Config) -> int:
    """Run the server until SIGINT/SIGTERM; returns the process exit code."""
    restrict_umask()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        return asyncio.run(_main(config))
    return uvloop.run(_main(config))



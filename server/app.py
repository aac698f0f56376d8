"""The server's lifecycle: open storage, listen, serve connections, shut down in order.

Shutdown (SIGINT/SIGTERM, or `Server.shutdown()`): stop accepting, let in-flight
commands finish (idle connections are closed at once; awaiting hellos return), close
cursors, close storage cleanly, log and exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import ssl
import time

from storage import native
from storage.files import make_dirs, restrict_umask

from .allocator import tune_allocator
from .collector import tune_collector
from .commands.buildinfo import build_info
from .config import Config
from .connection import serve_connection
from .context import ServerState
from .cursors import CursorManager
from .inbound import READ_SIZE
from .log import LOG
from .metrics import start_metrics_server
from .storage_service import StorageService
from .system_databases import ensure_system_databases, startup_document
from .timeseries.service import TimeseriesService
from .tls import build_server_context
from .tls.context import certificate_info
from .tls.listener import TlsListener, start_tls_server
from .ttl import ttl_monitor

__all__ = ["Server", "run"]

GRACEFUL_TIMEOUT = 30.0


class Server:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.state = ServerState(config)
        self._servers: list[asyncio.Server | TlsListener] = []
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
        if self.config.quiet:
            state.params.set_runtime({"quiet": True})
        LOG.quiet = state.params.get("quiet")
        LOG.verbosity = state.params.get("logLevel")
        LOG.max_attribute_size_kb = state.params.get("maxLogSizeKB")
        LOG.info("CONTROL", 4615611, "initandlisten", "MongoDB starting", pid=state.pid,
                 port=self.config.port, dbPath=self.config.dbpath, architecture="64-bit",
                 host=state.host)
        LOG.info("CONTROL", 21951, "initandlisten", "Options set by command line",
                 options=self.config.parsed())
        # bucketd's own: which path the per-measurement work takes (native/ or Python)
        LOG.info("CONTROL", 9000002, "initandlisten", "Native core", **native.describe())
        LOG.info("CONTROL", 9000003, "initandlisten", "Allocator", **tune_allocator())
        tls_context = self._tls_context()
        state.cursors = CursorManager()
        await self._open_storage()
        if self.config.metrics_port is not None:
            state.metrics = await start_metrics_server(state, self.config.metrics_port,
                                                       self.config.metrics_bind_ip)
        for addr in self.config.bind_ip:
            family = socket.AF_INET6 if ":" in addr else socket.AF_INET
            try:
                srv: asyncio.Server | TlsListener
                if tls_context is None:
                    srv = await asyncio.start_server(self._on_connection, host=addr,
                                                     port=self.config.port, family=family,
                                                     reuse_address=True, backlog=1024,
                                                     limit=READ_SIZE)
                else:
                    srv = await start_tls_server(self._on_connection, addr, self.config.port,
                                                 family=family, context=tls_context,
                                                 mode=self.config.tls.mode, limit=READ_SIZE)
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
                 ssl="on" if tls_context is not None else "off")
        self._background.append(asyncio.create_task(self._reap_cursors()))
        if state.storage is not None:
            self._background.append(asyncio.create_task(ttl_monitor(state, state.storage)))
        tune_collector()

    def _tls_context(self) -> ssl.SSLContext | None:
        """The server's TLS context (None when TLS is disabled); unusable files stop the
        start, before storage is touched."""
        tls = self.config.tls
        if not tls.enabled:
            return None
        context = build_server_context(tls)
        assert tls.certificate_key_file is not None
        info = certificate_info(tls.certificate_key_file)
        if info is not None:
            LOG.info("NETWORK", 4913010, "initandlisten", "Certificate information",
                     subject=info["subject"], issuer=info["issuer"],
                     notValidBefore=_iso(info["notBefore"]), notValidAfter=_iso(info["notAfter"]),
                     keyFile=tls.certificate_key_file, type="Server")
        if tls.allow_invalid_certificates:
            LOG.warning("CONTROL", 22124, "initandlisten", "While invalid X509 certificates may "
                        "be used to connect to this server, they will not be considered "
                        "permissible for authentication")
            LOG.startup_warnings.append(LOG.recent[-1])  # getLog: "startupWarnings"
        return context

    async def _open_storage(self) -> None:
        if self.config.storage_engine == "sqlite":
            make_dirs(self.config.dbpath)
        storage = await StorageService.open(self.config.dbpath, self.state)
        self.state.storage = storage
        self.state.timeseries = TimeseriesService(self.state, storage)
        if not self.config.repair:
            startup = startup_document(self.state.host, self.state.pid, self.config.parsed(),
                                       build_info())
            await storage.run(ensure_system_databases, storage.catalog, startup)
        for bad in storage.catalog.unreadable:  # bucketd's own id: served without it
            LOG.error("STORAGE", 9000003, "initandlisten", "Skipping a catalog entry that "
                      "cannot be read; its data is kept. Start with --repair to remove it",
                      catalogRecordId=bad.catalog_rid, reason=bad.reason,
                      idents=list(bad.idents))

    async def repair(self) -> int:
        """`--repair`: remove the catalog entries that cannot be read, with the data they
        name, and stop. Returns the exit code."""
        LOG.info("CONTROL", 4615611, "initandlisten", "MongoDB starting", pid=self.state.pid,
                 dbPath=self.config.dbpath, repair=True)
        await self._open_storage()
        storage = self.state.storage
        assert storage is not None
        for bad in list(storage.catalog.unreadable):
            await storage.run(storage.catalog.drop_unreadable, bad.catalog_rid)
            LOG.info("STORAGE", 9000004, "initandlisten", "Repair removed a catalog entry "
                     "that cannot be read", catalogRecordId=bad.catalog_rid,
                     reason=bad.reason, idents=list(bad.idents))
        LOG.info("CONTROL", 21364, "initandlisten", "Finished checking dbpath",
                 unreadableEntriesRemoved=not storage.catalog.unreadable)
        await self.shutdown("repair done")
        return 0

    async def _on_connection(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        state = self.state
        if state.shutting_down.is_set():
            writer.close()
            return
        if len(state.connections) >= self.config.max_conns:
            state.rejected_connections += 1
            if not LOG.quiet:
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
    async def shutdown(self, reason: str = "shutdown", exit_code: int = 0) -> None:
        state = self.state
        if state.shutting_down.is_set():
            await self._stopped.wait()
            return
        LOG.info("CONTROL", 23138, "SignalHandler", "Shutting down", exitCode=exit_code,
                 reason=reason)
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


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


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
        if config.repair:
            return await server.repair()
        await server.start()
    except Exception as exc:
        LOG.error("CONTROL", 20568, "initandlisten", "Error during startup",
                  error=f"{type(exc).__name__}: {exc}")
        code = 48 if isinstance(exc, OSError) else 1
        await server.shutdown("startup failed", exit_code=code)
        return code
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



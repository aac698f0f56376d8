"""Shared server state and the per-request context handed to command handlers.

`ServerState` is built once per process (uvicorn's ServerState idea): configuration,
parameters, counters, the connection table, storage and cursors. `ConnectionState`
is one client connection. `CommandRequest` is what a handler receives.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bson import ObjectId

from .auth.counters import AuthCounters
from .auth.principals import AuthenticatedUser
from .config import Config
from .local_sessions import LocalSessions
from .message_memory import MessageMemory
from .operations import OperationTable
from .parameters import ServerParameters
from .profiler import ProfileSettings

if TYPE_CHECKING:
    from .auth.sasl import SaslSession
    from .auth.users import UserStore
    from .cursors import CursorManager
    from .storage_service import StorageService
    from .timeseries.service import TimeseriesService

__all__ = ["ServerState", "ConnectionState", "CommandRequest", "OPCOUNTER_NAMES"]

OPCOUNTER_NAMES = ("insert", "query", "update", "delete", "getmore", "command")


@dataclass(slots=True)
class ConnectionState:
    id: int
    remote: str
    local: str
    client_metadata: dict[str, Any] | None = None
    compressors: tuple[str, ...] = ()  # negotiated in the handshake, client's order
    handshake_done: bool = False
    requests: int = 0
    user: AuthenticatedUser | None = None  # set by a successful authentication
    sasl: SaslSession | None = None  # a SASL conversation under way
    tls: bool = False  # the connection is TLS
    peer_subject: str | None = None  # its verified client certificate's subject (RFC 2253)


@dataclass(slots=True)
class ServerState:
    config: Config
    params: ServerParameters = field(default_factory=ServerParameters)
    process_id: ObjectId = field(default_factory=ObjectId)
    start_time: float = field(default_factory=time.time)
    start_monotonic: float = field(default_factory=time.monotonic)
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    storage: StorageService | None = None
    timeseries: TimeseriesService | None = None  # made with storage by the lifecycle
    cursors: CursorManager | None = None
    users: UserStore | None = None  # admin.system.users, made on first use (auth.users)
    auth_counters: AuthCounters = field(default_factory=AuthCounters)
    connections: dict[int, ConnectionState] = field(default_factory=dict)
    next_connection_id: int = 1
    total_connections_created: int = 0
    rejected_connections: int = 0
    opcounters: Counter[str] = field(default_factory=Counter)
    command_counts: Counter[str] = field(default_factory=Counter)
    command_failures: Counter[str] = field(default_factory=Counter)
    bytes_in: int = 0
    bytes_out: int = 0
    num_requests: int = 0
    # serverStatus.network.compression: {name: {compressor|decompressor: {bytesIn, bytesOut}}}
    compression: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    # serverStatus.transportSecurity: TLS connections accepted by protocol version
    tls_versions: Counter[str] = field(default_factory=Counter)
    shutting_down: asyncio.Event = field(default_factory=asyncio.Event)
    # starts the lifecycle's shutdown (set by `app.Server`; the shutdown command calls it)
    shutdown_hook: Callable[[str], None] | None = None
    metrics: Any = None  # server.metrics.Metrics when --metricsPort is given
    operations: OperationTable = field(default_factory=OperationTable)  # in progress
    sessions: LocalSessions = field(default_factory=LocalSessions)  # lsids seen
    profile: ProfileSettings = field(default_factory=ProfileSettings)  # per-db levels
    # incoming messages still arriving, against incomingMessageMemoryLimitBytes
    message_memory: MessageMemory = field(init=False)

    def __post_init__(self) -> None:
        params = self.params
        self.message_memory = MessageMemory(
            lambda: int(params.get("incomingMessageMemoryLimitBytes")))

    def count_compression(self, name: str, direction: str, bytes_in: int, bytes_out: int
                          ) -> None:
        entry = self.compression.setdefault(name, {
            "compressor": {"bytesIn": 0, "bytesOut": 0},
            "decompressor": {"bytesIn": 0, "bytesOut": 0}})[direction]
        entry["bytesIn"] += bytes_in
        entry["bytesOut"] += bytes_out

    def uptime(self) -> float:
        return time.monotonic() - self.start_monotonic

    def new_connection(self, remote: str, local: str) -> ConnectionState:
        conn = ConnectionState(self.next_connection_id, remote, local)
        self.next_connection_id += 1
        self.total_connections_created += 1
        self.connections[conn.id] = conn
        return conn


@dataclass(slots=True)
class CommandRequest:
    """What a command handler receives: the command document and where it came from."""

    server: ServerState
    conn: ConnectionState
    name: str
    body: dict[str, Any]
    db: str
    exhaust_allowed: bool = False
    via_op_query: bool = False

    @property
    def storage(self) -> StorageService:
        assert self.server.storage is not None, "storage is not open"
        return self.server.storage

    @property
    def cursors(self) -> CursorManager:
        assert self.server.cursors is not None
        return self.server.cursors

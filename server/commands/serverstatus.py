"""serverStatus: process, connections, network, security (authentication counters),
operation counters, memory, bucket catalog."""

from __future__ import annotations

import time
from typing import Any

from bson import Int64
from bson.datetime_ms import DatetimeMS

from ..auth.sasl import enabled_mechanisms
from ..context import OPCOUNTER_NAMES, CommandRequest
from ..procinfo import rss_bytes, virtual_bytes
from ..version import MONGODB_VERSION


async def handle(req: CommandRequest) -> dict[str, Any]:
    s = req.server
    uptime = s.uptime()
    current = len(s.connections)
    reply: dict[str, Any] = {
        "host": s.host,
        "version": MONGODB_VERSION,
        "process": "mongod",
        "pid": Int64(s.pid),
        "uptime": float(int(uptime)),
        "uptimeMillis": Int64(int(uptime * 1000)),
        "uptimeEstimate": Int64(int(uptime)),
        "localTime": DatetimeMS(int(time.time() * 1000)),
        "connections": {
            "current": current,
            "available": max(0, s.config.max_conns - current),
            "totalCreated": s.total_connections_created,
            "rejected": s.rejected_connections,
            "active": 1,
        },
        "network": {
            "bytesIn": Int64(s.bytes_in),
            "bytesOut": Int64(s.bytes_out),
            "numRequests": Int64(s.num_requests),
            "totalIngressTLSConnections": Int64(s.tls_versions.total()),
            "compression": {
                name: {d: {k: Int64(v) for k, v in io.items()} for d, io in dirs.items()}
                for name, dirs in s.compression.items()
            },
            # bucketd's: memory held by incoming messages still arriving (inbound.py)
            "incomingMessageMemory": {k: Int64(v) for k, v in s.message_memory.status().items()},
        },
        "security": {"authentication": s.auth_counters.document(enabled_mechanisms(s))},
        "transportSecurity": {name: Int64(s.tls_versions[name])
                              for name in ("1.0", "1.1", "1.2", "1.3", "unknown")},
        "opcounters": {name: Int64(s.opcounters[name]) for name in OPCOUNTER_NAMES},
        "mem": {
            "bits": 64,
            "resident": rss_bytes() // (1024 * 1024),
            "virtual": virtual_bytes() // (1024 * 1024),
            "supported": True,
        },
        "metrics": {
            "commands": {
                name: {"total": Int64(n), "failed": Int64(s.command_failures[name])}
                for name, n in sorted(s.command_counts.items())
            },
        },
    }
    if s.storage is not None:
        reply["storageEngine"] = s.storage.engine_status()
        catalog_stats = s.timeseries.server_status() if s.timeseries is not None else None
        if catalog_stats is not None:
            reply["bucketCatalog"] = catalog_stats
    return reply

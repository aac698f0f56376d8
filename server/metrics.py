"""Prometheus metrics on `--metricsPort`: `/metrics`, plus `/livez` and `/readyz`.

Counters that the server keeps anyway (connections, commands, bytes, bucket catalog,
storage) are read from `ServerState` at scrape time by a custom collector, so the
request path pays nothing for them; only the per-command latency histogram is
observed as commands run. Names follow Prometheus conventions: `bucketd_<name>_total`
for counters, `_seconds` and `_bytes` units.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .log import LOG
from .procinfo import rss_bytes

if TYPE_CHECKING:
    from .context import ServerState

__all__ = ["Metrics", "start_metrics_server"]

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                   5.0, 10.0)


class _StateCollector(Collector):
    def __init__(self, state: ServerState) -> None:
        self.state = state

    def collect(self) -> Iterator[Any]:
        s = self.state
        yield GaugeMetricFamily("bucketd_connections", "Open client connections",
                                value=len(s.connections))
        yield CounterMetricFamily("bucketd_connections_accepted", "Connections accepted",
                                  value=s.total_connections_created)
        yield CounterMetricFamily("bucketd_connections_rejected",
                                  "Connections refused over maxConns",
                                  value=s.rejected_connections)
        ops = CounterMetricFamily("bucketd_operations", "Operations by command and result",
                                  labels=["command", "result"])
        for name, n in sorted(s.command_counts.items()):
            failed = s.command_failures[name]
            ops.add_metric([name, "ok"], n - failed)
            ops.add_metric([name, "error"], failed)
        yield ops
        yield CounterMetricFamily("bucketd_network_received_bytes", "Bytes received",
                                  value=s.bytes_in)
        yield CounterMetricFamily("bucketd_network_sent_bytes", "Bytes sent", value=s.bytes_out)
        yield CounterMetricFamily("bucketd_requests", "Requests received", value=s.num_requests)
        yield GaugeMetricFamily("bucketd_resident_memory_bytes", "Resident set size",
                                value=rss_bytes())
        yield GaugeMetricFamily("bucketd_open_cursors", "Open cursors",
                                value=len(s.cursors) if s.cursors is not None else 0)
        if s.storage is not None:
            yield from s.storage.metric_families()
        if s.timeseries is not None:
            yield from s.timeseries.metric_families()


class Metrics:
    def __init__(self, state: ServerState) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_StateCollector(state))
        self.latency = Histogram("bucketd_command_duration_seconds",
                                 "Command latency by command", ["command"],
                                 registry=self.registry, buckets=LATENCY_BUCKETS)
        self.state = state
        self._servers: list[asyncio.base_events.Server] = []
        self.port: int | None = None

    def observe_command(self, command: str, seconds: float, ok: bool) -> None:
        self.latency.labels(command).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass
            parts = request_line.decode("latin-1").split()
            path = parts[1].split("?")[0] if len(parts) >= 2 else ""
            if len(parts) < 2 or parts[0] not in ("GET", "HEAD"):
                status, ctype, body = "405 Method Not Allowed", "text/plain", b"method not allowed\n"
            elif path == "/metrics":
                status, ctype = "200 OK", "text/plain; version=0.0.4; charset=utf-8"
                body = self.render()
            elif path == "/livez":
                status, ctype, body = "200 OK", "text/plain", b"ok\n"
            elif path == "/readyz":
                ready = not self.state.shutting_down.is_set()
                status = "200 OK" if ready else "503 Service Unavailable"
                ctype, body = "text/plain", b"ok\n" if ready else b"shutting down\n"
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"not found\n"
            head = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
            writer.write(head + (body if parts and parts[0] != "HEAD" else b""))
            await writer.drain()
        except (TimeoutError, ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def close(self) -> None:
        for srv in self._servers:
            srv.close()
            with contextlib.suppress(Exception):
                await srv.wait_closed()


async def start_metrics_server(state: ServerState, port: int, bind_ip: list[str]) -> Metrics:
    metrics = Metrics(state)
    for addr in bind_ip:
        try:
            srv = await asyncio.start_server(metrics._handle, host=addr, port=port)
        except OSError:
            if addr == "::":
                continue
            raise
        metrics._servers.append(srv)
        metrics.port = srv.sockets[0].getsockname()[1]
        LOG.info("NETWORK", 9000001, "listener", "Serving Prometheus metrics",
                 address=f"{addr}:{metrics.port}")
    return metrics

"""Prometheus metrics on --metricsPort: counters move under load; /livez and /readyz answer."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import urllib.request

import pymongo
import pytest

from ..conftest import start_server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    with opener.open(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.status, r.read().decode()


def _value(text: str, name: str, labels: str = "") -> float:
    pattern = re.escape(name) + (re.escape("{" + labels + "}") if labels else r"(?:\{\})?") \
        + r" ([0-9.e+-]+)"
    m = re.search(pattern, text)
    assert m, f"{name}{{{labels}}} not in scrape"
    return float(m.group(1))


def test_metrics_endpoint(tmp_path) -> None:
    port = _free_port()
    proc = start_server(tmp_path, "--metricsPort", str(port))
    try:
        assert _scrape(port, "/livez") == (200, "ok\n")
        assert _scrape(port, "/readyz")[0] == 200
        _, before = _scrape(port)
        with pymongo.MongoClient(proc.uri) as c:
            c.m.c.insert_many([{"i": i} for i in range(100)])
            for _ in range(20):
                c.m.c.find_one({"i": 5})
            _, during = _scrape(port)
            # curl, as an operator would scrape it (where curl is installed)
            curl = subprocess.run(["curl", "-s", "--noproxy", "*",
                                   f"http://127.0.0.1:{port}/metrics"],
                                  capture_output=True, text=True, timeout=10) \
                if shutil.which("curl") else None
        assert _value(during, "bucketd_operations_total", 'command="find",result="ok"') >= 20
        assert _value(during, "bucketd_operations_total", 'command="insert",result="ok"') >= 1
        assert _value(during, "bucketd_network_received_bytes_total") > \
            _value(before, "bucketd_network_received_bytes_total")
        assert _value(during, "bucketd_connections_accepted_total") >= 1
        assert "bucketd_command_duration_seconds_bucket" in during
        assert _value(during, "bucketd_storage_size_bytes") > 0
        if curl is not None:
            assert curl.returncode == 0, curl.stderr
            assert "bucketd_operations_total" in curl.stdout
    finally:
        proc.stop()


def _listening_addresses(port: int) -> set[str]:
    """The local IPv4 addresses with a socket listening on `port` (from /proc/net/tcp)."""
    found = set()
    with open("/proc/net/tcp", encoding="ascii") as f:
        next(f)
        for line in f:
            local, _, state = line.split()[1:4]
            host, _, port_hex = local.partition(":")
            if state == "0A" and int(port_hex, 16) == port:
                found.add(socket.inet_ntoa(bytes.fromhex(host)[::-1]))
    return found


def _metrics_log_addresses(proc) -> list[str]:
    return re.findall(r'"id":9000001,.*?"address":"([^"]+)"', proc.log_text())


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux's /proc/net/tcp")
def test_metrics_bind_localhost_by_default(tmp_path) -> None:
    """--metricsPort does not follow the wire listener's --bind_ip_all: 127.0.0.1 only."""
    port = _free_port()
    proc = start_server(tmp_path, "--bind_ip_all", "--metricsPort", str(port))
    try:
        assert _listening_addresses(port) == {"127.0.0.1"}
        assert _listening_addresses(proc.port) == {"0.0.0.0"}  # the wire port: all of them
        assert _metrics_log_addresses(proc) == [f"127.0.0.1:{port}"]
        assert _scrape(port, "/livez") == (200, "ok\n")
    finally:
        proc.stop()


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux's /proc/net/tcp")
def test_metrics_bind_ip_explicit(tmp_path) -> None:
    port = _free_port()
    proc = start_server(tmp_path, "--metricsPort", str(port), "--metricsBindIp", "0.0.0.0")
    try:
        assert _listening_addresses(port) == {"0.0.0.0"}
        assert _listening_addresses(proc.port) == {"127.0.0.1"}  # the wire port: its default
        assert _metrics_log_addresses(proc) == [f"0.0.0.0:{port}"]
        assert _scrape(port, "/livez") == (200, "ok\n")
    finally:
        proc.stop()

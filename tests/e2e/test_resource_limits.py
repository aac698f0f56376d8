"""Regression tests for issue 16's resource findings, against real server processes.

- A stalled half-frame and a trickled frame are dropped once `incomingMessageTimeoutSecs`
  (1 s here) runs out; a connection idle between messages is kept.
- Ten connections each sending 24 MB of a declared 48 MB message: the server's RSS grows
  by less than `incomingMessageMemoryLimitBytes`, the connections beyond the cap wait,
  other clients are served, and the server stays up.
- The slow-query line of a 48 MB insert is cut at `maxLogSizeKB` in the log file and in
  getLog.
- Under a umask of 022 the dbpath (and the parents the server creates) is 0700, the data
  files, SQLite's WAL and SHM, mongod.lock and the log file 0600.
- A closed pymongo client's connections end at once, including its streaming monitor's.
- `shutdown` on admin writes acknowledged `j: false` time-series measurements still in
  the group commit, exits 0 and the restarted server has them; on another database,
  with a wrong-typed or unknown argument, it is refused and the server keeps serving.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bson
import pymongo
import pytest
from pymongo.write_concern import WriteConcern

from protocol import encode_op_msg
from pytest_bucketd import BucketdProcess

from ..conftest import ROOT, start_server
from .wire_client import RawConnection

pytestmark = pytest.mark.slow

MB = 1_000_000
BOUND = 30.0  # hang guards for polling loops; no assertion is about durations


def _wait_until(what: Callable[[], bool], bound: float = BOUND) -> bool:
    end = time.monotonic() + bound
    while time.monotonic() < end:
        if what():
            return True
        time.sleep(0.05)
    return what()


def _ping_frame(request_id: int = 1, pad: int = 0) -> bytes:
    body: dict[str, Any] = {"ping": 1, "$db": "admin"}
    if pad:
        body["comment"] = "x" * pad
    return encode_op_msg(body, request_id, 0)


def _log_lines(text: str) -> list[dict[str, Any]]:
    return [bson.json_util.loads(line) for line in text.splitlines() if line.startswith("{")]


def _dropped_for(proc: BucketdProcess, code_name: str) -> int:
    return sum(1 for line in _log_lines(proc.log_text())
               if line["id"] == 22988 and line["attr"]["error"]["codeName"] == code_name)


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BucketdProcess]:
    proc = start_server(tmp_path_factory.mktemp("limited"),
                        "--setParameter", "incomingMessageTimeoutSecs=1")
    try:
        yield proc
    finally:
        proc.stop()


# -- partial frames ----------------------------------------------------------------------------
def test_a_stalled_half_frame_is_dropped(limited: BucketdProcess) -> None:
    before = _dropped_for(limited, "NetworkTimeout")
    frame = _ping_frame(pad=20_000)
    conn = RawConnection(limited.port, timeout=BOUND)
    conn.send(frame[:len(frame) // 2])
    assert conn.is_closed_by_peer()  # within the socket's BOUND, else socket.timeout
    conn.close()
    assert _wait_until(lambda: _dropped_for(limited, "NetworkTimeout") > before)


def test_a_trickled_frame_is_dropped(limited: BucketdProcess) -> None:
    """1 KB/s, a quarter of incomingMessageMinBytesPerSec: it falls behind and is dropped
    long before its 200 KB are sent."""
    frame = _ping_frame(pad=200_000)
    conn = RawConnection(limited.port, timeout=BOUND)
    sent, closed = 0, False
    end = time.monotonic() + BOUND
    while sent < len(frame) and time.monotonic() < end:
        conn.sock.settimeout(BOUND)
        try:
            conn.send(frame[sent:sent + 50])
        except (ConnectionResetError, BrokenPipeError):
            closed = True
            break
        sent += 50
        conn.sock.settimeout(0.05)  # doubles as the pacing: 50 bytes per 50 ms
        try:
            if conn.sock.recv(1) == b"":
                closed = True
                break
        except TimeoutError:
            pass
        except OSError:
            closed = True
            break
    conn.close()
    assert closed and sent < len(frame)


def test_an_idle_connection_between_messages_is_kept(limited: BucketdProcess) -> None:
    conn = RawConnection(limited.port, timeout=BOUND)
    conn.send(_ping_frame(1))
    assert conn.recv_reply_doc()["ok"] == 1.0
    time.sleep(2.5)  # idle for longer than incomingMessageTimeoutSecs
    conn.send(_ping_frame(2))
    assert conn.recv_reply_doc()["ok"] == 1.0
    conn.close()


# -- memory of in-flight messages --------------------------------------------------------------
def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _half_sent(port: int, stop: threading.Event, errors: list[BaseException]) -> socket.socket:
    """A connection sending 24 MB of a message announcing 48 MB, from its own thread."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    header = struct.pack("<iiii", 48 * MB, 1, 0, 2013)

    def send() -> None:
        try:
            sock.sendall(header)
            chunk = bytes(1 << 20)
            for _ in range(24):
                if stop.is_set():
                    return
                sock.sendall(chunk)
        except OSError:
            if not stop.is_set():
                errors.append(AssertionError("the server closed a waiting connection"))

    threading.Thread(target=send, daemon=True).start()
    return sock


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_half_sent_large_messages_stay_within_the_memory_cap(tmp_path: Path) -> None:
    cap = 100 * MB  # two 48 MB messages fit, a third does not
    proc = start_server(tmp_path, "--setParameter", f"incomingMessageMemoryLimitBytes={cap}",
                        "--setParameter", "incomingMessageMemoryWaitSecs=600")
    assert proc.proc is not None
    stop = threading.Event()
    errors: list[BaseException] = []
    socks: list[socket.socket] = []
    try:
        with pymongo.MongoClient(proc.uri) as client:
            client.t.c.insert_many([{"_id": i, "pad": "p" * 1000} for i in range(1000)])
            list(client.t.c.find())

            def status() -> dict[str, Any]:
                return client.admin.command("serverStatus")["network"]

            base_in = status()["bytesIn"]
            base_rss = _rss(proc.proc.pid)
            socks = [_half_sent(proc.port, stop, errors) for _ in range(10)]
            # two are read (24 MB each), eight wait without being read
            assert _wait_until(lambda: status()["incomingMessageMemory"]["waiting"] == 8
                               and status()["bytesIn"] - base_in >= 48 * MB)
            mem = status()["incomingMessageMemory"]
            assert mem["inUseBytes"] == 96 * MB and mem["limitBytes"] == cap
            # other clients are served meanwhile
            client.t.c.insert_one({"_id": "during"})
            assert client.t.c.count_documents({}) == 1001
            time.sleep(0.5)  # anything still in flight lands
            growth = _rss(proc.proc.pid) - base_rss
            print(f"RSS growth with 10 half-sent 48 MB messages: {growth / MB:.1f} MB")
            assert growth < cap  # was 10 x 24 MB unbounded
            assert not errors
            stop.set()
            for s in socks:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            assert _wait_until(lambda: status()["incomingMessageMemory"]["inUseBytes"] == 0)
            assert client.admin.command("ping")["ok"] == 1.0
    finally:
        stop.set()
        for s in socks:
            s.close()
        assert proc.stop() == 0


# -- a server with a log file, started under umask 022 --------------------------------------------
class _LoggedServer:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, dbpath: Path, log: Path):
        self.proc, self.port, self.dbpath, self.log = proc, port, dbpath, log
        self.uri = f"mongodb://127.0.0.1:{port}/"


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_LoggedServer]:
    base = tmp_path_factory.mktemp("logged")
    dbpath = base / "made" / "by" / "server"
    log = base / "bucketd.log"
    old = os.umask(0o022)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "server", "--port", "0", "--dbpath",
                                 str(dbpath), "--logpath", str(log), "--slowms", "0"],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    finally:
        os.umask(old)
    ready = re.compile(r'"msg":"Waiting for connections","attr":\{"port":(\d+)')
    port: list[int] = []

    def started() -> bool:
        m = ready.search(log.read_text()) if log.exists() else None
        if m:
            port.append(int(m.group(1)))
        return bool(m) or proc.poll() is not None

    assert _wait_until(started) and port, "the server did not start"
    try:
        yield _LoggedServer(proc, port[0], dbpath, log)
    finally:
        proc.terminate()
        proc.wait(BOUND)


def test_the_slow_query_line_of_a_48mb_insert_is_truncated(logged: _LoggedServer) -> None:
    docs = [{"_id": i, "pad": "x" * (15_900_000)} for i in range(3)]  # one 48 MB message
    with pymongo.MongoClient(logged.uri) as client:
        client.big.c.insert_many(docs)
        lines = client.admin.command("getLog", "global")["log"]
    text = logged.log.read_text()
    assert len(text) < 2 * MB  # was the whole command: 125 MB after a few of these
    [slow] = [line for line in _log_lines(text)
              if line["id"] == 51803 and line["attr"]["command"].get("insert") == "c"]
    assert slow["truncated"]["command"]["documents"] == {
        "0": {"pad": {"type": "string", "size": 15_900_005}}}
    assert slow["size"]["command"] > 47 * MB
    assert max(len(line) for line in text.splitlines()) < 12 * 1024
    assert max(len(line) for line in lines) < 12 * 1024  # getLog lines are as small
    assert any('"truncated":{"command":{"documents"' in line for line in lines)


def test_maxlogsizekb_is_settable_at_runtime(logged: _LoggedServer) -> None:
    with pymongo.MongoClient(logged.uri) as client:
        admin = client.admin
        assert admin.command("getParameter", 1, maxLogSizeKB=1)["maxLogSizeKB"] == 10
        assert admin.command("setParameter", 1, maxLogSizeKB=1)["was"] == 10
        try:
            client.big.command({"find": "c", "filter": {"a": "f" * 5000}})
            lines = admin.command("getLog", "global")["log"]
        finally:
            admin.command("setParameter", 1, maxLogSizeKB=10)
        [slow] = [bson.json_util.loads(line) for line in lines
                  if '"id":51803' in line and '"find":"c"' in line]
        assert slow["truncated"]["command"] == {"filter": {"a": {"type": "string",
                                                                 "size": 5005}}}
        with pytest.raises(pymongo.errors.OperationFailure) as exc:
            admin.command("setParameter", 1, maxLogSizeKB=-1)
        assert exc.value.code == 2


def test_files_and_directories_are_private_under_umask_022(logged: _LoggedServer) -> None:
    with pymongo.MongoClient(logged.uri) as client:
        client.files.c.insert_one({"a": 1})  # the WAL and SHM exist once written
    dbpath = logged.dbpath
    for d in (dbpath, dbpath.parent, dbpath.parent.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    names = {p.name for p in dbpath.iterdir()}
    assert {"mongod.lock", "bucketd.sqlite", "bucketd.sqlite-wal", "bucketd.sqlite-shm"} <= names
    for p in [*dbpath.iterdir(), logged.log]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


# -- connections of a closed client ---------------------------------------------------------------
def test_a_closed_clients_connections_end_at_once(limited: BucketdProcess) -> None:
    """Its streaming monitor waits in an awaitable hello for heartbeatFrequencyMS (60 s
    here); the server notices the client going instead of answering it then."""
    watcher = RawConnection(limited.port, timeout=BOUND)

    def current() -> int:
        watcher.send(encode_op_msg({"serverStatus": 1, "$db": "admin"}, 1, 0))
        return int(watcher.recv_reply_doc()["connections"]["current"])

    alone = current()
    client: pymongo.MongoClient = pymongo.MongoClient(limited.uri, heartbeatFrequencyMS=60_000)
    client.admin.command("ping")
    assert _wait_until(lambda: current() >= alone + 2)  # a pooled one and the monitor's
    client.close()
    assert _wait_until(lambda: current() == alone, bound=20.0)  # < the monitor's 60 s
    watcher.close()


# -- shutdown --------------------------------------------------------------------------------------
def test_shutdown_is_refused_on_another_database_and_with_bad_arguments(
        limited: BucketdProcess) -> None:
    with pymongo.MongoClient(limited.uri) as client:
        for db, extra, code, message in [
            ("test", {}, 13, "shutdown may only be run against the admin database."),
            ("admin", {"force": 1}, 14,
             "BSON field 'shutdown.force' is the wrong type 'int', expected type 'bool'"),
            ("admin", {"timeoutSecs": "x"}, 14, "BSON field 'shutdown.timeoutSecs' is the "
                                                "wrong type 'string'"),
            ("admin", {"bogus": 1}, 40415, "BSON field 'shutdown.bogus' is an unknown field."),
        ]:
            with pytest.raises(pymongo.errors.OperationFailure) as exc:
                client[db].command({"shutdown": 1, **extra})
            assert exc.value.code == code and message in str(exc.value)
        assert client.admin.command("ping")["ok"] == 1.0
    assert limited.proc is not None and limited.proc.poll() is None


def test_shutdown_writes_pending_timeseries_measurements(tmp_path: Path) -> None:
    proc = start_server(tmp_path, "--setParameter", "journalCommitInterval=500")
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    n = 5000
    with pymongo.MongoClient(proc.uri) as client:
        db = client.sd
        db.create_collection("m", timeseries={"timeField": "t", "metaField": "s"})
        coll = db.get_collection("m", write_concern=WriteConcern(w=1, j=False))
        for b in range(0, n, 500):
            coll.insert_many([{"t": start + datetime.timedelta(seconds=i), "s": i % 7, "v": i}
                              for i in range(b, b + 500)])
        with pytest.raises(pymongo.errors.ConnectionFailure):
            client.admin.command("shutdown", comment="test")  # no reply: the socket closes
    assert proc.proc is not None and proc.proc.wait(BOUND) == 0
    assert proc.stop() == 0
    log = _log_lines(proc.log_text())
    [term] = [line for line in log if line["id"] == 4695300]
    assert term["attr"] == {"force": False, "timeoutSecs": 15}
    assert any(line["id"] == 4784907 for line in log)  # Storage closed cleanly
    again = start_server(tmp_path)
    try:
        with pymongo.MongoClient(again.uri) as client:
            assert client.sd.m.count_documents({}) == n
            assert sum(d["v"] for d in client.sd.m.find({}, {"v": 1})) == n * (n - 1) // 2
    finally:
        again.stop()

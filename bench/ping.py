"""Round trips per second of `ping`: bucketd vs. a canned-reply server (the protocol floor).

Both servers run as child processes on this machine, in the same run, and the same
clients (a separate process, N concurrent connections each sending pings one after
another) measure them; the ratio bucketd/floor is the figure that travels between
machines. Also prints latency percentiles.

    python bench/ping.py [--seconds 5] [--clients 1 8]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pytest_bucketd import BucketdProcess  # noqa: E402


def _ping_bytes(request_id: int) -> bytes:
    import bson

    body = b"\x00" + bson.encode({"ping": 1, "$db": "admin"})
    return struct.pack("<iiii", 16 + 4 + len(body), request_id, 0, 2013) + b"\x00" * 4 + body


CANNED_SERVER = r'''
import asyncio, struct, sys, bson, uvloop
REPLY_BODY = b"\x00" + bson.encode({"ok": 1.0})
async def handle(reader, writer):
    buf = bytearray()
    try:
        while True:
            data = await reader.read(262144)
            if not data:
                break
            buf += data
            while len(buf) >= 16:
                length, rid = struct.unpack_from("<ii", buf)
                if len(buf) < length:
                    break
                del buf[:length]
                writer.write(struct.pack("<iiii", 20 + len(REPLY_BODY), 1, rid, 2013)
                             + b"\x00" * 4 + REPLY_BODY)
    finally:
        writer.close()
async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
uvloop.run(main())
'''


async def _client(port: int, deadline: float, latencies: list[float]) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    n = 0
    rid = 1
    try:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            writer.write(_ping_bytes(rid))
            head = await reader.readexactly(16)
            length = struct.unpack_from("<i", head)[0]
            await reader.readexactly(length - 16)
            latencies.append(time.perf_counter() - t0)
            n += 1
            rid += 1
    finally:
        writer.close()
    return n


def _run_clients(port: int, clients: int, seconds: float, out: mp.Queue) -> None:
    import uvloop

    async def main() -> tuple[int, list[float]]:
        lat: list[float] = []
        await asyncio.sleep(0)
        warm = time.perf_counter() + 0.5
        await asyncio.gather(*(_client(port, warm, []) for _ in range(clients)))
        deadline = time.perf_counter() + seconds
        counts = await asyncio.gather(*(_client(port, deadline, lat) for _ in range(clients)))
        return sum(counts), lat

    total, lat = uvloop.run(main())
    out.put((total / seconds, lat))


def measure(port: int, clients: int, seconds: float) -> tuple[float, list[float]]:
    q: mp.Queue = mp.Queue()
    p = mp.Process(target=_run_clients, args=(port, clients, seconds, q))
    p.start()
    result = q.get()
    p.join()
    return result


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))] * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    args = ap.parse_args()

    canned = subprocess.Popen([sys.executable, "-c", CANNED_SERVER], stdout=subprocess.PIPE)
    canned_port = int(canned.stdout.readline())
    with tempfile.TemporaryDirectory() as d:
        bucketd = BucketdProcess([sys.executable, "-m", "server"], dbpath=d,
                                 extra_args=["--quiet"])
        bucketd.start()
        try:
            print(f"{'clients':>7} {'server':>8} {'pings/s':>10} {'p50 us':>8} {'p99 us':>8}"
                  f" {'ratio':>6}")
            for clients in args.clients:
                floor, flat = measure(canned_port, clients, args.seconds)
                ours, olat = measure(bucketd.port, clients, args.seconds)
                print(f"{clients:>7} {'floor':>8} {floor:>10.0f} {pct(flat, 50):>8.0f} "
                      f"{pct(flat, 99):>8.0f}")
                print(f"{clients:>7} {'bucketd':>8} {ours:>10.0f} {pct(olat, 50):>8.0f} "
                      f"{pct(olat, 99):>8.0f} {ours / floor:>6.2f}")
        finally:
            bucketd.stop()
            canned.kill()


if __name__ == "__main__":
    main()

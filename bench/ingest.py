"""Time-series ingest against the floors of this machine, started in the same run.

    python bench/ingest.py [--measurements 1000000] [--clients 2] [--runs tsbs,highcard,backfill]
                           [--deal shared|fixed] [--series-per-client]

Three servers take the same pre-encoded batches (`RawBSONDocument`s, so the clients do
not encode: they are not the bottleneck) from N client processes doing `insert_many` of
1000: the canned floor (acknowledges without decoding), the decode floor (decodes every
batch into dicts with pymongo, on uvloop; see `_canned.py`) and bucketd on a fresh
dbpath. Per server: measurements/s, server CPU per measurement (utime + stime from
/proc over the load), and for bucketd the bytes per measurement on disk (after a clean
stop), its peak RSS, the ratios to both floors, and the buckets it wrote and reopened. Runs:

- `tsbs`: TSBS devops cpu-only (100 hosts, 10 string tags as the meta object, 10 int64
  fields), time-ordered. How the batches reach the clients:
  - `--deal shared` (the default, as `tsbs_load` without `--hash-workers`, whose workers
    all take from one channel): each client sends the next batch nobody has taken yet,
    so no client gets more than a batch or so ahead of another;
  - `--deal fixed`: client i of N sends batches i, i+N, i+2N, ... whatever the others do.
    One client can then drift many batches ahead, and each bucket-span boundary takes
    every host through the reopening cascade once per batch of lead: the figures vary
    from run to run with the drift (`bench/reopening.py` measures that cascade in a
    fixed order);
  - `--series-per-client` (as `tsbs_load --hash-workers`): each client sends the batches
    of its own hosts, so no host's measurements arrive out of time order.
- `highcard`: 100,000 series of 10 measurements each (every batch has 1000 series).
- `backfill`: the tsbs data with the batches sent newest first, so every batch goes back
  in time: each host's open bucket is archived and a new one begun, after a reopening
  query for an earlier bucket of the host.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.sharedctypes import Synchronized

import bson
import pymongo
from _common import bucketd, dir_bytes, peak_rss_mb
from bson.raw_bson import RawBSONDocument
from tsbs import measurements

BATCH = 1000
HERE = os.path.dirname(os.path.abspath(__file__))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def batches_of(run: str, total: int, streams: int = 1) -> list[list[bytes]]:
    """The pre-encoded batches of `run` (tsbs, highcard or backfill). With `streams` > 1
    the hosts are split into that many streams (host mod streams), each batched on its
    own, and the batches interleaved so that client i of `streams` sends stream i."""
    hosts = 100_000 if run == "highcard" else 100
    per_stream: list[list[list[bytes]]] = [[] for _ in range(streams)]
    pending: list[list[bytes]] = [[] for _ in range(streams)]
    for i, doc in enumerate(measurements(total, hosts=hosts)):
        s = (i % hosts) % streams
        batch = pending[s]
        batch.append(bson.encode({"_id": bson.ObjectId(), **doc}))
        if len(batch) == BATCH:
            per_stream[s].append(batch)
            pending[s] = []
    for s, batch in enumerate(pending):
        if batch:
            per_stream[s].append(batch)
    for out in per_stream:
        if run == "backfill":
            out.reverse()
    # round-robin over the streams, padded so that batches[i::streams] is stream i
    longest = max(map(len, per_stream))
    return [b for k in range(longest) for out in per_stream
            for b in (out[k:k + 1] or [[]])]


def _client(uri: str, batches: list[list[bytes]], taken: Synchronized | None,
            ready: mp.Barrier, q: mp.Queue) -> None:
    """Send `batches`: all in order, or with `taken` (shared by the clients) each batch
    whose index this client is first to take."""
    docs = [[RawBSONDocument(b) for b in batch] for batch in batches]
    client: pymongo.MongoClient = pymongo.MongoClient(uri)
    coll = client.bench.cpu
    client.admin.command("ping")
    ready.wait()
    n = 0
    for k in range(len(docs)) if taken is None else iter(lambda: _take(taken), -1):
        if k >= len(docs):
            break
        if docs[k]:
            coll.insert_many(docs[k], ordered=False)
        n += len(docs[k])
    client.close()
    q.put(n)


def _take(taken: Synchronized) -> int:
    with taken.get_lock():
        k: int = taken.value
        taken.value += 1
    return k


def load(uri: str | Sequence[str], pid: int | Sequence[int], batches: list[list[bytes]],
         clients: int, deal: str = "shared") -> tuple[float, float]:
    """(measurements/s, server CPU µs per measurement) of `clients` processes sending
    `batches`, dealt as `deal` says (see the module's docstring); with several servers
    (`uri`s and their `pid`s), client i talks to server i mod their number, and the CPU
    is theirs together."""
    uris = [uri] if isinstance(uri, str) else list(uri)
    pids = [pid] if isinstance(pid, int) else list(pid)
    ready, q = mp.Barrier(clients + 1), mp.Queue()
    taken = mp.Value("q", 0) if deal == "shared" else None
    procs = [mp.Process(target=_client,
                        args=(uris[me % len(uris)],
                              batches if taken is not None else batches[me::clients],
                              taken, ready, q))
             for me in range(clients)]
    for p in procs:
        p.start()
    ready.wait()
    cpu0, t0 = sum(map(cpu_seconds, pids)), time.perf_counter()
    n = sum(q.get() for _ in procs)
    elapsed, cpu = time.perf_counter() - t0, sum(map(cpu_seconds, pids)) - cpu0
    for p in procs:
        p.join()
    return n / elapsed, cpu / n * 1e6


@contextmanager
def floor_server(*args: str) -> Iterator[tuple[str, int]]:
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "_canned.py"), *args],
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"mongodb://127.0.0.1:{port}/?directConnection=true", proc.pid
    finally:
        proc.kill()
        proc.wait()


def bucketd_run(batches: list[list[bytes]], clients: int, deal: str,
                create: Callable[[pymongo.database.Database], None]) -> dict[str, float]:
    with bucketd() as server:
        uri = server.uri
        with pymongo.MongoClient(uri) as c:
            create(c.bench)
        pid = server.proc.pid
        rate, cpu = load(uri, pid, batches, clients, deal)
        with pymongo.MongoClient(uri) as c:
            count = c.bench.cpu.count_documents({})
            ts = c.bench.command("collStats", "cpu")["timeseries"]
        rss = peak_rss_mb(pid)
        server.stop()
        disk = dir_bytes(server.dbpath)
    return {"rate": rate, "cpu_us": cpu, "count": count, "rss_mb": rss, "disk": disk,
            "buckets": ts["bucketCount"], "reopened": ts["numBucketsReopened"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--measurements", type=int, default=1_000_000)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--runs", default="tsbs,highcard,backfill")
    ap.add_argument("--deal", choices=("shared", "fixed"), default="shared",
                    help="shared: each client sends the next batch not yet taken (as "
                         "tsbs_load's workers sharing one channel); fixed: client i of N "
                         "sends batches i, i+N, ... (one client may drift ahead, and "
                         "bucketd reopens buckets once per batch of lead)")
    ap.add_argument("--series-per-client", action="store_true",
                    help="each client sends its own hosts (as tsbs_load's --hash-workers)")
    args = ap.parse_args()
    deal = "fixed" if args.series_per_client else args.deal

    def create(db: pymongo.database.Database) -> None:
        db.create_collection("cpu", timeseries={"timeField": "time", "metaField": "tags"})

    print(f"{args.measurements:,} measurements per run, {args.clients} clients"
          f"{' with their own series' if args.series_per_client else f', batches dealt {deal}'},"
          f" batches of {BATCH}, pre-encoded")
    # buckets / reopened: the buckets written and those reopened on the way (where one
    # host's batches come from several clients, how they interleave moves both)
    print(f"{'run':<9} {'server':<13} {'meas/s':>10} {'cpu µs/m':>9} {'÷decode':>8} "
          f"{'÷canned':>8} {'B/meas':>7} {'peak RSS':>9} {'buckets':>8} {'reopened':>8}")
    for run in args.runs.split(","):
        batches = batches_of(run, args.measurements,
                             args.clients if args.series_per_client else 1)
        total = sum(map(len, batches))
        with floor_server() as (uri, pid):
            canned, canned_cpu = load(uri, pid, batches, args.clients, deal)
        with floor_server("--decode") as (uri, pid):
            decode, decode_cpu = load(uri, pid, batches, args.clients, deal)
        got = bucketd_run(batches, args.clients, deal, create)
        assert got["count"] == total, (got["count"], total)
        print(f"{run:<9} {'canned floor':<13} {canned:>10,.0f} {canned_cpu:>9.1f}")
        print(f"{'':<9} {'decode floor':<13} {decode:>10,.0f} {decode_cpu:>9.1f} "
              f"{decode / decode:>8.2f} {decode / canned:>8.2f}")
        print(f"{'':<9} {'bucketd':<13} {got['rate']:>10,.0f} {got['cpu_us']:>9.1f} "
              f"{got['rate'] / decode:>8.2f} {got['rate'] / canned:>8.2f} "
              f"{got['disk'] / total:>7.1f} {got['rss_mb']:>7.0f} MB "
              f"{got['buckets']:>8,} {got['reopened']:>8,}", flush=True)


if __name__ == "__main__":
    main()

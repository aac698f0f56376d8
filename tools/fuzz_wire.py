"""Fuzz a bucketd server over the wire: hostile frames from several connections at once.

Five kinds of frame, mixed: random bytes behind a sound header; valid commands mutated
(bytes flipped, inserted, cut, lengths rewritten); commands with one argument of every
BSON type (every command the server lists, every argument it commonly takes); bogus
OP_COMPRESSED; SASL conversations with random payloads. Each fuzz frame is followed on
its connection by a `ping`, so a frame that rightly gets no reply (moreToCome) is told
apart from a hang. The server must never crash, hang (no reply to the ping within
`--timeout` seconds on a connection it kept open) or answer InternalError (1); the
collections it held before are unchanged afterwards, and it restarts on its data
directory with them intact.

Usage: python tools/fuzz_wire.py [--frames N] [--seed S] [--connections C] [--port P] [--auth]

Without --port it starts its own server (this checkout) on a temporary data directory.
Prints a JSON report; exits 1 on any crash, hang, InternalError or lost data.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import hashlib
import json
import os
import random
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import bson  # noqa: E402
import pymongo  # noqa: E402
from bson import Binary, Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex  # noqa: E402
from bson.timestamp import Timestamp  # noqa: E402

from protocol import CompressorId, compress_message, encode_op_msg  # noqa: E402
from pytest_bucketd import BucketdProcess  # noqa: E402

KEEP_DB = "fuzzkeep"  # the collections that must survive; no fuzz frame names this db
FUZZ_DB = "fuzz"
NEVER = frozenset({"shutdown"})  # a fuzzer that stops its target measures nothing

ARGUMENTS = (
    "filter", "sort", "projection", "limit", "skip", "batchSize", "singleBatch", "hint",
    "documents", "updates", "deletes", "pipeline", "cursor", "ordered", "query", "key",
    "indexes", "index", "name", "timeseries", "expireAfterSeconds", "validator", "viewOn",
    "collation", "let", "comment", "maxTimeMS", "readConcern", "writeConcern", "lsid",
    "txnNumber", "autocommit", "apiVersion", "apiStrict", "allowDiskUse", "explain",
    "verbosity", "new", "upsert", "remove", "update", "fields", "arrayFilters",
    "bypassDocumentValidation", "nameOnly", "authorizedCollections", "getMore",
    "collection", "cursors", "to", "dropTarget", "ops", "nsInfo", "showPrivileges",
    "logLevel", "journalCommitInterval", "slowms", "full", "scale", "rawData",
    "$readPreference", "mechanism", "payload", "conversationId", "user", "pwd", "roles",
    "saslSupportedMechs", "speculativeAuthenticate", "client", "compression", "force",
)


T0 = datetime.datetime(2026, 1, 1)
# Valid commands, one or more per command the server has, each argument a target for
# values of every type (`Frames.systematic`) and for random retyping (`Frames.retyped`).
TEMPLATES: tuple[dict[str, Any], ...] = (
    {"find": "c", "filter": {"a": {"$gt": 1}}, "sort": {"a": -1}, "projection": {"a": 1},
     "limit": 3, "skip": 1, "batchSize": 2, "hint": {"_id": 1}, "maxTimeMS": 1000},
    {"find": "ts", "filter": {"m": "h", "t": {"$gte": T0}}, "sort": {"t": 1}},
    {"insert": "c", "documents": [{"a": 1}], "ordered": False},
    {"insert": "ts", "documents": [{"t": T0, "m": "h", "v": 1.5}], "ordered": True},
    {"update": "c", "updates": [{"q": {"a": 1}, "u": {"$inc": {"b": 1}}, "upsert": True,
                                 "multi": False, "arrayFilters": []}]},
    {"update": "ts", "updates": [{"q": {"m": "h"}, "u": {"$set": {"m": "g"}}, "multi": True}]},
    {"delete": "c", "deletes": [{"q": {"a": 2}, "limit": 1}]},
    {"delete": "ts", "deletes": [{"q": {"m": "g"}, "limit": 0}]},
    {"aggregate": "ts", "pipeline": [{"$match": {"m": "h"}},
                                     {"$group": {"_id": "$m", "n": {"$sum": 1}}}],
     "cursor": {"batchSize": 1}, "allowDiskUse": True, "let": {"x": 1}},
    {"aggregate": "c", "pipeline": [{"$project": {"y": {"$add": ["$a", 1]}}},
                                    {"$sort": {"y": 1}}, {"$limit": 2},
                                    {"$lookup": {"from": "c", "localField": "a",
                                                 "foreignField": "a", "as": "j"}}],
     "cursor": {}},
    {"aggregate": 1, "pipeline": [{"$documents": [{"a": 1}]}, {"$unwind": "$a"}],
     "cursor": {}},
    {"count": "c", "query": {"a": 1}, "limit": 5, "skip": 0},
    {"distinct": "c", "key": "a", "query": {}},
    {"findAndModify": "c", "query": {"a": 1}, "update": {"$set": {"b": 2}}, "new": True,
     "upsert": False, "fields": {"b": 1}, "sort": {"a": 1}},
    {"create": "tsx", "timeseries": {"timeField": "t", "metaField": "m",
                                     "granularity": "minutes"}, "expireAfterSeconds": 60},
    {"create": "px", "capped": False},
    {"create": "vx", "viewOn": "c", "pipeline": [{"$match": {"a": {"$gte": 1}}},
                                                  {"$project": {"a": 1}}]},
    {"collMod": "vx", "viewOn": "ts", "pipeline": [{"$limit": 5}]},
    {"find": "vx", "filter": {"a": 2}, "sort": {"a": 1}, "limit": 2},
    {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1", "unique": False}]},
    {"dropIndexes": "c", "index": "a_1"},
    {"listIndexes": "c", "cursor": {}},
    {"listCollections": 1, "filter": {"name": "c"}, "nameOnly": True},
    {"collMod": "tsx", "expireAfterSeconds": 100},
    {"collStats": "ts", "scale": 1024},
    {"dbStats": 1, "scale": 1},
    {"validate": "c", "full": False},
    {"explain": {"find": "c", "filter": {"a": 1}}, "verbosity": "executionStats"},
    {"getMore": Int64(1), "collection": "c", "batchSize": 1},
    {"killCursors": "c", "cursors": [Int64(1)]},
    {"drop": "px"},
    {"hello": 1, "client": {"driver": {"name": "fuzz", "version": "0"}},
     "compression": ["zlib"]},
    {"connectionStatus": 1, "showPrivileges": True},
    {"ping": 1}, {"buildInfo": 1}, {"whatsmyuri": 1}, {"hostInfo": 1},
    {"serverStatus": 1}, {"startSession": 1}, {"endSessions": [{"id": Binary(b"0" * 16, 4)}]},
    {"listCommands": 1},
)
ADMIN_TEMPLATES: tuple[dict[str, Any], ...] = (
    {"renameCollection": f"{FUZZ_DB}.px", "to": f"{FUZZ_DB}.py", "dropTarget": False},
    {"bulkWrite": 1, "ops": [{"insert": 0, "document": {"a": 1}}],
     "nsInfo": [{"ns": f"{FUZZ_DB}.c"}], "ordered": True},
    {"setParameter": 1, "logLevel": 0},
    {"setParameter": 1, "journalCommitInterval": 100},
    {"getParameter": 1, "logLevel": 1},
    {"getLog": "global"},
    {"getCmdLineOpts": 1},
    {"listDatabases": 1, "nameOnly": True, "filter": {"name": FUZZ_DB}},
    {"killAllSessions": []},
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a command, its own fields first."""
    out: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        out.append((*prefix, k))
        out.extend(_paths(v, (*prefix, k)))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (_replaced(v, rest, new) if k == head else v) for k, v in value.items()}
    return [(_replaced(v, rest, new) if i == head else v) for i, v in enumerate(value)]


def bson_values(rng: random.Random) -> list[Any]:
    """One value of every BSON type, with some of each type's edge values."""
    return [
        rng.choice([0.0, -0.0, 1.5, float("nan"), float("inf"), -1e308, 2.0 ** 63]),
        rng.choice(["", "x", "fuzz", "a.b", "$x", "\x00"[:0] + "é" * 3, "system.buckets.x"]),
        rng.choice([{}, {"a": 1}, {"$gt": 1}, {"$db": 1}, {"": None}]),
        rng.choice([[], [1, "a"], [{}], [[[]]]]),
        Binary(rng.randbytes(rng.randint(0, 40)), rng.choice([0, 2, 3, 4, 5, 6, 7, 128])),
        ObjectId(),
        rng.choice([True, False]),
        datetime.datetime.fromtimestamp(rng.randint(-10**9, 10**10), datetime.UTC),
        None,
        Regex(rng.choice(["", "a.*", "[", "(?"]), rng.choice(["", "i", "zz"])),
        DBRef("c", 1),
        Code("function(){}"),
        Code("x", {"a": 1}),
        rng.choice([0, -1, 1, 2**31 - 1, -2**31]),
        Timestamp(rng.randint(0, 2**32 - 1), rng.randint(0, 2**32 - 1)),
        Int64(rng.choice([0, -1, 2**63 - 1, -2**63])),
        Decimal128(rng.choice(["0", "NaN", "-Infinity", "1E+6000", "-0", "1.5"])),
        MinKey(), MaxKey(),
    ]


@dataclass
class Report:
    frames: int = 0
    replies: int = 0
    closed_by_server: int = 0
    incomplete: int = 0
    hangs: int = 0
    internal_errors: int = 0
    codes: Counter[int] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)

    def keep(self, what: str, frame: bytes) -> None:
        if len(self.samples) < 20:
            self.samples.append(f"{what}: {frame[:400].hex()}")


class Frames:
    """The frame generators, all driven by one seeded `random.Random`."""

    def __init__(self, rng: random.Random, commands: list[str]) -> None:
        self.rng = rng
        self.commands = commands
        self.next_id = 1
        self.pending = self.systematic_frames()[::-1]

    def systematic_frames(self) -> list[bytes]:
        """Every template with each of its top-level arguments (the command's own value
        and $db included) set to a value of every BSON type."""
        out = []
        for template in TEMPLATES + ADMIN_TEMPLATES:
            db = "admin" if template in ADMIN_TEMPLATES else FUZZ_DB
            for arg in [*template, "$db"]:
                for value in bson_values(self.rng):
                    body = {**template, "$db": db}
                    if arg == "$db" and isinstance(value, str) and value.startswith(KEEP_DB):
                        continue
                    body[arg] = value
                    out.append(self._encoded_or_ping(body))
        return out

    def _encoded_or_ping(self, body: dict[str, Any]) -> bytes:
        try:
            return encode_op_msg(body, self.request_id(), 0)
        except (bson.errors.InvalidDocument, OverflowError, ValueError):
            return self.encoded({"ping": 1})

    def retyped(self) -> bytes:
        """A template with one value anywhere inside it replaced by one of another type."""
        rng = self.rng
        admin = rng.random() < 0.2
        template = rng.choice(ADMIN_TEMPLATES if admin else TEMPLATES)
        path = rng.choice(_paths(template))
        body = _replaced(template, path, rng.choice(bson_values(rng)))
        return self._encoded_or_ping({**body, "$db": "admin" if admin else FUZZ_DB})

    def request_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def any(self) -> tuple[str, bytes]:
        if self.pending:
            return "systematic", self.pending.pop()
        kind = self.rng.choices(["random", "mutated", "typed", "retyped", "compressed",
                                 "sasl"], weights=[8, 25, 15, 30, 10, 12])[0]
        make: Callable[[], bytes] = getattr(self, kind)
        return kind, make()

    def random(self) -> bytes:
        body = self.rng.randbytes(self.rng.randint(0, 300))
        op = self.rng.choice([2013, 2012, 2004, 1, 2010, self.rng.randint(-2**31, 2**31 - 1)])
        return struct.pack("<iiii", 16 + len(body), self.request_id(), 0, op) + body

    def valid_command(self) -> dict[str, Any]:
        return self.rng.choice(TEMPLATES)

    def encoded(self, body: dict[str, Any], flags: int = 0) -> bytes:
        return encode_op_msg({**body, "$db": FUZZ_DB}, self.request_id(), 0, flags)

    def mutated(self) -> bytes:
        rng = self.rng
        frame = bytearray(self.encoded(self.valid_command(),
                                       rng.choice([0, 0, 0, 1, 2, 1 << 16, 1 << 20])))
        for _ in range(rng.randint(1, 8)):
            if not frame:
                break
            at = rng.randrange(len(frame))
            op = rng.randint(0, 4)
            if op == 0:
                frame[at] ^= 1 << rng.randint(0, 7)
            elif op == 1:
                frame[at] = rng.randint(0, 255)
            elif op == 2:
                frame[at:at] = rng.randbytes(rng.randint(1, 8))
            elif op == 3:
                del frame[at:at + rng.randint(1, 8)]
            elif at + 4 <= len(frame):
                struct.pack_into("<i", frame, at, rng.choice(
                    [0, -1, 4, 5, 2**31 - 1, len(frame) - at, len(frame) - at + 1]))
        if rng.random() < 0.8 and len(frame) >= 4:  # mostly a frame the server reads whole
            struct.pack_into("<i", frame, 0, len(frame))
        return bytes(frame)

    def typed(self) -> bytes:
        rng = self.rng
        values = bson_values(rng)
        name = rng.choice(self.commands)
        body: dict[str, Any] = {name: rng.choice(["c", "ts", 1, rng.choice(values)])}
        for arg in rng.sample(ARGUMENTS, rng.randint(1, 3)):
            body[arg] = rng.choice(values)
        db: Any = FUZZ_DB if rng.random() < 0.9 else rng.choice([*values, "admin", "a.b", ""])
        if isinstance(db, str) and db.startswith(KEEP_DB):
            db = FUZZ_DB
        return self._encoded_or_ping({**body, "$db": db})

    def compressed(self) -> bytes:
        rng = self.rng
        inner = self.encoded(self.valid_command())
        if rng.random() < 0.5:
            frame = bytearray(compress_message(inner, rng.choice(list(CompressorId))))
            at = rng.randrange(16, len(frame))
            frame[at] = rng.randint(0, 255)  # the compressor id, the size or the payload
        else:
            payload = rng.randbytes(rng.randint(0, 200))
            prefix = struct.pack("<iiB", rng.choice([2013, 2004, 2012, 0]),
                                 rng.choice([0, -1, 16, len(payload), 2**31 - 1, 48_000_000]),
                                 rng.choice([0, 1, 2, 3, 4, 255]))
            frame = bytearray(struct.pack("<iiii", 16 + len(prefix) + len(payload),
                                          self.request_id(), 0, 2012) + prefix + payload)
        return bytes(frame)

    def sasl(self) -> bytes:
        rng = self.rng
        mech = rng.choice(["SCRAM-SHA-256", "SCRAM-SHA-1", "PLAIN", "MONGODB-X509", "GSSAPI",
                           "", "x" * 200])
        payload = rng.choice([
            b"n,,n=fuzz,r=" + rng.randbytes(24), b"n,,n=,r=", b"p=tls-unique,,n=a,r=b",
            b"c=biws,r=abc,p=" + rng.randbytes(30), rng.randbytes(rng.randint(0, 100)),
            b"n,,n=" + b"=2C" * 50 + b",r=x"])
        body: dict[str, Any] = rng.choice([
            {"saslStart": 1, "mechanism": mech, "payload": Binary(payload),
             "autoAuthorize": 1, "options": {"skipEmptyExchange": rng.random() < 0.5}},
            {"saslContinue": 1, "conversationId": rng.choice([1, 0, -1, "1", 2**31 - 1]),
             "payload": Binary(payload)},
            {"hello": 1, "speculativeAuthenticate": {"saslStart": 1, "mechanism": mech,
                                                     "payload": Binary(payload), "db": "admin"},
             "saslSupportedMechs": rng.choice(["admin.fuzz", "", ".", "x"])},
            {"authenticate": 1, "mechanism": mech, "user": rng.choice(["CN=x", "", "a"])},
            {"logout": 1},
        ])
        db = rng.choice(["admin", "$external", FUZZ_DB])
        return encode_op_msg({**body, "$db": db}, self.request_id(), 0)

    def ping(self) -> tuple[int, bytes]:
        rid = self.request_id()
        return rid, encode_op_msg({"ping": 1, "$db": "admin"}, rid, 0)


async def _read_message(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(16)
        length = struct.unpack_from("<i", head)[0]
        return head + await reader.readexactly(length - 16)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def _reply_body(message: bytes) -> dict[str, Any] | None:
    op = struct.unpack_from("<i", message, 12)[0]
    try:
        if op == 2013:
            return bson.decode(message[21:])
        if op == 1:
            return bson.decode(message[36:])
    except Exception:
        return None
    return None


async def _worker(host: str, port: int, frames: Frames, report: Report, count: int,
                  timeout: float) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    for _ in range(count):
        if writer is None:
            reader, writer = await asyncio.open_connection(host, port)
        assert reader is not None
        kind, frame = frames.any()
        report.frames += 1
        report.kinds[kind] += 1
        declared = struct.unpack_from("<i", frame)[0] if len(frame) >= 4 else -1
        try:
            writer.write(frame)
            if declared != len(frame):  # the server rightly waits for the rest: hang up
                report.incomplete += 1
                writer.close()
                writer = None
                continue
            ping_id, ping = frames.ping()
            writer.write(ping)
            await writer.drain()
        except ConnectionError:
            report.closed_by_server += 1
            writer = None
            continue
        while True:
            try:
                message = await asyncio.wait_for(_read_message(reader), timeout)
            except TimeoutError:
                report.hangs += 1
                report.keep("hang", frame)
                writer.close()
                writer = None
                break
            if message is None:
                report.closed_by_server += 1
                writer.close()
                writer = None
                break
            report.replies += 1
            body = _reply_body(message) or {}
            if body.get("ok") == 0:
                report.codes[int(body.get("code", 0))] += 1
                if body.get("code") == 1 or body.get("codeName") == "InternalError":
                    report.internal_errors += 1
                    report.keep(f"InternalError {body.get('errmsg', '')[:200]}", frame)
            if struct.unpack_from("<i", message, 8)[0] == ping_id:
                break
    if writer is not None:
        writer.close()


def _digest(client: pymongo.MongoClient[dict[str, Any]]) -> str:
    h = hashlib.sha256()
    db = client[KEEP_DB]
    for name in sorted(db.list_collection_names()):
        h.update(name.encode())
        for doc in db[name].find({}, sort=[("_id", 1)]):
            h.update(bson.encode(doc))
    return h.hexdigest()


def _seed(client: pymongo.MongoClient[dict[str, Any]]) -> None:
    db = client[KEEP_DB]
    db.docs.insert_many([{"_id": i, "v": i * 1.5, "s": str(i)} for i in range(200)])
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    start = datetime.datetime(2026, 1, 1)
    db.ts.insert_many([{"t": start + datetime.timedelta(seconds=i), "m": i % 7, "v": i}
                       for i in range(1000)])
    client[FUZZ_DB].c.insert_many([{"a": i} for i in range(10)])
    client[FUZZ_DB].create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})


async def fuzz(host: str, port: int, *, frames: int, seed: int, connections: int,
               timeout: float) -> Report:
    client: pymongo.MongoClient[dict[str, Any]]
    with pymongo.MongoClient(host, port) as client:
        names = sorted(client.admin.command("listCommands")["commands"])
    rng = random.Random(seed)
    gen = Frames(rng, [n for n in names if n not in NEVER])
    report = Report()
    share = [frames // connections + (1 if i < frames % connections else 0)
             for i in range(connections)]
    await asyncio.gather(*(_worker(host, port, gen, report, n, timeout) for n in share))
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds that make a hang")
    ap.add_argument("--port", type=int, help="fuzz a running server instead of starting one")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--auth", action="store_true",
                    help="start the server with --auth: the fuzz frames come unauthenticated")
    args = ap.parse_args(argv)
    proc: BucketdProcess | None = None
    login: dict[str, Any] = {}
    if args.port is None:
        proc = BucketdProcess([sys.executable, "-m", "server"],
                              dbpath=tempfile.mkdtemp(prefix="bucketd-fuzz-"),
                              extra_args=["--auth"] if args.auth else [])
        proc.start()
        assert proc.port is not None
        port = proc.port
        if args.auth:  # the first user, through the localhost exception
            login = {"username": "fuzzroot", "password": "fuzz-secret", "authSource": "admin"}
            first: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(args.host, port)
            with first:
                first.admin.command("createUser", "fuzzroot", pwd="fuzz-secret",
                                    roles=["root"])
    else:
        port = args.port
    client: pymongo.MongoClient[dict[str, Any]]
    with pymongo.MongoClient(args.host, port, **login) as client:
        if proc is not None:
            _seed(client)
        before = _digest(client)
    started = time.monotonic()
    report = asyncio.run(fuzz(args.host, port, frames=args.frames, seed=args.seed,
                              connections=args.connections, timeout=args.timeout))
    seconds = time.monotonic() - started
    alive = proc is None or (proc.proc is not None and proc.proc.poll() is None)
    unchanged = restarted = False
    if alive:
        with pymongo.MongoClient(args.host, port, serverSelectionTimeoutMS=10_000,
                                 **login) as client:
            unchanged = _digest(client) == before
    log_tracebacks: list[str] = []
    if proc is not None:
        proc.stop()
        lines = [line.decode(errors="replace") for line in proc.output]
        log_tracebacks = ["".join(lines[max(0, i - 2):i + 20])[:3000]
                          for i, line in enumerate(lines) if "Traceback" in line]
        proc.start()  # the same data directory
        with pymongo.MongoClient(args.host, proc.port, serverSelectionTimeoutMS=10_000,
                                 **login) as client:
            restarted = _digest(client) == before
        proc.stop()
        proc.cleanup()
    result = {
        "frames": report.frames, "seconds": round(seconds, 1),
        "frames_per_second": round(report.frames / seconds) if seconds else None,
        "replies": report.replies, "closed_by_server": report.closed_by_server,
        "incomplete_frames_hung_up": report.incomplete, "hangs": report.hangs,
        "internal_errors": report.internal_errors, "server_alive": alive,
        "known_collections_unchanged": unchanged, "restarted_with_data": restarted,
        "log_tracebacks": len(log_tracebacks), "log_samples": log_tracebacks[:5], "kinds": dict(report.kinds),
        "error_codes": dict(report.codes.most_common(25)), "samples": report.samples,
    }
    print(json.dumps(result, indent=1))
    failed = (report.hangs or report.internal_errors or not alive or not unchanged
              or (proc is not None and (not restarted or log_tracebacks)))
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

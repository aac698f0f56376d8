"""`bucketd inspect`: look inside time-series bucket documents.

Reads buckets from a running server's ``system.buckets.<coll>`` (``--uri``, ``--db``,
``--collection``) or from ``mongodump`` ``.bson`` files of a buckets collection (from
bucketd or a real MongoDB), and prints per bucket: the meta, time range, count,
version, and per field the column's encoded size, the plain BSON size of the same
values, the compression ratio, and (``--values``) the decoded values. ``--json`` prints
one JSON object per bucket (JSON Lines). A progress bar is drawn on a terminal.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import bson
from bson import json_util
from bson.binary import Binary

from storage.bsoncolumn import BSONColumnError, decompress
from storage.bsonutil import CODEC_OPTIONS, decode, encode

__all__ = ["main", "inspect_bucket", "BucketReport", "FieldReport"]

_JSON = json_util.JSONOptions(json_mode=json_util.JSONMode.RELAXED,
                              datetime_representation=json_util.DatetimeRepresentation.ISO8601)


@dataclass
class FieldReport:
    name: str
    encoded_bytes: int
    plain_bytes: int
    count: int
    values: list[Any] | None = None
    error: str | None = None

    @property
    def ratio(self) -> float:
        return self.plain_bytes / self.encoded_bytes if self.encoded_bytes else 0.0


@dataclass
class BucketReport:
    id: Any
    meta: Any
    time_min: Any
    time_max: Any
    count: int
    version: int
    fields: list[FieldReport] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "_id": self.id, "meta": self.meta, "timeMin": self.time_min,
            "timeMax": self.time_max, "count": self.count, "version": self.version,
            "encodedBytes": sum(f.encoded_bytes for f in self.fields),
            "plainBytes": sum(f.plain_bytes for f in self.fields),
            "fields": [
                {"name": f.name, "encodedBytes": f.encoded_bytes, "plainBytes": f.plain_bytes,
                 "ratio": round(f.ratio, 3), "count": f.count,
                 **({"values": f.values} if f.values is not None else {}),
                 **({"error": f.error} if f.error else {})}
                for f in self.fields
            ],
        }


def _time_field(doc: dict[str, Any]) -> str | None:
    """The time field: the control.min entry holding a date (MongoDB writes it first)."""
    mins = doc.get("control", {}).get("min", {})
    for name, value in mins.items():
        if isinstance(value, bson.datetime_ms.DatetimeMS):
            return name
    return next(iter(mins), None)


def inspect_bucket(doc: dict[str, Any], *, values: bool = False) -> BucketReport:
    control = doc.get("control", {})
    version = int(control.get("version", 1))
    time_name = _time_field(doc)
    report = BucketReport(doc.get("_id"), doc.get("meta"),
                          control.get("min", {}).get(time_name) if time_name else None,
                          control.get("max", {}).get(time_name) if time_name else None,
                          0, version)
    counts: list[int] = []
    for name, column in doc.get("data", {}).items():
        if isinstance(column, Binary) and column.subtype == 7:
            raw = bytes(column)
            try:
                plain = decompress(raw)
                decoded = bson.decode(plain, CODEC_OPTIONS)
                fr = FieldReport(name, len(raw), len(plain), len(decoded),
                                 list(decoded.values()) if values else None)
            except BSONColumnError as exc:
                fr = FieldReport(name, len(raw), 0, 0, None, exc.errmsg)
        elif isinstance(column, dict):  # version 1: {"0": v0, "1": v1, ...}
            plain_bytes = len(encode(column))
            fr = FieldReport(name, plain_bytes, plain_bytes, len(column),
                             list(column.values()) if values else None)
        else:
            fr = FieldReport(name, 0, 0, 0, None, f"unexpected data.{name} of type "
                                                  f"{type(column).__name__}")
        report.fields.append(fr)
        counts.append(fr.count)
    report.count = int(control["count"]) if "count" in control else (
        max(counts) if counts else 0)
    if time_name is not None:
        for f in report.fields:
            if f.name == time_name:
                report.count = max(report.count, f.count)
    return report


def iter_bson_file(stream: IO[bytes], progress: _Progress | None = None) -> Iterator[dict]:
    """Documents from a mongodump .bson file (concatenated BSON documents)."""
    while True:
        head = stream.read(4)
        if not head:
            return
        if len(head) < 4:
            raise ValueError("truncated BSON file")
        size = int.from_bytes(head, "little", signed=True)
        if size < 5 or size > 16 * 1024 * 1024 + 16 * 1024:
            raise ValueError(f"invalid BSON document size {size}")
        body = stream.read(size - 4)
        if len(body) < size - 4:
            raise ValueError("truncated BSON file")
        if progress is not None:
            progress.advance(size)
        yield decode(head + body)


class _Progress:
    """A progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, total: int, out: IO[str]) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.buckets = 0
        self.out = out
        self.enabled = out.isatty()
        self._last = -1

    def advance(self, nbytes: int) -> None:
        self.done += nbytes
        self.buckets += 1
        if not self.enabled:
            return
        pct = int(self.done * 100 / self.total)
        if pct != self._last:
            self._last = pct
            bar = "#" * (pct // 4)
            self.out.write(f"\r[{bar:<25}] {pct:3d}% {self.buckets} buckets")
            self.out.flush()

    def finish(self) -> None:
        if self.enabled and self._last >= 0:
            self.out.write("\n")
            self.out.flush()


def _fmt(v: Any) -> str:
    return json_util.dumps(v, json_options=_JSON)


def print_text(report: BucketReport, out: IO[str], *, values: bool) -> None:
    out.write(f"bucket {_fmt(report.id)} version={report.version} count={report.count}\n")
    out.write(f"  meta: {_fmt(report.meta)}\n")
    out.write(f"  time: {_fmt(report.time_min)} .. {_fmt(report.time_max)}\n")
    out.write(f"  {'field':<24} {'encoded':>9} {'plain':>9} {'ratio':>8}\n")
    for f in report.fields:
        line = f"  {f.name:<24} {f.encoded_bytes:>9} {f.plain_bytes:>9} {f.ratio:>7.2f}x"
        if f.error:
            line += f"  ERROR: {f.error}"
        out.write(line + "\n")
        if values and f.values is not None:
            out.write(f"    values: {_fmt(f.values)}\n")


def _from_server(args: argparse.Namespace) -> Iterable[dict]:
    import pymongo  # lazy: only reading from a server (--uri) needs the driver

    client: pymongo.MongoClient = pymongo.MongoClient(args.uri, document_class=dict,
                                                     datetime_conversion="DATETIME_MS")
    coll = client[args.db][f"system.buckets.{args.collection}"]
    try:
        yield from coll.find({}, limit=args.limit or 0)
    finally:
        client.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bucketd inspect", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="mongodump .bson files of a buckets collection")
    ap.add_argument("--uri", default=None, help="read from this server instead of files")
    ap.add_argument("--db", default="test")
    ap.add_argument("--collection", "-c", help="time-series collection name (with --uri)")
    ap.add_argument("--values", action="store_true", help="print the decoded values")
    ap.add_argument("--json", action="store_true", help="JSON Lines output")
    ap.add_argument("--limit", type=int, default=0, help="stop after this many buckets")
    args = ap.parse_args(argv)
    if bool(args.files) == bool(args.uri):
        print("bucketd inspect: error: give .bson files or --uri (with --collection)",
              file=sys.stderr)
        return 2
    if args.uri and not args.collection:
        print("bucketd inspect: error: --uri needs --collection", file=sys.stderr)
        return 2
    out = sys.stdout
    n = 0
    try:
        if args.uri:
            docs: Iterable[dict] = _from_server(args)
            sources: list[tuple[Iterable[dict], _Progress | None]] = [(docs, None)]
        else:
            sources = []
            for path in args.files:
                file_progress = _Progress(os.path.getsize(path), sys.stderr)
                sources.append((_file_docs(path, file_progress), file_progress))
        for docs, progress in sources:
            for doc in docs:
                report = inspect_bucket(doc, values=args.values)
                if args.json:
                    out.write(json_util.dumps(report.to_json(), json_options=_JSON) + "\n")
                else:
                    print_text(report, out, values=args.values)
                n += 1
                if args.limit and n >= args.limit:
                    break
            if progress is not None:
                progress.finish()
            if args.limit and n >= args.limit:
                break
    except BrokenPipeError:
        return 0
    except (OSError, ValueError) as exc:
        print(f"bucketd inspect: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _file_docs(path: str, progress: _Progress) -> Iterator[dict]:
    with open(path, "rb") as f:
        yield from iter_bson_file(f, progress)

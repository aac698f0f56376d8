"""`bucketd inspect`: look inside time-series bucket documents.

Reads buckets from a running server's ``system.buckets.<coll>`` (``--uri``, ``--db``,
``--collection``) or from ``mongodump`` ``.bson`` files of a buckets collection (from
bucketd or a real MongoDB), and prints per bucket: the meta, time range, count,
version, and per field the column's encoded size, the plain BSON size of the same
values, the compression ratio, and (``--values``) the decoded values. ``--json`` prints
one JSON object per bucket (JSON Lines), and a summary line at the end (on stderr with
``--json``). A progress bar is drawn on stderr when it is a terminal other than the
report's. Columns are decoded by the native core (`storage.bsoncolumn.native`) where it
can, the Python reference otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import math
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import bson
import bson.errors
from bson import json_util
from bson.binary import Binary

from storage import native
from storage.bsoncolumn import BSONColumnError, decompress
from storage.bsoncolumn.api import rows_to_document
from storage.bsoncolumn.decoder import DEFAULT_MAX_VALUES as MAX_VALUES
from storage.bsonutil import CODEC_OPTIONS, decode, encode

__all__ = ["main", "inspect_bucket", "BucketReport", "FieldReport", "Summary"]

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
        """The JSON Lines object, in relaxed Extended JSON's plain shapes."""
        return {
            "_id": _jsonable(self.id), "meta": _jsonable(self.meta),
            "timeMin": _jsonable(self.time_min), "timeMax": _jsonable(self.time_max),
            "count": self.count, "version": self.version,
            "encodedBytes": sum(f.encoded_bytes for f in self.fields),
            "plainBytes": sum(f.plain_bytes for f in self.fields),
            "fields": [
                {"name": f.name, "encodedBytes": f.encoded_bytes, "plainBytes": f.plain_bytes,
                 "ratio": round(f.ratio, 3), "count": f.count,
                 **({"values": _jsonable(f.values)} if f.values is not None else {}),
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
            fr = _column_report(name, column, values)
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


def _column_report(name: str, raw: bytes, values: bool) -> FieldReport:
    """One BSONColumn: decoded by the native core where it can (the Python reference
    for the columns it leaves, and to word the error of a malformed one)."""
    if values:
        rows = native.core.decode_column(raw, MAX_VALUES) if native.core else None
        if rows is not None:
            plain = rows_to_document(rows)
            decoded = bson.decode(plain, CODEC_OPTIONS)
            return FieldReport(name, len(raw), len(plain), len(decoded), list(decoded.values()))
    else:
        packed = native.core.decode_column_packed(raw, MAX_VALUES) if native.core else None
        if packed is not None:
            count, plain_bytes = _packed_sizes(*packed)
            return FieldReport(name, len(raw), plain_bytes, count)
    try:
        plain = decompress(raw)
    except BSONColumnError as exc:
        return FieldReport(name, len(raw), 0, 0, None, exc.errmsg)
    decoded = bson.decode(plain, CODEC_OPTIONS)
    return FieldReport(name, len(raw), len(plain), len(decoded),
                       list(decoded.values()) if values else None)


def _row_header(i: int) -> int:
    """Bytes of row `i`'s element header in `{"<row>": value}`: type byte, key, NUL."""
    return 2 + len(str(i))


_HEADERS_UP_TO = [0]  # [n]: the header bytes of rows 0..n-1 together


def _headers(n: int) -> int:
    table = _HEADERS_UP_TO
    while len(table) <= n:
        table.append(table[-1] + _row_header(len(table) - 1))
    return table[n]


def _packed_sizes(types: bytes, data: bytes, _ends: bytes) -> tuple[int, int]:
    """(present rows, bytes of the `{"<row>": value}` document) of a packed column (a
    skipped row has type 0 and no element)."""
    n = len(types)
    headers = _headers(n)
    skipped = 0
    at = types.find(0)
    while at >= 0:
        skipped += 1
        headers -= _row_header(at)
        at = types.find(0, at + 1)
    return n - skipped, 5 + len(data) + headers


def iter_bson_file(stream: IO[bytes], progress: _Progress | None = None) -> Iterator[bytes]:
    """The documents of a mongodump .bson file (concatenated BSON documents), raw."""
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
        yield head + body


class _Progress:
    """A progress bar on stderr: only when stderr is a terminal that is not also where
    the report goes (a bar between report lines would be mixed into them)."""

    def __init__(self, total: int, err: IO[str], out: IO[str]) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.buckets = 0
        self.out = err
        self.enabled = _separate_terminal(err, out)
        self._last = -1

    def advance(self, amount: int) -> None:
        self.done += amount
        self.buckets += 1
        if not self.enabled:
            return
        pct = min(100, int(self.done * 100 / self.total))
        if pct != self._last:
            self._last = pct
            bar = "#" * (pct // 4)
            self.out.write(f"\r[{bar:<25}] {pct:3d}% {self.buckets} buckets")
            self.out.flush()

    def finish(self) -> None:
        if self.enabled and self._last >= 0:
            self.out.write("\n")
            self.out.flush()


def _separate_terminal(err: IO[str], out: IO[str]) -> bool:
    """True when `err` is a terminal and `out` does not write to that same terminal."""
    try:
        if not err.isatty():
            return False
        if not out.isatty():
            return True
        return not os.path.samestat(os.fstat(err.fileno()), os.fstat(out.fileno()))
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


def _fmt(v: Any) -> str:
    return json.dumps(_jsonable(v))


_EPOCH = datetime.datetime(1970, 1, 1)
_PLAIN = frozenset({int, bson.int64.Int64, float, str, bool, type(None)})
_MAX_ISO_MS = 253402300799999  # 9999-12-31T23:59:59.999Z: json_util's last ISO date


def _jsonable(v: Any) -> Any:
    """`v` as json_util's relaxed Extended JSON shapes it, quickly for the values buckets
    hold most (dates, ObjectIds, strings, numbers, documents of them); json_util for
    the rest."""
    if v is None or isinstance(v, str | bool):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float) and math.isfinite(v):
        return v
    if isinstance(v, bson.datetime_ms.DatetimeMS):
        ms = int(v)
        if 0 <= ms <= _MAX_ISO_MS:
            t = _EPOCH + datetime.timedelta(milliseconds=ms)
            frac = f".{ms % 1000:03d}" if ms % 1000 else ""
            return {"$date": f"{t.strftime('%Y-%m-%dT%H:%M:%S')}{frac}Z"}
    elif isinstance(v, bson.ObjectId):
        return {"$oid": str(v)}
    elif type(v) is dict:
        return {k: _jsonable(x) for k, x in v.items()}
    elif type(v) is list:
        kinds = set(map(type, v))
        if kinds <= _PLAIN and (float not in kinds or all(
                math.isfinite(x) for x in v if type(x) is float)):
            return v  # a column of plain numbers or strings, as json_util writes them
        return [_jsonable(x) for x in v]
    return json.loads(json_util.dumps(v, json_options=_JSON))


_TEXT_HEADER = f"  {'field':<24} {'encoded':>9} {'plain':>9} {'ratio':>8}\n"


def print_text(report: BucketReport, out: IO[str], *, values: bool) -> None:
    parts = [f"bucket {_fmt(report.id)} version={report.version} count={report.count}\n"
             f"  meta: {_fmt(report.meta)}\n"
             f"  time: {_fmt(report.time_min)} .. {_fmt(report.time_max)}\n", _TEXT_HEADER]
    for f in report.fields:
        enc = f.encoded_bytes
        ratio = f.plain_bytes / enc if enc else 0.0
        parts.append(f"  {f.name:<24} {enc:>9} {f.plain_bytes:>9} {ratio:>7.2f}x"
                     f"{'  ERROR: ' + f.error if f.error else ''}\n")
        if values and f.values is not None:
            parts.append(f"    values: {_fmt(f.values)}\n")
    out.write("".join(parts))


class InspectError(Exception):
    """A one-line error for the user (the exit status is 1)."""


@dataclass
class Summary:
    """What the whole run saw: the summary line."""

    buckets: int = 0
    measurements: int = 0
    bucket_bytes: int = 0
    encoded_bytes: int = 0
    plain_bytes: int = 0

    def add(self, report: BucketReport, size: int) -> None:
        self.buckets += 1
        self.measurements += report.count
        self.bucket_bytes += size
        self.encoded_bytes += sum(f.encoded_bytes for f in report.fields)
        self.plain_bytes += sum(f.plain_bytes for f in report.fields)

    def line(self) -> str:
        ratio = self.plain_bytes / self.encoded_bytes if self.encoded_bytes else 0.0
        return (f"summary: {self.buckets} buckets, {self.measurements} measurements, "
                f"{self.bucket_bytes} bytes of buckets; columns {self.encoded_bytes} bytes "
                f"encoded, {self.plain_bytes} bytes as plain BSON, ratio {ratio:.2f}x")


# how long an unreachable server is waited for unless the URI says (pymongo's is 30 s)
DEFAULT_SERVER_SELECTION_MS = 5000


def _from_server(args: argparse.Namespace, progress_err: IO[str], out: IO[str]
                 ) -> tuple[Iterator[bytes], _Progress]:
    """The raw bucket documents of the time-series collection `--collection` in the
    database `--db` (else the URI's, else "test"); InspectError when it cannot be read."""
    import pymongo  # lazy: only reading from a server (--uri) needs the driver
    from bson.raw_bson import RawBSONDocument
    from pymongo import uri_parser
    from pymongo.errors import ConfigurationError, ConnectionFailure, PyMongoError

    try:
        parsed = uri_parser.parse_uri(args.uri)
    except (ConfigurationError, ValueError) as exc:
        raise InspectError(f"invalid --uri: {exc}") from None
    db_name = args.db or parsed.get("database") or "test"
    options: dict[str, Any] = {}
    if "serverselectiontimeoutms" not in parsed["options"]:
        options["serverSelectionTimeoutMS"] = DEFAULT_SERVER_SELECTION_MS
    client: pymongo.MongoClient = pymongo.MongoClient(
        args.uri, document_class=RawBSONDocument, **options)
    name = args.collection
    try:
        try:
            found = list(client[db_name].list_collections(filter={"name": name}))
        except ConnectionFailure as exc:
            hosts = ",".join(f"{h}:{p}" for h, p in parsed["nodelist"])
            raise InspectError(f"cannot reach the server at {hosts}: "
                               f"{_unreachable_reason(exc)}") from None
        if not found:
            raise InspectError(f"collection {db_name}.{name} does not exist")
        kind = found[0].get("type")
        if name.startswith("system.buckets."):
            buckets = name
        elif kind == "timeseries":
            buckets = f"system.buckets.{name}"
        else:
            raise InspectError(f"{db_name}.{name} is a {kind}, not a time-series collection")
        coll = client[db_name][buckets]
        progress = _Progress(args.limit or coll.estimated_document_count(), progress_err, out)
        cursor = coll.find({}, limit=args.limit or 0)
    except PyMongoError as exc:
        client.close()
        raise InspectError(str(exc).split("\n")[0]) from None
    except InspectError:
        client.close()
        raise

    def docs() -> Iterator[bytes]:
        try:
            for doc in cursor:
                progress.advance(1)
                yield doc.raw
        except PyMongoError as exc:
            raise InspectError(str(exc).split("\n")[0]) from None
        finally:
            client.close()

    return docs(), progress


def _unreachable_reason(exc: Exception) -> str:
    """The cause in pymongo's server-selection error, without its topology dump."""
    text = str(exc).split("\n")[0].split(", Timeout:")[0]
    text = re.sub(r" \(configured timeouts:[^)]*\)", "", text)
    return re.sub(r"^[^\s:]+:\d+: ", "", text)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bucketd inspect", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="mongodump .bson files of a buckets collection")
    ap.add_argument("--uri", default=None, help="read from this server instead of files")
    ap.add_argument("--db", default=None,
                    help="database of --collection (default: the URI's, else test)")
    ap.add_argument("--collection", "-c", help="time-series collection name (with --uri)")
    ap.add_argument("--values", action="store_true", help="print the decoded values")
    ap.add_argument("--json", action="store_true",
                    help="JSON Lines output (the summary line goes to stderr)")
    ap.add_argument("--limit", type=int, default=0, help="stop after this many buckets")
    return ap


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if bool(args.files) == bool(args.uri):
        print("bucketd inspect: error: give .bson files or --uri (with --collection)",
              file=sys.stderr)
        return 2
    if args.uri and not args.collection:
        print("bucketd inspect: error: --uri needs --collection", file=sys.stderr)
        return 2
    out = sys.stdout
    summary = Summary()
    try:
        sources: list[tuple[Iterator[bytes], _Progress]]
        if args.uri:
            sources = [_from_server(args, sys.stderr, out)]
        else:
            sources = []
            for path in args.files:
                file_progress = _Progress(os.path.getsize(path), sys.stderr, out)
                sources.append((_file_docs(path, file_progress), file_progress))
        for docs, progress in sources:
            try:
                for raw in docs:
                    report = inspect_bucket(decode(raw), values=args.values)
                    if args.json:
                        out.write(json.dumps(report.to_json()) + "\n")
                    else:
                        print_text(report, out, values=args.values)
                    summary.add(report, len(raw))
                    if args.limit and summary.buckets >= args.limit:
                        break
            finally:
                progress.finish()
            if args.limit and summary.buckets >= args.limit:
                break
        print(summary.line(), file=sys.stderr if args.json else out)
    except BrokenPipeError:
        return 0
    except InspectError as exc:
        print(f"bucketd inspect: error: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError, bson.errors.InvalidBSON) as exc:
        print(f"bucketd inspect: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _file_docs(path: str, progress: _Progress) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from iter_bson_file(f, progress)

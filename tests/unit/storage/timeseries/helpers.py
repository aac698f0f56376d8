"""Test helpers: an in-memory buckets collection that applies catalog writes and answers
reopening requests, and measurement/time builders."""

from __future__ import annotations

import datetime as dt
from array import array
from typing import Any

import bson
from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bsonutil import decode, encode
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.options import TimeseriesOptions
from storage.timeseries.reopening import ReopeningQuery
from storage.timeseries.unpack import BucketSpec, unpack_bucket
from storage.timeseries.write_batch import BatchResult
from storage.vocabulary.raw_documents import RawDocuments


def ms(iso: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 UTC time ('2021-01-01T00:00:00')."""
    d = dt.datetime.fromisoformat(iso).replace(tzinfo=dt.UTC)
    return (d - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)


def date(iso_or_ms: str | int) -> DatetimeMS:
    return DatetimeMS(ms(iso_or_ms) if isinstance(iso_or_ms, str) else iso_or_ms)


def sequence(docs: list[dict[str, Any]]) -> RawDocuments:
    """`docs` as a document sequence off the wire (each in its own field order)."""
    raws = [bson.encode(d) for d in docs]
    offsets = array("q")
    at = 0
    for r in raws:
        offsets.append(at)
        at += len(r)
    return RawDocuments(b"".join(raws), offsets)


class FakeStore:
    """system.buckets.<coll> for one or more collections, keyed by bucket _id."""

    def __init__(self) -> None:
        self.docs: dict[Any, dict[ObjectId, bytes]] = {}
        self.queries: list[ReopeningQuery] = []
        self.fetches: list[ObjectId] = []
        self.fail_next = False

    def apply(self, catalog: BucketCatalog, result: BatchResult) -> None:
        """Perform the writes as one transaction, then commit (or abort on failure)."""
        if self.fail_next:
            self.fail_next = False
            catalog.abort(result)
            return
        coll = self.docs.setdefault(result.coll, {})
        staged = dict(coll)
        for w in result.writes:
            if w.kind == "insert":
                assert w.bucket_id not in staged, "duplicate bucket _id"
            else:
                assert w.bucket_id in staged, "update of a missing bucket"
            staged[w.bucket_id] = w.document
        coll.clear()
        coll.update(staged)
        catalog.commit(result)

    def insert(self, catalog: BucketCatalog, coll: Any, options: TimeseriesOptions,
               docs: list[dict[str, Any]], ordered: bool = True) -> BatchResult:
        r = catalog.insert_batch(coll, options, docs, self, ordered=ordered)
        self.apply(catalog, r)
        return r

    def buckets(self, coll: Any) -> list[dict[str, Any]]:
        """Decoded bucket documents sorted by _id."""
        return [decode(b) for _oid, b in sorted(self.docs.get(coll, {}).items(),
                                                  key=lambda kv: kv[0].binary)]

    def measurements(self, coll: Any, options: TimeseriesOptions) -> list[dict[str, Any]]:
        spec = BucketSpec(options.time_field, options.meta_field)
        out = []
        for b in self.docs.get(coll, {}).values():
            out.extend(unpack_bucket(b, spec))
        return out

    # -- BucketSource ----------------------------------------------------------------------

    def fetch_bucket(self, coll: Any, bucket_id: ObjectId) -> bytes | None:
        self.fetches.append(bucket_id)
        return self.docs.get(coll, {}).get(bucket_id)

    def find_reopening_candidate(self, coll: Any, query: ReopeningQuery) -> bytes | None:
        self.queries.append(query)
        candidates = []
        for raw in self.docs.get(coll, {}).values():
            doc = decode(raw)
            if query.matches(doc, len(raw)):
                candidates.append((int(doc["control"]["min"][query.time_field]), raw))
        if not candidates:
            return None
        candidates.sort(key=lambda c: c[0])
        return candidates[0][1]

    def put_raw(self, coll: Any, doc: dict[str, Any]) -> None:
        self.docs.setdefault(coll, {})[doc["_id"]] = encode(doc)

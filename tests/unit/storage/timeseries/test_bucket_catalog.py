"""A stateful model of the bucket catalog over an in-memory buckets collection.

Rules insert batches (several series, out-of-order times, sparse and type-changing
fields), fail storage transactions, restart the server (empty catalog), clear the
collection state and delete buckets behind the catalog's back. Invariants: storage holds
exactly the measurements the model inserted; every bucket is consistent (count, columns,
min <= value <= max, time span, _id time, v2 sorted, columns byte-identical to a one-shot
compression); at most one open bucket per series; open buckets agree with storage.
"""

from __future__ import annotations

from typing import Any

import bson
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from storage.bson_order import compare, sort_key
from storage.bsoncolumn import compress
from storage.bsonutil import CODEC_OPTIONS
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.bucket_document import decode_column
from storage.timeseries.bucket_id import oid_time_seconds
from storage.timeseries.constants import TimeseriesParameters
from storage.timeseries.metadata import normalize_meta
from storage.timeseries.options import parse_timeseries_options
from storage.timeseries.rollover import RolloverAction
from storage.timeseries.unpack import BucketSpec, unpack_bucket

from .helpers import FakeStore

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
SPAN = OPTS.bucket_max_span_seconds * 1000
PARAMS = TimeseriesParameters(timeseriesBucketMaxCount=6, timeseriesBucketMaxSize=3000)
BASE = 1_700_000_000_000
_ABSENT = object()

metas = st.sampled_from([_ABSENT, None, "a", "b", {"x": 1, "y": 2}, {"y": 2, "x": 1}, 3])
values = st.one_of(st.integers(-50, 50), st.floats(-1e3, 1e3, allow_nan=False),
                   st.sampled_from(["s", "tt", "u" * 40]))
fields = st.fixed_dictionaries({}, optional={
    "a": st.integers(-100, 100),
    "b": st.sampled_from(["x", "y", "z" * 50]),
    "c": st.fixed_dictionaries({"p": st.integers(0, 9)}, optional={"q": st.booleans()}),
    "x": values,
})
measurement = st.tuples(st.integers(-2 * 3_600_000, 6 * 3_600_000), metas, fields)


class CatalogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = FakeStore()
        self.catalog = BucketCatalog(PARAMS)
        self.model: dict[int, dict[str, Any]] = {}
        self.next_id = 0

    @rule(batch=st.lists(measurement, min_size=1, max_size=12), fail=st.booleans(),
          ordered=st.booleans())
    def insert(self, batch: list, fail: bool, ordered: bool) -> None:
        docs = []
        for offset, meta, extra in batch:
            d: dict[str, Any] = {"_id": self.next_id, "t": DatetimeMS(BASE + offset), **extra}
            if meta is not _ABSENT:
                d["m"] = meta
            self.next_id += 1
            docs.append(d)
        fail = fail and len(docs) % 3 == 0          # fail about one batch in six
        self.store.fail_next = fail
        result = self.store.insert(self.catalog, "c", OPTS, docs, ordered=ordered)
        assert result.errors == []
        if not fail:
            for d in docs:
                if "m" in d:
                    d = {**d, "m": normalize_meta(d["m"])}
                self.model[d["_id"]] = d

    @rule()
    def restart(self) -> None:
        self.catalog = BucketCatalog(PARAMS)

    @rule()
    def clear(self) -> None:
        self.catalog.clear("c")

    @rule(pick=st.integers(0, 1000))
    def delete_bucket_directly(self, pick: int) -> None:
        docs = self.store.docs.get("c", {})
        if not docs:
            return
        oid = sorted(docs, key=lambda o: o.binary)[pick % len(docs)]
        for m in unpack_bucket(docs.pop(oid), BucketSpec("t", "m")):
            del self.model[m["_id"]]
        self.catalog.handle_direct_write("c", oid)

    @invariant()
    def storage_holds_exactly_the_model(self) -> None:
        got = {m["_id"]: m for m in self.store.measurements("c", OPTS)}
        assert got.keys() == self.model.keys()
        for k, m in got.items():
            exp = self.model[k]
            assert m.keys() == exp.keys()
            for f in m:
                assert type(m[f]) is type(exp[f]) and compare(m[f], exp[f]) == 0

    @invariant()
    def buckets_are_consistent(self) -> None:
        for raw in self.store.docs.get("c", {}).values():
            b = bson.decode(raw, CODEC_OPTIONS)
            control, data = b["control"], b["data"]
            count = control["count"]
            cols = {name: decode_column(bytes(col)) for name, col in data.items()}
            times = cols["t"]
            assert len(times) == count and set(times) == {str(i) for i in range(count)}
            tmin, tmax = int(control["min"]["t"]), int(control["max"]["t"])
            assert oid_time_seconds(b["_id"]) == tmin // 1000
            ts = [int(times[str(i)]) for i in range(count)]
            assert all(tmin <= t <= tmax for t in ts) and max(ts) == tmax
            assert all(t - tmin < SPAN for t in ts)
            if control["version"] == 2:
                assert ts == sorted(ts)
            for name, rows in cols.items():
                assert all(int(r) < count for r in rows)
                assert bytes(data[name]) == compress(bson.encode(rows), count)
                vals = list(rows.values())
                if name != "t" and not any(isinstance(v, dict | list) for v in vals):
                    lo, hi = control["min"][name], control["max"][name]
                    assert all(sort_key(lo) <= sort_key(v) <= sort_key(hi) for v in vals)
                    assert any(compare(lo, v) == 0 for v in vals)
                    assert any(compare(hi, v) == 0 for v in vals)

    @invariant()
    def one_open_bucket_per_series_and_agreement_with_storage(self) -> None:
        seen = set()
        stored = self.store.docs.get("c", {})
        for b in self.catalog.open_buckets("c"):
            assert not b.staged
            if b.rollover_action == RolloverAction.kNone:
                assert b.key not in seen
                seen.add(b.key)
            assert b.bucket_id in stored
            doc = bson.decode(stored[b.bucket_id], CODEC_OPTIONS)
            assert doc["control"]["count"] == b.num_committed == b.num_measurements
            assert doc["control"]["min"] == b.minmax.min()
            assert doc["control"]["max"] == b.minmax.max()


TestCatalogStateMachine = CatalogMachine.TestCase
TestCatalogStateMachine.settings = settings(
    max_examples=35, stateful_step_count=15, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

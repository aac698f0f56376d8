"""The namespace resolver: a namespace's kind and, for a time-series collection, its
typed target, looked up once."""

from __future__ import annotations

import pytest

from server.namespaces import (
    buckets_name,
    raw_target,
    resolve_namespace,
    timeseries_target,
    view_name_of,
)
from storage.catalog import Catalog
from storage.errors import MongoError
from storage.timeseries import TimeseriesOptions, parse_timeseries_options
from storage.vocabulary.error_codes import ErrorCode


@pytest.fixture
def catalog():
    cat = Catalog.open(engine="memory")
    opts = parse_timeseries_options({"timeField": "t", "metaField": "m",
                                     "granularity": "minutes"})
    with cat.transaction():
        cat.create_collection("db", "plain", {})
        cat.create_collection("db", buckets_name("w"), {})
        cat.create_collection("db", "w", {"timeseries": opts.to_document(),
                                          "expireAfterSeconds": 60}, kind="timeseries")
    yield cat
    cat.close()


def test_a_missing_namespace_has_no_kind(catalog) -> None:
    ns = resolve_namespace(catalog, "db", "nope")
    assert (ns.kind, ns.entry, ns.timeseries) == (None, None, None)


def test_a_collection_is_no_time_series_target(catalog) -> None:
    ns = resolve_namespace(catalog, "db", "plain")
    assert ns.kind == "collection" and ns.entry is not None and ns.timeseries is None
    assert resolve_namespace(catalog, "db", buckets_name("w")).kind == "collection"


def test_a_time_series_collection_resolves_to_its_target(catalog) -> None:
    ns = resolve_namespace(catalog, "db", "w")
    assert ns.kind == "timeseries"
    target = ns.timeseries
    assert target is not None
    assert target.entry is ns.entry
    assert target.options == TimeseriesOptions.from_document(ns.entry.options["timeseries"])
    assert (target.options.time_field, target.options.meta_field) == ("t", "m")
    assert (target.db, target.name, target.ns) == ("db", "w", "db.w")
    assert (target.buckets_name, target.buckets_ns) == ("system.buckets.w",
                                                        "db.system.buckets.w")
    buckets = target.buckets(catalog)
    assert buckets is not None and buckets.entry.name == "system.buckets.w"


def test_the_target_is_frozen(catalog) -> None:
    target = timeseries_target(catalog, "db", "w")
    with pytest.raises(AttributeError):
        target.options = None  # type: ignore[misc]


def test_timeseries_target_refuses_other_namespaces(catalog) -> None:
    for name in ("plain", "nope"):
        with pytest.raises(MongoError) as e:
            timeseries_target(catalog, "db", name)
        assert e.value.code == ErrorCode.NamespaceNotFound


def test_raw_data_targets_the_buckets(catalog) -> None:
    assert raw_target(catalog, "db", "w", {"rawData": True}) == "system.buckets.w"
    assert raw_target(catalog, "db", "w", {}) == "w"
    assert raw_target(catalog, "db", "plain", {"rawData": True}) == "plain"
    assert view_name_of(buckets_name("w")) == "w"

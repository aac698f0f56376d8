"""Namespaces: what a name is (collection, time-series view, view) and how clients see it.

`resolve_namespace` is the one place a command learns what its namespace is: its kind
and, for a time-series collection, a `TimeseriesTarget` (the view's catalog entry, its
parsed options and its buckets collection's name), resolved once per command. The
listCollections description and `rawData` targeting live here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storage.catalog import Catalog
from storage.catalog_entries import CollectionEntry
from storage.collection import Collection
from storage.errors import MongoError
from storage.timeseries import TimeseriesOptions
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["BUCKETS_PREFIX", "Namespace", "TimeseriesTarget", "buckets_name",
           "describe_namespace", "namespace_kind", "raw_target", "resolve_namespace",
           "timeseries_target", "view_name_of"]

BUCKETS_PREFIX = "system.buckets."


def buckets_name(name: str) -> str:
    """The buckets collection of time-series view `name`."""
    return BUCKETS_PREFIX + name


def view_name_of(buckets: str) -> str:
    """The time-series view whose buckets collection is `buckets`."""
    return buckets[len(BUCKETS_PREFIX):]


@dataclass(frozen=True, slots=True)
class TimeseriesTarget:
    """A time-series collection as a command acts on it."""

    entry: CollectionEntry
    options: TimeseriesOptions

    @property
    def db(self) -> str:
        return self.entry.db

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def ns(self) -> str:
        """The view's namespace: the bucket catalog's key for the collection."""
        return self.entry.ns

    @property
    def buckets_name(self) -> str:
        return buckets_name(self.entry.name)

    @property
    def buckets_ns(self) -> str:
        return f"{self.entry.db}.{self.buckets_name}"

    def buckets(self, catalog: Catalog) -> Collection | None:
        """The buckets collection, or None before the first insert made it."""
        return catalog.get_collection(self.entry.db, self.buckets_name)


@dataclass(frozen=True, slots=True)
class Namespace:
    """What `db.name` is: kind None when it does not exist."""

    db: str
    name: str
    kind: str | None
    entry: CollectionEntry | None
    timeseries: TimeseriesTarget | None


def resolve_namespace(catalog: Catalog, db: str, name: str) -> Namespace:
    """Look `db.name` up once (storage thread)."""
    entry = catalog.entry(db, name)
    if entry is None:
        return Namespace(db, name, None, None, None)
    target = None
    if entry.kind == "timeseries":
        target = TimeseriesTarget(entry, TimeseriesOptions.from_document(
            entry.options["timeseries"]))
    return Namespace(db, name, entry.kind, entry, target)


def timeseries_target(catalog: Catalog, db: str, name: str) -> TimeseriesTarget:
    """The time-series collection `db.name`; NamespaceNotFound when it is not one."""
    target = resolve_namespace(catalog, db, name).timeseries
    if target is None:
        raise MongoError(ErrorCode.NamespaceNotFound, f"ns does not exist: {db}.{name}")
    return target


def describe_namespace(entry: CollectionEntry) -> dict[str, Any]:
    """The listCollections document of one namespace, in MongoDB's shape."""
    if entry.kind == "timeseries":
        return {"name": entry.name, "type": "timeseries", "options": dict(entry.options),
                "info": {"readOnly": False}}
    if entry.kind == "view":
        return {"name": entry.name, "type": "view", "options": dict(entry.options),
                "info": {"readOnly": True}}
    doc: dict[str, Any] = {"name": entry.name, "type": "collection",
                           "options": dict(entry.options),
                           "info": {"readOnly": False, "uuid": entry.uuid}}
    if not entry.options.get("clusteredIndex"):
        doc["idIndex"] = {"v": 2, "key": {"_id": 1}, "name": "_id_"}
    return doc


def namespace_kind(catalog: Catalog, db: str, name: str) -> str | None:
    """"collection", "timeseries", "view", or None when the namespace does not exist."""
    entry = catalog.entry(db, name)
    return None if entry is None else entry.kind


def raw_target(catalog: Catalog, db: str, name: str, body: dict[str, Any]) -> str:
    """With `rawData: true` a time-series collection's commands act on its buckets."""
    if body.get("rawData") is True and namespace_kind(catalog, db, name) == "timeseries":
        return buckets_name(name)
    return name

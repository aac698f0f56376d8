"""How namespaces are described to clients (listCollections, collStats)."""

from __future__ import annotations

from typing import Any

from storage.catalog_entries import CollectionEntry

__all__ = ["describe_namespace", "namespace_kind", "raw_target"]


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


def namespace_kind(catalog: Any, db: str, name: str) -> str | None:
    """"collection", "timeseries", "view", or None when the namespace does not exist."""
    entry = catalog.entry(db, name)
    return None if entry is None else entry.kind


def raw_target(catalog: Any, db: str, name: str, body: dict[str, Any]) -> str:
    """With `rawData: true` a time-series collection's commands act on its buckets."""
    if body.get("rawData") is True and namespace_kind(catalog, db, name) == "timeseries":
        return f"system.buckets.{name}"
    return name

"""How namespaces are described to clients (listCollections, collStats)."""

from __future__ import annotations

from typing import Any

from storage.catalog import CollectionEntry

__all__ = ["describe_namespace", "namespace_kind"]


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

"""What the catalog stores per namespace: `CollectionEntry` (name, UUID, kind, options, info,
record store ident, indexes) and `IndexEntry` (spec, ident, multikey state), with their
documents in the ``_catalog`` record store. Immutable: the catalog swaps in new entries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bson.binary import Binary

from storage.engine.base import RecordId
from storage.indexes import IndexSpec

__all__ = ["CollectionEntry", "IndexEntry", "UnreadableEntry", "KINDS"]

KINDS = frozenset({"collection", "view", "timeseries"})


@dataclass(frozen=True)
class UnreadableEntry:
    """A catalog record that does not read as an entry: left as it is, with why."""

    catalog_rid: RecordId
    reason: str
    idents: tuple[str, ...] = ()  # the record stores it appears to own, kept


@dataclass(frozen=True)
class IndexEntry:
    """One index of a collection, as the catalog stores it."""

    spec: IndexSpec
    ident: str
    multikey: bool = False
    #: per key field, the path components that held arrays (MongoDB's multikeyPaths)
    multikey_paths: tuple[frozenset[int], ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name

    def to_doc(self) -> dict[str, Any]:
        return {"spec": self.spec.document, "ident": self.ident, "multikey": self.multikey,
                "multikeyPaths": [sorted(p) for p in self.multikey_paths]}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> IndexEntry:
        spec = IndexSpec.from_document(doc["spec"])
        paths = tuple(frozenset(p) for p in doc.get("multikeyPaths", []))
        if len(paths) != len(spec.fields):
            paths = tuple(frozenset() for _ in spec.fields)
        return cls(spec, doc["ident"], bool(doc.get("multikey")), paths)


@dataclass(frozen=True)
class CollectionEntry:
    """One namespace. Immutable: the catalog swaps in a new entry on every change."""

    db: str
    name: str
    uuid: Binary  # subtype 4
    kind: str
    options: dict[str, Any]
    info: dict[str, Any]
    ident: str | None
    indexes: tuple[IndexEntry, ...] = ()
    catalog_rid: RecordId = 0

    @property
    def ns(self) -> str:
        return f"{self.db}.{self.name}"

    def index(self, name: str) -> IndexEntry | None:
        for ix in self.indexes:
            if ix.name == name:
                return ix
        return None

    def to_doc(self) -> dict[str, Any]:
        return {"ns": self.ns, "db": self.db, "name": self.name, "uuid": self.uuid,
                "kind": self.kind, "options": self.options, "info": self.info,
                "ident": self.ident, "indexes": [ix.to_doc() for ix in self.indexes]}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any], rid: RecordId) -> CollectionEntry:
        """The entry a catalog record holds; ValueError (saying what) for one that no
        command of ours could have written."""
        uuid = doc["uuid"]
        if not isinstance(uuid, Binary):
            uuid = Binary(bytes(uuid), 4)
        db, name, kind, ident = doc["db"], doc["name"], doc["kind"], doc.get("ident")
        if type(db) is not str or type(name) is not str or not db or not name:
            raise ValueError(f"its namespace is not two strings: {db!r}, {name!r}")
        if doc.get("ns") not in (None, f"{db}.{name}"):
            raise ValueError(f"its ns {doc.get('ns')!r} is not {db}.{name}")
        if kind not in KINDS or len(uuid) != 16:
            raise ValueError(f"kind {kind!r} or its {len(uuid)}-byte uuid is not valid")
        if ident is not None and type(ident) is not str:
            raise ValueError(f"its record store ident {ident!r} is not a string")
        options, info = doc.get("options") or {}, doc.get("info") or {}
        if not isinstance(options, dict) or not isinstance(info, dict):
            raise ValueError("its options or info is not a document")
        return cls(db, name, uuid, kind, dict(options), dict(info), ident,
                   tuple(IndexEntry.from_doc(i) for i in doc.get("indexes", [])), rid)

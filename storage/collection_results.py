"""What `Collection` operations return: insert results, index-creation results, collStats and
validate figures, and the counters an index scan fills in for explain; and what
`update_many` takes (`Replacement`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from storage.engine.base import RecordId
from storage.errors import MongoError

__all__ = ["InsertResult", "CreateIndexesResult", "CollectionStats", "IndexKeys",
           "Replacement", "ValidateResult", "ScanStats"]


@dataclass(frozen=True, slots=True)
class IndexKeys:
    """The keys a document version has in each index of its collection (`Collection.update`
    returns them for the version it stores): the indexes' idents then, and per index its
    encoded keys."""

    indexes: tuple[str, ...]
    keys: tuple[tuple[bytes, ...], ...]


@dataclass(frozen=True, slots=True)
class Replacement:
    """One document of `Collection.update_many`: the record, the new version (decoded,
    and encoded when the caller has it), what the stored version is known by: decoded or
    its keys (`IndexKeys`, from the update that stored it; neither: it is read), and the
    stored bytes the caller read it from (`expected`, see `RecordStore.update`).

    `new_keys`: the new version's keys, when the caller made them (one key per index,
    none multikey; a unique index still checks them); `new_doc` is then not read, and
    may be empty, when `encoded` is given. `old_size`: the stored version's length, when
    the caller knows it."""

    rid: RecordId
    new_doc: Mapping[str, Any]
    encoded: bytes | None = None
    old_doc: Mapping[str, Any] | None = None
    old_keys: IndexKeys | None = None
    expected: bytes | None = None
    new_keys: IndexKeys | None = None
    old_size: int | None = None


@dataclass
class InsertResult:
    """Per input document: its RecordId, or None if it was not inserted."""

    record_ids: list[RecordId | None]
    #: (position in the batch, error) in batch order
    errors: list[tuple[int, MongoError]] = field(default_factory=list)
    #: with `insert_many(..., return_keys=True)`: per input document, the keys it was
    #: inserted with (what `Collection.update` takes as `old_keys`), None if not inserted
    keys: list[IndexKeys | None] | None = None

    @property
    def n_inserted(self) -> int:
        return sum(1 for r in self.record_ids if r is not None)


@dataclass
class CreateIndexesResult:
    created: list[str]
    num_indexes_before: int
    num_indexes_after: int

    @property
    def all_existed(self) -> bool:
        """MongoDB replies with the note "all indexes already exist" then."""
        return not self.created


@dataclass(frozen=True)
class CollectionStats:
    """collStats figures in bytes (scale them in the command)."""

    ns: str
    count: int
    size: int
    storage_size: int
    nindexes: int
    total_index_size: int
    index_sizes: dict[str, int]

    @property
    def avg_obj_size(self) -> int:
        return self.size // self.count if self.count else 0


@dataclass
class ValidateResult:
    ns: str
    valid: bool
    errors: list[str]
    warnings: list[str]
    n_records: int
    n_invalid_documents: int
    keys_per_index: dict[str, int]
    index_details: dict[str, dict[str, Any]]


@dataclass
class ScanStats:
    """Counters an index scan fills in (for explain)."""

    keys_examined: int = 0
    docs_examined: int = 0
    dups_dropped: int = 0

"""The native measurement scan: a time-series insert batch read from its wire bytes.

`scan(buf, options, ordered)` hands a batch of BSON documents laid back to back (an
OP_MSG kind-1 sequence) to the native core (`storage.native.core.scan_measurements`,
`native/src/measurements/`), which validates each document (well-formed BSON, at most
`maxBSONDepth` levels deep, at most 16 MiB, a BSON date in the time field), normalizes
its meta value and finds its series, sizes its fields, and groups the batch as the
catalog does, all without a Python object per measurement. What it computes is what
`measurements.MeasurementPreparer.prepare_all` and `bucket_catalog.insert_batch`'s
grouping compute from the decoded documents (the differential tests hold it to that);
beyond them it refuses malformed BSON (InvalidBSON), too-deep nesting (Overflow) and
documents over 16 MiB (BSONObjectTooLarge) per measurement, as MongoDB does.

`scan` returns None where the Python path must do the work: the core was not built, or
it declined the batch because a document holds something pymongo reads back
differently from its bytes (duplicate field names, Symbol, Undefined, DBPointer, a
`$ref`/`$id` sub-document, non-canonical array keys or regex options; see
`native/src/measurements/walk.rs`). A batch whose framing is broken raises the
`MongoError` the core reports for the whole batch.

The accessors below turn the result's coarse byte arrays into numpy arrays and the few
Python objects a caller needs (errors as `prepare_all` lists them, the groups, the
decoded normalized meta of each series).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import numpy as np

from storage import native
from storage.bsonutil import MAX_BSON_SIZE, decode
from storage.errors import MongoError
from storage.vocabulary.missing import MISSING

from .options import TimeseriesOptions

if TYPE_CHECKING:
    from storage._native import ScannedBatch

__all__ = ["AVAILABLE", "MAX_BSON_DEPTH", "Arrays", "Prescan", "arrays", "errors", "groups",
           "prescan", "scan", "series_meta", "series_metas"]

AVAILABLE: Final = native.core is not None and hasattr(native.core, "scan_measurements")

# maxBSONDepth's default (server/parameters.py; MongoDB's is the same)
MAX_BSON_DEPTH: Final = 200


def scan(buf: bytes, options: TimeseriesOptions, ordered: bool, *,
         offsets: Sequence[int] | None = None, max_depth: int = MAX_BSON_DEPTH,
         max_size: int = MAX_BSON_SIZE) -> ScannedBatch | None:
    """The scanned batch, or None when the Python path must prepare it (no core, or the
    core declined it). `offsets`: where each document starts (each runs to the next
    one); without them each document's length prefix frames it."""
    core = native.core
    if not AVAILABLE or core is None:
        return None
    try:
        return native.check(core.scan_measurements, buf, options.time_field,
                            options.meta_field, ordered,
                            None if offsets is None else list(offsets), max_depth, max_size)
    except core.Declined:
        return None


class Prescan(NamedTuple):
    """A batch scanned before it reached the catalog (by `prescan`, e.g. on the thread
    that read it off the wire while the storage thread works): what `scan` gave for
    these options, of this buffer."""

    buffer: bytes
    time_field: str
    meta_field: str | None
    ordered: bool
    batch: ScannedBatch | None  # None: the core declined it


def prescan(buf: bytes, options: TimeseriesOptions, ordered: bool, *,
            offsets: Sequence[int] | None = None) -> Prescan | None:
    """`scan` ahead of the catalog, or None without the core. The scan releases the GIL,
    so a thread that calls this runs beside the others."""
    if not AVAILABLE:
        return None
    return Prescan(buf, options.time_field, options.meta_field, ordered,
                   scan(buf, options, ordered, offsets=offsets))


class Arrays(NamedTuple):
    """Per-measurement figures of a scanned batch, one entry per document."""

    times: np.ndarray          # int64 ms since the epoch (0 where refused)
    series_of: np.ndarray      # int32 series index (-1 where refused or not scanned)
    field_counts: np.ndarray   # int32 fields other than the meta, the added _id included
    value_bytes: np.ndarray    # int64 value bytes of those fields
    max_value_lens: np.ndarray  # int32 longest of those values, at least 8
    has_id: np.ndarray         # bool: the document has an _id
    nested: np.ndarray         # bool: a field other than the meta is an object or array


def arrays(batch: ScannedBatch) -> Arrays:
    """The batch's per-measurement figures as numpy arrays (views of the bytes)."""
    return Arrays(
        np.frombuffer(batch.times(), dtype="<i8"),
        np.frombuffer(batch.series_of(), dtype="<i4"),
        np.frombuffer(batch.field_counts(), dtype="<i4"),
        np.frombuffer(batch.value_bytes(), dtype="<i8"),
        np.frombuffer(batch.max_value_lens(), dtype="<i4"),
        np.frombuffer(batch.has_id(), dtype=np.uint8).astype(bool),
        np.frombuffer(batch.nested(), dtype=np.uint8).astype(bool),
    )


def errors(batch: ScannedBatch) -> list[tuple[int, MongoError]]:
    """The refused documents as `prepare_all` lists them: (index, MongoError)."""
    return [(i, MongoError(code, message)) for i, code, message in batch.errors()]


def groups(batch: ScannedBatch) -> list[list[int]]:
    """The accepted measurements' indexes grouped as `insert_batch` stages them: series
    in order of first appearance, each by time (stable)."""
    order = np.frombuffer(batch.order(), dtype="<i4").tolist()
    starts = np.frombuffer(batch.series_starts(), dtype="<i4").tolist()
    return [order[a:b] for a, b in pairwise(starts)]


def series_metas(batch: ScannedBatch) -> list[Any]:
    """The normalized meta value of each series (decoded once per series), MISSING for
    the series of measurements without one."""
    return [series_meta(batch, j) for j in range(batch.series_count)]


def series_meta(batch: ScannedBatch, j: int) -> Any:
    """The normalized meta value of series `j` (MISSING without one)."""
    doc = batch.series_meta(j)
    return MISSING if doc is None else decode(doc)[""]

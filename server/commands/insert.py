"""insert: documents into a collection (ordered or not), or measurements into a time-series
collection; per-document failures are reported in `writeErrors`.

Measurements sent as a document sequence (OP_MSG kind 1, as drivers send `insert_many`)
reach the bucket catalog undecoded: `raw_sequences` tells the dispatcher to keep
`documents` as `RawDocuments` when the target is a time-series collection, and the
catalog decodes (or scans) them itself."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final

from query.executor import check_size, prepare_document_for_insert
from storage.bsonutil import CODEC_OPTIONS
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.raw_documents import MalformedDocument, RawDocuments

from ..context import CommandRequest, ServerState
from ..namespaces import raw_target, resolve_namespace
from ..timeseries.writes import insert_measurements
from ..views.writes import refused_writes
from ..write_batches import write_reply
from ._args import check_fields, get_bool, get_list, namespace_arg, require
from ._write import (
    after_direct_write,
    check_batch_size,
    make_validator,
    parse_write_concern,
)

_DOCUMENTS: Final = frozenset({"documents"})


def raw_sequences(server: ServerState, body: dict[str, Any], db: Any) -> Collection[str]:
    """The document sequences this insert takes raw: `documents` when it goes to a
    time-series collection (not with rawData, which writes the buckets themselves)."""
    name = body.get("insert")
    if server.storage is None or type(name) is not str or not name or \
            type(db) is not str or body.get("rawData") is True:
        return ()
    # read-only use of the catalog's in-memory table, as `handle` does
    if resolve_namespace(server.storage.catalog, db, name).timeseries is None:
        return ()
    return _DOCUMENTS


def _decoded(raw: RawDocuments) -> list[Any]:
    try:
        return raw.decode(CODEC_OPTIONS)
    except MalformedDocument as exc:
        raise MongoError(ErrorCode.InvalidBSON, exc.message) from None


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "insert", ("documents", "ordered", "bypassDocumentValidation",
                                  "collectionUUID"))
    name = namespace_arg(body, "insert")
    name = raw_target(req.storage.catalog, req.db, name, body)
    docs: list[Any] | RawDocuments | None
    if isinstance(body.get("documents"), RawDocuments):
        docs = body["documents"]  # a document sequence: all of them are documents
    else:
        docs = get_list(body, "insert", "documents")
    if docs is None:
        require(body, "insert", "documents")
        docs = []
    check_batch_size(len(docs), "insert")
    ordered = get_bool(body, "insert", "ordered", True)
    bypass = get_bool(body, "insert", "bypassDocumentValidation", False)
    wc = parse_write_concern(body)
    db = req.db
    if name.startswith("system.") and not name.startswith("system.buckets.") and \
            name not in ("system.js", "system.profile"):
        raise MongoError(ErrorCode.InvalidNamespace, f"Invalid system namespace: {db}.{name}")

    # The catalog's in-memory table is read-only here; writes to it happen on the
    # storage thread, and a namespace's kind never changes while it exists.
    resolved = resolve_namespace(req.storage.catalog, db, name)
    if resolved.kind == "view":
        return refused_writes(db, name, len(docs), ordered=ordered)
    ts = resolved.timeseries
    if ts is not None:
        return await insert_measurements(req, ts, docs, ordered=ordered, durable=wc.j)
    if isinstance(docs, RawDocuments):  # kept raw for a time-series target that is gone
        docs = _decoded(docs)

    # Per-document checks that need no storage happen here, off the storage thread.
    prepared: list[tuple[int, dict[str, Any], bytes]] = []
    errors: list[tuple[int, MongoError]] = []
    stop_at: int | None = None
    for i, doc in enumerate(docs):
        try:
            if not isinstance(doc, dict):
                raise MongoError(ErrorCode.TypeMismatch, "documents must be objects")
            doc = prepare_document_for_insert(doc)
            prepared.append((i, doc, check_size(doc)))
        except MongoError as exc:
            errors.append((i, exc))
            if ordered:
                stop_at = i
                break

    def write() -> int:
        catalog = req.storage.catalog
        coll = catalog.get_or_create_collection(db, name)
        validator = None if bypass else make_validator(coll.options, f"{db}.{name}")
        batch = prepared
        if validator is not None:
            batch = []
            for i, doc, data in prepared:
                try:
                    validator(doc)
                    batch.append((i, doc, data))
                except MongoError as exc:
                    errors.append((i, exc))
                    if ordered:
                        break
            if ordered and errors:
                first_bad = min(i for i, _ in errors)
                batch = [b for b in batch if b[0] < first_bad]
        if not batch:
            return 0
        result = coll.insert_many([d for _, d, _ in batch], ordered=ordered,
                                  encoded=[e for _, _, e in batch], durable=wc.j)
        for pos, err in result.errors:
            errors.append((batch[pos][0], err))
        after_direct_write(req, db, name)
        return result.n_inserted

    n = await req.storage.run(write) if prepared else 0
    if stop_at is not None:
        errors = [e for e in errors if e[0] <= stop_at] if ordered else errors
    if ordered and errors:
        first = min(i for i, _ in errors)
        errors = [e for e in errors if e[0] == first]
    req.server.opcounters["insert"] += len(docs) - 1 if docs else 0
    return write_reply(n, errors)

"""Writes of measurements: insert through the bucket catalog, update and delete by
rewriting the buckets that hold the matched measurements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from query.executor import (
    FindSpec,
    UpdateStatement,
    compile_statement_update,
    matching,
    positional_match,
    prepare_find,
    statement_variables,
)
from query.match import compile_filter
from query.variables import CommandVariables
from storage.bsonutil import decode
from storage.collation import Collator, OperationCollation, has_string
from storage.engine.base import retry_write_conflicts
from storage.errors import MongoError
from storage.timeseries import (
    BucketCatalog,
    BucketSpec,
    bucket_filter,
    bucket_index_key,
    meta_only_filter,
    rebuild_bucket,
    unpack_bucket,
)
from storage.timeseries.native_scan import prescan
from storage.timeseries.pending_writes import write_buckets
from storage.timeseries.shared_insert import insert_shared
from storage.timeseries.stored_buckets import StoredBuckets
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING
from storage.vocabulary.raw_documents import RawDocuments

from ..parsing.collation import timeseries_collator
from ..parsing.write_statements import parse_delete_statement, parse_update_statement
from ..write_batches import WriteTally, run_statements, write_reply
from .service import timeseries_service

if TYPE_CHECKING:
    from storage.collection import Collection

    from ..context import CommandRequest
    from ..namespaces import TimeseriesTarget

__all__ = ["StatementResult", "delete_measurements", "delete_statement", "insert_measurements",
           "refuse_sort", "stage_measurements", "update_measurements", "update_statement"]

# (measurement) -> (what stays in the bucket or None, what is re-inserted or None)
Transform = Callable[[dict[str, Any]], tuple[dict[str, Any] | None, dict[str, Any] | None]]


# --- insert -----------------------------------------------------------------------------------

async def insert_measurements(req: CommandRequest, target: TimeseriesTarget,
                              docs: list[dict[str, Any]] | RawDocuments, *, ordered: bool,
                              durable: bool) -> dict[str, Any]:
    """Stage the measurements into buckets and acknowledge; the group commit writes them
    (now when `durable`). `docs` sent as a document sequence arrive as `RawDocuments`
    and go to the bucket catalog so, undecoded."""
    service = timeseries_service(req)
    # a client's value that is not a document (binData would read as BSON bytes to the
    # catalog) goes in as None, which the catalog refuses at its index
    measurements: list[Any] | RawDocuments = docs if isinstance(docs, RawDocuments) else \
        [d if type(d) is dict else None for d in docs]
    # the native scan runs here, on the thread that read the batch, without the GIL,
    # while the storage thread works on what came before it
    prescanned = prescan(docs.buffer, target.options, ordered, offsets=docs.offsets) \
        if isinstance(docs, RawDocuments) else None

    def run() -> dict[str, Any]:
        n, errors = stage_measurements(req, target, measurements, ordered=ordered,
                                       durable=durable, prescanned=prescanned)
        return write_reply(n, errors)

    reply = await req.storage.run(run, keep_deferred=True)
    service.arm_flush_timer()
    req.server.opcounters["insert"] += max(0, len(docs) - 1)
    return reply


def stage_measurements(req: CommandRequest, target: TimeseriesTarget,
                       measurements: list[Any] | RawDocuments, *, ordered: bool,
                       durable: bool, prescanned: Any = None
                       ) -> tuple[int, list[tuple[int, MongoError]]]:
    """Storage thread: put the measurements into buckets and commit them in the bucket
    catalog; their bucket writes join the group commit's pending writes (written now when
    `durable` or when the commit interval has passed; the caller arms the flush timer).
    Returns (inserted, errors by index)."""
    service = timeseries_service(req)
    catalog = req.storage.catalog
    opts = target.options
    buckets = catalog.get_or_create_collection(target.db, target.buckets_name)
    service.sync_parameters()
    if service.catalog.check_versions:
        return _stage_shared(req, target, buckets, measurements, ordered=ordered,
                             durable=durable, prescanned=prescanned)
    source = StoredBuckets(buckets, opts, service.deferred, service.flush_deferred)
    result = service.catalog.insert_batch(target.ns, opts, measurements, source,
                                          ordered=ordered, prescanned=prescanned)
    service.note_bucket_inserts(buckets, result.writes)
    service.deferred.add(target.db, target.buckets_name, result.writes)
    service.catalog.commit(result)
    if durable or service.deferred.due(service.commit_interval_ms()):
        service.flush_deferred(durable=durable)
    return result.num_inserted, list(result.errors)


def _stage_shared(req: CommandRequest, target: TimeseriesTarget, buckets: Collection,
                  measurements: list[Any] | RawDocuments, *, ordered: bool, durable: bool,
                  prescanned: Any) -> tuple[int, list[tuple[int, MongoError]]]:
    """`stage_measurements` when other processes write the same buckets (PostgreSQL):
    written before committed, retried on a write conflict (`shared_insert`)."""
    service = timeseries_service(req)
    result = insert_shared(
        service.catalog, req.storage.catalog, buckets, target.ns, target.options,
        measurements, ordered=ordered, durable=durable, prescanned=prescanned,
        before_write=lambda r: service.note_bucket_inserts(buckets, r.writes))
    return result.num_inserted, list(result.errors)


# --- updates and deletes ----------------------------------------------------------------------

def bucket_hint(target: TimeseriesTarget, hint: Any) -> Any:
    """A write's `hint` on the view as the buckets collection's planner takes it: an
    index name as is, a key pattern in bucket form ({$natural} as is)."""
    if not isinstance(hint, dict) or not hint or "$natural" in hint:
        return hint or None
    try:
        return bucket_index_key(target.options, hint)
    except MongoError:
        raise MongoError(ErrorCode.BadValue, "error processing query: planner returned error "
                         ":: caused by :: hint provided does not correspond to an existing "
                         "index") from None


def _bucket_find(target: TimeseriesTarget, flt: dict[str, Any] | None, hint: Any,
                 collator: Collator | None) -> FindSpec:
    """The find of a write's candidate buckets: its bucket filter compared by the
    collation only when it holds a string (the buckets' own indexes are simple)."""
    return FindSpec(filter=flt, hint=bucket_hint(target, hint),
                    collator=collator if has_string(flt) else None)


def _rewrite_buckets(req: CommandRequest, target: TimeseriesTarget, flt: dict[str, Any], *,
                     limit_one: bool, transform: Transform,
                     variables: dict[str, Any] | None = None, hint: Any = None,
                     collator: Collator | None = None
                     ) -> tuple[int, list[dict[str, Any]]]:
    """Walk candidate buckets; measurements the filter selects are passed to `transform`;
    what it keeps stays in the bucket, what it returns as `out` is collected (re-inserted
    by updates). Buckets left empty are deleted; changed ones rebuilt. `variables` are
    those the filter's `$expr` may read; `hint` picks the buckets' index. Returns
    (matched, outputs)."""
    opts = target.options
    buckets = target.buckets(req.storage.catalog)
    if buckets is None:
        return 0, []
    service = timeseries_service(req)
    matcher = compile_filter(flt, variables=variables, collator=collator)
    bflt = bucket_filter(flt, opts) if flt else None
    found = matching(buckets, prepare_find(buckets, _bucket_find(target, bflt, hint,
                                                                 collator)))
    # a single write reads buckets only up to the first holding a match; the writes wait
    # until the read is over, so they never meet the scan
    rows = found if limit_one else list(found)
    spec = BucketSpec(opts.time_field, opts.meta_field)
    matched = 0
    outputs: list[dict[str, Any]] = []
    rewrites: list[tuple[int, bytes, dict[str, Any], list[dict[str, Any]]]] = []
    for rid, raw, bucket in rows:
        kept: list[dict[str, Any]] = []
        changed = False
        for m in unpack_bucket(bucket, spec):
            if (not limit_one or not matched) and matcher.matches(m):
                matched += 1
                keep, out = transform(m)
                if out is not None:
                    outputs.append(out)
                if keep is not None:
                    kept.append(keep)
                changed = True
            else:
                kept.append(m)
        if changed:
            rewrites.append((rid, raw, bucket, kept))
        if limit_one and matched:
            break
    found.close()
    for rid, raw, bucket, kept in rewrites:
        if not kept:
            buckets.delete(rid, old_doc=bucket, expected=raw)
        else:
            min_ms = int(bucket["control"]["min"][opts.time_field])
            data = rebuild_bucket(bucket["_id"], kept, opts, min_time_ms=min_ms)
            buckets.update(rid, decode(data), encoded=data, old_doc=bucket, expected=raw)
        service.catalog.handle_direct_write(target.ns, bucket["_id"])
    return matched, outputs


def _insert_side(req: CommandRequest, target: TimeseriesTarget,
                 docs: list[dict[str, Any]]) -> None:
    """Insert measurements through a side bucket catalog (MongoDB does the same for
    updated measurements), inside the caller's transaction."""
    if not docs:
        return
    opts = target.options
    buckets = target.buckets(req.storage.catalog)
    assert buckets is not None  # the measurements came from it
    service = timeseries_service(req)
    side = BucketCatalog(service.catalog.params)
    result = side.insert_batch(target.ns, opts, docs, None, ordered=True)
    if result.errors:
        side.abort(result)
        raise result.errors[0][1]
    service.note_bucket_inserts(buckets, result.writes)
    write_buckets(buckets, result.writes)
    side.commit(result)
    service.catalog.merge_stats(target.ns, side.execution_stats(target.ns))


@dataclass(slots=True)
class StatementResult:
    """What one update or delete statement did. `before` is the first measurement it
    matched as it was, `after` that one as updated (or the upserted measurement)."""

    matched: int = 0
    modified: int = 0
    upserted: Any = MISSING
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


def refuse_sort(sort: dict[str, Any] | None) -> None:
    """MongoDB 8.0 picks no measurement by sort for a single update or delete."""
    if sort:
        raise MongoError(ErrorCode.InvalidOptions, "Cannot perform a findAndModify with a "
                         "query and sort on a time-series collection.")


async def delete_measurements(req: CommandRequest, target: TimeseriesTarget,
                              deletes: list[Any], *, ordered: bool, durable: bool,
                              variables: CommandVariables | None = None) -> dict[str, Any]:
    catalog = req.storage.catalog
    values = (variables or CommandVariables()).values()

    def apply(_i: int, raw: Any, tally: WriteTally) -> None:
        q, limit_one, hint, collation = parse_delete_statement(raw)

        def statement() -> int:
            with catalog.transaction(durable=durable):
                return delete_statement(req, target, q, limit_one, values, hint,
                                        collation).matched

        tally.n += retry_write_conflicts(statement)

    def run() -> dict[str, Any]:
        tally = run_statements(deletes, ordered=ordered, apply=apply)
        return write_reply(tally.n, tally.errors)

    return await req.storage.run(run)


def delete_statement(req: CommandRequest, target: TimeseriesTarget, q: dict[str, Any],
                     limit_one: bool, variables: dict[str, Any], hint: Any = None,
                     collation: OperationCollation = None) -> StatementResult:
    """One delete (storage thread, in the caller's transaction) with the operation's
    `collation`; `before` is the deleted measurement of a single delete."""
    opts = target.options
    collator = timeseries_collator(collation, target.entry.options)
    meta_flt = meta_only_filter(q, opts) if not limit_one else None
    if meta_flt is not None:
        # A predicate only on the metaField deletes whole buckets.
        buckets = target.buckets(req.storage.catalog)
        if buckets is None:
            return StatementResult()
        rows = list(matching(buckets, prepare_find(buckets, _bucket_find(
            target, meta_flt, hint, collator))))
        n = 0
        for rid, raw, bucket in rows:
            n += int(bucket["control"].get("count") or sum(
                1 for _ in unpack_bucket(bucket, BucketSpec(opts.time_field))))
            buckets.delete(rid, old_doc=bucket, expected=raw)
            timeseries_service(req).catalog.handle_direct_write(target.ns, bucket["_id"])
        return StatementResult(matched=n)
    result = StatementResult()

    def transform(m: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        if result.before is None:
            result.before = m
        return None, None

    result.matched, _ = _rewrite_buckets(req, target, q, limit_one=limit_one,
                                         transform=transform, variables=variables, hint=hint,
                                         collator=collator)
    return result


async def update_measurements(req: CommandRequest, target: TimeseriesTarget,
                              updates: list[Any], *, ordered: bool, durable: bool,
                              variables: CommandVariables | None = None) -> dict[str, Any]:
    catalog = req.storage.catalog

    def apply(i: int, raw: Any, tally: WriteTally) -> None:
        stmt = parse_update_statement(raw, variables=variables)

        def statement() -> StatementResult:
            with catalog.transaction(durable=durable):
                return update_statement(req, target, stmt)

        out = retry_write_conflicts(statement)
        tally.n += out.matched
        tally.modified += out.modified
        if out.upserted is not MISSING:
            tally.add_upserted(i, out.upserted)

    def run() -> dict[str, Any]:
        return run_statements(updates, ordered=ordered, apply=apply).update_reply()

    return await req.storage.run(run)


def update_statement(req: CommandRequest, target: TimeseriesTarget,
                     stmt: UpdateStatement) -> StatementResult:
    """One update statement (operators, replacement or pipeline: each matched measurement
    is updated on its own and moves to a bucket through a side bucket catalog), on the
    storage thread in the caller's transaction."""
    if not stmt.multi:
        refuse_sort(stmt.sort)
    opts = target.options
    collator = timeseries_collator(stmt.collator, target.entry.options)
    update = compile_statement_update(stmt, collator)
    result = StatementResult()
    positional = compile_filter(stmt.q, variables=statement_variables(stmt),
                                collator=collator) if update.uses_positional else None

    def transform(m: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        pos = positional_match(positional, m) if positional is not None else None
        new, changed = update.apply(m, matched_position=pos, id_immutable=False)
        if result.before is None:
            result.before, result.after = m, new
        if not changed:
            return m, None
        result.modified += 1
        return None, new  # updated measurements move to new buckets

    result.matched, outputs = _rewrite_buckets(req, target, stmt.q, limit_one=not stmt.multi,
                                               transform=transform,
                                               variables=statement_variables(stmt),
                                               hint=stmt.hint, collator=collator)
    if result.matched == 0 and stmt.upsert:
        doc = update.upsert_document(stmt.q)
        outputs = [doc]
        result.upserted = doc.get("_id", MISSING)
        result.after = doc
    for doc in outputs:
        if opts.time_field not in doc:
            raise MongoError(ErrorCode.BadValue,
                             f"'{opts.time_field}' must be present and contain a valid BSON "
                             "UTC datetime value")
    _insert_side(req, target, outputs)
    return result

"""Writes of measurements: insert through the bucket catalog, update and delete by
rewriting the buckets that hold the matched measurements."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from query.executor import (
    UpdateStatement,
    compile_statement_update,
    statement_variables,
)
from query.match import compile_filter
from query.timeseries.scan import BucketScan
from query.variables import CommandVariables
from storage.bsonutil import decode
from storage.collation import Collator
from storage.errors import MongoError
from storage.timeseries import (
    BucketCatalog,
    BucketSpec,
    bucket_filter,
    meta_only_filter,
    rebuild_bucket,
    unpack_bucket,
)
from storage.timeseries.native_scan import prescan
from storage.timeseries.pending_writes import write_buckets
from storage.timeseries.stored_buckets import StoredBuckets
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING
from storage.vocabulary.raw_documents import RawDocuments

from ..parsing.collation import timeseries_collator
from ..parsing.write_statements import parse_delete_statement, parse_update_statement
from ..write_batches import WriteTally, run_statements, write_reply
from .service import timeseries_service

if TYPE_CHECKING:
    from ..context import CommandRequest
    from ..namespaces import TimeseriesTarget

__all__ = ["delete_measurements", "insert_measurements", "update_measurements"]

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
        catalog = req.storage.catalog
        opts = target.options
        buckets = catalog.get_or_create_collection(target.db, target.buckets_name)
        service.sync_parameters()
        source = StoredBuckets(buckets, opts, service.deferred, service.flush_deferred)
        result = service.catalog.insert_batch(target.ns, opts, measurements, source,
                                              ordered=ordered, prescanned=prescanned)
        service.note_bucket_inserts(buckets, opts.time_field, result.writes)
        service.deferred.add(target.db, target.buckets_name, result.writes)
        service.catalog.commit(result)
        if durable or service.deferred.due(service.commit_interval_ms()):
            service.flush_deferred(durable=durable)
        reply: dict[str, Any] = {"n": result.num_inserted}
        if result.errors:
            reply["writeErrors"] = [e.to_write_error(i) for i, e in result.errors]
        return reply

    reply = await req.storage.run(run, keep_deferred=True)
    service.arm_flush_timer()
    req.server.opcounters["insert"] += max(0, len(docs) - 1)
    return reply


# --- updates and deletes ----------------------------------------------------------------------

def _rewrite_buckets(req: CommandRequest, target: TimeseriesTarget, flt: dict[str, Any], *,
                     limit_one: bool, transform: Transform,
                     variables: dict[str, Any] | None = None,
                     collator: Collator | None = None
                     ) -> tuple[int, list[dict[str, Any]]]:
    """Walk candidate buckets; measurements the filter selects are passed to `transform`;
    what it keeps stays in the bucket, what it returns as `out` is collected (re-inserted
    by updates). Buckets left empty are deleted; changed ones rebuilt. `variables` are
    those the filter's `$expr` may read. Returns (matched, outputs)."""
    opts = target.options
    buckets = target.buckets(req.storage.catalog)
    if buckets is None:
        return 0, []
    service = timeseries_service(req)
    matcher = compile_filter(flt, variables=variables, collator=collator)
    bflt = bucket_filter(flt, opts) if flt else None
    rows = list(BucketScan(buckets, bflt, collator=collator).buckets())
    spec = BucketSpec(opts.time_field, opts.meta_field)
    matched = 0
    outputs: list[dict[str, Any]] = []
    for rid, bucket in rows:
        if limit_one and matched:
            break
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
        if not changed:
            continue
        if not kept:
            buckets.delete(rid, old_doc=bucket)
        else:
            min_ms = int(bucket["control"]["min"][opts.time_field])
            data = rebuild_bucket(bucket["_id"], kept, opts, min_time_ms=min_ms)
            buckets.update(rid, decode(data), encoded=data, old_doc=bucket)
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
    service.note_bucket_inserts(buckets, opts.time_field, result.writes)
    write_buckets(buckets, result.writes)
    side.commit(result)
    service.catalog.merge_stats(target.ns, side.execution_stats(target.ns))


async def delete_measurements(req: CommandRequest, target: TimeseriesTarget,
                              deletes: list[Any], *, ordered: bool, durable: bool,
                              variables: CommandVariables | None = None) -> dict[str, Any]:
    catalog = req.storage.catalog
    values = (variables or CommandVariables()).values()

    def apply(_i: int, raw: Any, tally: WriteTally) -> None:
        q, limit_one, _hint, collation = parse_delete_statement(raw)
        collator = timeseries_collator(collation, target.entry.options)
        with catalog.transaction(durable=durable):
            tally.n += _delete_one_statement(req, target, q, limit_one, values, collator)

    def run() -> dict[str, Any]:
        tally = run_statements(deletes, ordered=ordered, apply=apply)
        return write_reply(tally.n, tally.errors)

    return await req.storage.run(run)


def _delete_one_statement(req: CommandRequest, target: TimeseriesTarget, q: dict[str, Any],
                          limit_one: bool, variables: dict[str, Any],
                          collator: Collator | None = None) -> int:
    opts = target.options
    meta_flt = meta_only_filter(q, opts) if not limit_one else None
    if meta_flt is not None:
        # A predicate only on the metaField deletes whole buckets.
        buckets = target.buckets(req.storage.catalog)
        if buckets is None:
            return 0
        rows = list(BucketScan(buckets, meta_flt, collator=collator).buckets())
        n = 0
        for rid, bucket in rows:
            n += int(bucket["control"].get("count") or sum(
                1 for _ in unpack_bucket(bucket, BucketSpec(opts.time_field))))
            buckets.delete(rid, old_doc=bucket)
            timeseries_service(req).catalog.handle_direct_write(target.ns, bucket["_id"])
        return n
    matched, _ = _rewrite_buckets(req, target, q, limit_one=limit_one,
                                  transform=lambda m: (None, None), variables=variables,
                                  collator=collator)
    return matched


async def update_measurements(req: CommandRequest, target: TimeseriesTarget,
                              updates: list[Any], *, ordered: bool, durable: bool,
                              variables: CommandVariables | None = None) -> dict[str, Any]:
    catalog = req.storage.catalog

    def apply(i: int, raw: Any, tally: WriteTally) -> None:
        stmt = parse_update_statement(raw, variables=variables)
        collator = timeseries_collator(stmt.collator, target.entry.options)
        with catalog.transaction(durable=durable):
            out_n, out_mod, up = _update_one_statement(req, target, stmt, collator)
        tally.n += out_n
        tally.modified += out_mod
        if up is not MISSING:
            tally.add_upserted(i, up)

    def run() -> dict[str, Any]:
        return run_statements(updates, ordered=ordered, apply=apply).update_reply()

    return await req.storage.run(run)


def _update_one_statement(req: CommandRequest, target: TimeseriesTarget,
                          stmt: UpdateStatement, collator: Collator | None = None
                          ) -> tuple[int, int, Any]:
    """(matched, modified, upserted _id or MISSING) of one statement (operators,
    replacement or pipeline: each matched measurement is updated on its own)."""
    opts = target.options
    update = compile_statement_update(stmt, collator)
    modified = 0

    def transform(m: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        nonlocal modified
        new, changed = update.apply(m)
        if not changed:
            return m, None
        modified += 1
        return None, new  # updated measurements move to new buckets

    matched, outputs = _rewrite_buckets(req, target, stmt.q, limit_one=not stmt.multi,
                                        transform=transform,
                                        variables=statement_variables(stmt),
                                        collator=collator)
    upserted: Any = MISSING
    if matched == 0 and stmt.upsert:
        doc = update.upsert_document(stmt.q)
        outputs = [doc]
        upserted = doc.get("_id", MISSING)
    for doc in outputs:
        if opts.time_field not in doc:
            raise MongoError(ErrorCode.BadValue,
                             f"'{opts.time_field}' must be present and contain a valid BSON "
                             "UTC datetime value")
    _insert_side(req, target, outputs)
    return matched, modified, upserted

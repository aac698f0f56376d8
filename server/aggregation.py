"""Running aggregation pipelines against storage: sources, pushdown, and the context services.

The pipeline runs on the storage thread, lazily, as the cursor pulls batches. A leading
`$match` (with a following `$sort`) is pushed into the query planner so indexes serve
it; `$lookup`/`$unionWith` read other collections through `resolve_collection`;
`$out`/`$merge` write through the sinks defined here; `$collStats`/`$indexStats` are
answered from the catalog. A view is read as its resolved pipeline over the namespace
underneath (prepended to the command's own pipeline, as mongod does, so a leading `$match`
of the view still reaches the indexes); `system.views` is read from the catalog's views.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from bson import Int64

from query.context import PipelineContext
from query.dependencies import pipeline_fields
from query.executor import (
    FindSpec,
    check_size,
    matching,
    prepare_document_for_insert,
    prepare_find,
    run_find,
)
from query.match import compile_filter
from query.pipeline import Pipeline, compile_pipeline, resolve_let_variables
from query.sort import compile_sort
from storage.bson_order import values_equal
from storage.clustered import is_clustered
from storage.collation import (
    COLLECTION_DEFAULT,
    Collator,
    CollectionDefault,
    OperationCollation,
    effective_collator,
)
from storage.collection import Collection
from storage.errors import MongoError
from storage.indexes import ID_INDEX_NAME
from storage.vocabulary.error_codes import ErrorCode

from .collection_stats import collection_stats
from .current_op import parse_stage_spec, report
from .document_validation import make_validator
from .local_sessions import parse_sessions_spec
from .namespaces import resolve_namespace
from .parsing.pipeline import split_leading_match
from .timeseries.indexes import timeseries_indexes_with_idents
from .timeseries.reads import measurement_source, timeseries_pipeline
from .views.definitions import (
    SYSTEM_VIEWS,
    ResolvedView,
    resolve_view,
    system_views_documents,
)

if TYPE_CHECKING:
    from .context import CommandRequest

__all__ = ["build_context", "collection_source", "pipeline_collator", "run_pipeline"]


def collection_source(req: CommandRequest, db: str, name: str,
                      flt: dict[str, Any] | None = None,
                      sort: dict[str, Any] | None = None,
                      fields: set[str] | None = None,
                      ctx: PipelineContext | None = None) -> Iterator[dict[str, Any]]:
    """Documents of `db.name` as a pipeline sees them (time-series: unpacked measurements;
    a view: its pipeline's results, computed with `ctx`'s `$$NOW`)."""
    catalog = req.storage.catalog
    view = resolve_view(catalog, db, name)
    if view is not None:
        stages: list[dict[str, Any]] = list(view.pipeline)
        if flt:
            stages.append({"$match": flt})
        if sort:
            stages.append({"$sort": sort})
        view_ctx = PipelineContext(db=db, coll=view.source) if ctx is None else \
            _replace_ctx(ctx, db=db, coll=view.source)
        return compile_pipeline(stages, view_ctx).run(
            collection_source(req, db, view.source, ctx=view_ctx))
    ns = resolve_namespace(catalog, db, name)
    if ns.entry is None:
        if name == SYSTEM_VIEWS:
            return _system_views_source(catalog, db, flt, sort)
        return iter(())
    if ns.timeseries is not None:
        return measurement_source(req, ns.timeseries, flt,
                                  frozenset(fields) if fields is not None else None)
    coll = catalog.get_collection(db, name)
    spec = FindSpec(filter=flt, sort=sort, collator=ctx.collator if ctx is not None else None)
    return run_find(coll, prepare_find(coll, spec))


def _replace_ctx(ctx: PipelineContext, **changes: Any) -> PipelineContext:
    return dataclasses.replace(ctx, **changes)


def _system_views_source(catalog: Any, db: str, flt: dict[str, Any] | None,
                         sort: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    docs = system_views_documents(catalog, db)
    if flt:
        matcher = compile_filter(flt)
        docs = [d for d in docs if matcher.matches(d)]
    if sort:
        docs.sort(key=compile_sort(sort))
    return iter(docs)


def _out(req: CommandRequest, db: str, name: str, docs: Iterable[dict[str, Any]],
         bypass: bool = False) -> None:
    catalog = req.storage.catalog
    entry = catalog.entry(db, name)
    if entry is not None and entry.kind != "collection":
        raise MongoError(ErrorCode.CommandNotSupportedOnView,
                         f"Namespace {db}.{name} is a view, not a collection")
    # the replacement collection keeps the old one's options, validator included
    validator = None if bypass or entry is None else make_validator(entry.options,
                                                                    f"{db}.{name}")
    prepared = []
    for doc in docs:
        doc = prepare_document_for_insert(dict(doc))
        if validator is not None:
            validator(doc)
        prepared.append((doc, check_size(doc)))
    with catalog.transaction():
        coll = catalog.get_or_create_collection(db, name)
        coll.truncate()
        if prepared:
            result = coll.insert_many([d for d, _ in prepared], encoded=[e for _, e in prepared])
            if result.errors:
                raise result.errors[0][1]


def _merge(req: CommandRequest, db: str, name: str, docs: Iterable[dict[str, Any]],
           on: list[str] | None = None, when_matched: Any = "merge",
           when_not_matched: str = "insert", let: dict[str, Any] | None = None,
           bypass: bool = False) -> None:
    catalog = req.storage.catalog
    on = on or ["_id"]
    with catalog.transaction():
        coll = catalog.get_or_create_collection(db, name)
        validator = None if bypass else make_validator(coll.options, f"{db}.{name}")
        for doc in docs:
            doc = dict(doc)
            if any(f not in doc for f in on):
                raise MongoError(51132, "$merge write error: 'on' field cannot be missing, null, "
                                 "undefined or an array")
            flt = {f: doc[f] for f in on}
            found = None
            spec = FindSpec(filter=flt)
            for rid_doc in _matching_rows(coll, spec):
                found = rid_doc
                break
            if found is None:
                if when_not_matched == "insert":
                    new = prepare_document_for_insert(doc)
                    if validator is not None:
                        validator(new)
                    res = coll.insert_many([new], encoded=[check_size(new)])
                    if res.errors:
                        raise res.errors[0][1]
                elif when_not_matched == "fail":
                    raise MongoError(ErrorCode.MergeStageNoMatchingDocument,
                                     "$merge could not find a matching document in the "
                                     "target collection for at least one document in the source "
                                     "collection")
                continue
            rid, old = found
            if when_matched == "keepExisting":
                continue
            if when_matched == "fail":
                raise MongoError(ErrorCode.DuplicateKey, "$merge with whenMatched: fail found an "
                                 "existing document with the same values for the 'on' fields")
            if when_matched == "replace":
                new = {"_id": old["_id"], **{k: v for k, v in doc.items() if k != "_id"}}
            elif when_matched == "merge":
                new = {**old, **{k: v for k, v in doc.items()}}
            elif isinstance(when_matched, list):
                sub = compile_pipeline(when_matched, PipelineContext(db=db))
                variables = {"new": doc, **(let or {})}
                new = next(iter(sub.run([old], variables=variables)), old)
            else:
                raise MongoError(ErrorCode.BadValue, f"unsupported whenMatched {when_matched!r}")
            if not values_equal(new.get("_id"), old.get("_id")):
                raise MongoError(ErrorCode.ImmutableField,
                                 "$merge failed to update the matching document, did you "
                                 "attempt to modify the _id or the shard key?")
            if validator is not None:
                validator(new, old)
            coll.update(rid, new, encoded=check_size(new), old_doc=old)


def _matching_rows(coll: Collection, spec: FindSpec) -> Iterator[tuple[int, dict[str, Any]]]:
    for rid, _raw, doc in matching(coll, prepare_find(coll, spec)):
        yield rid, doc


def index_stats_documents(req: CommandRequest, db: str, coll: str | None
                          ) -> list[dict[str, Any]]:
    """`$indexStats`: each index with its uses since the start (time-series: the buckets'
    indexes in the user's terms, under the collection's names). Storage thread."""
    catalog = req.storage.catalog
    if coll is None:
        raise MongoError(ErrorCode.InvalidNamespace, "$indexStats must be run against a "
                         "collection")
    ns = resolve_namespace(catalog, db, coll)
    if ns.timeseries is not None:
        indexes = timeseries_indexes_with_idents(req, ns.timeseries)
    elif ns.entry is not None and ns.entry.kind == "collection":
        # a clustered collection's cluster key is no index (mongod's catalog has none)
        clustered = is_clustered(ns.entry.options)
        indexes = [(dict(ix.spec.document), ix.ident) for ix in ns.entry.indexes
                   if not (clustered and ix.name == ID_INDEX_NAME)]
    else:
        return []
    host = f"{req.server.host}:{req.conn.local.rpartition(':')[2]}"
    out = []
    for spec, ident in indexes:
        ops, since = catalog.index_usage.accesses(ident)
        out.append({"name": spec["name"], "key": spec["key"], "host": host,
                    "accesses": {"ops": Int64(ops), "since": since}, "spec": spec})
    return out


def build_context(req: CommandRequest, coll: str | None, *, allow_disk_use: bool,
                  bypass_validation: bool = False) -> PipelineContext:
    """The pipeline's context; `$out`/`$merge` validate what they write unless
    `bypass_validation` (the command's `bypassDocumentValidation`)."""
    db = req.db
    params = req.server.params

    def resolve(other_db: str, other: str) -> Iterable[dict[str, Any]]:
        return collection_source(req, other_db, other, ctx=ctx)

    def coll_stats(spec: dict[str, Any]) -> Iterable[dict[str, Any]]:
        if coll is None:
            raise MongoError(ErrorCode.InvalidNamespace, "$collStats must be run on a collection")
        out: dict[str, Any] = {"ns": f"{db}.{coll}", "host": req.server.host,
                               "localTime": req.server.start_time}
        if "storageStats" in spec:
            scale = (spec.get("storageStats") or {}).get("scale", 1) or 1
            out["storageStats"] = collection_stats(req, db, coll, int(scale))
        if "count" in spec:
            out["count"] = collection_stats(req, db, coll, 1).get("count", 0)
        return [out]

    def index_stats(spec: dict[str, Any]) -> Iterable[dict[str, Any]]:
        return index_stats_documents(req, db, coll)

    def current_op(spec: Any) -> Iterable[dict[str, Any]]:
        options = parse_stage_spec(spec)
        if db != "admin" or coll is not None:
            raise MongoError(ErrorCode.InvalidNamespace, "$currentOp must be run against the "
                             "'admin' database with {aggregate: 1}")
        return report(req.server, req.conn, options)

    def local_sessions(spec: Any) -> Iterable[dict[str, Any]]:
        uids = parse_sessions_spec(spec, req.conn.user)
        if coll is not None:
            raise MongoError(ErrorCode.InvalidNamespace, "$listLocalSessions must be run "
                             "against the database with {aggregate: 1}, not a collection")
        return req.server.sessions.records(uids)

    ctx = PipelineContext(
        db=db, coll=coll, allow_disk_use=allow_disk_use,
        memory_limit_bytes=int(params.get("internalDocumentSourceGroupMaxMemoryBytes")),
        resolve_collection=resolve,
        out=lambda d, c, docs: _out(req, d, c, docs, bypass_validation),
        merge=lambda d, c, docs, *a, **kw: _merge(req, d, c, docs, *a,
                                                  **{**kw, "bypass": bypass_validation}),
        coll_stats=coll_stats, index_stats=index_stats, current_op=current_op,
        list_local_sessions=local_sessions,
    )
    return ctx


def pipeline_collator(req: CommandRequest, coll: str | None, view: ResolvedView | None,
                      collation: OperationCollation) -> Collator | None:
    """The collation a pipeline on `coll` runs with: the one asked for, else the
    collection's default; on a view its own default, and asking for another is refused."""
    if view is not None:
        own = effective_collator(COLLECTION_DEFAULT, view.collation)
        if not isinstance(collation, CollectionDefault) and collation != own:
            raise MongoError(ErrorCode.OptionNotSupportedOnView,
                             "Cannot override a view's default collation")
        return own
    entry = req.storage.catalog.entry(req.db, coll) if coll is not None else None
    return effective_collator(collation, entry.options.get("collation")
                              if entry is not None else None)


def run_pipeline(req: CommandRequest, coll: str | None, stages: list[Any],
                 ctx: PipelineContext, let: dict[str, Any] | None,
                 collation: OperationCollation = COLLECTION_DEFAULT
                 ) -> tuple[Pipeline, Iterator[Any]]:
    """Compile and start the pipeline on its source (call on the storage thread). On a
    view, the view's resolved pipeline runs first, over the namespace underneath. The
    pipeline runs with `collation`, or the collection's default collation."""
    ctx.variables = resolve_let_variables(let, ctx)
    view = resolve_view(req.storage.catalog, req.db, coll) if coll is not None else None
    ctx.collator = pipeline_collator(req, coll, view, collation)
    if view is not None:
        stages = [*view.pipeline, *stages]
        coll = view.source
    pipeline = compile_pipeline(stages, ctx)
    if coll is None or pipeline.starts_with_source:
        return pipeline, pipeline.run(())
    fields = pipeline_fields(stages)  # lets time-series reads decode only these columns

    ts = resolve_namespace(req.storage.catalog, req.db, coll).timeseries

    def source(flt: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        if ts is not None:
            return measurement_source(req, ts, flt, frozenset(fields)
                                      if fields is not None else None,
                                      collator=ctx.collator)
        return collection_source(req, req.db, coll, flt, fields=fields, ctx=ctx)

    def general() -> Iterator[Any]:
        flt, rest = split_leading_match(stages, ctx.variables)
        if flt is not None and not _uses_variables(flt):
            return compile_pipeline(rest, ctx).run(source(flt))
        return pipeline.run(source())

    if ts is None:
        return pipeline, general()
    # the read planner picks the path: last point, columnar $group, or the general one
    return pipeline, timeseries_pipeline(req, ts, stages, ctx, fields,
                                         whole=pipeline.run, general=general)


def _uses_variables(flt: Any) -> bool:
    if isinstance(flt, dict):
        return "$expr" in flt or any(_uses_variables(v) for v in flt.values())
    if isinstance(flt, list):
        return any(_uses_variables(v) for v in flt)
    return False

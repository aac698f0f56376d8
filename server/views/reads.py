"""find, count and distinct through a view (or the virtual `system.views`), as mongod runs
them: each becomes an aggregation on the view (`aggregate` then prepends the view's
pipeline), and a find's cursor belongs to the view's namespace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from query.executor import distinct_of
from storage.collation import COLLECTION_DEFAULT, OperationCollation
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..aggregation import build_context, run_pipeline
from .definitions import SYSTEM_VIEWS, resolve_view

if TYPE_CHECKING:
    from ..context import CommandRequest

__all__ = ["count_through_view", "distinct_through_view", "find_through_view",
           "reads_through_pipeline"]

# find options an aggregation cannot honour (query_request_conversion's refusals)
_NOT_IN_AGGREGATION = ("min", "max", "returnKey", "showRecordId")


def reads_through_pipeline(req: CommandRequest, db: str, name: str) -> bool:
    """Whether `db.name` is read as an aggregation: a view, or `system.views` (storage
    thread)."""
    catalog = req.storage.catalog
    if name == SYSTEM_VIEWS:
        return catalog.entry(db, name) is None
    return resolve_view(catalog, db, name) is not None


def check_find_options(body: dict[str, Any]) -> None:
    """What mongod refuses when it turns a find on a view into an aggregation."""
    for option in _NOT_IN_AGGREGATION:
        if body.get(option):
            raise MongoError(ErrorCode.InvalidPipelineOperator,
                             f"Option {option} not supported in aggregation.")
    if body.get("tailable"):
        raise MongoError(ErrorCode.InvalidPipelineOperator,
                         "Tailable cursors are not supported in aggregation.")
    for option in ("noCursorTimeout", "allowPartialResults"):
        if body.get(option):
            raise MongoError(ErrorCode.InvalidPipelineOperator,
                             f"Option {option} not supported in aggregation.")
    sort = body.get("sort")
    if isinstance(sort, dict) and "$natural" in sort:
        raise MongoError(ErrorCode.InvalidPipelineOperator,
                         "Sort option $natural not supported in aggregation.")
    if body.get("singleBatch") and body.get("limit") != 1:
        raise MongoError(ErrorCode.InvalidPipelineOperator,
                         "Option singleBatch not supported in aggregation.")
    for option in ("$_requestResumeToken", "$_resumeAfter"):
        if body.get(option):
            raise MongoError(ErrorCode.InvalidPipelineOperator,
                             f"Option {option} not supported in aggregation.")


def find_pipeline(flt: dict[str, Any] | None, sort: dict[str, Any] | None, skip: int,
                  limit: int, projection: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A find as the pipeline mongod builds for it: $match, $sort, $skip, $limit, $project."""
    stages: list[dict[str, Any]] = []
    if flt:
        stages.append({"$match": flt})
    if sort:
        stages.append({"$sort": sort})
    if skip:
        stages.append({"$skip": skip})
    if limit:
        stages.append({"$limit": limit})
    if projection:
        stages.append({"$project": projection})
    return stages


async def find_through_view(req: CommandRequest, name: str, stages: list[dict[str, Any]],
                            batch_size: int | None, *, let: dict[str, Any] | None,
                            allow_disk_use: bool,
                            collation: OperationCollation = COLLECTION_DEFAULT
                            ) -> dict[str, Any]:
    """A find on a view: the `cursor` reply field, the cursor on the view's namespace."""
    ctx = build_context(req, name, allow_disk_use=allow_disk_use)

    def start() -> Any:
        return run_pipeline(req, name, stages, ctx, let, collation)[1]

    source = await req.storage.run(start)
    return await req.cursors.first_batch(f"{req.db}.{name}", source, batch_size=batch_size,
                                         run=req.storage.run, conn_id=req.conn.id)


async def count_through_view(req: CommandRequest, name: str, query: dict[str, Any] | None,
                             skip: int, limit: int,
                             collation: OperationCollation = COLLECTION_DEFAULT) -> int:
    """count on a view: [$match] [$skip] [$limit] $count over the view."""
    stages = find_pipeline(query, None, skip, limit, None)
    stages.append({"$count": "count"})
    ctx = build_context(req, name, allow_disk_use=True)

    def run() -> int:
        for doc in run_pipeline(req, name, stages, ctx, None, collation)[1]:
            return int(doc["count"])
        return 0

    return await req.storage.run(run)


async def distinct_through_view(req: CommandRequest, name: str, key: str,
                                query: dict[str, Any] | None,
                                collation: OperationCollation = COLLECTION_DEFAULT
                                ) -> list[Any]:
    """distinct on a view: the view's documents matching `query`, the values at `key` with
    arrays unwound, each once, in BSON order."""
    stages = find_pipeline(query, None, 0, 0, None)
    ctx = build_context(req, name, allow_disk_use=True)

    def run() -> list[Any]:
        docs = run_pipeline(req, name, stages, ctx, None, collation)[1]
        return distinct_of(docs, key, ctx.collator)

    return await req.storage.run(run)

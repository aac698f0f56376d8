"""explain: the plan of a find, aggregate, count, distinct, update or delete."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..namespaces import resolve_namespace
from ..write_explain import explain_write
from . import aggregate, find
from ._args import check_fields, command_variables

VERBOSITIES = ("queryPlanner", "executionStats", "allPlansExecution")


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "explain", ("verbosity",))
    inner = body["explain"]
    if not isinstance(inner, dict) or not inner:
        raise MongoError(ErrorCode.FailedToParse, "explain command requires a nested object")
    verbosity = body.get("verbosity", "allPlansExecution")
    if verbosity not in VERBOSITIES:
        raise MongoError(ErrorCode.FailedToParse, "verbosity string must be one of "
                         "{'queryPlanner', 'executionStats', 'allPlansExecution'}")
    name = next(iter(inner))
    if name == "find":
        out = await find.explain(req, inner, verbosity)
    elif name == "aggregate":
        out = await aggregate.explain(req, inner, verbosity)
    elif name in ("count", "distinct"):
        out = await _explain_read(req, name, inner, verbosity)
    elif name in ("update", "delete", "findAndModify", "findandmodify"):
        variables = command_variables(inner, name)
        out = await req.storage.run(explain_write, req, name, inner, variables, verbosity)
        out["command"] = inner
    else:
        raise MongoError(ErrorCode.CommandNotFound, f"Explain failed due to unknown command: "
                         f"{name}")
    out.setdefault("serverInfo", {"host": req.server.host, "port": req.server.config.port,
                                  "version": "8.0.4"})
    out.setdefault("ok", 1.0)
    out.pop("ok")
    return out


async def _explain_read(req: CommandRequest, name: str, inner: dict[str, Any],
                        verbosity: str) -> dict[str, Any]:
    """count and distinct: on a time-series collection the aggregation mongod runs for
    them; elsewhere the plan of the find of their query."""
    coll = inner[name]
    flt = inner.get("query") or {}
    ts = await req.storage.run(lambda: resolve_namespace(req.storage.catalog, req.db,
                                                         coll).timeseries)
    if ts is None:
        out = await find.explain(req, {"find": coll, "filter": flt}, verbosity)
        out["command"] = inner
        return out
    pipeline: list[dict[str, Any]] = [{"$match": flt}] if flt else []
    if name == "count":
        pipeline.append({"$count": "count"})
    else:
        pipeline.append({"$group": {"_id": None, "distinct": {"$addToSet": f"${inner['key']}"}}})
    out = await aggregate.explain(req, {"aggregate": coll, "pipeline": pipeline, "cursor": {}},
                                  verbosity)
    out["command"] = inner
    return out

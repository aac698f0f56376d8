"""explain: the plan of a find, aggregate, count, distinct, update or delete."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from . import aggregate, find
from ._args import check_fields

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
    elif name in ("count", "distinct", "update", "delete", "findAndModify"):
        coll = inner[name]
        flt = inner.get("query")
        if name in ("update", "delete"):
            stmts = inner.get("updates" if name == "update" else "deletes") or [{}]
            flt = stmts[0].get("q") if isinstance(stmts[0], dict) else None
        out = await find.explain(req, {"find": coll, "filter": flt or {}}, verbosity)
    else:
        raise MongoError(ErrorCode.CommandNotFound, f"Explain failed due to unknown command: "
                         f"{name}")
    out.setdefault("serverInfo", {"host": req.server.host, "port": req.server.config.port,
                                  "version": "8.0.4"})
    out.setdefault("ok", 1.0)
    out.pop("ok")
    return out

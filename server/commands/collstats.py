"""collStats: size, count and index figures of a collection (time-series: bucket statistics)."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..collection_stats import collection_stats
from ..context import CommandRequest
from ._args import check_fields, get_int, namespace_arg


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "collStats", ("scale", "verbose"))
    name = namespace_arg(body, "collStats")
    scale = get_int(body, "collStats", "scale", 1) or 1
    if scale < 1:
        raise MongoError(ErrorCode.BadValue, "scale has to be >= 1")
    return await req.storage.run(collection_stats, req, req.db, name, scale)

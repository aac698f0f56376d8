"""getMore: the next batch of an open cursor."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..auth.cursor_access import getmore_check
from ..context import CommandRequest
from ._args import check_fields, get_int, get_str, require


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "getMore", ("collection", "batchSize", "maxTimeMS", "term",
                                   "lastKnownCommittedOpTime", "includeQueryStatsMetrics"))
    cid = body["getMore"]
    if not isinstance(cid, int) or isinstance(cid, bool):
        raise MongoError(ErrorCode.TypeMismatch,
                         "BSON field 'getMore.getMore' is the wrong type, expected type 'long'")
    coll = get_str(body, "getMore", "collection")
    if coll is None:
        require(body, "getMore", "collection")
    batch_size = get_int(body, "getMore", "batchSize")
    if batch_size is not None and batch_size < 0:
        raise MongoError(ErrorCode.BadValue, "BatchSize must be non-negative")
    if batch_size == 0:
        batch_size = None
    check = getmore_check(req.conn.user) if req.server.config.auth else None
    return {"cursor": await req.cursors.get_more(int(cid), f"{req.db}.{coll}", batch_size,
                                                 check)}

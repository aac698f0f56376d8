"""killCursors: close cursors by id on one namespace."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..auth.cursor_access import kill_check
from ..context import CommandRequest
from ._args import check_fields, get_list, namespace_arg


async def handle(req: CommandRequest) -> dict[str, Any]:
    check_fields(req.body, "killCursors", ("cursors",))
    coll = namespace_arg(req.body, "killCursors")
    ids = get_list(req.body, "killCursors", "cursors")
    if ids is None:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         "BSON field 'killCursors.cursors' is missing but a required field")
    for cid in ids:
        if not isinstance(cid, int) or isinstance(cid, bool):
            raise MongoError(ErrorCode.TypeMismatch,
                             "BSON field 'killCursors.cursors' is the wrong type, expected long")
    ns = f"{req.db}.{coll}"
    check = kill_check(req.conn.user, ns, req.body, req.db) if req.server.config.auth else None
    return req.cursors.kill(ns, [int(c) for c in ids], check)

"""dropDatabase: remove every namespace of the database."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ._args import check_fields


async def handle(req: CommandRequest) -> dict[str, Any]:
    check_fields(req.body, "dropDatabase", ())
    db = req.db
    if db in ("admin", "config", "local"):
        raise MongoError(ErrorCode.IllegalOperation, f"Dropping the '{db}' database is prohibited.")

    def drop() -> list[str]:
        names = req.storage.catalog.drop_database(db)
        service = req.server.timeseries
        if service is not None:
            for name in names:
                service.forget_namespace(db, name)
        return names

    names = await req.storage.run(drop)
    req.cursors.close_for_namespace(db)
    return {"dropped": db} if names else {}

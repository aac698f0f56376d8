"""getLog: recent log lines (`global`), startup warnings, or the list of logs (`*`)."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..log import LOG


async def handle(req: CommandRequest) -> dict[str, Any]:
    which = req.body["getLog"]
    if type(which) is not str:
        raise MongoError(ErrorCode.TypeMismatch,
                         "Argument to getLog must be of type String; found "
                         f"{which!r} of type {type(which).__name__}")
    if which == "*":
        return {"names": ["global", "startupWarnings"]}
    if which == "global":
        lines = list(LOG.recent)
        return {"totalLinesWritten": LOG.total_lines, "log": lines}
    if which == "startupWarnings":
        return {"totalLinesWritten": len(LOG.startup_warnings), "log": list(LOG.startup_warnings)}
    raise MongoError(ErrorCode.InvalidOptions, f"No log named '{which}'")

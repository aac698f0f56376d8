"""getParameter: read server parameters (`*` for all, or named ones, or `showDetails`)."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..generic_args import GENERIC_ARGUMENTS
from ..parameters import PARAMETERS


def _details(name: str, value: Any) -> dict[str, Any]:
    spec = PARAMETERS[name]
    return {"value": value, "settableAtRuntime": spec.runtime, "settableAtStartup": True}


async def handle(req: CommandRequest) -> dict[str, Any]:
    arg = req.body["getParameter"]
    params = req.server.params
    show_details = isinstance(arg, dict) and bool(arg.get("showDetails"))
    all_params = arg == "*" or (isinstance(arg, dict) and arg.get("allParameters"))
    if all_params:
        names = list(PARAMETERS)
    else:
        names = [k for k in req.body if k != "getParameter" and k not in GENERIC_ARGUMENTS]
    reply: dict[str, Any] = {}
    for name in names:
        if name not in PARAMETERS:
            continue
        value = params.get(name)
        reply[name] = _details(name, value) if show_details else value
    if not reply:
        raise MongoError(ErrorCode.InvalidOptions, "no option found to get")
    return reply

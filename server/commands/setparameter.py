"""setParameter: change runtime-settable server parameters; answers the previous value in `was`."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest
from ..generic_args import GENERIC_ARGUMENTS
from ..log import LOG


async def handle(req: CommandRequest) -> dict[str, Any]:
    changes = {k: v for k, v in req.body.items()
               if k != "setParameter" and k not in GENERIC_ARGUMENTS}
    result = req.server.params.set_runtime(changes)
    if "logLevel" in changes:
        LOG.verbosity = req.server.params.get("logLevel")
    if "maxLogSizeKB" in changes:
        LOG.max_attribute_size_kb = req.server.params.get("maxLogSizeKB")
    if "quiet" in changes:
        LOG.quiet = req.server.params.get("quiet")
    return result

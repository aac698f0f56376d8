"""getCmdLineOpts: the command line and the parsed options, as mongod reports them."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    cfg = req.server.config
    return {"argv": ["bucketd", *cfg.argv], "parsed": cfg.parsed()}

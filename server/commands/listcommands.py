"""listCommands: every command the server knows, with its help text."""

from __future__ import annotations

from typing import Any

from ..context import CommandRequest


async def handle(req: CommandRequest) -> dict[str, Any]:
    from . import COMMANDS

    commands: dict[str, Any] = {}
    for name, cmd in sorted(COMMANDS.items()):
        commands[name] = {
            "help": cmd.help,
            "requiresAuth": cmd.requires_auth,
            "secondaryOk": True,
            "adminOnly": cmd.admin_only,
            "apiVersions": [],
            "deprecatedApiVersions": [],
        }
    return {"commands": commands}

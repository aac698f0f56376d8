"""listCommands: every command the server knows, with its help text.

The registry (`server.commands`) hands this command its own table when it builds it, so
this module does not import the registry that imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..context import CommandRequest

__all__ = ["CommandInfo", "ListCommands"]


class CommandInfo(Protocol):
    """What listCommands shows of a registered command."""

    @property
    def help(self) -> str: ...
    @property
    def requires_auth(self) -> bool: ...
    @property
    def admin_only(self) -> bool: ...


class ListCommands:
    """The listCommands handler over the registry's table (read when a command runs)."""

    def __init__(self, table: Callable[[], Mapping[str, CommandInfo]]) -> None:
        self._table = table

    async def handle(self, req: CommandRequest) -> dict[str, Any]:
        commands: dict[str, Any] = {}
        for name, cmd in sorted(self._table().items()):
            commands[name] = {
                "help": cmd.help,
                "requiresAuth": cmd.requires_auth,
                "secondaryOk": True,
                "adminOnly": cmd.admin_only,
                "apiVersions": [],
                "deprecatedApiVersions": [],
            }
        return {"commands": commands}

"""The command table: sorted, every module registered, every command documented."""

from __future__ import annotations

import importlib
import pkgutil

import server.commands as commands_pkg
from server.commands import COMMANDS


def test_table_is_sorted_and_named() -> None:
    names = list(COMMANDS)
    assert names == sorted(names)
    for name, cmd in COMMANDS.items():
        assert cmd.name == name
        assert cmd.help.strip(), f"{name} has no help"


def test_every_command_module_is_registered() -> None:
    handlers = {c.handler.__module__ for c in COMMANDS.values()}
    for info in pkgutil.iter_modules(commands_pkg.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"server.commands.{info.name}")
        assert module.__name__ in handlers, f"server/commands/{info.name}.py is not in COMMANDS"
        assert module.__doc__, f"server/commands/{info.name}.py has no docstring"

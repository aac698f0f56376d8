"""Command-level variables: a command's `let`, an update statement's `c` constants, and the
`$$NOW` / `$$CLUSTER_TIME` one command fixes for all its documents.

    variables = resolve_let(body.get("let"))      # evaluated once, before any document
    variables.values()                            # {"NOW": ..., "x": 3}: what expressions read
    variables.with_constants(statement["c"])      # an update statement's constants added

MongoDB's rules: a `let` name is a user-writable variable name (a lowercase ASCII or a
non-ASCII first character, then letters, digits, `_`: 16866/16867/16868); a system
variable's name is refused (4738901); a `let` expression is evaluated before the query
reads any document, so it may not read a field (4890500), though it may read the `let`
variables defined before it and `$$NOW`. Constants (`c`) are literal values, never
evaluated; their names follow the rule for names one may read (an uppercase first
character passes), and a built-in name cannot be redefined (17275).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from bson import Timestamp
from bson.datetime_ms import DatetimeMS

from query.dates.clock import current_now
from query.dependencies import expression_reads_document
from query.expressions.core import compile_expression, validate_user_var_name
from storage.errors import MongoError

__all__ = ["CommandVariables", "resolve_let", "resolve_constants"]

# The system variables a privileged (internal) client may set through `let`.
_INTERNAL_CONSTANTS: Final = frozenset({"NOW", "CLUSTER_TIME", "JS_SCOPE", "IS_MR",
                                        "USER_ROLES"})
_BUILTINS: Final = frozenset({"ROOT", "REMOVE", "NOW", "CLUSTER_TIME", "JS_SCOPE", "IS_MR",
                              "SEARCH_META", "USER_ROLES"})


@dataclass(frozen=True)
class CommandVariables:
    """The variables of one command: `$$NOW`, `$$CLUSTER_TIME` (None on a standalone) and
    the user's `let` values (and a statement's constants), by name."""

    now: DatetimeMS = field(default_factory=current_now)
    cluster_time: Timestamp | None = None
    user: Mapping[str, Any] = field(default_factory=dict)

    def values(self) -> dict[str, Any]:
        """The variables as expressions read them (system ones under their own names)."""
        out: dict[str, Any] = {"NOW": self.now}
        if self.cluster_time is not None:
            out["CLUSTER_TIME"] = self.cluster_time
        out.update(self.user)
        return out

    def with_constants(self, constants: Mapping[str, Any] | None) -> CommandVariables:
        """These variables with an update statement's constants added (they win)."""
        if not constants:
            return self
        return replace(self, user={**self.user, **constants})


_READS_FIELD_MSG: Final = ("Command let Expression tried to access a field, but this is not "
                           "allowed becauseCommand let Expressions run before the query "
                           "examines any documents.")


def resolve_let(let: Mapping[str, Any] | None, *, now: DatetimeMS | None = None,
                cluster_time: Timestamp | None = None) -> CommandVariables:
    """Validate and evaluate a command's `let` document (already known to be an object)."""
    base = CommandVariables(now if now is not None else current_now(), cluster_time)
    if not let:
        return base
    env = base.values()
    user: dict[str, Any] = {}
    for name, spec in let.items():
        if name in _INTERNAL_CONSTANTS:
            raise MongoError(4738901, f"Attempt to set internal constant: {name}")
        validate_user_var_name(name, for_write=True)
        expr = compile_expression(spec, variables_in_scope=tuple(user))
        if expression_reads_document(spec):
            raise MongoError(4890500, _READS_FIELD_MSG)
        user[name] = expr.evaluate({}, {**env, **user})
    return replace(base, user=user)


def resolve_constants(constants: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate an update statement's `c` names; the values are taken as they are."""
    if not constants:
        return {}
    for name in constants:
        _validate_name_for_read(name)
        if name in _BUILTINS:
            raise MongoError(17275, "Can't redefine a non-user-writable variable")
    return dict(constants)


def _validate_name_for_read(name: str) -> None:
    if not name:
        raise MongoError(16866, "empty variable names are not allowed")
    c0 = name[0]
    if not (c0.isascii() and c0.isalpha()) and c0.isascii():
        raise MongoError(16867, f"'{name}' starts with an invalid character for a user "
                         "variable name")
    for ch in name[1:]:
        if ch.isascii() and not (ch.isalnum() or ch == "_"):
            raise MongoError(16868, f"'{name}' contains an invalid character for a variable "
                             f"name: '{ch}'")

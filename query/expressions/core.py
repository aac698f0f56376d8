"""Compiling aggregation expressions into closures.

An expression spec (the BSON the user wrote) is compiled once into a tree of Python closures
``fn(doc, variables) -> value`` and then evaluated many times. `doc` is `$$ROOT`; `$$CURRENT`
is `doc` too unless a `$let` (or `$redact`) rebinds it, which is known at compile time, so a
field path like ``"$a.b"`` compiles to a direct walk of `doc`. `variables` is a plain dict of
user variables (by name) and system variables (``NOW``, ``CLUSTER_TIME``, ``CURRENT`` when
rebound); it is shared, not copied, between documents.

Operators are looked up in `registry.OPERATORS` (name → compiler), which the family modules
(`arithmetic`, `strings`, `dates`, ...) fill; this module imports none of them (the package
`__init__` does). A sub-expression whose spec references no field, variable or impure
operator is folded into a constant at compile time, as MongoDB's optimizer does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from query.dates.clock import current_now
from storage.collation import Collator
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .registry import IMPLICIT_DOC_OPERATORS, IMPURE_OPERATORS, OPERATORS, Fn
from .values import value_repr

__all__ = [
    "Scope", "Expression", "compile_expression",
    "compile_node", "const_fn", "is_const", "const_value", "parse_args",
    "check_arity", "check_arity_range", "compile_field_path", "path_getter",
    "validate_user_var_name", "EMPTY_VARS", "parse_object_args",
]

EMPTY_VARS: Final[dict[str, Any]] = {}

# System variables that may be read in any expression.
_SYSTEM_VARS: Final = {"ROOT", "CURRENT", "NOW", "CLUSTER_TIME", "REMOVE",
                       "SEARCH_META", "USER_ROLES", "DESCEND", "PRUNE", "KEEP"}


class Scope:
    """What a sub-expression may reference: user variables in scope, rebinding of CURRENT."""

    __slots__ = ("collator", "current_rebound", "redact", "user_vars")

    def __init__(self, user_vars: Iterable[str] = (), current_rebound: bool = False,
                 redact: bool = False, collator: Collator | None = None) -> None:
        self.user_vars = frozenset(user_vars)
        self.current_rebound = current_rebound
        self.redact = redact
        # The operation's collation (None: simple), for comparisons of strings.
        self.collator = collator

    def with_vars(self, names: Iterable[str]) -> Scope:
        names = set(names)
        rebound = self.current_rebound or "CURRENT" in names
        return Scope(self.user_vars | (names - {"CURRENT"}), rebound, self.redact, self.collator)


class Expression:
    """A compiled expression: call ``evaluate(doc, variables)`` as often as needed."""

    __slots__ = ("evaluate", "spec")

    def __init__(self, fn: Fn, spec: Any) -> None:
        self.evaluate: Fn = fn
        self.spec = spec

    @property
    def is_constant(self) -> bool:
        return is_const(self.evaluate)

    @property
    def constant_value(self) -> Any:
        return const_value(self.evaluate)

    def __repr__(self) -> str:
        return f"Expression({self.spec!r})"


def const_fn(value: Any) -> Fn:
    """A closure returning `value`, marked as constant."""
    def f(doc: Any, variables: dict) -> Any:
        return value
    f.const = value  # type: ignore[attr-defined]
    return f


def is_const(fn: Fn) -> bool:
    return hasattr(fn, "const")


def const_value(fn: Fn) -> Any:
    return fn.const  # type: ignore[attr-defined]


def compile_expression(expr: Any, *, variables_in_scope: Iterable[str] = (),
                       collator: Collator | None = None) -> Expression:
    """Compile an aggregation expression spec; user variables named in `variables_in_scope`
    (e.g. a `$lookup`'s `let`) may be referenced as ``$$name``; strings compare by
    `collator` (None: the simple collation)."""
    return Expression(compile_node(expr, Scope(variables_in_scope, collator=collator)), expr)


def compile_node(spec: Any, scope: Scope) -> Fn:
    """Compile one expression node (field path, variable, literal, object, array, operator)."""
    t = type(spec)
    if t is str:
        if spec.startswith("$"):
            if spec.startswith("$$"):
                return _compile_variable(spec[2:], scope)
            return compile_field_path(spec[1:], scope)
        return const_fn(spec)
    if t is dict:
        if not spec:
            return const_fn({})
        first = next(iter(spec))
        if first.startswith("$"):
            if len(spec) != 1:
                raise MongoError(15983, "An object representing an expression must have "
                                 f"exactly one field: {_render(spec)}")
            return _compile_operator(first, spec[first], scope, spec)
        return _compile_object(spec, scope)
    if t is list:
        return _compile_array(spec, scope)
    return const_fn(spec)


def _render(spec: Any) -> str:
    return value_repr(spec)


def _compile_operator(name: str, arg: Any, scope: Scope, whole: dict) -> Fn:
    compiler = OPERATORS.get(name)
    if compiler is None:
        raise MongoError(ErrorCode.InvalidPipelineOperator, f"Unrecognized expression '{name}'")
    fn = compiler(arg, scope, name)
    if not is_const(fn) and _is_constant_spec(whole):
        return const_fn(fn({}, EMPTY_VARS))
    return fn


def _is_constant_spec(spec: Any) -> bool:
    """True if `spec` reads no field, variable or impure operator (safe to fold)."""
    t = type(spec)
    if t is str:
        return not spec.startswith("$")
    if t is dict:
        if len(spec) == 1:
            k = next(iter(spec))
            if k in ("$literal", "$const"):
                return True
            if k in IMPURE_OPERATORS or k in IMPLICIT_DOC_OPERATORS:
                return False
        return all(_is_constant_spec(v) for v in spec.values())
    if t is list:
        return all(_is_constant_spec(v) for v in spec)
    return True


def _compile_object(spec: dict, scope: Scope) -> Fn:
    items: list[tuple[str, Fn]] = []
    for k, v in spec.items():
        _validate_field_name(k)
        items.append((k, compile_node(v, scope)))
    if all(is_const(f) for _, f in items):
        out = {k: const_value(f) for k, f in items if const_value(f) is not MISSING}
        return const_fn(out)

    def f(doc: Any, variables: dict) -> Any:
        out = {}
        for k, fn in items:
            val = fn(doc, variables)
            if val is not MISSING:
                out[k] = val
        return out
    return f


def _validate_field_name(k: str) -> None:
    if not k:
        raise MongoError(15998, "FieldPath field names may not be empty strings.")
    if k.startswith("$"):
        raise MongoError(16410, "FieldPath field names may not start with '$'. "
                         "Consider using $getField or $setField.")
    if "." in k:
        raise MongoError(16412, "FieldPath field names may not contain '.'. "
                         "Consider using $getField or $setField.")
    if "\0" in k:
        raise MongoError(16411, "FieldPath field names may not contain embedded nulls")


def _compile_array(spec: list, scope: Scope) -> Fn:
    fns = [compile_node(x, scope) for x in spec]
    if all(is_const(f) for f in fns):
        return const_fn([None if const_value(f) is MISSING else const_value(f) for f in fns])

    def f(doc: Any, variables: dict) -> Any:
        out = []
        for fn in fns:
            val = fn(doc, variables)
            out.append(None if val is MISSING else val)
        return out
    return f


# ---------------------------------------------------------------- field paths and variables

def _split_path(path: str, whole: str) -> list[str]:
    if not path:
        raise MongoError(16872, f"'{whole}' is not a valid field path")
    parts = path.split(".")
    for p in parts:
        if not p:
            raise MongoError(15998, "FieldPath field names may not be empty strings.")
        if p.startswith("$"):
            raise MongoError(16410, "FieldPath field names may not start with '$'. "
                             "Consider using $getField or $setField.")
        if "\0" in p:
            raise MongoError(16419, "field path must not contain embedded null characters")
    return parts


def _path_in_doc(doc: dict, parts: list[str], i: int) -> Any:
    n = len(parts)
    while True:
        val = doc.get(parts[i], MISSING)
        if i == n - 1:
            return val
        t = type(val)
        if t is dict:
            doc = val
            i += 1
            continue
        if t is list:
            return _path_in_array(val, parts, i + 1)
        return MISSING


def _path_in_array(arr: list, parts: list[str], i: int) -> list:
    out = []
    for el in arr:
        if type(el) is dict:
            r = _path_in_doc(el, parts, i)
            if r is not MISSING:
                out.append(r)
    return out


def _path_in_value(val: Any, parts: list[str]) -> Any:
    """Aggregation field-path semantics applied to an arbitrary value (`$$var.a.b`)."""
    t = type(val)
    if t is dict:
        return _path_in_doc(val, parts, 0)
    if t is list:
        return _path_in_array(val, parts, 0)
    return MISSING


def path_getter(path: str) -> Callable[[Any], Any]:
    """A function value-of-path(doc) with aggregation semantics (arrays map over elements)."""
    parts = _split_path(path, "$" + path)
    if len(parts) == 1:
        k = parts[0]

        def get1(doc: Any) -> Any:
            return doc.get(k, MISSING) if type(doc) is dict else MISSING
        return get1
    if len(parts) == 2:
        a, b = parts

        def get2(doc: Any) -> Any:
            if type(doc) is not dict:
                return MISSING
            x = doc.get(a, MISSING)
            t = type(x)
            if t is dict:
                return x.get(b, MISSING)
            if t is list:
                return _path_in_array(x, parts, 1)
            return MISSING
        return get2

    def getn(doc: Any) -> Any:
        return _path_in_value(doc, parts)
    return getn


def compile_field_path(path: str, scope: Scope) -> Fn:
    """``$a.b`` relative to CURRENT."""
    get = path_getter(path)
    if scope.current_rebound:
        parts = _split_path(path, "$" + path)

        def from_current(doc: Any, variables: dict) -> Any:
            return _path_in_value(variables["CURRENT"], parts)
        return from_current

    def f(doc: Any, variables: dict) -> Any:
        return get(doc)
    f.field_path = path  # type: ignore[attr-defined]
    return f


def validate_user_var_name(name: str, *, for_write: bool) -> None:
    """MongoDB's variable naming rules (a lowercase or non-ASCII first character)."""
    if not name:
        raise MongoError(16866, "empty variable names are not allowed")
    c0 = name[0]
    ok_first = (c0.islower() and c0.isascii()) or not c0.isascii()
    if for_write:
        if not ok_first:
            raise MongoError(16867, f"'{name}' starts with an invalid character for a user "
                             "variable name")
    elif not (ok_first or (c0.isupper() and c0.isascii())):
        raise MongoError(16869, f"'{name}' starts with an invalid character for a variable name")
    for ch in name[1:]:
        if not (ch.isalnum() or ch == "_" or not ch.isascii()):
            raise MongoError(16868 if for_write else 16870,
                             f"'{name}' contains an invalid character for a variable name: "
                             f"'{ch}'")


def _compile_variable(text: str, scope: Scope) -> Fn:
    name, _, rest = text.partition(".")
    parts = _split_path(rest, "$$" + text) if rest else None
    validate_user_var_name(name, for_write=False)
    base: Fn
    if name == "ROOT":
        def base(doc: Any, variables: dict) -> Any:
            return doc
    elif name == "CURRENT":
        if scope.current_rebound:
            def base(doc: Any, variables: dict) -> Any:
                return variables["CURRENT"]
        else:
            def base(doc: Any, variables: dict) -> Any:
                return doc
    elif name == "REMOVE":
        return const_fn(MISSING)
    elif name == "NOW":
        def base(doc: Any, variables: dict) -> Any:
            now = variables.get("NOW", MISSING)
            if now is MISSING:
                return current_now()
            return now
    elif name == "CLUSTER_TIME":
        def base(doc: Any, variables: dict) -> Any:
            ct = variables.get("CLUSTER_TIME", MISSING)
            if ct is MISSING:
                raise MongoError(10071200, "$$CLUSTER_TIME is unavailable in this context "
                                 "(no replica set or sharded cluster)")
            return ct
    elif name in ("DESCEND", "PRUNE", "KEEP") and scope.redact:
        return const_fn(name.lower())
    elif name in ("SEARCH_META", "USER_ROLES"):
        raise MongoError(ErrorCode.NotImplemented, f"$${name} is not supported by bucketd")
    elif name in scope.user_vars:
        def base(doc: Any, variables: dict) -> Any:
            return variables[name]
    else:
        raise MongoError(17276, f"Use of undefined variable: {name}")
    if parts is None:
        return base

    def with_path(doc: Any, variables: dict) -> Any:
        return _path_in_value(base(doc, variables), parts)
    return with_path


# ---------------------------------------------------------------- argument helpers

def parse_args(arg: Any, scope: Scope) -> list[Fn]:
    """Operands of an n-ary operator: an array of expressions, or one bare operand."""
    if type(arg) is list:
        return [compile_node(a, scope) for a in arg]
    return [compile_node(arg, scope)]


def check_arity(name: str, args: list, n: int) -> None:
    if len(args) != n:
        raise MongoError(16020, f"Expression {name} takes exactly {n} arguments. "
                         f"{len(args)} were passed in.")


def check_arity_range(name: str, args: list, lo: int, hi: int) -> None:
    if not lo <= len(args) <= hi:
        raise MongoError(28667, f"Expression {name} takes at least {lo} arguments, and at most "
                         f"{hi}, but {len(args)} were passed in.")


def parse_object_args(name: str, arg: Any, scope: Scope, *, required: Iterable[str],
                      optional: Iterable[str], not_object_code: int, unknown_code: int,
                      missing_code: int | None = None,
                      not_object_msg: str | None = None) -> dict[str, Fn]:
    """Named arguments of an object-form operator (``{$op: {input: ..., to: ...}}``)."""
    if type(arg) is not dict:
        raise MongoError(not_object_code, not_object_msg or
                         f"{name} expects an object of named arguments but found: "
                         f"{type_name(arg)}")
    allowed = set(required) | set(optional)
    out: dict[str, Fn] = {}
    for k, v in arg.items():
        if k not in allowed:
            raise MongoError(unknown_code, f"Unrecognized parameter to {name}: {k}")
        out[k] = compile_node(v, scope)
    for r in required:
        if r not in out:
            raise MongoError(missing_code or unknown_code,
                             f"Missing '{r}' parameter to {name}")
    return out

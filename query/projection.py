"""Find projections: inclusion, exclusion, ``$slice``, ``$elemMatch``, positional ``$``
and aggregation expressions, with MongoDB's parse rules and errors.

    p = compile_projection({"a": 1, "b.c": 1, "d": {"$slice": -2}}, filter_matcher=m)
    p.apply(doc, matched_position=pos)

The spec is parsed into a tree (one node per path component) the way MongoDB's
projection parser builds its AST, so path collisions (31249/31250) and mixes of
inclusion and exclusion (31253/31254) are found at compile time. Whether a
projection with only ``_id``/``$slice``/``$elemMatch`` is an inclusion or an
exclusion follows MongoDB's `computeProjectionType` rules.

Expressions (``{a: "$b"}``, ``{c: {$add: [...]}}``, ``{d: {$literal: 1}}``) are
compiled with `query.expressions.compile_expression`; they are
evaluated against the whole document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from bson import Decimal128

from query.expressions.core import compile_expression
from query.match import Matcher, compile_filter
from query.paths import validate_field_path
from storage.errors import MongoError
from storage.vocabulary.bson_types import is_number
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

__all__ = ["Projection", "compile_projection"]

INCLUDE: Final = "include"
EXCLUDE: Final = "exclude"


@dataclass
class _Leaf:
    kind: str                    # "include" | "exclude" | "expr" | "slice" | "elemMatch" | "positional"
    arg: Any = None


@dataclass
class _Tree:
    children: dict[str, _Tree | _Leaf] = field(default_factory=dict)


@dataclass
class _Ctx:
    type: str | None = None
    id_included: bool = False
    id_excluded: bool = False
    has_positional: bool = False
    has_elem_match: bool = False
    has_slice: bool = False
    id_specified: bool = False


def _add(root: _Tree, parts: tuple[str, ...], leaf: _Leaf) -> None:
    node = root
    full = ".".join(parts)
    for i, part in enumerate(parts):
        child = node.children.get(part)
        if i == len(parts) - 1:
            if child is not None:
                raise MongoError(31250, f"Path collision at {full}")
            node.children[part] = leaf
            return
        if child is None:
            child = _Tree()
            node.children[part] = child
        elif not isinstance(child, _Tree):
            raise MongoError(31249, f"Path collision at {full} remaining portion "
                             f"{'.'.join(parts[1:])}")
        node = child


def _compile_expression(spec: Any) -> Any:
    return compile_expression(spec)


def _positional(name: str) -> tuple[int, int] | None:
    i = name.find(".$.")
    if i >= 0:
        return i, i + 3
    if name.endswith(".$"):
        return len(name) - 2, len(name)
    if name == "$":
        return 0, 1
    return None


def _filter_has_path_prefix(matcher: Matcher, first: str) -> bool:
    def walk(n: Any) -> bool:
        if n.kind in ("and", "or", "nor", "not") and n.path is None:
            return any(walk(c) for c in n.children)
        if n.path is not None:
            return n.path.split(".")[0] == first
        return False
    return walk(matcher.root)


class _Parser:
    def __init__(self, filter_matcher: Matcher | None, filter_spec: dict[str, Any] | None):
        self.ctx = _Ctx()
        self.matcher = filter_matcher
        self.filter_spec = filter_spec

    def element(self, name: str, value: Any, parent: _Tree, parent_path: tuple[str, ...]) -> None:
        pos = _positional(name)
        if isinstance(value, dict):
            if pos is not None:
                raise MongoError(31271,
                                 "positional projection cannot be used with an expression or "
                                 "sub object")
            self.sub_object(name, value, parent, parent_path)
        elif isinstance(value, bool) or is_number(value):
            if _true_value(value):
                self.inclusion(name, parent, parent_path, pos)
            else:
                self.exclusion(name, parent)
        else:
            if pos is not None:
                raise MongoError(31308, "positional projection cannot be used with a literal")
            parts = validate_field_path(name)
            _add(parent, parts, _Leaf("expr", _compile_expression(value)))
            if self.ctx.type is not None and self.ctx.type != INCLUDE:
                raise MongoError(31310, f"Cannot use an expression {name}: {value!r} in an "
                                 "exclusion projection")
            self.ctx.type = INCLUDE

    def sub_object(self, name: str, obj: dict[str, Any], parent: _Tree,
                   parent_path: tuple[str, ...]) -> None:
        parts = validate_field_path(name)
        if len(obj) == 1 and next(iter(obj)).startswith("$"):
            op, arg = next(iter(obj.items()))
            if op == "$slice":
                self.slice(parts, arg, obj, parent)
                return
            if op == "$elemMatch":
                self.elem_match(parts, arg, parent, parent_path)
                return
            if op == "$meta":
                raise MongoError(ErrorCode.NotImplemented,
                                 f"$meta projection is not supported by bucketd: {arg!r}")
            expr = _compile_expression(obj)
            if self.ctx.type is not None and self.ctx.type != INCLUDE:
                raise MongoError(31252,
                                 "Cannot use expression other than $meta in exclusion projection")
            self.ctx.type = INCLUDE
            _add(parent, parts, _Leaf("expr", expr))
            return
        if not obj:
            raise MongoError(51270, "An empty sub-projection is not a valid value. Found empty "
                             f"object at path {'.'.join(parent_path + parts)}")
        node = _Tree()
        # A nested object is a new layer of the tree at `parts`.
        holder = parent
        for i, part in enumerate(parts):
            existing = holder.children.get(part)
            if i == len(parts) - 1:
                if existing is not None:
                    if not isinstance(existing, _Tree):
                        raise MongoError(31250, f"Path collision at {'.'.join(parts)}")
                    node = existing
                else:
                    holder.children[part] = node
                break
            if existing is None:
                existing = _Tree()
                holder.children[part] = existing
            elif not isinstance(existing, _Tree):
                raise MongoError(31249, f"Path collision at {'.'.join(parts)} remaining portion "
                                 f"{'.'.join(parts[1:])}")
            holder = existing
        for k, v in obj.items():
            self.element(k, v, node, parent_path + parts)

    def slice(self, parts: tuple[str, ...], arg: Any, obj: dict[str, Any], parent: _Tree) -> None:
        if is_number(arg):
            leaf = _Leaf("slice", (None, _to_int(arg)))
        elif isinstance(arg, list):
            if len(arg) != 2:
                raise MongoError(31272, "$slice array argument should be of form [skip, limit]")
            skip, limit = arg
            if not is_number(skip):
                raise MongoError(31257, "$slice expects the skip argument to be a number, got "
                                 f"{type(skip).__name__}")
            if not is_number(limit):
                raise MongoError(31258, "$slice expects the limit argument to be a number, got "
                                 f"{type(limit).__name__}")
            if _to_int(limit) <= 0:
                raise MongoError(31259, f"$slice limit must be positive, got {_to_int(limit)}")
            leaf = _Leaf("slice", (_to_int(skip), _to_int(limit)))
        else:
            raise MongoError(31273, "$slice only supports numbers and [skip, limit] arrays")
        _add(parent, parts, leaf)
        self.ctx.has_slice = True

    def elem_match(self, parts: tuple[str, ...], arg: Any, parent: _Tree,
                   parent_path: tuple[str, ...]) -> None:
        if not isinstance(arg, dict):
            raise MongoError(31274, "elemMatch: Invalid argument, object required, but got "
                             f"{type(arg).__name__}")
        if self.ctx.has_positional:
            raise MongoError(31255, "Cannot specify positional operator and $elemMatch.")
        if len(parts) != 1 or parent_path:
            raise MongoError(31275, "Cannot use $elemMatch projection on a nested field.")
        matcher = compile_filter({parts[0]: {"$elemMatch": arg}})
        _add(parent, parts, _Leaf("elemMatch", matcher))
        self.ctx.has_elem_match = True

    def inclusion(self, name: str, parent: _Tree, parent_path: tuple[str, ...],
                  pos: tuple[int, int] | None) -> None:
        top_id = name == "_id" and not parent_path
        if pos is None:
            _add(parent, validate_field_path(name), _Leaf(INCLUDE))
            if top_id:
                self.ctx.id_included = True
        else:
            if self.ctx.has_positional:
                raise MongoError(31276,
                                 "Cannot specify more than one positional projection per query.")
            if self.ctx.has_elem_match:
                raise MongoError(31256, "Cannot specify positional operator and $elemMatch.")
            if self.matcher is None:
                raise MongoError(51050, "Projections with a positional operator require a matcher")
            first = parent_path[0] if parent_path else name.split(".")[0]
            if not _filter_has_path_prefix(self.matcher, first):
                raise MongoError(31277, f"Positional projection '{name}' does not match the "
                                 "query document.")
            if name.endswith(".$."):
                raise MongoError(31270, "Path cannot end with '.$.'")
            begin, end = pos
            rest = name[end:]
            if _positional(rest) is not None or rest == "$":
                raise MongoError(31287, f"Cannot use positional operator twice: {name}")
            parts = validate_field_path(name[:begin])
            _add(parent, parts, _Leaf("positional"))
            self.ctx.has_positional = True
        if not top_id:
            if self.ctx.type is not None and self.ctx.type != INCLUDE:
                raise MongoError(31253, f"Cannot do inclusion on field {name} in exclusion "
                                 "projection")
            self.ctx.type = INCLUDE

    def exclusion(self, name: str, parent: _Tree) -> None:
        _add(parent, validate_field_path(name), _Leaf(EXCLUDE))
        if name == "_id" and parent is self.root:
            self.ctx.id_excluded = True
        else:
            if self.ctx.type is not None and self.ctx.type != EXCLUDE:
                raise MongoError(31254, f"Cannot do exclusion on field {name} in inclusion "
                                 "projection")
            self.ctx.type = EXCLUDE

    def parse(self, spec: dict[str, Any]) -> tuple[_Tree, str]:
        self.root = _Tree()
        for name, value in spec.items():
            self.ctx.id_specified |= name == "_id" or name.startswith("_id.")
            self.element(name, value, self.root, ())
        ctx = self.ctx
        if ctx.type is None:
            if ctx.has_slice:
                ctx.type = INCLUDE if ctx.id_included else EXCLUDE
            elif ctx.has_elem_match or ctx.id_included:
                ctx.type = INCLUDE
            else:
                ctx.type = EXCLUDE
        if ctx.type == INCLUDE and not ctx.id_specified:
            self.root.children = {"_id": _Leaf(INCLUDE), **self.root.children}
        if ctx.type == EXCLUDE and ctx.id_included:
            self.root.children.pop("_id", None)
        return self.root, ctx.type


def _true_value(v: Any) -> bool:
    if isinstance(v, Decimal128):
        return v.to_decimal() != 0
    return bool(v)


def _to_int(v: Any) -> int:
    """numberInt(): truncation, saturating like MongoDB's conversion."""
    if isinstance(v, Decimal128):
        d = v.to_decimal()
        if d.is_nan():
            return 0
        v = float(d)
    if isinstance(v, float):
        if v != v:
            return 0
        v = max(min(v, 2**31 - 1), -(2**31))
    return max(min(int(v), 2**31 - 1), -(2**31))


def _slice(arr: list[Any], skip: int | None, limit: int) -> list[Any]:
    if skip is None:
        return arr[:limit] if limit >= 0 else arr[max(len(arr) + limit, 0):]
    start = skip if skip >= 0 else max(len(arr) + skip, 0)
    return arr[start:start + limit]


class Projection:
    """A compiled find projection. ``apply(doc, matched_position=None) -> dict``."""

    def __init__(self, spec: dict[str, Any], tree: _Tree, kind: str,
                 filter_matcher: Matcher | None, has_positional: bool) -> None:
        self.spec = spec
        self.kind = kind
        self._tree = tree
        self._matcher = filter_matcher
        self.has_positional = has_positional

    @property
    def is_inclusion(self) -> bool:
        return self.kind == INCLUDE

    def apply(self, doc: dict[str, Any], matched_position: int | None = None) -> dict[str, Any]:
        if self.has_positional and matched_position is None and self._matcher is not None:
            _, matched_position = self._matcher.match_position(doc)
        if self.kind == INCLUDE:
            return self._include(doc, self._tree, doc, matched_position)
        return self._exclude(doc, self._tree, doc, matched_position)

    __call__ = apply

    # -- inclusion
    def _include(self, sub: dict[str, Any], tree: _Tree, root: dict[str, Any],
                 pos: int | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        children = tree.children
        for name, value in sub.items():
            node = children.get(name)
            if node is None:
                continue
            if isinstance(node, _Tree):
                r = self._include_value(value, node, root, pos)
                if r is not MISSING:
                    out[name] = r
                continue
            kind = node.kind
            if kind == INCLUDE:
                out[name] = value
            elif kind == "slice":
                out[name] = _slice(value, *node.arg) if type(value) is list else value
            elif kind == "elemMatch":
                r = self._elem_match(name, value, node.arg)
                if r is not MISSING:
                    out[name] = r
            elif kind == "positional":
                out[name] = self._positional(name, value, pos)
        for name, node in children.items():
            if isinstance(node, _Leaf) and node.kind == "expr":
                v = node.arg.evaluate(root, {})
                if v is not MISSING and not _is_missing(v):
                    out[name] = v
            elif isinstance(node, _Tree) and name not in sub and _has_expr(node):
                r = self._include_value({}, node, root, pos)
                if r is not MISSING:
                    out[name] = r
        return out

    def _include_value(self, value: Any, tree: _Tree, root: dict[str, Any],
                       pos: int | None) -> Any:
        if type(value) is dict:
            return self._include(value, tree, root, pos)
        if type(value) is list:
            out = []
            for e in value:
                if type(e) is dict or type(e) is list:
                    out.append(self._include_value(e, tree, root, pos))
                elif _has_expr(tree):
                    out.append(self._include({}, tree, root, pos))
            return out
        if _has_expr(tree):
            return self._include({}, tree, root, pos)
        return MISSING

    # -- exclusion
    def _exclude(self, sub: dict[str, Any], tree: _Tree, root: dict[str, Any],
                 pos: int | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        children = tree.children
        for name, value in sub.items():
            node = children.get(name)
            if node is None:
                out[name] = value
            elif isinstance(node, _Tree):
                out[name] = self._exclude_value(value, node, root, pos)
            elif node.kind == EXCLUDE:
                continue
            elif node.kind == "slice":
                out[name] = _slice(value, *node.arg) if type(value) is list else value
            elif node.kind == "elemMatch":
                r = self._elem_match(name, value, node.arg)
                if r is not MISSING:
                    out[name] = r
            else:
                out[name] = value
        return out

    def _exclude_value(self, value: Any, tree: _Tree, root: dict[str, Any],
                       pos: int | None) -> Any:
        if type(value) is dict:
            return self._exclude(value, tree, root, pos)
        if type(value) is list:
            return [self._exclude_value(e, tree, root, pos) for e in value]
        return value

    # -- find-only operators
    @staticmethod
    def _elem_match(name: str, value: Any, matcher: Matcher) -> Any:
        ok, idx = matcher.match_position({name: value})
        if not ok or type(value) is not list or idx is None:
            return MISSING
        return [value[idx]]

    @staticmethod
    def _positional(name: str, value: Any, pos: int | None) -> Any:
        if type(value) is not list:
            return value
        if pos is None or pos >= len(value):
            raise MongoError(51246, "Executor error during find command :: caused by :: "
                             "positional operator '.$' couldn't find a matching element in the "
                             "array")
        return [value[pos]]


def _has_expr(tree: _Tree) -> bool:
    for node in tree.children.values():
        if isinstance(node, _Leaf):
            if node.kind == "expr":
                return True
        elif _has_expr(node):
            return True
    return False


def _is_missing(v: Any) -> bool:
    return type(v).__name__ in ("Missing", "_Missing", "MissingType")


def compile_projection(spec: dict[str, Any] | None, *, filter_matcher: Matcher | None = None,
                       ) -> Projection | None:
    """Compile a find projection; None for an empty spec (return documents whole)."""
    if not spec:
        return None
    if not isinstance(spec, dict):
        raise MongoError(ErrorCode.TypeMismatch, "projection must be an object")
    parser = _Parser(filter_matcher, None)
    tree, kind = parser.parse(spec)
    return Projection(spec, tree, kind, filter_matcher, parser.ctx.has_positional)


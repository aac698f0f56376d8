"""$project with aggregation semantics.

Find projections (`query.projection`) and `$project` share inclusion/exclusion rules but
differ elsewhere: in a pipeline `{$slice: [...]}`, `{$filter: ...}` etc. are expressions (no
find-only `$slice: n`, `$elemMatch` or positional `$`), computed fields may read the
pipeline's variables ($$NOW, a $lookup's `let`), and nested arrays are projected element by
element. The spec is parsed into a tree of INCLUDE / EXCLUDE / computed leaves, with
MongoDB's errors for mixed or colliding paths.

Inclusion mode: included fields keep the input document's order, computed fields follow in
specification order; `_id` is kept unless excluded. Exclusion mode removes paths (arrays are
traversed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from query.context import PipelineContext
from query.expressions.core import Scope, compile_node
from query.expressions.registry import OPERATORS, Fn
from query.expressions.values import num_kind, truthy
from storage.errors import MongoError
from storage.vocabulary.missing import MISSING

from .base import Env, Stage, register_stage
from .basic import remove_path

__all__ = ["ProjectStage", "AggregationProjection"]


class _Leaf:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


INCLUDE: Final = _Leaf("INCLUDE")
EXCLUDE: Final = _Leaf("EXCLUDE")


def _has_computed(tree: dict) -> bool:
    return any(callable(v) or (type(v) is dict and _has_computed(v)) for v in tree.values())


class AggregationProjection:
    """A compiled $project specification: ``apply(doc, variables) -> dict``."""

    def __init__(self, spec: dict, scope: Scope) -> None:
        self.spec = spec
        self.mode: str | None = None   # "include" | "exclude"
        self.id_excluded = False
        self.tree: dict = {}
        self._parse(spec, scope, self.tree, "")
        if self.mode is None:
            # Only _id was specified.
            self.mode = "exclude" if self.id_excluded else "include"
        self.computed = _has_computed(self.tree)
        self.exclude_paths = [p for p in self._leaf_paths(self.tree, "") if p[1] is EXCLUDE]

    def _leaf_paths(self, tree: dict, prefix: str) -> list[tuple[list[str], Any]]:
        out = []
        for k, v in tree.items():
            if type(v) is dict:
                out.extend(self._leaf_paths(v, prefix + k + "."))
            else:
                out.append(((prefix + k).split("."), v))
        return out

    def _set_mode(self, mode: str, path: str) -> None:
        if self.mode is None:
            self.mode = mode
        elif self.mode != mode:
            if mode == "exclude":
                raise MongoError(31254, f"Invalid $project :: caused by :: Cannot do exclusion "
                                 f"on field {path} in inclusion projection")
            raise MongoError(31253, f"Invalid $project :: caused by :: Cannot do inclusion on "
                             f"field {path} in exclusion projection")

    def _parse(self, spec: dict, scope: Scope, tree: dict, prefix: str) -> None:
        for key, val in spec.items():
            full = prefix + key
            parts = key.split(".")
            for p in parts:
                if not p:
                    raise MongoError(15998, "FieldPath field names may not be empty strings.")
                if p.startswith("$"):
                    raise MongoError(16410, "FieldPath field names may not start with '$'. "
                                     "Consider using $getField or $setField.")
            leaf = self._classify(val, full, scope)
            node = tree
            for i, p in enumerate(parts[:-1]):
                child = node.get(p)
                if child is None:
                    child = node[p] = {}
                elif type(child) is not dict:
                    raise MongoError(31249, f"Invalid $project :: caused by :: Path collision at "
                                     f"{full} remaining portion {'.'.join(parts[i + 1:])}")
                node = child
            last = parts[-1]
            if isinstance(leaf, dict):
                child = node.get(last)
                if child is None:
                    child = node[last] = {}
                elif type(child) is not dict:
                    raise MongoError(31250, f"Invalid $project :: caused by :: Path collision at "
                                     f"{full}")
                self._parse(leaf, scope, child, full + ".")
                continue
            if last in node:
                raise MongoError(31250, f"Invalid $project :: caused by :: Path collision at "
                                 f"{full}")
            node[last] = leaf

    def _classify(self, val: Any, path: str, scope: Scope) -> Any:
        """INCLUDE / EXCLUDE / a sub-spec dict / a compiled expression."""
        is_id = path == "_id"
        if type(val) is bool or num_kind(val) >= 0:
            if truthy(val):
                if not is_id:
                    self._set_mode("include", path)
                return INCLUDE
            if is_id:
                self.id_excluded = True
            else:
                self._set_mode("exclude", path)
            return EXCLUDE
        if type(val) is dict:
            if not val:
                raise MongoError(51270, "Invalid $project :: caused by :: An empty "
                                 f"sub-projection is not a valid value. Found empty object at "
                                 f"path {path}")
            first = next(iter(val))
            if first.startswith("$"):
                if first not in OPERATORS and first != "$literal":
                    raise MongoError(31325, f"Invalid $project :: caused by :: Unknown "
                                     f"expression {first}")
                return self._computed(val, path, scope)
            return val
        return self._computed(val, path, scope)

    def _computed(self, val: Any, path: str, scope: Scope) -> Fn:
        if self.mode == "exclude":
            raise MongoError(31252, "Invalid $project :: caused by :: Cannot use expression "
                             "other than $meta in exclusion projection")
        if path != "_id":
            self._set_mode("include", path)
        return compile_node(val, scope)

    # ------------------------------------------------------------- evaluation

    def apply(self, doc: dict, variables: dict) -> dict:
        if self.mode == "exclude":
            out: Any = doc
            if self.id_excluded:
                out = remove_path(out, ["_id"])
            for parts, _ in self.exclude_paths:
                out = remove_path(out, parts)
            return out
        tree = self.tree
        out = _include_doc(doc, tree, top=True, id_excluded=self.id_excluded)
        if self.computed:
            _expressions_into(out, tree, doc, variables)
        return out


def _include_doc(d: dict, tree: dict, top: bool = False, id_excluded: bool = False) -> dict:
    out: dict = {}
    for k, v in d.items():
        node = tree.get(k)
        if node is None:
            if top and k == "_id" and not id_excluded:
                out[k] = v
            continue
        if node is INCLUDE:
            out[k] = v
        elif type(node) is dict:
            r = _include_value(v, node)
            if r is not MISSING:
                out[k] = r
    return out


def _include_value(v: Any, tree: dict) -> Any:
    t = type(v)
    if t is dict:
        return _include_doc(v, tree)
    if t is list:
        return [r for r in (_include_value(e, tree) for e in v if type(e) in (dict, list))
                if r is not MISSING]
    return MISSING


def _expressions_into(out: dict, tree: dict, root: Any, variables: dict) -> None:
    for k, node in tree.items():
        if node is INCLUDE or node is EXCLUDE:
            continue
        if type(node) is dict:
            if _has_computed(node):
                out[k] = _expressions_value(out.get(k, MISSING), node, root, variables)
            continue
        val = node(root, variables)
        if val is MISSING:
            out.pop(k, None)
        else:
            out[k] = val


def _expressions_value(v: Any, tree: dict, root: Any, variables: dict) -> Any:
    t = type(v)
    if t is dict:
        _expressions_into(v, tree, root, variables)
        return v
    if t is list:
        return [_expressions_value(e, tree, root, variables) for e in v]
    d: dict = {}
    _expressions_into(d, tree, root, variables)
    return d


class ProjectStage(Stage):
    name = "$project"

    def __init__(self, spec: dict, ctx: PipelineContext) -> None:
        self.spec = spec
        self.projection = AggregationProjection(spec, ctx.scope())

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        apply = self.projection.apply
        variables = env.variables
        for d in docs:
            yield apply(d, variables)


def _c_project(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict:
        raise MongoError(15969, "$project specification must be an object")
    if not spec:
        raise MongoError(51272, "projection specification must have at least one field")
    return ProjectStage(spec, ctx)


register_stage("$project", _c_project)

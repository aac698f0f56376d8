"""Streaming stages: $match $project $addFields $set $unset $limit $skip $count $replaceRoot
$replaceWith $redact $sample $documents.

`$match` delegates to the query matcher (`query.matcher` / `query.match` `compile_filter`);
`$project` lives (and registers) in `project.py` (aggregation projection semantics).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from typing import Any

from query.context import PipelineContext
from query.expressions.core import Scope, compile_node
from query.expressions.registry import Fn
from query.expressions.values import (
    as_int,
    int_or_long,
    is_integral64,
    num_kind,
    truthy,
    value_repr,
)
from query.match import compile_filter
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .base import Env, Stage, register_stage

__all__ = ["MatchStage", "AddFieldsStage", "UnsetStage", "LimitStage",
           "SkipStage", "CountStage", "ReplaceRootStage", "RedactStage", "SampleStage",
           "DocumentsStage", "compile_matcher", "compile_addfields_tree", "apply_addfields",
           "remove_path", "validate_field_path"]


def _contains_key(spec: Any, key: str) -> bool:
    if type(spec) is dict:
        return any(k == key or _contains_key(v, key) for k, v in spec.items())
    if type(spec) is list:
        return any(_contains_key(v, key) for v in spec)
    return False


def compile_matcher(spec: dict, ctx: PipelineContext) -> Callable[[dict, dict], bool] | None:
    """A predicate ``(doc, variables) -> bool`` for a query filter.

    A top-level ``$expr`` is evaluated here with the run's variables (so `$lookup` sub-pipelines
    can use their `let`); the rest of the filter goes to the query matcher. Returns None when
    the matcher must be compiled per run (an ``$expr`` nested in the filter that may read
    variables whose values are only known at run time).
    """
    exprs: list[Any] = []
    rest: dict = {}
    for k, v in spec.items():
        if k == "$expr":
            exprs.append(v)
        elif k == "$and" and type(v) is list and any(
                type(c) is dict and list(c) == ["$expr"] for c in v):
            # {$and: [..., {$expr: X}, ...]}: hoist the $expr clauses (same conjunction).
            others = []
            for c in v:
                if type(c) is dict and list(c) == ["$expr"]:
                    exprs.append(c["$expr"])
                else:
                    others.append(c)
            if others:
                rest["$and"] = others
        else:
            rest[k] = v
    expr_fn = None
    if exprs:
        scope = ctx.scope()
        fns = [compile_node(e, scope) for e in exprs]
        if len(fns) == 1:
            expr_fn = fns[0]
        else:
            def expr_fn(doc: Any, variables: dict) -> Any:
                return all(truthy(f(doc, variables)) for f in fns)
    if rest and ctx.variables_in_scope and _contains_key(rest, "$expr"):
        return None
    static_vars = dict(ctx.variables)
    static_vars.setdefault("NOW", ctx.now)
    m = compile_filter(rest, variables=static_vars, collator=ctx.collator) if rest else None
    matches = m.matches if m is not None else None
    if expr_fn is None:
        if matches is None:  # {$match: {}} matches everything
            return lambda doc, variables: True
        return lambda doc, variables: matches(doc)
    if matches is None:
        return lambda doc, variables: truthy(expr_fn(doc, variables))
    return lambda doc, variables: matches(doc) and truthy(expr_fn(doc, variables))


class MatchStage(Stage):
    name = "$match"

    def __init__(self, spec: dict, ctx: PipelineContext) -> None:
        self.spec = spec
        self.collator = ctx.collator
        self.pred = compile_matcher(spec, ctx)

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        variables = env.variables
        pred = self.pred
        if pred is None:
            m = compile_filter(self.spec, variables=variables, collator=self.collator)
            matches = m.matches
            for d in docs:
                if matches(d):
                    yield d
            return
        for d in docs:
            if pred(d, variables):
                yield d


def _c_match(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict:
        raise MongoError(15959, "the match filter must be an expression in an object")
    return MatchStage(spec, ctx)


# ---------------------------------------------------------------- $addFields / $set

def validate_field_path(path: str, *, what: str = "FieldPath") -> list[str]:
    if not path:
        raise MongoError(40352, "FieldPath cannot be constructed with empty string")
    parts = path.split(".")
    for p in parts:
        if not p:
            raise MongoError(15998, "FieldPath field names may not be empty strings.")
        if p.startswith("$"):
            raise MongoError(16410, "FieldPath field names may not start with '$'. Consider "
                             "using $getField or $setField.")
    return parts


def compile_addfields_tree(spec: dict, scope: Scope, stage: str) -> dict:
    """A tree {field: Fn | subtree} for $addFields-style assignment (nested objects merge)."""
    tree: dict = {}
    _build_tree(spec, scope, tree, "", stage)
    return tree


def _build_tree(spec: dict, scope: Scope, tree: dict, prefix: str, stage: str) -> None:
    for key, val in spec.items():
        parts = validate_field_path(key)
        node = tree
        for i, p in enumerate(parts[:-1]):
            sub = node.get(p)
            if sub is None:
                sub = node[p] = {}
            elif type(sub) is not dict:
                raise MongoError(31250, f"Invalid {stage} :: caused by :: Path collision at "
                                 f"{prefix}{'.'.join(parts[:i + 1])}")
            node = sub
        last = parts[-1]
        full = prefix + key
        if type(val) is dict and val and not next(iter(val)).startswith("$"):
            sub = node.get(last)
            if sub is None:
                sub = node[last] = {}
            elif type(sub) is not dict:
                raise MongoError(31250, f"Invalid {stage} :: caused by :: Path collision at "
                                 f"{full}")
            _build_tree(val, scope, sub, full + ".", stage)
        else:
            if last in node:
                raise MongoError(31250, f"Invalid {stage} :: caused by :: Path collision at "
                                 f"{full}")
            node[last] = compile_node(val, scope)


def _apply_into(target: dict, tree: dict, root: Any, variables: dict) -> None:
    for k, item in tree.items():
        if type(item) is dict:
            target[k] = _apply_sub(target.get(k, MISSING), item, root, variables)
        else:
            v = item(root, variables)
            if v is MISSING:
                target.pop(k, None)
            else:
                target[k] = v


def _apply_sub(cur: Any, tree: dict, root: Any, variables: dict) -> Any:
    t = type(cur)
    if t is dict:
        d = dict(cur)
        _apply_into(d, tree, root, variables)
        return d
    if t is list:
        return [_apply_sub(e, tree, root, variables) for e in cur]
    d = {}
    _apply_into(d, tree, root, variables)
    return d


def apply_addfields(doc: dict, tree: dict, variables: dict) -> dict:
    out = dict(doc)
    _apply_into(out, tree, doc, variables)
    return out


class AddFieldsStage(Stage):
    def __init__(self, name: str, spec: dict, ctx: PipelineContext) -> None:
        self.name = name
        self.spec = spec
        self.tree = compile_addfields_tree(spec, ctx.scope(), name)
        # Fast path: only top-level computed fields.
        self.flat = [(k, f) for k, f in self.tree.items() if type(f) is not dict] \
            if all(type(f) is not dict for f in self.tree.values()) else None

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        variables = env.variables
        flat = self.flat
        if flat is not None:
            for d in docs:
                out = dict(d)
                for k, f in flat:
                    v = f(d, variables)
                    if v is MISSING:
                        out.pop(k, None)
                    else:
                        out[k] = v
                yield out
            return
        tree = self.tree
        for d in docs:
            yield apply_addfields(d, tree, variables)


def _c_add_fields(name: str) -> Callable[[Any, PipelineContext], Stage]:
    def compiler(spec: Any, ctx: PipelineContext) -> Stage:
        if type(spec) is not dict:
            raise MongoError(40272, f"{name} specification stage must be an object, got "
                             f"{type_name(spec)}")
        return AddFieldsStage(name, spec, ctx)
    return compiler


# ---------------------------------------------------------------- $unset

def remove_path(doc: Any, parts: list[str]) -> Any:
    """`doc` without the field at `parts` (arrays traversed); a copy only where changed."""
    if type(doc) is list:
        return [remove_path(e, parts) if type(e) in (dict, list) else e for e in doc]
    if type(doc) is not dict:
        return doc
    k = parts[0]
    if k not in doc:
        return doc
    out = dict(doc)
    if len(parts) == 1:
        del out[k]
        return out
    v = doc[k]
    if type(v) in (dict, list):
        out[k] = remove_path(v, parts[1:])
    return out


class UnsetStage(Stage):
    name = "$unset"

    def __init__(self, spec: Any, fields: list[str]) -> None:
        self.spec = spec
        self.paths = [validate_field_path(f) for f in fields]

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        paths = self.paths
        for d in docs:
            for p in paths:
                d = remove_path(d, p)
            yield d


def _c_unset(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is str:
        return UnsetStage(spec, [spec])
    if type(spec) is not list:
        raise MongoError(31002, "$unset specification must be a string or an array")
    if not spec:
        raise MongoError(31119, "$unset specification must be a string or an array with at "
                         "least one field")
    if not all(type(f) is str for f in spec):
        raise MongoError(31120, "$unset specification must be a string or an array containing "
                         "only string values")
    return UnsetStage(spec, spec)


# ---------------------------------------------------------------- $limit / $skip / $count

def _non_negative_long(spec: Any, stage: str, code: int) -> int:
    if num_kind(spec) < 0:
        raise MongoError(code, f"invalid argument to {stage} stage: Expected a number in: "
                         f"{stage}: {value_repr(spec)}")
    if not is_integral64(spec):
        raise MongoError(code, f"invalid argument to {stage} stage: Expected an integer: "
                         f"{stage}: {value_repr(spec)}")
    n = as_int(spec)
    if n < 0:
        raise MongoError(code, f"invalid argument to {stage} stage: Expected a non-negative "
                         f"number in: {stage}: {n}")
    return n


class LimitStage(Stage):
    name = "$limit"

    def __init__(self, n: int) -> None:
        self.n = n
        self.spec = n

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        return itertools.islice(docs, self.n)


class SkipStage(Stage):
    name = "$skip"

    def __init__(self, n: int) -> None:
        self.n = n
        self.spec = n

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        return itertools.islice(docs, self.n, None)


def _c_limit(spec: Any, ctx: PipelineContext) -> Stage:
    n = _non_negative_long(spec, "$limit", 5107201)
    if n == 0:
        raise MongoError(15958, "the limit must be positive")
    return LimitStage(n)


def _c_skip(spec: Any, ctx: PipelineContext) -> Stage:
    return SkipStage(_non_negative_long(spec, "$skip", 5107200))


class CountStage(Stage):
    name = "$count"
    blocking = True

    def __init__(self, field: str) -> None:
        self.field = field
        self.spec = field

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        n = 0
        for _ in docs:
            n += 1
        if n:
            yield {self.field: int_or_long(n)}

    def explain(self) -> dict:
        # MongoDB explains $count as the $group and $project it desugars into.
        return {"$count": self.field}


def _c_count(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not str:
        raise MongoError(40156, "the count field must be a non-empty string")
    if not spec:
        raise MongoError(40157, "the count field must be a non-empty string")
    if spec.startswith("$"):
        raise MongoError(40158, "the count field cannot be a $-prefixed path")
    if "\0" in spec:
        raise MongoError(40159, "the count field cannot contain a null byte")
    if "." in spec:
        raise MongoError(40160, "the count field cannot contain '.'")
    return CountStage(spec)


# ---------------------------------------------------------------- $replaceRoot / $replaceWith

class ReplaceRootStage(Stage):
    def __init__(self, name: str, spec: Any, expr_spec: Any, ctx: PipelineContext) -> None:
        self.name = name
        self.spec = spec
        self.fn: Fn = compile_node(expr_spec, ctx.scope())

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        fn = self.fn
        variables = env.variables
        for d in docs:
            v = fn(d, variables)
            if type(v) is not dict:
                raise MongoError(40228, "'newRoot' expression must evaluate to an object, but "
                                 f"resulting value was: {value_repr(v)}. Type of resulting "
                                 f"value: '{type_name(v)}'. Input document: {value_repr(d)}")
            yield v


def _c_replace_root(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict:
        raise MongoError(40229, f"expected an object as specification for $replaceRoot stage, "
                         f"got {type_name(spec)}")
    for k in spec:
        if k != "newRoot":
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field '$replaceRoot.{k}' is an unknown field.")
    if "newRoot" not in spec:
        raise MongoError(40231, "no newRoot specified for the $replaceRoot stage")
    return ReplaceRootStage("$replaceRoot", spec, spec["newRoot"], ctx)


def _c_replace_with(spec: Any, ctx: PipelineContext) -> Stage:
    return ReplaceRootStage("$replaceWith", spec, spec, ctx)


# ---------------------------------------------------------------- $redact

class RedactStage(Stage):
    name = "$redact"

    def __init__(self, spec: Any, ctx: PipelineContext) -> None:
        self.spec = spec
        self.fn = compile_node(spec, ctx.scope(current_rebound=True, redact=True))

    def _decide(self, sub: dict, root: dict, variables: dict) -> str:
        variables["CURRENT"] = sub
        r = self.fn(root, variables)
        if r not in ("descend", "prune", "keep"):
            raise MongoError(17053, "$redact's expression should not return anything aside from "
                             "the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned "
                             f"{value_repr(r)}")
        return r

    def _redact(self, sub: dict, root: dict, variables: dict) -> dict | None:
        decision = self._decide(sub, root, variables)
        if decision == "prune":
            return None
        if decision == "keep":
            return sub
        out: dict[str, Any] = {}
        for k, v in sub.items():
            t = type(v)
            if t is dict:
                r = self._redact(v, root, variables)
                if r is not None:
                    out[k] = r
            elif t is list:
                out[k] = self._redact_array(v, root, variables)
            else:
                out[k] = v
        return out

    def _redact_array(self, arr: list, root: dict, variables: dict) -> list:
        out: list[Any] = []
        for e in arr:
            t = type(e)
            if t is dict:
                r = self._redact(e, root, variables)
                if r is not None:
                    out.append(r)
            elif t is list:
                out.append(self._redact_array(e, root, variables))
            else:
                out.append(e)
        return out

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        variables = dict(env.variables)
        for d in docs:
            r = self._redact(d, d, variables)
            if r is not None:
                yield r


def _c_redact(spec: Any, ctx: PipelineContext) -> Stage:
    return RedactStage(spec, ctx)


# ---------------------------------------------------------------- $sample

class SampleStage(Stage):
    name = "$sample"
    blocking = True

    def __init__(self, spec: dict, size: int) -> None:
        self.spec = spec
        self.size = size

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        # Reservoir sampling (algorithm R), then a random order.
        k = self.size
        reservoir: list[dict] = []
        rnd = random.random
        for i, d in enumerate(docs):
            if i < k:
                reservoir.append(d)
            else:
                j = int(rnd() * (i + 1))
                if j < k:
                    reservoir[j] = d
        random.shuffle(reservoir)
        yield from reservoir


def _c_sample(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict:
        raise MongoError(28745, "the $sample stage specification must be an object")
    size: int | None = None
    for k, v in spec.items():
        if k == "size":
            if num_kind(v) < 0:
                raise MongoError(28746, "size argument to $sample must be a number")
            if not is_integral64(v) or as_int(v) < 0:
                raise MongoError(28747, "size argument to $sample must not be negative")
            size = as_int(v)
        else:
            raise MongoError(28748, f"unrecognized option to $sample: {k}")
    if size is None:
        raise MongoError(28749, "$sample stage must specify a size")
    return SampleStage(spec, size)


# ---------------------------------------------------------------- $documents

class DocumentsStage(Stage):
    name = "$documents"

    def __init__(self, spec: Any, ctx: PipelineContext) -> None:
        self.spec = spec
        self.fn = compile_node(spec, ctx.scope())

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        value = self.fn({}, env.variables)
        if type(value) is not list:
            raise MongoError(5858203, "an array is expected")
        for d in value:
            if type(d) is not dict:
                raise MongoError(5858202, "literal documents specification must be an array of "
                                 "objects")
            yield d


def _c_documents(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is list and not all(type(d) is dict for d in spec):
        raise MongoError(5858202, "literal documents specification must be an array of objects")
    if type(spec) not in (list, str, dict):
        raise MongoError(5858201, "literal documents specification must be an array")
    return DocumentsStage(spec, ctx)


register_stage("$match", _c_match)
register_stage("$addFields", _c_add_fields("$addFields"))
register_stage("$set", _c_add_fields("$set"))
register_stage("$unset", _c_unset)
register_stage("$limit", _c_limit)
register_stage("$skip", _c_skip)
register_stage("$count", _c_count)
register_stage("$replaceRoot", _c_replace_root)
register_stage("$replaceWith", _c_replace_with)
register_stage("$redact", _c_redact)
register_stage("$sample", _c_sample)
register_stage("$documents", _c_documents, first_only=True)

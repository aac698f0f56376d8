"""$lookup (equality, pipeline with `let`, and the concise correlated form) and $unionWith.

Both read another collection of the same database through `ctx.resolve_collection(db,
coll)`; the foreign documents are read once per run. The equality form builds a hash index
of the foreign documents on `foreignField` (values under arrays indexed element by element,
missing as null, numbers by value) so a join is one lookup per local value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from query.context import PipelineContext
from query.expressions.core import compile_node, validate_user_var_name
from query.expressions.registry import Fn
from query.expressions.values import value_repr
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .base import Env, Stage, register_stage
from .basic import validate_field_path
from .group import group_key_fn
from .unwind import set_path

__all__ = ["LookupStage", "UnionWithStage", "path_values"]


def path_values(doc: Any, parts: list[str]) -> list[Any]:
    """Values at a dotted path with query semantics: arrays are traversed, an array leaf
    contributes itself and its elements; missing contributes nothing."""
    out: list[Any] = []

    def walk(v: Any, i: int) -> None:
        if i == len(parts):
            out.append(v)
            if type(v) is list:
                out.extend(v)
            return
        t = type(v)
        if t is dict:
            if parts[i] in v:
                walk(v[parts[i]], i + 1)
        elif t is list:
            if parts[i].isdigit():
                idx = int(parts[i])
                if idx < len(v):
                    walk(v[idx], i + 1)
            for e in v:
                if type(e) is dict:
                    walk(e, i)
    walk(doc, 0)
    return out


def _foreign_docs(ctx: PipelineContext, coll: str) -> list[dict]:
    if ctx.resolve_collection is None:
        raise MongoError(ErrorCode.NotImplemented, "this pipeline cannot read other collections "
                         "(no resolver in the pipeline context)")
    return list(ctx.resolve_collection(ctx.db, coll))


def _sub_ctx(ctx: PipelineContext, let_names: list[str]) -> PipelineContext:
    names = tuple(dict.fromkeys((*ctx.variables_in_scope, *let_names)))
    return dataclasses.replace(ctx, variables_in_scope=names)


class LookupStage(Stage):
    name = "$lookup"

    def __init__(self, spec: dict, ctx: PipelineContext) -> None:
        from query.pipeline import compile_pipeline  # the sub-pipeline cycle (see pipeline.py)
        self.spec = spec
        allowed = ("from", "as", "localField", "foreignField", "let", "pipeline", "_internal")
        for k in spec:
            if k not in allowed:
                raise MongoError(ErrorCode.FailedToParse, f"unknown argument to $lookup: {k}")
        for k in ("from", "as", "localField", "foreignField"):
            if k in spec and type(spec[k]) is not str:
                if k == "from" and type(spec[k]) is dict:
                    continue
                raise MongoError(40321, f"$lookup argument '{k}: {value_repr(spec[k])}' must be "
                                 f"a string, is type {type_name(spec[k])}")
        if "as" not in spec:
            raise MongoError(ErrorCode.FailedToParse, "must specify 'as' field for a $lookup")
        self.as_parts = validate_field_path(spec["as"])
        has_local, has_foreign = "localField" in spec, "foreignField" in spec
        if has_local != has_foreign:
            raise MongoError(ErrorCode.FailedToParse, "$lookup requires both or neither of "
                             "'localField' and 'foreignField' to be specified")
        if not has_local and "pipeline" not in spec:
            raise MongoError(ErrorCode.FailedToParse, "$lookup requires either 'pipeline' or "
                             "both 'localField' and 'foreignField' to be specified")
        if "let" in spec and "pipeline" not in spec:
            raise MongoError(ErrorCode.FailedToParse, "$lookup with 'let' must also specify "
                             "'pipeline'")
        self.local = validate_field_path(spec["localField"]) if has_local else None
        self.foreign = validate_field_path(spec["foreignField"]) if has_local else None
        frm = spec.get("from")
        if type(frm) is dict:
            if set(frm) != {"db", "coll"} or frm.get("db") != ctx.db:
                raise MongoError(ErrorCode.FailedToParse, "$lookup 'from' must name a "
                                 "collection of the same database")
            frm = frm["coll"]
        self.from_coll: str | None = frm
        self.lets: list[tuple[str, Fn]] = []
        let = spec.get("let", {})
        if type(let) is not dict:
            raise MongoError(ErrorCode.FailedToParse, "$lookup argument 'let' must be an object, "
                             f"is type {type_name(let)}")
        scope = ctx.scope()
        for name, expr in let.items():
            validate_user_var_name(name, for_write=True)
            self.lets.append((name, compile_node(expr, scope)))
        self.pipeline = None
        if "pipeline" in spec:
            if type(spec["pipeline"]) is not list:
                raise MongoError(ErrorCode.FailedToParse, "$lookup argument 'pipeline' must be "
                                 f"an array, is type {type_name(spec['pipeline'])}")
            self.pipeline = compile_pipeline(spec["pipeline"], _sub_ctx(ctx, list(let)),
                                             context="$lookup")
        if self.from_coll is None and not (self.pipeline and self.pipeline.starts_with_source):
            raise MongoError(ErrorCode.FailedToParse, "must specify 'from' field for a $lookup")
        self.correlated = bool(self.lets) or "$$" in repr(spec.get("pipeline", []))
        self.key = group_key_fn(ctx.collator)

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        foreign = [] if self.from_coll is None else _foreign_docs(env.ctx, self.from_coll)
        index = self._index(foreign) if self.foreign is not None else None
        cached: list[dict] | None = None
        for d in docs:
            matches = foreign
            if index is not None:
                matches = self._equality_matches(d, index, foreign)
            if self.pipeline is not None:
                if not self.correlated and index is None:
                    if cached is None:
                        cached = list(self.pipeline.run_env(matches, env))
                    result = cached
                else:
                    variables = env.variables
                    if self.lets:
                        variables = dict(variables)
                        for name, fn in self.lets:
                            v = fn(d, env.variables)
                            variables[name] = None if v is MISSING else v
                    result = list(self.pipeline.run_env(matches, Env(env.ctx, variables)))
            else:
                result = list(matches)
            yield set_path(d, self.as_parts, result)

    def _index(self, foreign: list[dict]) -> dict[Any, list[int]]:
        index: dict[Any, list[int]] = {}
        parts = self.foreign
        key = self.key
        assert parts is not None
        for i, fd in enumerate(foreign):
            vals = path_values(fd, parts)
            keys = {key(v) for v in vals} if vals else {None}
            for k in keys:
                index.setdefault(k, []).append(i)
        return index

    def _equality_matches(self, d: dict, index: dict, foreign: list[dict]) -> list[dict]:
        assert self.local is not None
        vals = path_values(d, self.local)
        key = self.key
        keys = {key(v) for v in vals} if vals else {None}
        hits: set[int] = set()
        for k in keys:
            hits.update(index.get(k, ()))
        return [foreign[i] for i in sorted(hits)]


def _c_lookup(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict:
        raise MongoError(ErrorCode.FailedToParse, "the $lookup specification must be an Object, "
                         f"but found {type_name(spec)}")
    return LookupStage(spec, ctx)


class UnionWithStage(Stage):
    name = "$unionWith"

    def __init__(self, spec: Any, ctx: PipelineContext) -> None:
        from query.pipeline import compile_pipeline  # the sub-pipeline cycle (see pipeline.py)
        self.spec = spec
        coll: Any
        if type(spec) is str:
            coll, stages = spec, []
        elif type(spec) is dict:
            for k in spec:
                if k not in ("coll", "pipeline"):
                    raise MongoError(ErrorCode.IDLUnknownField,
                                     f"BSON field '$unionWith.{k}' is an unknown field.")
            coll = spec.get("coll")
            stages = spec.get("pipeline", [])
            if coll is not None and type(coll) is not str:
                raise MongoError(ErrorCode.TypeMismatch, "BSON field '$unionWith.coll' is the "
                                 "wrong type, expected type 'string'")
            if type(stages) is not list:
                raise MongoError(ErrorCode.TypeMismatch, "BSON field '$unionWith.pipeline' is "
                                 "the wrong type, expected type 'array'")
        else:
            raise MongoError(ErrorCode.FailedToParse, "the $unionWith stage specification must "
                             f"be an object or string, but found {type_name(spec)}")
        self.coll = coll
        self.pipeline = compile_pipeline(stages, ctx, context="$unionWith")
        if coll is None and not self.pipeline.starts_with_source:
            raise MongoError(ErrorCode.FailedToParse, "$unionWith stage without explicit "
                             "collection must have a pipeline with $documents as first stage")

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        yield from docs
        foreign = [] if self.coll is None else _foreign_docs(env.ctx, self.coll)
        yield from self.pipeline.run_env(foreign, env)

    def explain(self) -> dict:
        return {"$unionWith": {"coll": self.coll, "pipeline": self.pipeline.explain()}}


register_stage("$lookup", _c_lookup)
register_stage("$unionWith", lambda spec, ctx: UnionWithStage(spec, ctx))

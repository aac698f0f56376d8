"""The $setWindowFields stage: sort by (partitionBy, sortBy), cut the sorted stream into
partitions, compute every output field per partition, emit the documents with the fields
added. The sort spills to disk like $sort; one partition at a time is held in memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from query.context import PipelineContext
from query.expressions.comparison import agg_key
from query.expressions.core import compile_node
from query.expressions.reducers import approx_size
from query.expressions.registry import Fn
from query.spill import external_sort
from query.window.bounds import Partition
from query.window.functions import WindowFunction, parse_window_function
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .base import Env, Stage, register_stage
from .basic import validate_field_path
from .group import group_key
from .sort import compile_sort_key
from .unwind import get_path, set_path

__all__ = ["SetWindowFieldsStage"]


class SetWindowFieldsStage(Stage):
    name = "$setWindowFields"
    blocking = True

    def __init__(self, spec: dict, ctx: PipelineContext) -> None:
        self.spec = spec
        scope = ctx.scope()
        for k in spec:
            if k not in ("partitionBy", "sortBy", "output"):
                raise MongoError(ErrorCode.IDLUnknownField,
                                 f"BSON field '$setWindowFields.{k}' is an unknown field.")
        if "output" not in spec:
            raise MongoError(ErrorCode.IDLFailedToParse, "BSON field '$setWindowFields.output' "
                             "is missing but a required field")
        self.partition_fn: Fn | None = None
        if "partitionBy" in spec:
            self.partition_fn = compile_node(spec["partitionBy"], scope)
        self.sort_fields: list[tuple[str, int]] | None = None
        self.sort_key = None
        if "sortBy" in spec:
            sb = spec["sortBy"]
            if type(sb) is not dict:
                raise MongoError(ErrorCode.TypeMismatch, "BSON field '$setWindowFields.sortBy' "
                                 f"is the wrong type '{type_name(sb)}', expected type 'object'")
            self.sort_key = compile_sort_key(sb)
            self.sort_fields = [(k, 1 if v == 1 else -1) for k, v in sb.items()]
        out = spec["output"]
        if type(out) is not dict:
            raise MongoError(ErrorCode.TypeMismatch, "BSON field '$setWindowFields.output' is "
                             f"the wrong type '{type_name(out)}', expected type 'object'")
        self.outputs: list[tuple[list[str], WindowFunction]] = []
        seen: list[list[str]] = []
        for field, fspec in out.items():
            parts = validate_field_path(field)
            for other in seen:
                n = min(len(other), len(parts))
                if other[:n] == parts[:n]:
                    raise MongoError(6307900, "$setWindowFields 'output' specification contains "
                                     "two conflicting paths")
            seen.append(parts)
            if type(fspec) is not dict:
                raise MongoError(ErrorCode.FailedToParse, f"The field '{field}' must be an "
                                 "object")
            fns = [k for k in fspec if k != "window"]
            if len(fns) != 1:
                raise MongoError(ErrorCode.FailedToParse, "Expected exactly one window function "
                                 f"in the output field '{field}', found {len(fns)}")
            op = fns[0]
            fn = parse_window_function(op, fspec[op], fspec.get("window", MISSING), scope,
                                       self.sort_fields)
            self.outputs.append((parts, fn))
        self.needs_values = any(f.needs_sort_values for _, f in self.outputs)
        self.needs_keys = any(f.needs_sort_keys for _, f in self.outputs)
        self.flat = all(len(p) == 1 for p, _ in self.outputs)

    def _partitions(self, docs: Iterator[dict], env: Env) -> Iterator[list[dict]]:
        variables = env.variables
        pf = self.partition_fn
        sk = self.sort_key
        if pf is None and sk is None:
            items = list(docs)
            if items:
                yield items
            return
        if pf is None:
            assert sk is not None  # both None returned above
            sorted_docs = external_sort(docs, sk, env.ctx)
        elif sk is None:
            sorted_docs = external_sort(docs, lambda d: agg_key(pf(d, variables)), env.ctx)
        else:
            sorted_docs = external_sort(docs, lambda d: (agg_key(pf(d, variables)), sk(d)),
                                        env.ctx)
        if pf is None:
            items = list(sorted_docs)
            if items:
                yield items
            return
        cur: list[dict] = []
        cur_key: Any = MISSING
        for d in sorted_docs:
            k = group_key(pf(d, variables))
            if cur and k != cur_key:
                yield cur
                cur = []
            cur_key = k
            cur.append(d)
        if cur:
            yield cur

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        ctx = env.ctx
        limit = ctx.memory_limit_bytes
        value_path = None
        if self.needs_values and self.sort_fields:
            value_path = self.sort_fields[0][0].split(".")
        for items in self._partitions(docs, env):
            if not ctx.allow_disk_use and len(items) > 1000:
                used = sum(approx_size(d) for d in items[:: max(1, len(items) // 200)]) * \
                    max(1, len(items) // 200)
                if used > limit:
                    raise MongoError(5414201, "Exceeded memory limit in "
                                     f"DocumentSourceSetWindowFields, used {used} bytes but max "
                                     f"allowed is {limit}")
            sort_values = None
            if value_path is not None:
                sort_values = [_sort_value(d, value_path) for d in items]
            sort_keys = [self.sort_key(d) for d in items] if self.needs_keys and \
                self.sort_key is not None else None
            part = Partition(items, env.variables, sort_values, sort_keys)
            columns = [(parts, fn.compute(part)) for parts, fn in self.outputs]
            if self.flat:
                names = [(p[0], col) for p, col in columns]
                for i, d in enumerate(items):
                    out = dict(d)
                    for name, col in names:
                        v = col[i]
                        out[name] = None if v is MISSING else v
                    yield out
            else:
                for i, d in enumerate(items):
                    out = d
                    for parts, col in columns:
                        v = col[i]
                        out = set_path(out, parts, None if v is MISSING else v)
                    yield out


def _sort_value(doc: dict, parts: list[str]) -> Any:
    v = get_path(doc, parts)
    return None if v is MISSING else v


def _c_set_window_fields(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict:
        raise MongoError(ErrorCode.FailedToParse, "the $setWindowFields stage specification "
                         f"must be an object, found {type_name(spec)}")
    return SetWindowFieldsStage(spec, ctx)


register_stage("$setWindowFields", _c_set_window_fields)

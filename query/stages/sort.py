"""$sort (with $limit coalescing into a top-k sort) and its external-sort spill."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

from bson import Int64

from query.context import PipelineContext
from query.sort import compile_sort
from query.spill import external_sort
from storage.collation import Collator
from storage.errors import MongoError

from .base import Env, Stage, register_stage

__all__ = ["SortStage", "compile_sort_key"]


def compile_sort_key(spec: dict, collator: Collator | None = None) -> Any:
    """A key function for `sorted()` from a sort spec (via query.sort)."""
    return compile_sort(spec, collator)


class SortStage(Stage):
    name = "$sort"
    blocking = True

    def __init__(self, spec: dict, ctx: PipelineContext) -> None:
        self.spec = spec
        self.key = compile_sort_key(spec, ctx.collator)
        self.limit: int | None = None

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        if self.limit is not None:
            yield from heapq.nsmallest(self.limit, docs, key=self.key)
            return
        yield from external_sort(docs, self.key, env.ctx)

    def explain(self) -> dict:
        out: dict = {"sortKey": self.spec}
        if self.limit is not None:
            out["limit"] = Int64(self.limit)
        return {"$sort": out}


def _c_sort(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict:
        raise MongoError(15973, "the $sort key specification must be an object")
    if not spec:
        raise MongoError(15976, "$sort stage must have at least one sort key")
    return SortStage(spec, ctx)


register_stage("$sort", _c_sort)

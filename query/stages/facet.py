"""$facet: several sub-pipelines over the same input, one output document."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from query.context import PipelineContext
from query.expressions.values import value_repr
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name

from .base import Env, Stage, register_stage

__all__ = ["FacetStage"]


class FacetStage(Stage):
    name = "$facet"
    blocking = True

    def __init__(self, spec: dict, ctx: PipelineContext) -> None:
        from query.pipeline import compile_pipeline  # the sub-pipeline cycle (see pipeline.py)
        self.spec = spec
        self.facets = []
        for fname, stages in spec.items():
            if fname.startswith("$"):
                raise MongoError(40179, f"$facet pipeline names must not start with '$': "
                                 f"{fname}")
            if "." in fname:
                raise MongoError(40178, f"$facet pipeline names must not contain '.': {fname}")
            if type(stages) is not list:
                raise MongoError(40170, f"arguments to $facet must be arrays, {fname} is type "
                                 f"{type_name(stages)}")
            for st in stages:
                if type(st) is not dict or not st:
                    raise MongoError(40171, "elements of arrays in $facet spec must be non-empty "
                                     f"objects, {fname} argument contained an element of type "
                                     f"{type_name(st)}: {value_repr(st)}")
            self.facets.append((fname, compile_pipeline(stages, ctx, context="$facet")))

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        items = list(docs)
        out = {}
        for fname, pipeline in self.facets:
            out[fname] = list(pipeline.run_env(items, env))
        yield out

    def explain(self) -> dict:
        return {"$facet": {name: p.explain() for name, p in self.facets}}


def _c_facet(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict or not spec:
        raise MongoError(40169, "the $facet specification must be a non-empty object, but "
                         f"found: {value_repr(spec)}")
    return FacetStage(spec, ctx)


register_stage("$facet", _c_facet)

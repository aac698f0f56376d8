"""Aggregation pipelines: compile a list of stage specs once, run it over documents.

    pipeline = compile_pipeline([{"$match": {...}}, {"$group": {...}}], ctx)
    for doc in pipeline.run(source_docs):
        ...
    pipeline.explain()   # [{"$match": {...}}, {"$group": {...}}]

Stages are looked up in `query.stages.STAGES` (extendable with `register_stage`). Stages
stream where MongoDB streams; $group, $sort, $bucket, $bucketAuto, $setWindowFields (per
partition), $facet and $sample consume their input first. A `$sort` immediately followed by a
`$limit` becomes a top-k sort, as MongoDB's optimizer does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from query.context import PipelineContext
from query.variables import resolve_let
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

# The one import cycle of query/: the stage index imports $facet, $lookup and $unionWith,
# whose sub-pipelines are compiled by this module (they import it when they compile one).
from .stages import FIRST_STAGE_ONLY, LAST_STAGE_ONLY, Env, Stage, compile_stage
from .stages.basic import LimitStage
from .stages.sort import SortStage

__all__ = ["Pipeline", "compile_pipeline", "resolve_let_variables"]


class Pipeline:
    """A compiled pipeline. `run` may be called many times (each run is independent)."""

    def __init__(self, stages: list[Stage], ctx: PipelineContext, spec: list[dict]) -> None:
        self.stages = stages
        self.ctx = ctx
        self.spec = spec

    def base_variables(self) -> dict[str, Any]:
        v: dict[str, Any] = {"NOW": self.ctx.now}
        if self.ctx.cluster_time is not None:
            v["CLUSTER_TIME"] = self.ctx.cluster_time
        v.update(self.ctx.variables)
        return v

    def run(self, docs: Iterable[dict] = (), variables: dict[str, Any] | None = None
            ) -> Iterator[dict]:
        """Run over `docs`; `variables` adds/overrides user variables (e.g. a $lookup's let)."""
        env_vars = self.base_variables()
        if variables:
            env_vars.update(variables)
        env = Env(self.ctx, env_vars)
        it: Iterator[dict] = iter(docs)
        for st in self.stages:
            it = st.run(it, env)
        return it

    def run_env(self, docs: Iterable[dict], env: Env) -> Iterator[dict]:
        """Run with an existing environment (sub-pipelines share their parent's variables)."""
        it: Iterator[dict] = iter(docs)
        for st in self.stages:
            it = st.run(it, env)
        return it

    @property
    def starts_with_source(self) -> bool:
        """True if the first stage ignores its input ($documents, $collStats, ...)."""
        return bool(self.stages) and self.stages[0].name in FIRST_STAGE_ONLY

    def explain(self) -> list[dict]:
        return [st.explain() for st in self.stages]

    def __repr__(self) -> str:
        return f"Pipeline({[s.name for s in self.stages]})"


def compile_pipeline(stages: list[dict], ctx: PipelineContext | None = None, *,
                     context: str | None = None) -> Pipeline:
    """Compile a pipeline. `context` names the enclosing stage for sub-pipelines
    ("$facet", "$lookup", "$unionWith"), which restricts the stages allowed inside."""
    ctx = ctx or PipelineContext()
    if type(stages) is not list:
        raise MongoError(ErrorCode.TypeMismatch, "'pipeline' option must be specified as an "
                         "array")
    compiled: list[Stage] = []
    n = len(stages)
    for i, spec in enumerate(stages):
        parts = compile_stage(spec, ctx)
        name = next(iter(spec))
        if context == "$facet" and name in ("$out", "$merge", "$facet", "$collStats",
                                            "$indexStats", "$currentOp", "$geoNear"):
            raise MongoError(40600, f"{name} is not allowed to be used within a $facet stage")
        if context == "$lookup" and name in ("$out", "$merge"):
            raise MongoError(51047, f"{name} is not allowed within a $lookup's sub-pipeline")
        if context == "$unionWith" and name in ("$out", "$merge"):
            raise MongoError(31441, f"{name} is not allowed within a $unionWith's sub-pipeline")
        if name in FIRST_STAGE_ONLY and i != 0:
            raise MongoError(40602, f"{name} is only valid as the first stage in a pipeline")
        if name in LAST_STAGE_ONLY and i != n - 1:
            raise MongoError(40601, f"{name} can only be the final stage in the pipeline")
        compiled.extend(parts)
    return Pipeline(_optimize(compiled), ctx, stages)


def _optimize(stages: list[Stage]) -> list[Stage]:
    out: list[Stage] = []
    for st in stages:
        if isinstance(st, LimitStage) and out and isinstance(out[-1], SortStage):
            prev = out[-1]
            prev.limit = st.n if prev.limit is None else min(prev.limit, st.n)
            continue
        out.append(st)
    return out


def resolve_let_variables(let: dict[str, Any] | None, ctx: PipelineContext
                          ) -> dict[str, Any]:
    """Evaluate an aggregate command's `let` document into variable values (may use $$NOW)."""
    if let is None:
        return {}
    if type(let) is not dict:
        raise MongoError(ErrorCode.TypeMismatch, "BSON field 'aggregate.let' is the wrong type "
                         f"'{type_name(let)}', expected type 'object'")
    return dict(resolve_let(let, now=ctx.now, cluster_time=ctx.cluster_time).user)

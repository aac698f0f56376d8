"""The stage protocol and the registry of stage compilers.

A stage compiler takes ``(spec, ctx)`` (the value of ``{$name: spec}`` and the
`PipelineContext`) and returns one `Stage`, or several when a stage is sugar for others
(`$sortByCount` is `$group` + `$sort`). `Stage.run(docs, env)` maps an iterator of documents
to an iterator of documents; streaming stages yield as they go, blocking ones ($group, $sort)
consume their input first.

`register_stage(name, compiler)` adds a stage from outside this package (e.g. the time-series
layer's `$_internalUnpackBucket`).

Stages must not mutate documents they receive: documents may be shared (a `$lookup`'s foreign
documents, a `$facet`'s input). A stage that changes a document copies what it changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from query.context import PipelineContext
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["Stage", "Env", "STAGES", "StageCompiler", "register_stage", "compile_stage",
           "FIRST_STAGE_ONLY", "LAST_STAGE_ONLY"]


@dataclass
class Env:
    """What a running pipeline carries: the context and the variables ($$NOW, let, ...)."""

    ctx: PipelineContext
    variables: dict[str, Any] = field(default_factory=dict)


class Stage:
    """One pipeline stage."""

    name: str = "$stage"
    #: True if the stage consumes all input before producing output.
    blocking: bool = False

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        raise NotImplementedError

    def explain(self) -> dict:
        return {self.name: getattr(self, "spec", {})}


StageCompiler = Callable[[Any, PipelineContext], "Stage | list[Stage]"]
STAGES: dict[str, StageCompiler] = {}
# Stages that must come first / last in a pipeline (MongoDB's position constraints).
FIRST_STAGE_ONLY: set[str] = {"$documents", "$collStats", "$indexStats", "$currentOp",
                              "$geoNear", "$changeStream", "$listSessions",
                              "$listLocalSessions", "$planCacheStats", "$search",
                              "$searchMeta", "$vectorSearch", "$listSearchIndexes"}
LAST_STAGE_ONLY: set[str] = {"$out", "$merge"}


def register_stage(name: str, compiler: StageCompiler, *, first_only: bool = False,
                   last_only: bool = False) -> None:
    """Add (or replace) a stage compiler, e.g. ``register_stage("$_internalUnpackBucket", f)``."""
    STAGES[name] = compiler
    if first_only:
        FIRST_STAGE_ONLY.add(name)
    if last_only:
        LAST_STAGE_ONLY.add(name)


# Stages whose string comparisons do not follow a collation yet: refused under one.
_SIMPLE_COLLATION_ONLY: Final = frozenset({"$setWindowFields", "$densify", "$bucketAuto",
                                           "$fill"})


def compile_stage(spec: Any, ctx: PipelineContext) -> list[Stage]:
    """Compile one ``{$name: arg}`` element of a pipeline."""
    if type(spec) is not dict:
        raise MongoError(ErrorCode.TypeMismatch,
                         "Each element of the 'pipeline' array must be an object")
    if len(spec) != 1:
        raise MongoError(40323, "A pipeline stage specification object must contain exactly "
                         "one field.")
    name, arg = next(iter(spec.items()))
    compiler = STAGES.get(name)
    if compiler is None:
        raise MongoError(40324, f"Unrecognized pipeline stage name: '{name}'")
    if ctx.collator is not None and name in _SIMPLE_COLLATION_ONLY:
        raise MongoError(ErrorCode.NotImplemented, f"bucketd does not run {name} under a "
                         "collation other than simple")
    out = compiler(arg, ctx)
    return out if isinstance(out, list) else [out]

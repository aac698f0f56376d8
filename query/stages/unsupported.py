"""Stages bucketd does not evaluate in the query layer: server-provided sources ($collStats,
$indexStats, $currentOp, $listLocalSessions — evaluated only when the context supplies a
provider, which checks the spec itself when `object_only` is off) and stages
refused with NotImplemented (238) and a clear message ($geoNear, search, change streams...)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from query.context import PipelineContext
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from .base import Env, Stage, register_stage

__all__ = ["ProvidedSourceStage"]


class ProvidedSourceStage(Stage):
    """A first stage whose documents come from a server-side provider in the context."""

    def __init__(self, name: str, spec: Any, provider: Callable[[Any], Any]) -> None:
        self.name = name
        self.spec = spec
        self.provider = provider

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        yield from self.provider(self.spec)


def _provided(name: str, attr: str, code: int, *, object_only: bool = True
              ) -> Callable[[Any, PipelineContext], Stage]:
    def compiler(spec: Any, ctx: PipelineContext) -> Stage:
        if object_only and type(spec) is not dict:
            raise MongoError(code, f"{name} must take a nested object but found: "
                             f"{type_name(spec)}")
        provider = getattr(ctx, attr)
        if provider is None:
            raise MongoError(ErrorCode.NotImplemented, f"{name} is answered by the server, not "
                             "available in this pipeline context")
        return ProvidedSourceStage(name, spec, provider)
    return compiler


def _refuse(name: str, why: str) -> Callable[[Any, PipelineContext], Stage]:
    def compiler(spec: Any, ctx: PipelineContext) -> Stage:
        raise MongoError(ErrorCode.NotImplemented, f"{name} is not supported by bucketd: {why}")
    return compiler


register_stage("$collStats", _provided("$collStats", "coll_stats", 5447000), first_only=True)
register_stage("$indexStats", _provided("$indexStats", "index_stats", 28803), first_only=True)
register_stage("$currentOp", _provided("$currentOp", "current_op", 0, object_only=False),
               first_only=True)
register_stage("$listLocalSessions", _provided("$listLocalSessions", "list_local_sessions", 0,
                                               object_only=False), first_only=True)
register_stage("$geoNear", _refuse("$geoNear", "there are no geospatial indexes"),
               first_only=True)
for _name, _why in (("$search", "Atlas Search only"), ("$searchMeta", "Atlas Search only"),
                    ("$vectorSearch", "Atlas Vector Search only"),
                    ("$listSearchIndexes", "Atlas Search only"),
                    ("$changeStream", "change streams need a replica set"),
                    ("$graphLookup", "not implemented"),
                    ("$listSessions", "sessions are not persisted"),
                    ("$planCacheStats", "there is no plan cache")):
    register_stage(_name, _refuse(_name, _why))

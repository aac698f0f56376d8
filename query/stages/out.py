"""$out and $merge: write the pipeline's results through the context's write sinks (the
server implements them against storage); they produce no documents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from query.context import PipelineContext
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from .base import Env, Stage, register_stage

__all__ = ["OutStage", "MergeStage"]

_WHEN_MATCHED = ("replace", "keepExisting", "merge", "fail")
_WHEN_NOT_MATCHED = ("insert", "discard", "fail")


class OutStage(Stage):
    name = "$out"
    blocking = True

    def __init__(self, spec: Any, db: str, coll: str, timeseries: dict | None) -> None:
        self.spec = spec
        self.db = db
        self.coll = coll
        self.timeseries = timeseries

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        sink = env.ctx.out
        if sink is None:
            raise MongoError(ErrorCode.NotImplemented, "$out is not available in this context "
                             "(no write sink)")
        sink(self.db, self.coll, list(docs))
        return iter(())


def _c_out(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is str:
        if not spec:
            raise MongoError(ErrorCode.InvalidNamespace, "Invalid $out target namespace, ")
        return OutStage(spec, ctx.db, spec, None)
    if type(spec) is dict:
        for k in spec:
            if k not in ("db", "coll", "timeseries"):
                raise MongoError(ErrorCode.IDLUnknownField,
                                 f"BSON field '$out.{k}' is an unknown field.")
        if "coll" not in spec:
            raise MongoError(ErrorCode.IDLFailedToParse,
                             "BSON field '$out.coll' is missing but a required field")
        db = spec.get("db", ctx.db)
        if type(db) is not str or type(spec["coll"]) is not str:
            raise MongoError(ErrorCode.TypeMismatch, "BSON field '$out.coll' is the wrong type, "
                             "expected type 'string'")
        return OutStage(spec, db, spec["coll"], spec.get("timeseries"))
    raise MongoError(16990, f"$out only supports a string or object argument, not "
                     f"{type_name(spec)}")


class MergeStage(Stage):
    name = "$merge"
    blocking = True

    def __init__(self, spec: Any, db: str, coll: str, on: list[str], when_matched: Any,
                 when_not_matched: str, let: dict | None) -> None:
        self.spec = spec
        self.db = db
        self.coll = coll
        self.on = on
        self.when_matched = when_matched
        self.when_not_matched = when_not_matched
        self.let = let

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        sink = env.ctx.merge
        if sink is None:
            raise MongoError(ErrorCode.NotImplemented, "$merge is not available in this context "
                             "(no write sink)")
        sink(self.db, self.coll, list(docs), on=self.on, when_matched=self.when_matched,
             when_not_matched=self.when_not_matched, let=self.let)
        return iter(())


def _c_merge(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is str:
        spec = {"into": spec}
    if type(spec) is not dict:
        raise MongoError(ErrorCode.TypeMismatch, "$merge requires a string or object argument, "
                         f"but found {type_name(spec)}")
    for k in spec:
        if k not in ("into", "on", "let", "whenMatched", "whenNotMatched"):
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field '$merge.{k}' is an unknown field.")
    if "into" not in spec:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         "BSON field '$merge.into' is missing but a required field")
    into = spec["into"]
    if type(into) is str:
        db, coll = ctx.db, into
    elif type(into) is dict and type(into.get("coll")) is str:
        db, coll = into.get("db", ctx.db), into["coll"]
    else:
        raise MongoError(51178, "$merge 'into' field  must be either a string or an object, but "
                         f"found {type_name(into)}")
    on = spec.get("on", "_id")
    on_list = [on] if type(on) is str else on
    if type(on_list) is not list or not on_list or not all(type(f) is str for f in on_list):
        raise MongoError(51186, "$merge 'on' field  must be either a string or an array of "
                         "strings")
    wm = spec.get("whenMatched", "merge")
    if type(wm) is not list and wm not in _WHEN_MATCHED:
        raise MongoError(ErrorCode.BadValue, f"Enumeration value '{wm}' for field "
                         "'$merge.whenMatched' is not a valid value.")
    wnm = spec.get("whenNotMatched", "insert")
    if wnm not in _WHEN_NOT_MATCHED:
        raise MongoError(ErrorCode.BadValue, f"Enumeration value '{wnm}' for field "
                         "'$merge.whenNotMatched' is not a valid value.")
    let = spec.get("let")
    if let is not None and type(wm) is not list:
        raise MongoError(51199, "Cannot use 'let' variables with 'whenMatched: " + str(wm) +
                         "' mode")
    return MergeStage(spec, db, coll, on_list, wm, wnm, let)


register_stage("$out", _c_out, last_only=True)
register_stage("$merge", _c_merge, last_only=True)

"""$unwind: one output document per array element (includeArrayIndex,
preserveNullAndEmptyArrays). The path is a plain dotted path: arrays on the way are not
traversed, as in MongoDB."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bson import Int64

from query.context import PipelineContext
from query.expressions.values import value_repr
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.missing import MISSING

from .base import Env, Stage, register_stage
from .basic import validate_field_path

__all__ = ["UnwindStage", "get_path", "set_path"]


def get_path(doc: Any, parts: list[str]) -> Any:
    """The value at a dotted path without array traversal (MISSING if absent)."""
    v = doc
    for p in parts:
        if type(v) is not dict:
            return MISSING
        v = v.get(p, MISSING)
        if v is MISSING:
            return MISSING
    return v


def set_path(doc: dict, parts: list[str], value: Any) -> dict:
    """A copy of `doc` with `value` at `parts` (copies the dicts on the way)."""
    out = dict(doc)
    if len(parts) == 1:
        if value is MISSING:
            out.pop(parts[0], None)
        else:
            out[parts[0]] = value
        return out
    sub = doc.get(parts[0])
    out[parts[0]] = set_path(sub if type(sub) is dict else {}, parts[1:], value)
    return out


class UnwindStage(Stage):
    name = "$unwind"

    def __init__(self, spec: Any, path: str, index_field: str | None, preserve: bool) -> None:
        self.spec = spec
        self.path = path
        self.parts = validate_field_path(path)
        self.index_field = index_field
        self.index_parts = validate_field_path(index_field) if index_field else None
        self.preserve = preserve

    def explain(self) -> dict:
        out: dict = {"path": "$" + self.path}
        if self.index_field:
            out["includeArrayIndex"] = self.index_field
        if self.preserve:
            out["preserveNullAndEmptyArrays"] = True
        return {"$unwind": out}

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        parts = self.parts
        idx = self.index_parts
        preserve = self.preserve
        single = parts[0] if len(parts) == 1 else None
        for d in docs:
            v = d.get(single, MISSING) if single is not None else get_path(d, parts)
            if type(v) is list:
                if v:
                    for i, e in enumerate(v):
                        if single is not None:
                            out = dict(d)
                            out[single] = e
                        else:
                            out = set_path(d, parts, e)
                        if idx is not None:
                            out = set_path(out, idx, Int64(i))
                        yield out
                elif preserve:
                    out = set_path(d, parts, MISSING)
                    yield set_path(out, idx, None) if idx is not None else out
            elif v is None or v is MISSING:
                if preserve:
                    yield set_path(d, idx, None) if idx is not None else d
            else:
                yield set_path(d, idx, None) if idx is not None else d


def _c_unwind(spec: Any, ctx: PipelineContext) -> Stage:
    index_field = None
    preserve = False
    if type(spec) is str:
        path = spec
    elif type(spec) is dict:
        path = None
        for k, v in spec.items():
            if k == "path":
                if type(v) is not str:
                    raise MongoError(28808, f"expected a string as the path for $unwind stage, "
                                     f"got {type_name(v)}")
                path = v
            elif k == "preserveNullAndEmptyArrays":
                if type(v) is not bool:
                    raise MongoError(28809, "expected a boolean for the "
                                     "preserveNullAndEmptyArrays option to $unwind stage, got "
                                     f"{type_name(v)}")
                preserve = v
            elif k == "includeArrayIndex":
                if type(v) is not str or not v:
                    raise MongoError(28810, "expected a non-empty string for the "
                                     "includeArrayIndex option to $unwind stage, got "
                                     f"{type_name(v)}")
                if v.startswith("$"):
                    raise MongoError(28822, "includeArrayIndex option to $unwind stage should "
                                     f"not be prefixed with a '$': {v}")
                index_field = v
            else:
                raise MongoError(28811, f"unrecognized option to $unwind stage: {k}")
    else:
        raise MongoError(15981, "expected either a string or an object as specification for "
                         f"$unwind stage, got {type_name(spec)}")
    if path is None:
        raise MongoError(28812, "no path specified to $unwind stage")
    if not path.startswith("$"):
        raise MongoError(28818, f"path option to $unwind stage should be prefixed with a '$': "
                         f"{value_repr(path)[1:-1]}")
    return UnwindStage(spec, path[1:], index_field, preserve)


register_stage("$unwind", _c_unwind)

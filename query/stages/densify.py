"""$densify: insert documents for missing values of a numeric or date field, per partition,
over the full range, each partition's range, or explicit bounds (upper bound exclusive)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bson.datetime_ms import DatetimeMS

from query.context import PipelineContext
from query.dates.arithmetic import TIME_UNITS, date_add
from query.dates.timezones import UTC_TZ
from query.expressions.arithmetic import add_values
from query.expressions.comparison import agg_key
from query.expressions.values import as_int, is_integral64, num_kind, value_repr
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .base import Env, Stage, register_stage
from .basic import validate_field_path
from .unwind import get_path, set_path

__all__ = ["DensifyStage"]


def _is_date(v: Any) -> bool:
    return type(v) is DatetimeMS


class DensifyStage(Stage):
    name = "$densify"
    blocking = True

    def __init__(self, spec: dict, ctx: PipelineContext) -> None:
        self.spec = spec
        for k in spec:
            if k not in ("field", "partitionByFields", "range"):
                raise MongoError(ErrorCode.IDLUnknownField,
                                 f"BSON field '$densify.{k}' is an unknown field.")
        for k in ("field", "range"):
            if k not in spec:
                raise MongoError(ErrorCode.IDLFailedToParse,
                                 f"BSON field '$densify.{k}' is missing but a required field")
        if type(spec["field"]) is not str:
            raise MongoError(ErrorCode.TypeMismatch, "BSON field '$densify.field' is the wrong "
                             f"type '{type_name(spec['field'])}', expected type 'string'")
        self.field = validate_field_path(spec["field"])
        pfs = spec.get("partitionByFields", [])
        if type(pfs) is not list or not all(type(f) is str for f in pfs):
            raise MongoError(ErrorCode.TypeMismatch, "BSON field '$densify.partitionByFields' is "
                             "the wrong type, expected type 'array' of strings")
        self.partition_fields = [validate_field_path(f) for f in pfs]
        for pf in self.partition_fields:
            n = min(len(pf), len(self.field))
            if pf[:n] == self.field[:n]:
                raise MongoError(8993000, "BSON field '$densify.partitionByFields' contains the "
                                 "field that is being densified")
        rng = spec["range"]
        if type(rng) is not dict:
            raise MongoError(ErrorCode.TypeMismatch, "BSON field '$densify.range' is the wrong "
                             "type, expected type 'object'")
        for k in rng:
            if k not in ("step", "unit", "bounds"):
                raise MongoError(ErrorCode.IDLUnknownField,
                                 f"BSON field '$densify.range.{k}' is an unknown field.")
        for k in ("step", "bounds"):
            if k not in rng:
                raise MongoError(ErrorCode.IDLFailedToParse, f"BSON field '$densify.range.{k}' is "
                                 "missing but a required field")
        step = rng["step"]
        if num_kind(step) < 0 or not step > 0:
            raise MongoError(5733401, "The step parameter in a range statement must be a "
                             "strictly positive numeric value")
        self.unit = rng.get("unit")
        if self.unit is not None:
            if self.unit not in TIME_UNITS:
                raise MongoError(ErrorCode.FailedToParse, f"unknown time unit value: "
                                 f"{value_repr(self.unit)}")
            if not is_integral64(step):
                raise MongoError(6586400, "The step parameter in a range statement must be a "
                                 "whole number when densifying a date range")
        self.step = step
        bounds = rng["bounds"]
        if type(bounds) is str:
            if bounds not in ("full", "partition"):
                raise MongoError(5946802, "Bounds string must either be 'full' or 'partition'")
        elif type(bounds) is list:
            if len(bounds) != 2:
                raise MongoError(5733403, "A bounding array in a range statement must have "
                                 "exactly two elements")
            lo, hi = bounds
            if _is_date(lo) and _is_date(hi):
                if self.unit is None:
                    raise MongoError(5733410, "A bounding array of dates must specify a unit")
            elif num_kind(lo) >= 0 and num_kind(hi) >= 0:
                if self.unit is not None:
                    raise MongoError(5733409, "Numeric bounds may not have unit parameter")
            else:
                raise MongoError(5733406, "A bounding array must contain either both dates or "
                                 "both numeric types")
            if agg_key(lo) > agg_key(hi):
                raise MongoError(5733402, "A bounding array in a range statement must be sorted")
        else:
            raise MongoError(5946800, "Explicit bounds must be numeric or dates")
        self.bounds = bounds

    def _next(self, v: Any) -> Any:
        if self.unit is not None:
            return DatetimeMS(date_add(int(v), self.unit, as_int(self.step), UTC_TZ))
        return add_values([v, self.step])

    def _check(self, v: Any) -> None:
        if self.unit is not None:
            if not _is_date(v):
                raise MongoError(6053600, "Encountered non-date value in $densify with a unit, "
                                 f"found {type_name(v)}")
        elif num_kind(v) < 0:
            if _is_date(v):
                raise MongoError(6053601, "Encountered date value in $densify without a unit")
            raise MongoError(5733201, "Densify field type must be numeric or a date")

    def _generated(self, value: Any, pvals: list[Any]) -> dict:
        d: dict = {}
        d = set_path(d, self.field, value)
        for parts, pv in zip(self.partition_fields, pvals):
            if pv is not MISSING:
                d = set_path(d, parts, pv)
        return d

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        limit = env.ctx.max_densify_docs
        entries = []
        gmin = gmax = MISSING
        for d in docs:
            v = get_path(d, self.field)
            if v is MISSING:
                for i in range(1, len(self.field)):
                    if type(get_path(d, self.field[:i])) is list:
                        raise MongoError(5733307, "$densify cannot generate fields nested inside "
                                         "arrays")
            pvals = [get_path(d, p) for p in self.partition_fields]
            if v is not None and v is not MISSING:
                self._check(v)
                if gmin is MISSING or agg_key(v) < agg_key(gmin):
                    gmin = v
                if gmax is MISSING or agg_key(v) > agg_key(gmax):
                    gmax = v
            pkey = tuple(agg_key(None if p is MISSING else p) for p in pvals)
            entries.append((pkey, agg_key(None if v is MISSING else v), pvals, v, d))
        entries.sort(key=lambda e: (e[0], e[1]))
        generated = 0
        i = 0
        n = len(entries)
        while i < n:
            j = i
            while j < n and entries[j][0] == entries[i][0]:
                j += 1
            part = entries[i:j]
            pvals = part[0][2]
            values = [e[3] for e in part if e[3] is not None and e[3] is not MISSING]
            if isinstance(self.bounds, list):
                lo, hi = self.bounds
            elif self.bounds == "full":
                lo, hi = gmin, gmax
            else:
                lo = values[0] if values else MISSING
                hi = values[-1] if values else MISSING
            cur = lo
            active = cur is not MISSING
            for e in part:
                v = e[3]
                if active and v is not None and v is not MISSING:
                    kv = agg_key(v)
                    while agg_key(cur) < kv and agg_key(cur) < agg_key(hi):
                        yield self._generated(cur, pvals)
                        generated += 1
                        if generated > limit:
                            raise MongoError(5897900, f"Generated {generated} documents in "
                                             f"$densify, which is over the limit of {limit}. "
                                             "Increase the 'internalQueryMaxAllowedDensifyDocs' "
                                             "parameter to allow more generated documents")
                        cur = self._next(cur)
                    if agg_key(cur) == kv:
                        cur = self._next(cur)
                yield e[4]
            if active:
                while agg_key(cur) < agg_key(hi):
                    yield self._generated(cur, pvals)
                    generated += 1
                    if generated > limit:
                        raise MongoError(5897900, f"Generated {generated} documents in "
                                         f"$densify, which is over the limit of {limit}")
                    cur = self._next(cur)
            i = j


def _c_densify(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict:
        raise MongoError(ErrorCode.TypeMismatch, "the $densify stage specification must be an "
                         f"object, found {type_name(spec)}")
    return DensifyStage(spec, ctx)


register_stage("$densify", _c_densify)

"""$fill: sugar for $setWindowFields ($locf / $linearFill per method) followed by $addFields
with $ifNull for constant or expression `value` fills."""

from __future__ import annotations

from typing import Any

from query.context import PipelineContext
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from .base import Stage, register_stage
from .basic import AddFieldsStage
from .set_window_fields import SetWindowFieldsStage

__all__: list[str] = []


def _c_fill(spec: Any, ctx: PipelineContext) -> list[Stage]:
    if type(spec) is not dict:
        raise MongoError(6315901, f"Argument to $fill stage must be an object, but found type: "
                         f"{type_name(spec)}")
    for k in spec:
        if k not in ("partitionBy", "partitionByFields", "sortBy", "output"):
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field '$fill.{k}' is an unknown field.")
    if "output" not in spec:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         "BSON field '$fill.output' is missing but a required field")
    if "partitionBy" in spec and "partitionByFields" in spec:
        raise MongoError(6050204, "Maximum one of 'partitionBy' and 'partitionByFields can be "
                         "specified in '$fill'")
    output = spec["output"]
    if type(output) is not dict or not output:
        raise MongoError(6050203, "The output field in '$fill' must contain an object with at "
                         "least one element")
    window_out: dict[str, Any] = {}
    value_out: dict[str, Any] = {}
    for field, fspec in output.items():
        if type(fspec) is not dict or len(fspec) != 1:
            raise MongoError(6050200, "Each fill output specification must be an object with "
                             "exactly one field")
        (kind, arg), = fspec.items()
        if kind == "value":
            value_out[field] = {"$ifNull": ["$" + field, arg]}
        elif kind == "method":
            if arg not in ("linear", "locf"):
                raise MongoError(6050202, "Method must be either linear or locf")
            window_out[field] = {"$linearFill" if arg == "linear" else "$locf": "$" + field}
        else:
            raise MongoError(6050200, "Each fill output specification must be an object with "
                             "exactly one field")
    stages: list[Stage] = []
    if window_out:
        swf: dict[str, Any] = {"output": window_out}
        if "sortBy" in spec:
            swf["sortBy"] = spec["sortBy"]
        elif any("$linearFill" in v for v in window_out.values()):
            raise MongoError(ErrorCode.FailedToParse, "$fill with method 'linear' requires "
                             "'sortBy'")
        if "partitionBy" in spec:
            swf["partitionBy"] = spec["partitionBy"]
        elif "partitionByFields" in spec:
            pbf = spec["partitionByFields"]
            if type(pbf) is not list or not all(type(f) is str for f in pbf):
                raise MongoError(ErrorCode.TypeMismatch, "BSON field '$fill.partitionByFields' "
                                 "is the wrong type, expected type 'array' of strings")
            swf["partitionBy"] = {f.replace(".", "_"): "$" + f for f in pbf}
        stages.append(SetWindowFieldsStage(swf, ctx))
    if value_out:
        stages.append(AddFieldsStage("$addFields", value_out, ctx))
    return stages


register_stage("$fill", _c_fill)

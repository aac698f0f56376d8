"""$_internalUnpackBucket: time-series bucket documents in, measurements out.

The stage MongoDB puts in front of every query on a time-series collection, accepted
here directly on a `system.buckets.*` collection too. Spec fields (MongoDB's names and
error codes): `timeField` (required), `metaField`, `bucketMaxSpanSeconds` (required,
int > 0), one of `include`/`exclude` (top-level field names), and the optional flags
MongoDB serialises (`assumeNoMixedSchemaData`, `usesExtendedRange`, `fixedBuckets`).
The unpacking itself is `storage.timeseries.unpack_bucket`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from query.context import PipelineContext
from storage.errors import MongoError
from storage.timeseries import BucketSpec, unpack_bucket
from storage.vocabulary.bson_types import type_name

from .base import Env, Stage, register_stage

__all__ = ["UnpackBucketStage"]

_BOOL_FLAGS = {"assumeNoMixedSchemaData": 6067202, "includeMinTimeAsMetadata": 6460208,
               "includeMaxTimeAsMetadata": 6460209, "usesExtendedRange": 6646901,
               "fixedBuckets": 7823300}


class UnpackBucketStage(Stage):
    name = "$_internalUnpackBucket"

    def __init__(self, spec: Any) -> None:
        if type(spec) is not dict:
            raise MongoError(5346500, "$_internalUnpackBucket specification must be an object, "
                             f"got: {type_name(spec)}")
        time_field: str | None = None
        meta_field: str | None = None
        span: int | None = None
        fields: set[str] = set()
        include = False
        seen_include_exclude = False
        for key, value in spec.items():
            if key in ("include", "exclude"):
                if seen_include_exclude:
                    raise MongoError(5408000, "The $_internalUnpackBucket stage expects at most "
                                     "one of include/exclude parameters to be specified")
                if type(value) is not list:
                    raise MongoError(5346501, "include or exclude field must be an array, got: "
                                     f"{type_name(value)}")
                for item in value:
                    if type(item) is not str:
                        raise MongoError(5346502, "include or exclude field element must be a "
                                         f"string, got: {type_name(item)}")
                    if "." in item:
                        raise MongoError(5346503, "include or exclude field element must be a "
                                         "single-element field path")
                    fields.add(item)
                include = key == "include"
                seen_include_exclude = True
            elif key == "timeField":
                if type(value) is not str:
                    raise MongoError(5346504, "timeField field must be a string, got: "
                                     f"{type_name(value)}")
                time_field = value
            elif key == "metaField":
                if type(value) is not str:
                    raise MongoError(5346505, "metaField field must be a string, got: "
                                     f"{type_name(value)}")
                if "." in value:
                    raise MongoError(5545700, "metaField field must be a single-element field "
                                     "path")
                meta_field = value
            elif key == "bucketMaxSpanSeconds":
                if type(value) is not int:
                    raise MongoError(5510600, "bucketMaxSpanSeconds field must be an integer, "
                                     f"got: {type_name(value)}")
                if value <= 0:
                    raise MongoError(5510601, "bucketMaxSpanSeconds field must be greater than "
                                     "zero")
                span = value
            elif key in _BOOL_FLAGS:
                if type(value) is not bool:
                    raise MongoError(_BOOL_FLAGS[key], f"{key} field must be a bool, got: "
                                     f"{type_name(value)}")
            else:
                raise MongoError(5346506,
                                 f"unrecognized parameter to $_internalUnpackBucket: {key}")
        if time_field is None:
            raise MongoError(5346508,
                             "The $_internalUnpackBucket stage requires a timeField parameter")
        if span is None:
            raise MongoError(5510602, "The $_internalUnpackBucket stage requires a "
                             "bucketMaxSpanSeconds parameter")
        self.spec = spec
        self.bucket_spec = BucketSpec(time_field, meta_field, frozenset(fields), include)

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        spec = self.bucket_spec
        for bucket in docs:
            yield from unpack_bucket(bucket, spec)


def _compile(spec: Any, ctx: PipelineContext) -> Stage:
    return UnpackBucketStage(spec)


register_stage("$_internalUnpackBucket", _compile)

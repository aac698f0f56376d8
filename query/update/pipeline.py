"""Pipeline-style updates: ``u: [{$set: ...}, {$unset: ...}, {$replaceWith: ...}]``.

The stages are the aggregation stages themselves, compiled once by
`query.pipeline.compile_pipeline`, so their parse errors are the aggregation's. As in
MongoDB, a stage is allowed only if it transforms one document into one document:
`$addFields`/`$set`, `$project`, `$unset`, `$replaceRoot`/`$replaceWith` (and `$fill`
with constant values, which is an `$addFields`); any other is refused with
InvalidOptions (72) "<stage> is not allowed to be used within an update". Each matched
document runs through the pipeline alone; the caller applies the result as a replacement.
The variables are the command's (`$$NOW`, `$$CLUSTER_TIME`, `let`) and the statement's
constants (`c`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from query.context import PipelineContext
from query.pipeline import compile_pipeline
from query.variables import CommandVariables
from storage.collation import Collator
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["UpdatePipeline", "ALLOWED_UPDATE_STAGES"]

ALLOWED_UPDATE_STAGES: Final = frozenset({"$addFields", "$set", "$project", "$unset",
                                          "$replaceRoot", "$replaceWith"})


class UpdatePipeline:
    """A compiled update pipeline: `transform(doc)` is the document it makes of `doc`."""

    def __init__(self, stages: list[Any], variables: CommandVariables,
                 constants: Mapping[str, Any], collator: Collator | None = None) -> None:
        user = {**variables.user, **constants}
        ctx = PipelineContext(now=variables.now, cluster_time=variables.cluster_time,
                              variables=user, collator=collator)
        self.spec = stages
        self._pipeline = compile_pipeline(stages, ctx)
        for stage in self._pipeline.stages:
            if stage.name not in ALLOWED_UPDATE_STAGES:
                raise MongoError(ErrorCode.InvalidOptions,
                                 f"{stage.name} is not allowed to be used within an update")

    def transform(self, doc: dict[str, Any]) -> dict[str, Any]:
        # every allowed stage maps one document to exactly one document
        (out,) = self._pipeline.run([doc])
        return out

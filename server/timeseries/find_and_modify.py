"""findAndModify on a time-series collection: one measurement updated, replaced, upserted
or removed through the update and delete statements of `writes`, and the measurement as
it was or as it is now for the reply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from query.executor import UpdateStatement
from query.variables import CommandVariables
from storage.collation import COLLECTION_DEFAULT, OperationCollation
from storage.vocabulary.missing import MISSING

from .writes import delete_statement, refuse_sort, update_statement

if TYPE_CHECKING:
    from ..context import CommandRequest
    from ..namespaces import TimeseriesTarget

__all__ = ["MeasurementModify", "find_and_modify_measurement"]


@dataclass(frozen=True, slots=True)
class MeasurementModify:
    """A findAndModify's parsed arguments: `update` is None for a remove."""

    query: dict[str, Any]
    update: Any
    sort: dict[str, Any] | None
    upsert: bool
    return_new: bool
    array_filters: list[dict[str, Any]] | None
    hint: Any
    variables: CommandVariables
    collation: OperationCollation = COLLECTION_DEFAULT


def find_and_modify_measurement(req: CommandRequest, target: TimeseriesTarget,
                                spec: MeasurementModify
                                ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(lastErrorObject, value) of one findAndModify, on the storage thread in the
    caller's transaction."""
    refuse_sort(spec.sort)
    if spec.update is None:
        out = delete_statement(req, target, spec.query, True, spec.variables.values(),
                               spec.hint, spec.collation)
        return {"n": 1 if out.before is not None else 0}, out.before
    out = update_statement(req, target, UpdateStatement(
        q=spec.query, u=spec.update, upsert=spec.upsert, array_filters=spec.array_filters,
        hint=spec.hint, variables=spec.variables, collator=spec.collation))
    last: dict[str, Any] = {"n": 1 if out.upserted is not MISSING else out.matched,
                            "updatedExisting": out.matched > 0}
    if out.upserted is not MISSING:
        last["upserted"] = out.upserted
    return last, out.after if spec.return_new else out.before

"""The `collation` argument of a command or a write statement: absent (the collection's
default), or a collation document parsed by `storage.collation` with mongod's errors."""

from __future__ import annotations

from typing import Any

from storage.collation import (
    COLLECTION_DEFAULT,
    Collator,
    OperationCollation,
    effective_collator,
    parse_collation,
)
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["collation_arg", "timeseries_collator"]


def collation_arg(body: dict[str, Any], where: str) -> OperationCollation:
    """`body`'s collation; `where` names the field in errors (e.g. ``find.collation``)."""
    if "collation" not in body:
        return COLLECTION_DEFAULT
    value = body["collation"]
    if not isinstance(value, dict):
        raise MongoError(ErrorCode.TypeMismatch, f"BSON field '{where}' is the wrong type "
                         f"'{type_name(value)}', expected type 'object'")
    if not value:  # mongod treats an empty collation as none given
        return COLLECTION_DEFAULT
    return parse_collation(value)


def timeseries_collator(collation: OperationCollation, options: dict[str, Any]
                        ) -> Collator | None:
    """The collation an operation on a time-series collection runs with: its own, or the
    collection's default (`options`, the time-series view's catalog options)."""
    return effective_collator(collation, options.get("collation"))

"""Helpers commands use to read their arguments with MongoDB's errors.

MongoDB's IDL parser rejects unknown fields (40415), wrong types (TypeMismatch 14) and
missing required fields (40414) with messages of the form
``BSON field 'find.limit' is the wrong type 'string', expected types '[long, int, decimal, double]'``;
these helpers produce the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bson import Decimal128, Int64

from query.variables import CommandVariables, resolve_let
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from ..generic_args import GENERIC_ARGUMENTS

__all__ = [
    "check_fields", "get_bool", "get_int", "get_str", "get_doc", "get_list",
    "require", "namespace_arg", "command_variables",
]


def check_fields(body: dict[str, Any], command: str, allowed: Iterable[str]) -> None:
    allowed_set = set(allowed)
    for i, key in enumerate(body):
        if i == 0 or key in allowed_set or key in GENERIC_ARGUMENTS:
            continue
        raise MongoError(ErrorCode.IDLUnknownField,
                         f"BSON field '{command}.{key}' is an unknown field.")


def _wrong_type(command: str, field: str, value: Any, expected: str) -> MongoError:
    return MongoError(ErrorCode.TypeMismatch,
                      f"BSON field '{command}.{field}' is the wrong type "
                      f"'{type_name(value)}', expected type{'s' if ',' in expected else ''} "
                      f"'{expected}'")


def command_variables(body: dict[str, Any], command: str) -> CommandVariables:
    """The command's `let` (an object, or absent) evaluated, with this command's $$NOW."""
    return resolve_let(get_doc(body, command, "let"))


def require(body: dict[str, Any], command: str, field: str) -> Any:
    if field not in body:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         f"BSON field '{command}.{field}' is missing but a required field")
    return body[field]


def get_bool(body: dict[str, Any], command: str, field: str, default: bool = False) -> bool:
    v = body.get(field, default)
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float | Int64 | Decimal128) and v is not None:
        return bool(v.to_decimal() if isinstance(v, Decimal128) else v)
    if v is None:
        return default
    raise _wrong_type(command, field, v, "[bool, long, int, decimal, double]")


def get_int(body: dict[str, Any], command: str, field: str, default: int | None = None
            ) -> int | None:
    v = body.get(field, default)
    if v is None or v is default:
        return v
    if isinstance(v, bool):
        raise _wrong_type(command, field, v, "[long, int, decimal, double]")
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if v != v:
            return 0  # mongod's safeInt64 (BSONElement::safeNumberLong): NaN is 0
        if v in (float("inf"), float("-inf")):
            return _clamped_int64(2**63 if v > 0 else -(2**63) - 1)
        return _clamped_int64(int(v))
    if isinstance(v, Decimal128):
        d = v.to_decimal()
        if d.is_nan():
            return 0
        if d.is_infinite():
            return _clamped_int64(2**63 if d > 0 else -(2**63) - 1)
        return _clamped_int64(round(d))  # Decimal128::toLong rounds half to even
    raise _wrong_type(command, field, v, "[long, int, decimal, double]")


def _clamped_int64(n: int) -> int:
    """A whole number as mongod's safeInt64 arguments take it: saturated to int64."""
    return max(-(2**63), min(n, 2**63 - 1))


def get_str(body: dict[str, Any], command: str, field: str, default: str | None = None
            ) -> str | None:
    v = body.get(field, default)
    if v is None or type(v) is str:
        return v
    raise _wrong_type(command, field, v, "string")


def get_doc(body: dict[str, Any], command: str, field: str,
            default: dict[str, Any] | None = None) -> dict[str, Any] | None:
    v = body.get(field, default)
    if v is None or isinstance(v, dict):
        return v
    raise _wrong_type(command, field, v, "object")


def get_list(body: dict[str, Any], command: str, field: str,
             default: list[Any] | None = None) -> list[Any] | None:
    v = body.get(field, default)
    if v is None or isinstance(v, list):
        return v
    raise _wrong_type(command, field, v, "array")


def namespace_arg(body: dict[str, Any], command: str) -> str:
    """The collection name given as the command's first value."""
    v = body[command]
    if type(v) is not str:
        raise MongoError(ErrorCode.InvalidNamespace,
                         f"collection name has invalid type {type_name(v)}")
    if not v:
        raise MongoError(ErrorCode.InvalidNamespace, f"Invalid namespace specified '{v}'")
    return v

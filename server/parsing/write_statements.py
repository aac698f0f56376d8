"""Parsing the statements of write commands (delete, update), shared by the commands and
the time-series writes."""

from __future__ import annotations

from typing import Any

from query.executor import UpdateStatement
from query.variables import CommandVariables
from storage.collation import OperationCollation
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from .collation import collation_arg

__all__ = ["DELETE_STATEMENT_FIELDS", "UPDATE_STATEMENT_FIELDS", "parse_delete_statement",
           "parse_update_statement"]

DELETE_STATEMENT_FIELDS = {"q", "limit", "hint", "collation"}


def parse_delete_statement(s: Any) -> tuple[dict[str, Any], bool, Any, OperationCollation]:
    """(q, limit one, hint, collation) of one delete statement."""
    if not isinstance(s, dict):
        raise MongoError(ErrorCode.TypeMismatch, "delete statements must be objects")
    for key in s:
        if key not in DELETE_STATEMENT_FIELDS:
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field 'delete.deletes.{key}' is an unknown field.")
    if "q" not in s:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         "BSON field 'delete.deletes.q' is missing but a required field")
    if "limit" not in s:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         "BSON field 'delete.deletes.limit' is missing but a required field")
    q = s["q"]
    if not isinstance(q, dict):
        raise MongoError(ErrorCode.TypeMismatch, "BSON field 'delete.deletes.q' is the wrong "
                         "type, expected type 'object'")
    limit = s["limit"]
    if limit not in (0, 1) or isinstance(limit, bool):
        raise MongoError(ErrorCode.FailedToParse,
                         f"The limit field in delete objects must be 0 or 1. Got {limit}")
    collation = collation_arg(s, "delete.deletes.collation")
    return q, bool(limit), s.get("hint"), collation


UPDATE_STATEMENT_FIELDS = {"q", "u", "upsert", "multi", "arrayFilters", "hint", "collation", "sort",
                    "c", "upsertSupplied"}


def parse_update_statement(s: Any, command: str = "update",
                           variables: CommandVariables | None = None) -> UpdateStatement:
    if not isinstance(s, dict):
        raise MongoError(ErrorCode.TypeMismatch, f"BSON field '{command}.updates' element must "
                         "be an object")
    for key in s:
        if key not in UPDATE_STATEMENT_FIELDS:
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field '{command}.updates.{key}' is an unknown field.")
    if "q" not in s:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         f"BSON field '{command}.updates.q' is missing but a required field")
    if "u" not in s:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         f"BSON field '{command}.updates.u' is missing but a required field")
    q, u = s["q"], s["u"]
    if not isinstance(q, dict):
        raise MongoError(ErrorCode.TypeMismatch, f"BSON field '{command}.updates.q' is the wrong "
                         "type, expected type 'object'")
    if not isinstance(u, dict | list):
        raise MongoError(ErrorCode.FailedToParse, "Update argument must be either an object or "
                         "an array")
    collation = collation_arg(s, f"{command}.updates.collation")
    multi = bool(s.get("multi", False))
    sort = s.get("sort")
    if sort is not None and multi:
        raise MongoError(ErrorCode.FailedToParse,
                         "Cannot specify sort with multi=true")
    constants = s.get("c")
    if constants is not None and not isinstance(constants, dict):
        raise MongoError(ErrorCode.TypeMismatch, f"BSON field '{command}.updates.c' is the wrong "
                         f"type '{type_name(constants)}', expected type 'object'")
    return UpdateStatement(q=q, u=u, multi=multi, upsert=bool(s.get("upsert", False)),
                           array_filters=s.get("arrayFilters"), hint=s.get("hint"), sort=sort,
                           constants=constants, variables=variables, collator=collation)

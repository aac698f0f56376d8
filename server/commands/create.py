"""create: a collection, a view (`viewOn`, `pipeline`), or a time-series collection
(view + system.buckets).

Repeating `create` with identical options succeeds; different options fail with
NamespaceExists (48), as MongoDB 7.0+ does.
"""

from __future__ import annotations

from typing import Any

from query.match import compile_filter
from storage.bsontext import to_mongo_string
from storage.collation import parse_collation
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..timeseries.ddl import create_timeseries
from ..views.definitions import (
    ViewDefinition,
    check_definition,
    existing_view_conflict,
    parse_pipeline,
    parse_view_on,
    view_definition,
)
from ._args import check_fields, namespace_arg

ALLOWED = ("capped", "size", "max", "autoIndexId", "idIndex", "storageEngine", "validator",
           "validationLevel", "validationAction", "indexOptionDefaults", "viewOn", "pipeline",
           "collation", "timeseries", "expireAfterSeconds", "clusteredIndex",
           "changeStreamPreAndPostImages", "encryptedFields", "recordIdsReplicated",
           "flags", "temp")
_IGNORED = {"storageEngine", "indexOptionDefaults", "autoIndexId", "idIndex", "flags", "temp",
            "recordIdsReplicated", "changeStreamPreAndPostImages"}


def plain_options(body: dict[str, Any]) -> dict[str, Any]:
    """The options a plain collection keeps (what listCollections shows): a default
    collation as mongod normalises it (every field; none for the simple collation)."""
    opts: dict[str, Any] = {}
    for key in ALLOWED:
        if key in body and key not in _IGNORED:
            opts[key] = body[key]
    if "collation" in opts:
        collator = parse_collation(opts.pop("collation"))
        if collator is not None:
            opts["collation"] = dict(collator.document)
    return opts


def _refuse_unbuilt(body: dict[str, Any]) -> None:
    if body.get("capped"):
        raise MongoError(ErrorCode.NotImplemented, "capped collections are not supported by "
                         "bucketd")
    if "encryptedFields" in body:
        raise MongoError(ErrorCode.NotImplemented, "queryable encryption is not supported")
    collation = body.get("collation")
    if collation is not None:
        if not isinstance(collation, dict):
            raise MongoError(ErrorCode.TypeMismatch, "BSON field 'create.collation' is the wrong "
                             f"type '{type_name(collation)}', expected type 'object'")
        parse_collation(collation)  # mongod's errors, before anything is created
    if "clusteredIndex" in body and "timeseries" not in body:
        raise MongoError(ErrorCode.NotImplemented, "clustered collections are not supported")
    if "expireAfterSeconds" in body and "timeseries" not in body:
        raise MongoError(ErrorCode.InvalidOptions,
                         "'expireAfterSeconds' is only supported on time-series collections or "
                         "clustered collections")
    validator = body.get("validator")
    if validator is not None:
        if not isinstance(validator, dict):
            raise MongoError(ErrorCode.TypeMismatch,
                             "BSON field 'create.validator' is the wrong type, expected object")
        compile_filter(validator)  # reject invalid validators now, with the matcher's errors


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "create", ALLOWED)
    name = namespace_arg(body, "create")
    if "viewOn" in body or "pipeline" in body:
        await _create_view(req, name)
        return {}
    _refuse_unbuilt(body)
    if "timeseries" in body:
        await create_timeseries(req, name)
        return {}
    options = plain_options(body)
    db = req.db

    def create() -> None:
        catalog = req.storage.catalog
        existing = catalog.entry(db, name)
        if existing is not None:
            if existing.kind == "collection" and existing.options == options:
                return
            raise MongoError(ErrorCode.NamespaceExists, f"Collection {db}.{name} already exists.")
        catalog.create_collection(db, name, options)

    await req.storage.run(create)
    return {}


# options a view takes besides viewOn and pipeline (the rest are refused as mongod does)
_VIEW_OPTIONS = frozenset({"viewOn", "pipeline", "collation", "writeConcern", "comment",
                           "storageEngine", "indexOptionDefaults", "flags", "temp"})


async def _create_view(req: CommandRequest, name: str) -> None:
    body = req.body
    db = req.db
    given = body.get("viewOn")
    view_on = parse_view_on("create", given) if "viewOn" in body else None
    pipeline = parse_pipeline("create", body["pipeline"]) if "pipeline" in body else []
    if view_on is None:
        raise MongoError(ErrorCode.InvalidOptions,
                         "'pipeline' requires 'viewOn' to also be specified")
    if "idIndex" in body:
        raise MongoError(ErrorCode.InvalidOptions, f"'idIndex' is not allowed with 'viewOn': "
                         f"{to_mongo_string(body['idIndex'])}")
    if "timeseries" in body:
        raise MongoError(ErrorCode.InvalidOptions,
                         f"{db}.{name}: 'timeseries' is not allowed with 'viewOn'")
    _refuse_unbuilt({k: v for k, v in body.items() if k not in ("viewOn", "pipeline")})
    for key in body:
        if key in ALLOWED and key not in _VIEW_OPTIONS:
            raise MongoError(ErrorCode.InvalidOptions, f"option not supported on a view: {key}")
    if name.startswith("system."):
        raise MongoError(ErrorCode.InvalidNamespace, "View name cannot start with 'system.', "
                         "which is reserved for system namespaces")
    collator = parse_collation(body["collation"]) if "collation" in body else None
    view = ViewDefinition(db, name, view_on, pipeline,
                          None if collator is None else dict(collator.document))

    def create() -> None:
        catalog = req.storage.catalog
        existing = catalog.entry(db, name)
        if existing is not None:
            if existing.kind == "view":
                conflict = existing_view_conflict(view_definition(existing), view_on, pipeline)
                if conflict is None:
                    return
                raise conflict
            if existing.kind == "timeseries":
                raise MongoError(ErrorCode.NamespaceExists,
                                 f"namespace {db}.{name} already exists, but is a view on "
                                 f"{db}.system.buckets.{name} rather than {db}.{view_on}")
            shown = {"uuid": existing.uuid, **existing.options}
            raise MongoError(ErrorCode.NamespaceExists,
                             f"namespace {db}.{name} already exists, but with different "
                             f"options: {to_mongo_string(shown)}")
        check_definition(catalog, view)
        catalog.create_collection(db, name, view.options(), kind="view")

    await req.storage.run(create)

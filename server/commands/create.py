"""create: a collection (clustered by `_id` with `clusteredIndex`, then optionally with
`expireAfterSeconds`), a view (`viewOn`, `pipeline`), or a time-series collection
(view + system.buckets).

Repeating `create` with identical options succeeds; different options fail with
NamespaceExists (48), as MongoDB 7.0+ does.
"""

from __future__ import annotations

from typing import Any

from bson.int64 import Int64

from storage.bsontext import to_mongo_string
from storage.clustered import CLUSTERED_OPTION, parse_clustered_index
from storage.collation import parse_collation
from storage.errors import MongoError
from storage.timeseries import parse_expire_after_seconds
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..document_validation import check_validation_options
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
# parsed into their stored form by `_clustered_options`
_CLUSTERED = {CLUSTERED_OPTION, "expireAfterSeconds"}


def plain_options(body: dict[str, Any]) -> dict[str, Any]:
    """The options a plain collection keeps (what listCollections shows): a default
    collation as mongod normalises it (every field; none for the simple collation)."""
    opts: dict[str, Any] = {}
    for key in ALLOWED:
        if key in body and key not in _IGNORED and key not in _CLUSTERED:
            opts[key] = body[key]
    if opts.get("validator") == {}:
        del opts["validator"]  # mongod keeps no empty validator
    if "collation" in opts:
        collator = parse_collation(opts.pop("collation"), "create.collation")
        if collator is not None:
            opts["collation"] = dict(collator.document)
    return opts


def _clustered_options(body: dict[str, Any], name: str) -> dict[str, Any]:
    """clusteredIndex (canonical) and expireAfterSeconds (a long), checked as mongod's
    create checks them; empty for an unclustered collection."""
    clustered = None
    if CLUSTERED_OPTION in body:
        clustered = parse_clustered_index(body[CLUSTERED_OPTION],
                                          buckets=name.startswith("system.buckets."))
    if "expireAfterSeconds" in body and clustered is None:
        raise MongoError(ErrorCode.InvalidOptions,
                         "'expireAfterSeconds' is only supported on time-series collections or "
                         "clustered collections")
    if clustered is None:
        return {}
    idx = body.get("idIndex")
    if isinstance(idx, dict) and idx:
        raise MongoError(ErrorCode.InvalidOptions,
                         "The 'clusteredIndex' option is not supported with the 'idIndex' option")
    if "autoIndexId" in body and not body["autoIndexId"]:
        raise MongoError(6026501,
                         "The 'clusteredIndex' option does not support {autoIndexId: false}")
    out = dict(clustered)
    if "expireAfterSeconds" in body:
        out["expireAfterSeconds"] = Int64(parse_expire_after_seconds(body["expireAfterSeconds"]))
    return out


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
        parse_collation(collation, "create.collation")  # mongod's errors, before anything is created


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
    db = req.db
    check_validation_options("create", db, name, body)
    options = {**plain_options(body), **_clustered_options(body, name)}

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
    if CLUSTERED_OPTION in body:
        raise MongoError(6026500, "The 'clusteredIndex' option is not supported with views")
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
    collator = parse_collation(body["collation"], "create.collation") \
        if "collation" in body else None
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

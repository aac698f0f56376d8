"""collMod: change a collection's validator, an index's hidden/TTL options, or a time-series
collection's bucketing and expireAfterSeconds."""

from __future__ import annotations

from typing import Any

from query.match import compile_filter
from storage.errors import MongoError
from storage.index_options import modify_index
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..namespaces import resolve_namespace
from ..timeseries.ddl import coll_mod_timeseries_view
from ..timeseries.indexes import translate_index_target
from ._args import check_fields, get_doc, namespace_arg

ALLOWED = ("validator", "validationLevel", "validationAction", "index", "timeseries",
           "expireAfterSeconds", "viewOn", "pipeline", "changeStreamPreAndPostImages",
           "dryRun", "cappedSize", "cappedMax", "collectionUUID")


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "collMod", ALLOWED)
    name = namespace_arg(body, "collMod")
    if "viewOn" in body or "pipeline" in body:
        raise MongoError(ErrorCode.NotImplemented, "views are not supported by bucketd")
    if "cappedSize" in body or "cappedMax" in body:
        raise MongoError(ErrorCode.NotImplemented, "capped collections are not supported")
    index = get_doc(body, "collMod", "index")
    db = req.db

    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        ns = resolve_namespace(catalog, db, name)
        entry = ns.entry
        if entry is None:
            raise MongoError(ErrorCode.NamespaceNotFound, f"ns does not exist: {db}.{name}")
        reply: dict[str, Any] = {}
        ts = ns.timeseries
        if ts is not None:
            for key in ("validator", "validationLevel", "validationAction"):
                if key in body:
                    raise MongoError(ErrorCode.InvalidOptions,
                                     f"option not supported on a time-series collection: {key}")
            if "timeseries" in body or "expireAfterSeconds" in body:
                coll_mod_timeseries_view(req, ts, body)
            if index is not None:
                reply.update(modify_index(catalog, db, ts.buckets_name,
                                          translate_index_target(ts, index)))
            return reply
        if "timeseries" in body:
            raise MongoError(ErrorCode.InvalidOptions,
                             "option only supported on a time-series collection: timeseries")
        if "expireAfterSeconds" in body:
            raise MongoError(ErrorCode.InvalidOptions, "option only supported on a time-series "
                             "collection or a clustered collection: expireAfterSeconds")
        options = dict(entry.options)
        changed = False
        for key in ("validator", "validationLevel", "validationAction"):
            if key in body:
                value = body[key]
                if key == "validator":
                    if not isinstance(value, dict):
                        raise MongoError(ErrorCode.TypeMismatch, "validator must be an object")
                    compile_filter(value)
                elif key == "validationLevel" and value not in ("off", "strict", "moderate"):
                    raise MongoError(ErrorCode.BadValue,
                                     f"Enumeration value '{value}' for field "
                                     "'collMod.validationLevel' is not a valid value.")
                elif key == "validationAction" and value not in ("error", "warn"):
                    raise MongoError(ErrorCode.BadValue,
                                     f"Enumeration value '{value}' for field "
                                     "'collMod.validationAction' is not a valid value.")
                options[key] = value
                changed = True
        if changed:
            catalog.set_options(db, name, options=options)
        if index is not None:
            reply.update(modify_index(catalog, db, name, index))
        return reply

    return await req.storage.run(run)

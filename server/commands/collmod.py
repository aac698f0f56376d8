"""collMod: change a collection's validator, an index's hidden/TTL options, a clustered
collection's expireAfterSeconds, a time-series collection's bucketing and
expireAfterSeconds, or a view's `viewOn`/`pipeline`."""

from __future__ import annotations

from typing import Any

from bson.int64 import Int64

from storage.clustered import clustered_index_name
from storage.errors import MongoError
from storage.index_options import modify_index
from storage.timeseries import parse_coll_mod_expire_after_seconds
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..document_validation import check_validation_options
from ..namespaces import resolve_namespace
from ..timeseries.ddl import coll_mod_timeseries_view
from ..timeseries.indexes import translate_index_target
from ..views.definitions import (
    ViewDefinition,
    check_definition,
    parse_pipeline,
    parse_view_on,
    view_definition,
)
from ._args import check_fields, get_doc, namespace_arg

ALLOWED = ("validator", "validationLevel", "validationAction", "index", "timeseries",
           "expireAfterSeconds", "viewOn", "pipeline", "changeStreamPreAndPostImages",
           "dryRun", "cappedSize", "cappedMax", "collectionUUID")


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "collMod", ALLOWED)
    name = namespace_arg(body, "collMod")
    if req.server.config.auth and ("viewOn" in body) != ("pipeline" in body):
        raise MongoError(ErrorCode.InvalidOptions, "Must specify both 'viewOn' and 'pipeline' "
                         "when modifying a view and auth is enabled")
    view_on = parse_view_on("collMod", body["viewOn"]) if "viewOn" in body else None
    pipeline = parse_pipeline("collMod", body["pipeline"]) if "pipeline" in body else None
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
        if entry.kind == "view":
            _modify_view(req, entry, view_on, pipeline)
            return reply
        for key in ("pipeline", "viewOn"):
            if key in body:
                raise MongoError(ErrorCode.InvalidOptions,
                                 f"option only supported on a view: {key}")
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
        options = dict(entry.options)
        check_validation_options("collMod", db, name, body, entry.options)
        changed = False
        if "expireAfterSeconds" in body:
            if clustered_index_name(options) is None:
                raise MongoError(ErrorCode.InvalidOptions, "option only supported on a "
                                 "time-series collection or a clustered collection: "
                                 "expireAfterSeconds")
            expire = parse_coll_mod_expire_after_seconds(body["expireAfterSeconds"])
            options.pop("expireAfterSeconds", None)
            if expire is not None:
                options["expireAfterSeconds"] = Int64(expire)
            changed = True
        for key in ("validator", "validationLevel", "validationAction"):
            if key in body:
                options[key] = body[key]
                changed = True
        if options.get("validator") == {}:
            del options["validator"]  # an empty validator removes it
        if changed:
            catalog.set_options(db, name, options=options)
        if index is not None:
            reply.update(modify_index(catalog, db, name, index))
        return reply

    return await req.storage.run(run)


# collMod options a view takes (the generic arguments aside)
_VIEW_OPTIONS = ("viewOn", "pipeline", "collectionUUID", "dryRun")


def _modify_view(req: CommandRequest, entry: Any, view_on: str | None,
                 pipeline: list[dict[str, Any]] | None) -> None:
    """A view's new definition: what is not given is kept (storage thread)."""
    for key in req.body:
        if key in ALLOWED and key not in _VIEW_OPTIONS:
            raise MongoError(ErrorCode.InvalidOptions, f"option not supported on a view: {key}")
    current = view_definition(entry)
    view = ViewDefinition(entry.db, entry.name,
                          current.view_on if view_on is None else view_on,
                          current.pipeline if pipeline is None else pipeline)
    catalog = req.storage.catalog
    check_definition(catalog, view)
    catalog.set_options(entry.db, entry.name,
                        options={"viewOn": view.view_on, "pipeline": view.pipeline})

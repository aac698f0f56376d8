"""Creating and modifying time-series collections: create and collMod."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage.collation import parse_collation
from storage.errors import MongoError
from storage.timeseries import (
    TimeseriesOptions,
    buckets_collection_options,
    coll_mod_timeseries,
    default_index_spec,
    options_equal,
    parse_coll_mod_expire_after_seconds,
    parse_expire_after_seconds,
    parse_timeseries_options,
)
from storage.vocabulary.error_codes import ErrorCode

from ..namespaces import buckets_name, resolve_namespace
from .service import timeseries_service

if TYPE_CHECKING:
    from ..context import CommandRequest
    from ..namespaces import TimeseriesTarget

__all__ = ["coll_mod_timeseries_view", "create_timeseries"]


async def create_timeseries(req: CommandRequest, name: str) -> None:
    """`create` with `timeseries`: the view entry and its buckets collection, atomically."""
    body = req.body
    db = req.db
    ns = f"{db}.{name}"
    opts = parse_timeseries_options(body["timeseries"], ns=ns)
    expire = None
    if "expireAfterSeconds" in body:
        expire = parse_expire_after_seconds(body["expireAfterSeconds"])
    for unsupported in ("validator", "viewOn", "pipeline", "capped"):
        if unsupported in body:
            raise MongoError(ErrorCode.InvalidOptions,
                             f"Time-series collections do not support '{unsupported}'")
    view_options: dict[str, Any] = {"timeseries": opts.to_document()}
    if expire is not None:
        view_options["expireAfterSeconds"] = expire
    collator = parse_collation(body["collation"], "create.collation") \
        if "collation" in body else None
    if collator is not None:  # the default of every operation on the collection
        view_options["collation"] = dict(collator.document)
    buckets = buckets_name(name)

    def run() -> None:
        catalog = req.storage.catalog
        existing = resolve_namespace(catalog, db, name)
        if existing.entry is not None:
            if existing.timeseries is not None and options_equal(
                    existing.timeseries.options, opts) and \
                    existing.entry.options.get("expireAfterSeconds") == expire and \
                    existing.entry.options.get("collation") == view_options.get("collation"):
                return
            raise MongoError(ErrorCode.NamespaceExists, f"Collection {ns} already exists.")
        if catalog.entry(db, buckets) is not None:
            raise MongoError(ErrorCode.NamespaceExists,
                             f"Collection {db}.{buckets} already exists.")
        collation = view_options.get("collation")
        with catalog.transaction():
            catalog.create_collection(db, buckets,
                                      buckets_collection_options(opts, expire, collation))
            catalog.create_collection(db, name, view_options, kind="timeseries",
                                      info={"bucketsNs": f"{db}.{buckets}"})
            default = default_index_spec(opts)
            if default is not None:
                if collation is not None:  # as MongoDB's createDefaultTimeseriesIndex
                    default["collation"] = collation
                coll = catalog.get_collection(db, buckets)
                assert coll is not None
                coll.create_indexes([default])
        timeseries_service(req).catalog.drop_collection(ns)

    await req.storage.run(run)


def coll_mod_timeseries_view(req: CommandRequest, target: TimeseriesTarget,
                             body: dict[str, Any]) -> dict[str, Any]:
    """collMod's `timeseries` and `expireAfterSeconds` (storage thread)."""
    catalog = req.storage.catalog
    new_options = dict(target.entry.options)
    changed = False
    if "timeseries" in body:
        new_opts, changed = coll_mod_timeseries(target.options, body["timeseries"])
        new_options["timeseries"] = new_opts.to_document()
    if "expireAfterSeconds" in body:
        expire = parse_coll_mod_expire_after_seconds(body["expireAfterSeconds"])
        if expire is None:
            new_options.pop("expireAfterSeconds", None)
        else:
            new_options["expireAfterSeconds"] = expire
    with catalog.transaction():
        catalog.set_options(target.db, target.name, options=new_options)
        bopts = buckets_collection_options(
            TimeseriesOptions.from_document(new_options["timeseries"]),
            new_options.get("expireAfterSeconds"), new_options.get("collation"))
        catalog.set_options(target.db, target.buckets_name, options=bopts)
    if changed:
        timeseries_service(req).catalog.clear(target.ns)
    return {}

"""Indexes of time-series collections: user key patterns translated to bucket fields."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage.errors import MongoError
from storage.timeseries import bucket_index_spec, drop_index_key, timeseries_index_spec
from storage.vocabulary.error_codes import ErrorCode

if TYPE_CHECKING:
    from ..context import CommandRequest
    from ..namespaces import TimeseriesTarget

__all__ = ["create_timeseries_indexes", "drop_timeseries_indexes", "list_timeseries_indexes",
           "timeseries_indexes_with_idents", "translate_index_target"]


async def create_timeseries_indexes(req: CommandRequest, target: TimeseriesTarget,
                                    specs: list[Any]) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        translated = [bucket_index_spec(target.options, s) for s in specs]
        buckets = catalog.get_or_create_collection(target.db, target.buckets_name)
        result = buckets.create_indexes(translated)
        reply: dict[str, Any] = {"createdCollectionAutomatically": False,
                                 "numIndexesBefore": result.num_indexes_before,
                                 "numIndexesAfter": result.num_indexes_after}
        if result.all_existed:
            reply["note"] = "all indexes already exist"
        return reply

    return await req.storage.run(run)


def list_timeseries_indexes(req: CommandRequest, target: TimeseriesTarget
                            ) -> list[dict[str, Any]]:
    """listIndexes in the user's terms (storage thread)."""
    return [spec for spec, _ident in timeseries_indexes_with_idents(req, target)]


def timeseries_indexes_with_idents(req: CommandRequest, target: TimeseriesTarget
                                   ) -> list[tuple[dict[str, Any], str]]:
    """(the user's spec, the buckets index's ident) of each index a time-series
    collection shows; one that has no user form (made on the buckets directly) is left
    out, as mongod does (storage thread)."""
    buckets = target.buckets(req.storage.catalog)
    if buckets is None:
        return []
    out = []
    for spec, ix in buckets.listed_indexes():  # clustered by _id: no _id index among them
        user = timeseries_index_spec(target.options, spec)
        if user is not None:
            out.append((user, ix.ident))
    return out


def translate_index_target(target: TimeseriesTarget, index: dict[str, Any]) -> dict[str, Any]:
    """collMod's `index` on a time-series collection, with its key pattern in bucket form."""
    if "keyPattern" in index and isinstance(index["keyPattern"], dict):
        return {**index, "keyPattern": drop_index_key(target.options, index["keyPattern"])}
    return index


def drop_timeseries_indexes(req: CommandRequest, target: TimeseriesTarget,
                            index: str | list[str] | dict[str, Any]) -> dict[str, Any]:
    """dropIndexes (storage thread)."""
    buckets = target.buckets(req.storage.catalog)
    if buckets is None:
        raise MongoError(ErrorCode.NamespaceNotFound, f"ns not found {target.ns}")
    if isinstance(index, dict):
        index = drop_index_key(target.options, index)
    return {"nIndexesWas": buckets.drop_indexes(index)}

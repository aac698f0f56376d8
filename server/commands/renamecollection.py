"""renameCollection: move a collection to a new name, within or across databases."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..namespaces import BUCKETS_PREFIX, namespace_kind
from ._args import check_fields, get_bool, require


def _split(ns: Any, field: str) -> tuple[str, str]:
    if type(ns) is not str:
        raise MongoError(ErrorCode.TypeMismatch, f"'{field}' must be of type String")
    db, dot, coll = ns.partition(".")
    if not dot or not db or not coll:
        raise MongoError(ErrorCode.InvalidNamespace, f"Invalid {field} namespace: {ns}")
    return db, coll


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "renameCollection", ("to", "dropTarget", "stayTemp", "collectionUUID"))
    src_db, src = _split(body["renameCollection"], "source")
    dst_db, dst = _split(require(body, "renameCollection", "to"), "target")
    drop_target = get_bool(body, "renameCollection", "dropTarget")

    def run() -> None:
        catalog = req.storage.catalog
        if namespace_kind(catalog, src_db, src) == "timeseries" or \
                src.startswith(BUCKETS_PREFIX):
            raise MongoError(ErrorCode.IllegalOperation,
                             "Renaming a time-series collection is not allowed")
        if namespace_kind(catalog, src_db, src) == "view":
            raise MongoError(ErrorCode.CommandNotSupportedOnView,
                             f"cannot rename view: {src_db}.{src}")
        if dst.startswith(BUCKETS_PREFIX):
            # mongod: only a buckets collection (with its time-series options) may become one
            raise MongoError(ErrorCode.IllegalOperation, "Cannot rename a collection to a "
                             f"time-series buckets collection: {dst_db}.{dst}")
        # a time-series collection is a view in mongod: the one answer for both
        if namespace_kind(catalog, dst_db, dst) in ("view", "timeseries"):
            raise MongoError(ErrorCode.NamespaceExists,
                             f"a view already exists with that name: {dst_db}.{dst}")
        catalog.rename_collection(src_db, src, dst_db, dst, drop_target=drop_target)

    await req.storage.run(run)
    req.cursors.close_for_namespace(f"{src_db}.{src}")
    return {}

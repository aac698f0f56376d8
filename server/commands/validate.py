"""validate: check a collection's documents and that its indexes agree with them."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..namespaces import resolve_namespace
from ._args import check_fields, namespace_arg


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "validate", ("full", "repair", "background", "checkBSONConformance",
                                    "metadata", "fixMultikey", "enforceFastCount"))
    name = namespace_arg(body, "validate")
    db = req.db

    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        ns = resolve_namespace(catalog, db, name)
        entry = ns.entry
        if entry is None:
            raise MongoError(ErrorCode.NamespaceNotFound,
                             f"Collection '{db}.{name}' does not exist to validate.")
        target = ns.timeseries.buckets_name if ns.timeseries is not None else name
        coll = catalog.get_collection(db, target)
        if coll is None:
            raise MongoError(ErrorCode.CommandNotSupportedOnView, "Cannot validate a view")
        r = coll.validate()
        return {
            "ns": f"{db}.{name}", "uuid": entry.uuid, "nInvalidDocuments": r.n_invalid_documents,
            "nNonCompliantDocuments": 0, "nrecords": r.n_records,
            "nIndexes": len(r.keys_per_index), "keysPerIndex": r.keys_per_index,
            "indexDetails": r.index_details, "valid": r.valid, "repaired": False,
            "warnings": r.warnings, "errors": r.errors, "extraIndexEntries": [],
            "missingIndexEntries": [], "corruptRecords": [],
        }

    return await req.storage.run(run)

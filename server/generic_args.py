"""Fields any command may carry (MongoDB's generic arguments); handlers ignore them."""

from __future__ import annotations

from typing import Final

__all__ = ["GENERIC_ARGUMENTS"]

GENERIC_ARGUMENTS: Final = frozenset({
    "$db", "lsid", "$clusterTime", "$readPreference", "apiVersion", "apiStrict",
    "apiDeprecationErrors", "txnNumber", "autocommit", "startTransaction", "readConcern",
    "writeConcern", "comment", "maxTimeMS", "$audit", "$client", "$configServerState",
    "$gleStats", "$oplogQueryData", "$replData", "mayBypassWriteBlocking", "tracking_info",
    "clientOperationKey", "$queryOptions", "databaseVersion", "shardVersion", "rawData",
    "$configTime", "$topologyTime", "expectPrefix", "versionContext",
})

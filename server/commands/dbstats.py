"""dbStats: a database's collections, objects and sizes."""

from __future__ import annotations

import os
from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ._args import check_fields, get_int


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "dbStats", ("scale", "freeStorage"))
    scale = get_int(body, "dbStats", "scale", 1) or 1
    if scale < 1:
        raise MongoError(ErrorCode.BadValue, "scale has to be >= 1")
    db = req.db
    st = await req.storage.run(req.storage.catalog.database_stats, db)
    try:
        vfs = os.statvfs(req.storage.dbpath)
        fs_total, fs_used = vfs.f_blocks * vfs.f_frsize, (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize
    except OSError:
        fs_total = fs_used = 0
    return {
        "db": db, "collections": st.collections, "views": st.views, "objects": st.objects,
        "avgObjSize": st.avg_obj_size, "dataSize": st.data_size / scale,
        "storageSize": st.storage_size / scale, "indexes": st.indexes,
        "indexSize": st.index_size / scale,
        "totalSize": (st.storage_size + st.index_size) / scale, "scaleFactor": scale,
        "fsUsedSize": fs_used / scale, "fsTotalSize": fs_total / scale,
    }

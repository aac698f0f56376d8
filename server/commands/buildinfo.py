"""buildInfo: the server's version and build, in mongod's shape (tools identify servers by it)."""

from __future__ import annotations

import platform
import sys
from typing import Any

from protocol import MAX_BSON_SIZE
from storage import native

from ..context import CommandRequest
from ..version import BUCKETD_VERSION, GIT_VERSION, MONGODB_VERSION, VERSION_ARRAY


def build_info(storage_engine: str = "sqlite") -> dict[str, Any]:
    """`storageEngines` names the engine this server runs on (`--storageEngine`)."""
    arch = platform.machine() or "unknown"
    return {
        "version": MONGODB_VERSION,
        "gitVersion": GIT_VERSION,
        "modules": [],
        "allocator": "system",
        "javascriptEngine": "none",
        "sysInfo": "deprecated",
        "versionArray": list(VERSION_ARRAY),
        "openssl": {"running": "disabled", "compiled": "disabled"},
        "buildEnvironment": {
            "distmod": "bucketd",
            "distarch": arch,
            "cc": f"CPython {platform.python_version()}",
            "ccflags": "",
            "cxx": "",
            "cxxflags": "",
            "linkflags": "",
            "target_arch": arch,
            "target_os": sys.platform if sys.platform != "linux" else "linux",
            "cppdefines": "",
        },
        "bits": 64,
        "debug": False,
        "maxBsonObjectSize": MAX_BSON_SIZE,
        "storageEngines": [storage_engine],
        "bucketd": {"version": BUCKETD_VERSION, "nativeCore": native.describe()},
    }


async def handle(req: CommandRequest) -> dict[str, Any]:
    return build_info(req.server.config.storage_engine)

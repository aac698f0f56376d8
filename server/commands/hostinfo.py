"""hostInfo: the machine the server runs on."""

from __future__ import annotations

import os
import platform
import socket
import time
from typing import Any

from bson.datetime_ms import DatetimeMS

from ..context import CommandRequest


def _mem_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        return 0


async def handle(req: CommandRequest) -> dict[str, Any]:
    uname = platform.uname()
    mem = _mem_mb()
    return {
        "system": {
            "currentTime": DatetimeMS(int(time.time() * 1000)),
            "hostname": socket.gethostname(),
            "cpuAddrSize": 64,
            "memSizeMB": mem,
            "memLimitMB": mem,
            "numCores": os.cpu_count() or 1,
            "numPhysicalCores": os.cpu_count() or 1,
            "numCpuSockets": 1,
            "cpuArch": uname.machine,
            "numaEnabled": False,
            "numNumaNodes": 1,
        },
        "os": {"type": uname.system, "name": uname.system, "version": uname.release},
        "extra": {
            "versionString": f"{uname.system} version {uname.release} {uname.version}",
            "kernelVersion": uname.release,
            "pageSize": os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096,
            "pythonVersion": platform.python_version(),
        },
    }

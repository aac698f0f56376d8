"""The C allocator's settings for the server process (glibc's `mallopt`).

A query reads its buckets as a few megabytes of short-lived blobs and decoded columns,
then frees them. glibc's default returns the freed top of each thread's heap to the
kernel at once (and moves its thresholds as it goes), so after a large ingest every
query faulted those pages in again: measured on double-groupby, a fifth of the storage
thread's time went to page faults in `malloc`, and the same queries ran 15-20% slower
than on a freshly started server. Here freed memory is kept for reuse up to
`TRIM_THRESHOLD` a heap, and allocations below `MMAP_THRESHOLD` come from the heaps
rather than from a fresh mapping each time. Where the C library is not glibc, nothing
changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Final

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_allocator"]

# mallopt's parameter numbers (<malloc.h>)
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3

TRIM_THRESHOLD: Final = 64 << 20
MMAP_THRESHOLD: Final = 16 << 20  # a reply batch (16 MiB) still comes from the heap


def tune_allocator() -> dict[str, int]:
    """Applies the settings; what was set (empty where glibc's `mallopt` is absent or
    refuses)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return {}
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = {}
    for name, param, value in (("trimThreshold", _M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                               ("mmapThreshold", _M_MMAP_THRESHOLD, MMAP_THRESHOLD)):
        if mallopt(param, value) == 1:
            done[name] = value
    return done

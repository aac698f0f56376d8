"""Process memory figures for serverStatus and metrics (Linux /proc, with a fallback)."""

from __future__ import annotations

import os
import resource

__all__ = ["rss_bytes", "virtual_bytes", "peak_rss_bytes"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _statm() -> tuple[int, int] | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            size, resident, *_ = f.read().split()
        return int(size) * _PAGE, int(resident) * _PAGE
    except OSError:
        return None


def rss_bytes() -> int:
    s = _statm()
    return s[1] if s else peak_rss_bytes()


def virtual_bytes() -> int:
    s = _statm()
    return s[0] if s else 0


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

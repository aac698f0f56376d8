"""CRC-32C of OP_MSG messages (the optional trailing checksum)."""

from __future__ import annotations

import crc32c as _crc32c

__all__ = ["crc32c"]


def crc32c(data: bytes | memoryview) -> int:
    return _crc32c.crc32c(data)

"""Wire-protocol numbers: opcodes, OP_MSG flag bits, compressor ids, size limits."""

from __future__ import annotations

import enum
from typing import Final

__all__ = [
    "OpCode", "MsgFlag", "CompressorId", "HEADER_SIZE", "MAX_MESSAGE_SIZE", "MAX_BSON_SIZE",
    "MAX_BSON_INTERNAL_SIZE", "MAX_BSON_DEPTH", "MAX_WRITE_BATCH_SIZE", "COMPRESSOR_NAMES",
]


class OpCode(enum.IntEnum):
    OP_REPLY = 1
    OP_UPDATE = 2001
    OP_INSERT = 2002
    OP_QUERY = 2004
    OP_GET_MORE = 2005
    OP_DELETE = 2006
    OP_KILL_CURSORS = 2007
    OP_COMPRESSED = 2012
    OP_MSG = 2013


class MsgFlag(enum.IntFlag):
    CHECKSUM_PRESENT = 1 << 0
    MORE_TO_COME = 1 << 1
    EXHAUST_ALLOWED = 1 << 16


# Plain ints for the hot path (IntFlag arithmetic is slow).
CHECKSUM_PRESENT: Final = 1 << 0
MORE_TO_COME: Final = 1 << 1
EXHAUST_ALLOWED: Final = 1 << 16
# Bits 0-15 are "required": a receiver must reject a message with an unknown one set.
KNOWN_REQUIRED_FLAGS: Final = CHECKSUM_PRESENT | MORE_TO_COME
REQUIRED_FLAGS_MASK: Final = 0xFFFF


class CompressorId(enum.IntEnum):
    NOOP = 0
    SNAPPY = 1
    ZLIB = 2
    ZSTD = 3


COMPRESSOR_NAMES: Final[dict[str, CompressorId]] = {
    "noop": CompressorId.NOOP,
    "snappy": CompressorId.SNAPPY,
    "zlib": CompressorId.ZLIB,
    "zstd": CompressorId.ZSTD,
}

HEADER_SIZE: Final = 16
# 48,000,000: maxMessageSizeBytes reported by hello.
MAX_MESSAGE_SIZE: Final = 48_000_000
# 16 MiB: maxBsonObjectSize reported by hello (user documents).
MAX_BSON_SIZE: Final = 16 * 1024 * 1024
# Commands may exceed a user document by 16 KiB (MongoDB's BSONObjMaxInternalSize).
MAX_BSON_INTERNAL_SIZE: Final = MAX_BSON_SIZE + 16 * 1024
# mongod's maxBSONDepth default: objects nested below an incoming document's top level
MAX_BSON_DEPTH: Final = 200
# 100,000: maxWriteBatchSize reported by hello.
MAX_WRITE_BATCH_SIZE: Final = 100_000

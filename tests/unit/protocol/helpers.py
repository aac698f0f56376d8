"""Builders for raw wire messages used by the protocol tests (independent of protocol.wire)."""

from __future__ import annotations

import struct

import bson
import crc32c


def header(length: int, request_id: int, response_to: int, op_code: int) -> bytes:
    return struct.pack("<iiii", length, request_id, response_to, op_code)


def op_msg(body: dict, *, request_id: int = 7, flags: int = 0,
           sequences: dict[str, list[dict]] | None = None, checksum: bool = False) -> bytes:
    sections = b""
    for name, docs in (sequences or {}).items():
        payload = name.encode() + b"\x00" + b"".join(bson.encode(d) for d in docs)
        sections += b"\x01" + struct.pack("<i", 4 + len(payload)) + payload
    sections = b"\x00" + bson.encode(body) + sections
    if checksum:
        flags |= 1
    length = 16 + 4 + len(sections) + (4 if checksum else 0)
    msg = header(length, request_id, 0, 2013) + struct.pack("<I", flags) + sections
    if checksum:
        msg += struct.pack("<I", crc32c.crc32c(msg))
    return msg

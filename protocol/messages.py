"""The messages bucketd reads and writes, as frozen value objects.

A request is an `OpMsg` or an `OpQuery`; both carry the command document already
decoded (`body`) and the id of the compressor it arrived with, so the reply can be
compressed the same way. An OP_MSG's kind-1 document sequences are not in its `body`:
they are kept as `RawDocuments` in `sequences` (framed, not decoded), and
`wire.merge_sequences` makes the whole command document when one is wanted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from storage.vocabulary.raw_documents import RawDocuments

__all__ = ["MsgHeader", "OpMsg", "OpQuery", "Request"]


@dataclass(frozen=True, slots=True)
class MsgHeader:
    message_length: int
    request_id: int
    response_to: int
    op_code: int


@dataclass(frozen=True, slots=True)
class OpMsg:
    request_id: int
    flag_bits: int
    body: dict[str, Any]
    compressor_id: int | None = None  # None: arrived uncompressed
    wire_length: int = 0  # bytes on the wire (compressed size when compressed)
    length: int = 0  # bytes of the (decompressed) message
    # the kind-1 sections by identifier, in message order (none of them is in `body`)
    sequences: Mapping[str, RawDocuments] = field(default_factory=dict)

    @property
    def more_to_come(self) -> bool:
        return bool(self.flag_bits & 0b10)

    @property
    def exhaust_allowed(self) -> bool:
        return bool(self.flag_bits & (1 << 16))


@dataclass(frozen=True, slots=True)
class OpQuery:
    """Legacy OP_QUERY; bucketd accepts it only on ``<db>.$cmd`` for the handshake."""

    request_id: int
    flags: int
    full_collection_name: str
    number_to_skip: int
    number_to_return: int
    query: dict[str, Any]
    compressor_id: int | None = None
    wire_length: int = 0
    length: int = 0

    @property
    def database(self) -> str:
        return self.full_collection_name.partition(".")[0]


Request = OpMsg | OpQuery

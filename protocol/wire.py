"""Parse and build wire messages: OP_MSG, OP_QUERY/OP_REPLY and OP_COMPRESSED.

Pure functions over bytes; `MessageDecoder` in `framing.py` cuts frames off a byte
stream and calls `parse_message` on each. An OP_MSG's body is decoded; its kind-1
document sequences are framed (every document's size and trailing NUL checked) but left
as `RawDocuments`, which `merge_sequences` decodes into the body for the commands that
want dicts.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Collection, Mapping
from typing import Any

import bson
from bson.codec_options import CodecOptions

from storage.vocabulary.bson_decode import decode_document
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.nesting import nesting_exceeds, too_deep_to_decode
from storage.vocabulary.raw_documents import MalformedDocument, RawDocuments

from . import compression
from .checksum import crc32c
from .constants import (
    CHECKSUM_PRESENT,
    HEADER_SIZE,
    KNOWN_REQUIRED_FLAGS,
    MAX_BSON_DEPTH,
    MAX_BSON_INTERNAL_SIZE,
    MAX_MESSAGE_SIZE,
    REQUIRED_FLAGS_MASK,
    CompressorId,
    OpCode,
)
from .errors import ProtocolError
from .messages import MsgHeader, OpMsg, OpQuery, Request

__all__ = [
    "parse_header", "parse_message", "encode_op_msg", "encode_op_reply", "encode_op_query",
    "compress_message", "merge_sequences",
]

_HEADER = struct.Struct("<iiii")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_COMPRESSED_PREFIX = struct.Struct("<iiB")
_REPLY_PREFIX = struct.Struct("<iqii")
_QUERY_INTS = struct.Struct("<ii")

_DEFAULT_CODEC: CodecOptions[dict[str, Any]] = CodecOptions(document_class=dict)


def parse_header(frame: bytes | memoryview) -> MsgHeader:
    return MsgHeader(*_HEADER.unpack_from(frame, 0))


def _fatal(code: int, msg: str, request_id: int = 0) -> ProtocolError:
    return ProtocolError(code, msg, fatal=True, request_id=request_id)


def _invalid_size(size: int, request_id: int) -> ProtocolError:
    return ProtocolError(ErrorCode.InvalidBSON,
                         f"BSONObj size: {size} (0x{size & 0xFFFFFFFF:X}) is invalid. Size must "
                         f"be between 0 and {MAX_BSON_INTERNAL_SIZE}(16MB)",
                         fatal=False, request_id=request_id)


def _too_deep(max_depth: int, request_id: int) -> ProtocolError:
    return ProtocolError(ErrorCode.Overflow,
                         f"BSONObj exceeded maximum nested object depth: {max_depth}",
                         fatal=False, request_id=request_id)


def _checked_depth(doc: dict[str, Any], max_depth: int, request_id: int) -> dict[str, Any]:
    """`doc`, or Overflow when it nests objects deeper than `maxBSONDepth` below itself
    (mongod's validation of every incoming document; empty objects count)."""
    if nesting_exceeds(doc, max_depth + 1):
        raise _too_deep(max_depth, request_id)
    return doc


def _decode_doc(buf: memoryview, pos: int, end: int, codec: CodecOptions[Any],
                request_id: int, max_depth: int) -> tuple[dict[str, Any], int]:
    """Decode one BSON document at `pos`; the frame bounds are checked before decoding,
    the nesting depth after."""
    if end - pos < 5:
        raise _fatal(ErrorCode.ProtocolError, "BSON document runs past the end of the message",
                     request_id)
    size = _I32.unpack_from(buf, pos)[0]
    if size < 5 or size > MAX_BSON_INTERNAL_SIZE:
        raise _invalid_size(size, request_id)
    if pos + size > end:
        raise _fatal(ErrorCode.ProtocolError, "BSON document runs past the end of the message",
                     request_id)
    try:
        doc = decode_document(buf[pos:pos + size], codec)
    except Exception as exc:
        if too_deep_to_decode(exc):  # nested far deeper than the limit: decoding gave up
            raise _too_deep(max_depth, request_id) from None
        raise ProtocolError(ErrorCode.InvalidBSON, f"invalid BSON in message: {exc}",
                            fatal=False, request_id=request_id) from None
    return _checked_depth(doc, max_depth, request_id), pos + size


def _frame_sequence(frame: bytes, start: int, end: int, codec: CodecOptions[Any],
                    request_id: int) -> RawDocuments:
    """The documents of a kind-1 section, framed but not decoded: each one's int32 size
    and trailing NUL checked (the errors `_decode_doc` gives) and its start recorded."""
    buffer = frame[start:end]
    n = len(buffer)
    offsets: list[int] = []
    append = offsets.append
    unpack = _I32.unpack_from
    pos = 0
    try:  # the common case, one short loop: stops at the first document that is not sound
        while pos < n:
            append(pos)
            (size,) = unpack(buffer, pos)
            pos += size
            if not 4 < size <= MAX_BSON_INTERNAL_SIZE or pos > n or buffer[pos - 1]:
                break
        else:
            return RawDocuments(buffer, array("q", offsets))
    except struct.error:
        pass
    # say what is wrong with the last one, in the order `_decode_doc` checks
    pos = offsets.pop()
    if n - pos < 5:
        raise _fatal(ErrorCode.ProtocolError, "BSON document runs past the end of the message",
                     request_id)
    size = unpack(buffer, pos)[0]
    if size < 5 or size > MAX_BSON_INTERNAL_SIZE:
        raise _invalid_size(size, request_id)
    if pos + size > n:
        raise _fatal(ErrorCode.ProtocolError, "BSON document runs past the end of the message",
                     request_id)
    reason = "bad eoo"  # no trailing NUL: said in the decoder's own words
    try:
        bson.decode(buffer[pos:pos + size], codec)
    except Exception as exc:
        reason = str(exc)
    raise ProtocolError(ErrorCode.InvalidBSON, MalformedDocument(len(offsets), reason).message,
                        fatal=False, request_id=request_id)


def merge_sequences(body: dict[str, Any], sequences: Mapping[str, RawDocuments],
                    codec: CodecOptions[Any] = _DEFAULT_CODEC, *, keep: Collection[str] = (),
                    request_id: int = 0, max_depth: int = MAX_BSON_DEPTH) -> dict[str, Any]:
    """The command document: `body` with each document sequence as a field, decoded into
    a list, or, for the names in `keep`, as the `RawDocuments` itself. A document that is
    not valid BSON raises a non-fatal InvalidBSON `ProtocolError` (the frame was sound)."""
    if not sequences:
        return body
    merged = dict(body)
    for name, raw in sequences.items():
        if name in keep:
            merged[name] = raw
            continue
        try:
            docs = raw.decode(codec)
        except MalformedDocument as exc:
            if too_deep_to_decode(exc):
                raise _too_deep(max_depth, request_id) from None
            raise ProtocolError(ErrorCode.InvalidBSON, exc.message, fatal=False,
                                request_id=request_id) from None
        for doc in docs:
            _checked_depth(doc, max_depth, request_id)
        merged[name] = docs
    return merged


def parse_message(frame: bytes, codec: CodecOptions[Any] = _DEFAULT_CODEC,
                  max_depth: int = MAX_BSON_DEPTH) -> Request:
    """Parse one complete frame (header included) into a request message."""
    length, request_id, _response_to, op_code = _HEADER.unpack_from(frame, 0)
    wire_length = length
    compressor_id: int | None = None
    if op_code == OpCode.OP_COMPRESSED:
        if length < HEADER_SIZE + _COMPRESSED_PREFIX.size:
            raise _fatal(ErrorCode.ProtocolError, "OP_COMPRESSED message too short", request_id)
        op_code, size, compressor_id = _COMPRESSED_PREFIX.unpack_from(frame, HEADER_SIZE)
        if size < 0 or size > MAX_MESSAGE_SIZE - HEADER_SIZE:
            raise _fatal(ErrorCode.ProtocolError, f"invalid uncompressed size {size}", request_id)
        if op_code == OpCode.OP_COMPRESSED:
            raise _fatal(ErrorCode.ProtocolError, "nested OP_COMPRESSED", request_id)
        payload = compression.decompress(
            compressor_id, memoryview(frame)[HEADER_SIZE + _COMPRESSED_PREFIX.size:], size)
        frame = _HEADER.pack(size + HEADER_SIZE, request_id, _response_to, op_code) + payload
    if op_code == OpCode.OP_MSG:
        return _parse_op_msg(frame, request_id, compressor_id, wire_length, codec, max_depth)
    if op_code == OpCode.OP_QUERY:
        return _parse_op_query(frame, request_id, compressor_id, wire_length, codec,
                               max_depth)
    raise _fatal(ErrorCode.ProtocolError, f"unsupported opCode {op_code}", request_id)


def _parse_op_msg(frame: bytes, request_id: int, compressor_id: int | None, wire_length: int,
                  codec: CodecOptions[Any], max_depth: int) -> OpMsg:
    buf = memoryview(frame)
    end = len(frame)
    if end < HEADER_SIZE + 4:
        raise _fatal(ErrorCode.ProtocolError, "OP_MSG too short", request_id)
    flags = _U32.unpack_from(buf, HEADER_SIZE)[0]
    if flags & ~KNOWN_REQUIRED_FLAGS & REQUIRED_FLAGS_MASK:
        raise _fatal(ErrorCode.IllegalOpMsgFlag,
                     f"Message contains illegal flags value: Ob{flags:032b}", request_id)
    if flags & CHECKSUM_PRESENT:
        if end < HEADER_SIZE + 8:
            raise _fatal(ErrorCode.ProtocolError, "OP_MSG too short for its checksum", request_id)
        end -= 4
        if _U32.unpack_from(buf, end)[0] != crc32c(buf[:end]):
            raise _fatal(ErrorCode.ChecksumMismatch, "OP_MSG checksum does not match contents",
                         request_id)
    pos = HEADER_SIZE + 4
    body: dict[str, Any] | None = None
    sequences: dict[str, RawDocuments] = {}
    while pos < end:
        kind = buf[pos]
        pos += 1
        if kind == 0:
            if body is not None:
                raise ProtocolError(40430, "Multiple body sections in message",
                                    fatal=False, request_id=request_id)
            body, pos = _decode_doc(buf, pos, end, codec, request_id, max_depth)
        elif kind == 1:
            if len(sequences) >= 2:
                raise _fatal(ErrorCode.TooManyDocumentSequences,
                             "Too many document sequences in OP_MSG", request_id)
            if end - pos < 4:
                raise _fatal(ErrorCode.ProtocolError, "document sequence runs past the message",
                             request_id)
            size = _I32.unpack_from(buf, pos)[0]
            seq_end = pos + size
            if size < 5 or seq_end > end:
                raise _fatal(ErrorCode.ProtocolError, "document sequence runs past the message",
                             request_id)
            nul = frame.find(b"\x00", pos + 4, seq_end)
            if nul < 0:
                raise _fatal(ErrorCode.ProtocolError, "document sequence identifier not terminated",
                             request_id)
            try:
                name = frame[pos + 4:nul].decode()
            except UnicodeDecodeError:
                raise _fatal(ErrorCode.ProtocolError, "document sequence identifier is not UTF-8",
                             request_id) from None
            if name in sequences:
                raise ProtocolError(40431, f"Duplicate document sequence: {name}",
                                    fatal=False, request_id=request_id)
            sequences[name] = _frame_sequence(frame, nul + 1, seq_end, codec, request_id)
            pos = seq_end
        else:
            raise ProtocolError(40432, f"Unknown section kind {kind}",
                                fatal=False, request_id=request_id)
    if body is None:
        raise ProtocolError(40587, "OP_MSG messages must have a body",
                            fatal=False, request_id=request_id)
    for name in sequences:
        if name in body:
            raise ProtocolError(40433,
                                f"Duplicate field between body and document sequence {name}",
                                fatal=False, request_id=request_id)
    return OpMsg(request_id, flags, body, compressor_id, wire_length, len(frame), sequences)


def _parse_op_query(frame: bytes, request_id: int, compressor_id: int | None,
                    wire_length: int, codec: CodecOptions[Any], max_depth: int) -> OpQuery:
    buf = memoryview(frame)
    end = len(frame)
    pos = HEADER_SIZE
    if end < pos + 4:
        raise _fatal(ErrorCode.ProtocolError, "OP_QUERY too short", request_id)
    flags = _I32.unpack_from(buf, pos)[0]
    pos += 4
    nul = frame.find(b"\x00", pos, end)
    if nul < 0:
        raise _fatal(ErrorCode.ProtocolError, "OP_QUERY collection name not terminated", request_id)
    try:
        ns = frame[pos:nul].decode()
    except UnicodeDecodeError:
        raise _fatal(ErrorCode.ProtocolError, "OP_QUERY namespace is not UTF-8", request_id) from None
    pos = nul + 1
    if end < pos + 8:
        raise _fatal(ErrorCode.ProtocolError, "OP_QUERY too short", request_id)
    skip, n_return = _QUERY_INTS.unpack_from(buf, pos)
    pos += 8
    query, pos = _decode_doc(buf, pos, end, codec, request_id, max_depth)
    return OpQuery(request_id, flags, ns, skip, n_return, query, compressor_id, wire_length,
                   len(frame))


def encode_op_msg(body: Any, request_id: int, response_to: int, flags: int = 0,
                  codec: CodecOptions[Any] = _DEFAULT_CODEC) -> bytes:
    """An OP_MSG with one body section; a checksum is appended when its flag is set."""
    doc = body if isinstance(body, bytes) else bson.encode(body, codec_options=codec)
    length = HEADER_SIZE + 4 + 1 + len(doc)
    if flags & CHECKSUM_PRESENT:
        length += 4
    msg = b"".join((_HEADER.pack(length, request_id, response_to, OpCode.OP_MSG),
                    _U32.pack(flags), b"\x00", doc))
    if flags & CHECKSUM_PRESENT:
        msg += _U32.pack(crc32c(msg))
    return msg


def encode_op_reply(doc: Any, request_id: int, response_to: int,
                    codec: CodecOptions[Any] = _DEFAULT_CODEC) -> bytes:
    """An OP_REPLY carrying one document (the answer to an OP_QUERY command)."""
    data = doc if isinstance(doc, bytes) else bson.encode(doc, codec_options=codec)
    length = HEADER_SIZE + _REPLY_PREFIX.size + len(data)
    return b"".join((_HEADER.pack(length, request_id, response_to, OpCode.OP_REPLY),
                     _REPLY_PREFIX.pack(0, 0, 0, 1), data))


def encode_op_query(doc: Any, request_id: int, ns: str = "admin.$cmd", flags: int = 0) -> bytes:
    """An OP_QUERY command (used by tests and benchmarks to speak the legacy handshake)."""
    data = bson.encode(doc)
    body = _I32.pack(flags) + ns.encode() + b"\x00" + _QUERY_INTS.pack(0, -1) + data
    return _HEADER.pack(HEADER_SIZE + len(body), request_id, 0, OpCode.OP_QUERY) + body


def compress_message(message: bytes, compressor: CompressorId) -> bytes:
    """Wrap a complete message in OP_COMPRESSED, keeping its ids."""
    length, request_id, response_to, op_code = _HEADER.unpack_from(message, 0)
    payload = compression.compress(compressor, memoryview(message)[HEADER_SIZE:])
    prefix = _COMPRESSED_PREFIX.pack(op_code, length - HEADER_SIZE, compressor)
    total = HEADER_SIZE + len(prefix) + len(payload)
    return _HEADER.pack(total, request_id, response_to, OpCode.OP_COMPRESSED) + prefix + payload

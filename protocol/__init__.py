"""bucketd's wire protocol, sans-IO: bytes in, messages out, and back.

No sockets, no asyncio, no storage: the server owns all I/O and calls into here.
"""

from .constants import (
    COMPRESSOR_NAMES,
    HEADER_SIZE,
    MAX_BSON_SIZE,
    MAX_MESSAGE_SIZE,
    MAX_WRITE_BATCH_SIZE,
    CompressorId,
    MsgFlag,
    OpCode,
)
from .errors import ProtocolError
from .framing import MessageDecoder
from .messages import MsgHeader, OpMsg, OpQuery, Request
from .wire import (
    compress_message,
    encode_op_msg,
    encode_op_query,
    encode_op_reply,
    merge_sequences,
    parse_message,
)

__all__ = [
    "COMPRESSOR_NAMES", "HEADER_SIZE", "MAX_BSON_SIZE", "MAX_MESSAGE_SIZE", "MAX_WRITE_BATCH_SIZE",
    "CompressorId", "MsgFlag", "OpCode", "ProtocolError", "MessageDecoder", "MsgHeader", "OpMsg",
    "OpQuery", "Request", "compress_message", "encode_op_msg", "encode_op_query",
    "encode_op_reply", "merge_sequences", "parse_message",
]

"""Cut a byte stream into wire messages, sans-IO (the h11 `receive_data`/`next_event` shape).

    decoder = MessageDecoder()
    decoder.feed(data)
    while (msg := decoder.next_message()) is not None:
        ...

`next_message` returns a parsed request, `None` when it needs more bytes, or raises
`ProtocolError`. After a fatal error the decoder refuses further use: the stream can
no longer be trusted and the connection must be closed.
"""

from __future__ import annotations

from typing import Any

from bson.codec_options import CodecOptions

from storage.vocabulary.error_codes import ErrorCode

from .constants import HEADER_SIZE, MAX_BSON_DEPTH, MAX_MESSAGE_SIZE
from .errors import ProtocolError
from .messages import Request
from .wire import _DEFAULT_CODEC, parse_message

__all__ = ["MessageDecoder"]


class MessageDecoder:
    def __init__(self, *, max_message_size: int = MAX_MESSAGE_SIZE,
                 codec_options: CodecOptions[Any] = _DEFAULT_CODEC,
                 max_depth: int = MAX_BSON_DEPTH) -> None:
        self._buf = bytearray()
        self._max_depth = max_depth
        self._max = max_message_size
        self._codec = codec_options
        self._broken = False

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def pending_length(self) -> int | None:
        """The announced length of the frame being received, once its header has arrived."""
        if len(self._buf) < 4:
            return None
        return int.from_bytes(self._buf[:4], "little", signed=True)

    def next_message(self) -> Request | None:
        if self._broken:
            raise ProtocolError(ErrorCode.ProtocolError, "stream already failed")
        buf = self._buf
        if len(buf) < 4:
            return None
        length = int.from_bytes(buf[:4], "little", signed=True)
        if length < HEADER_SIZE or length > self._max:
            self._broken = True
            raise ProtocolError(ErrorCode.ProtocolError,
                                f"message length {length} is outside [{HEADER_SIZE}, {self._max}]")
        if len(buf) < length:
            return None
        frame = bytes(buf[:length])
        del buf[:length]
        try:
            return parse_message(frame, self._codec, self._max_depth)
        except ProtocolError as exc:
            if exc.fatal:
                self._broken = True
            raise

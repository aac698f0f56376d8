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

# Chunks below this size are copied into a shared buffer of up to _COALESCED bytes, so a
# client trickling a message byte by byte costs its bytes, not an object per read.
_SMALL_CHUNK = 4096
_COALESCED = 64 * 1024


class MessageDecoder:
    """Keeps what has arrived as the chunks it arrived in, joining them only once a
    whole frame is there: a large message received over many reads is never grown by
    `realloc`, whose moves leave the old copies resident (two half-received 48 MB
    messages cost twice their bytes in RSS that way)."""

    def __init__(self, *, max_message_size: int = MAX_MESSAGE_SIZE,
                 codec_options: CodecOptions[Any] = _DEFAULT_CODEC,
                 max_depth: int = MAX_BSON_DEPTH) -> None:
        self._head = b""  # contiguous bytes, read from _pos on
        self._pos = 0
        self._tail: list[bytes | bytearray] = []  # chunks received after _head
        self._size = 0  # bytes not yet cut into frames
        self._max_depth = max_depth
        self._max = max_message_size
        self._codec = codec_options
        self._broken = False

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self._size += len(data)
        tail = self._tail
        if len(data) >= _SMALL_CHUNK:
            tail.append(bytes(data))
        elif tail and type(last := tail[-1]) is bytearray and len(last) < _COALESCED:
            last += data  # small chunks share one buffer: no object per trickled byte
        else:
            tail.append(bytearray(data))

    @property
    def buffered(self) -> int:
        return self._size

    def _contiguous(self, n: int) -> bytes:
        """`_head`, holding at least `n` bytes from `_pos` (the caller knows they arrived)."""
        if len(self._head) - self._pos < n:
            rest = len(self._head) - self._pos
            parts: list[bytes | bytearray | memoryview] = (
                [memoryview(self._head)[self._pos:], *self._tail] if rest else [*self._tail])
            self._head = b"".join(parts)  # one bytes part alone is taken as it is
            self._pos = 0
            self._tail = []
        return self._head

    def pending_length(self) -> int | None:
        """The announced length of the frame being received, once its header has arrived."""
        if self._size < 4:
            return None
        head = self._contiguous(4)
        return int.from_bytes(head[self._pos:self._pos + 4], "little", signed=True)

    def next_message(self) -> Request | None:
        if self._broken:
            raise ProtocolError(ErrorCode.ProtocolError, "stream already failed")
        length = self.pending_length()
        if length is None:
            return None
        if length < HEADER_SIZE or length > self._max:
            self._broken = True
            raise ProtocolError(ErrorCode.ProtocolError,
                                f"message length {length} is outside [{HEADER_SIZE}, {self._max}]")
        if self._size < length:
            return None
        head, pos = self._contiguous(length), self._pos
        frame = head if pos == 0 and len(head) == length else head[pos:pos + length]
        self._size -= length
        if pos + length == len(head):
            self._head, self._pos = b"", 0
        else:
            self._pos = pos + length
        try:
            return parse_message(frame, self._codec, self._max_depth)
        except ProtocolError as exc:
            if exc.fatal:
                self._broken = True
            raise

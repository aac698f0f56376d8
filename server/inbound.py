"""A connection's incoming bytes, read within the server's limits on partial messages.

Between messages a connection may stay silent as long as it likes (drivers keep pooled
connections idle). Once part of a message has arrived the rest must follow:

- in time: the message's deadline starts `incomingMessageTimeoutSecs` after its first
  bytes; every chunk received moves it later by the chunk's length divided by
  `incomingMessageMinBytesPerSec`, but never further than the timeout from now. A
  client that stops sending mid-message is dropped after the timeout; one that trickles
  slower than the minimum rate falls behind and is dropped (at a quarter of the rate,
  after about 4/3 of the timeout); one that keeps up with the rate is never dropped,
  however large its message. Defaults, 60 s and 4 KiB/s: a network that stalls for a
  minute mid-message, or moves less than 32 kbit/s, is not one a driver works over
  either, while any message of a few hundred KB gets a minute whatever the link.
- within memory: before reading the rest of a message whose header has arrived, the
  connection reserves its announced length from the server's `MessageMemory`, waiting
  (not reading) while the total would pass the cap; the reservation is given back once
  the message has been handled. Time spent waiting for memory is not held against the
  client: its message's clock starts again when it may read on.

A connection that breaks either limit raises `IncomingLimitExceeded`; the connection
logs it and closes, as for a malformed frame.
"""

from __future__ import annotations

import asyncio

from protocol import MessageDecoder
from protocol.constants import HEADER_SIZE, MAX_MESSAGE_SIZE
from storage.vocabulary.error_codes import ErrorCode

from .context import ServerState

__all__ = ["Inbound", "IncomingLimitExceeded", "READ_SIZE"]

READ_SIZE = 256 * 1024


class IncomingLimitExceeded(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Inbound:
    """Feeds one connection's decoder from its reader."""

    def __init__(self, server: ServerState, reader: asyncio.StreamReader,
                 decoder: MessageDecoder) -> None:
        self.server = server
        self.reader = reader
        self.decoder = decoder
        self._loop = asyncio.get_running_loop()
        self._deadline: float | None = None  # set while a message is partly received
        self._reserved = 0  # bytes reserved for the message being received

    def at_eof(self) -> bool:
        return self.reader.at_eof()

    async def read(self) -> bytes:
        """Read the next bytes into the decoder and return them (b"" at end of stream)."""
        if self._deadline is None:
            data = await self.reader.read(READ_SIZE)
        else:
            params = self.server.params
            delay = self._deadline - self._loop.time()
            try:
                if delay <= 0:
                    raise TimeoutError
                async with asyncio.timeout(delay):
                    data = await self.reader.read(READ_SIZE)
            except TimeoutError:
                raise IncomingLimitExceeded(
                    ErrorCode.NetworkTimeout,
                    f"the rest of a {self.decoder.pending_length() or 0}-byte message did not "
                    f"arrive in time ({self.decoder.buffered} bytes received; "
                    f"incomingMessageTimeoutSecs {params.get('incomingMessageTimeoutSecs')}, "
                    f"incomingMessageMinBytesPerSec "
                    f"{params.get('incomingMessageMinBytesPerSec')})") from None
            if data:
                now = self._loop.time()
                self._deadline = min(
                    now + params.get("incomingMessageTimeoutSecs"),
                    self._deadline + len(data) / params.get("incomingMessageMinBytesPerSec"))
        if data:
            self.server.bytes_in += len(data)
            self.decoder.feed(data)
        return data

    async def read_unlimited(self) -> bytes:
        """`read` without the partial message's deadline: for watching the connection
        while a command waits on purpose (an awaitable hello)."""
        data = await self.reader.read(READ_SIZE)
        if data:
            self.server.bytes_in += len(data)
            self.decoder.feed(data)
        return data

    async def admit(self) -> None:
        """Once the complete messages buffered have been handled: start the clock of the
        partial message left in the buffer, and reserve memory for the rest of it."""
        decoder = self.decoder
        buffered = decoder.buffered
        if not buffered:
            self._deadline = None
            return
        if self._deadline is None:
            self._deadline = self._loop.time() + self.server.params.get(
                "incomingMessageTimeoutSecs")
        length = decoder.pending_length()
        if (self._reserved or length is None or not HEADER_SIZE <= length <= MAX_MESSAGE_SIZE
                or length <= buffered):
            return  # reserved already, header incomplete, or a bad length the decoder refuses
        memory = self.server.message_memory
        waits = memory.waits
        wait = self.server.params.get("incomingMessageMemoryWaitSecs")
        if not await memory.acquire(length, wait):
            raise IncomingLimitExceeded(
                ErrorCode.ExceededMemoryLimit,
                f"no memory for a {length}-byte message within {wait} s: incoming messages "
                f"hold {memory.in_use} of incomingMessageMemoryLimitBytes {memory.limit}")
        self._reserved = length
        if memory.waits != waits:  # it waited: the client was not the slow one
            self._deadline = self._loop.time() + self.server.params.get(
                "incomingMessageTimeoutSecs")

    def message_done(self) -> None:
        """A message has been handled: its memory goes back, and whatever follows it in
        the buffer is a new message with its own clock."""
        self.release()
        self._deadline = None

    def release(self) -> None:
        if self._reserved:
            self.server.message_memory.release(self._reserved)
            self._reserved = 0

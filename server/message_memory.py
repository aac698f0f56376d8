"""The memory all connections together may hold in incoming messages still arriving.

A connection that has read the header of a message that is not complete yet asks for
the message's announced length (`acquire`) before it reads on, and gives it back once
the message has been handled (`release`). When the sum would pass the cap (the
`incomingMessageMemoryLimitBytes` parameter) the connection stops reading — TCP pushes
back on its client — until enough is given back; a request that fits is granted at
once even when larger ones wait (first fit), so small commands are served while big
uploads queue. A wait is bounded (`incomingMessageMemoryWaitSecs`); the connection is
then closed. A message that arrives whole in one read never asks: it is already in
memory, and a connection holds at most one read's worth outside this accounting.

The automatic cap (parameter 0) is a quarter of the memory available to the process
(the cgroup's limit when there is one), at most 1 GiB and at least two messages of the
largest size: a message costs two to three times its length while it is cut out of the
stream and decoded, so a quarter keeps the worst case of in-flight messages under three
quarters of memory; 1 GiB is about twenty maximum-size messages arriving at once, more
than the single storage thread can take in; two keep two bulk loads moving on a small
machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import Final

from protocol.constants import MAX_MESSAGE_SIZE

__all__ = ["MessageMemory", "automatic_limit"]

_GIB: Final = 1 << 30


def _available_memory() -> int:
    """Physical memory, or the cgroup's (v2, then v1) limit when lower; 0 if unknown."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with contextlib.suppress(OSError, ValueError):
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
            if text.isdigit():
                limit = int(text)
                if 0 < limit < (total or limit + 1):
                    total = limit
            break
    return total


def automatic_limit() -> int:
    available = _available_memory()
    quarter = available // 4 if available else _GIB
    return max(2 * MAX_MESSAGE_SIZE, min(_GIB, quarter))


class MessageMemory:
    """The server-wide account of bytes reserved for incoming messages."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self._limit = limit  # the parameter's value; 0 means automatic
        self._automatic = automatic_limit()
        self.in_use = 0
        self.waits = 0  # acquisitions that had to wait
        self.timeouts = 0  # waits that ran out
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def limit(self) -> int:
        """The cap in force; never below one message of the largest size, so every
        message can be received once the others are done."""
        value = self._limit()
        return max(value, MAX_MESSAGE_SIZE) if value > 0 else self._automatic

    @property
    def waiting(self) -> int:
        return sum(1 for _, fut in self._waiters if not fut.done())

    def status(self) -> dict[str, int]:
        """For serverStatus: the cap, what is reserved, and the waits."""
        return {"limitBytes": self.limit, "inUseBytes": self.in_use,
                "waiting": self.waiting, "waits": self.waits, "waitTimeouts": self.timeouts}

    def _fits(self, n: int) -> bool:
        return self.in_use + n <= self.limit

    async def acquire(self, n: int, timeout: float) -> bool:
        """Reserve `n` bytes, waiting up to `timeout` seconds; False if they never fit."""
        if self._fits(n):
            self.in_use += n
            return True
        self.waits += 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (n, fut)
        self._waiters.append(entry)
        granted = False
        try:
            async with asyncio.timeout(timeout):
                await fut
            granted = True
            return True
        except TimeoutError:
            self.timeouts += 1
            return False
        finally:
            if not granted:
                if fut.done() and not fut.cancelled():
                    self.release(n)  # granted as we gave up: hand it on
                else:
                    fut.cancel()
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(entry)

    def release(self, n: int) -> None:
        self.in_use -= n
        self._grant()

    def _grant(self) -> None:
        still: list[tuple[int, asyncio.Future[None]]] = []
        for n, fut in self._waiters:
            if fut.done():
                continue
            if self._fits(n):
                self.in_use += n
                fut.set_result(None)
            else:
                still.append((n, fut))
        self._waiters = still

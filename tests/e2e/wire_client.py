"""A tiny raw-socket client for tests that must send bytes no driver would send."""

from __future__ import annotations

import socket
import struct

import bson


class RawConnection:
    def __init__(self, port: int, timeout: float = 10.0, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_message(self) -> bytes | None:
        """One whole reply, or None when the server closed the connection."""
        head = self._recv_exact(16)
        if head is None:
            return None
        length = struct.unpack_from("<i", head)[0]
        rest = self._recv_exact(length - 16)
        return None if rest is None else head + rest

    def recv_reply_doc(self) -> dict | None:
        msg = self.recv_message()
        if msg is None:
            return None
        op = struct.unpack_from("<i", msg, 12)[0]
        if op == 2013:
            return bson.decode(msg[21:])
        if op == 1:
            return bson.decode(msg[36:])
        raise AssertionError(f"unexpected reply opCode {op}")

    def is_closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True

    def _recv_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionResetError, BrokenPipeError):
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()

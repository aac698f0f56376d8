"""A tiny raw-socket client for tests that must send bytes no driver would send."""

from __future__ import annotations

import socket
import struct
from typing import Any

import bson
from bson import Binary

from .scram_client import ScramClient


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

    def command(self, body: dict[str, Any], db: str = "admin") -> dict[str, Any]:
        """Run one command as an OP_MSG; its reply (the connection must stay open)."""
        doc = bson.encode({**body, "$db": db})
        self.send(struct.pack("<iiiiI", 21 + len(doc), 1, 0, 2013, 0) + b"\x00" + doc)
        reply = self.recv_reply_doc()
        assert reply is not None, "the server closed the connection"
        return reply

    def login(self, user: str, password: str, db: str = "admin") -> None:
        """Authenticate with SCRAM-SHA-256 (the tests' own client side)."""
        cl = ScramClient(user, password)
        first = self.command({"saslStart": 1, "mechanism": "SCRAM-SHA-256",
                              "payload": Binary(cl.first()),
                              "options": {"skipEmptyExchange": True}}, db)
        assert first.get("ok") == 1.0, first
        final = self.command({"saslContinue": 1, "conversationId": first["conversationId"],
                              "payload": Binary(cl.final(bytes(first["payload"])))}, db)
        assert final.get("ok") == 1.0 and final.get("done"), final
        assert bytes(final["payload"]) == cl.expected

    def close(self) -> None:
        self.sock.close()


def raw_connection(server: Any, timeout: float = 10.0) -> RawConnection:
    """A raw connection to the tests' server, logged in when it requires it (the
    compose scenario's server runs with --auth; its URI carries the credentials)."""
    raw = RawConnection(server.port, timeout=timeout, host=server.host)
    credentials = getattr(server, "credentials", None)
    if credentials is not None:
        raw.login(*credentials)
    return raw

"""SCRAM-SHA-256's client side for the tests, written apart from the server's
(server/auth/scram.py), so that a test conversation checks the server against RFC 7677
rather than against itself."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

__all__ = ["ScramClient"]


class ScramClient:
    """SCRAM-SHA-256's client side, written apart from the server's, for the tests."""

    def __init__(self, user: str, password: str) -> None:
        self.user, self.password = user, password
        self.nonce = base64.b64encode(secrets.token_bytes(18)).decode()
        self.first_bare = f"n={user},r={self.nonce}"

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac("sha256", self.password.encode(),
                                     base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        stored = hashlib.sha256(client_key).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        sig = hmac.new(stored, auth, "sha256").digest()
        proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
        server_key = hmac.new(salted, b"Server Key", "sha256").digest()
        self.expected = b"v=" + base64.b64encode(hmac.new(server_key, auth, "sha256").digest())
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

"""SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802, RFC 7677), the server side, as mongod has them.

Sans-IO: credentials are derived from a password (`derive_credentials`, the slow PBKDF2
part, which callers run off the event loop), and a `ScramServer` answers the client's
two messages given the user's stored keys. Authentication itself costs two HMACs and a
hash: as in mongod, the salted password is computed only when credentials are made
(createUser, updateUser) and by the client.

MongoDB's particulars: SCRAM-SHA-1 hashes the password as md5("user:mongo:password")
(hex) before PBKDF2; SCRAM-SHA-256 SASLpreps it. Salts are the hash length minus four
bytes (16 and 28); the server nonce is 24 random bytes in base64 appended to the
client's; only the gs2 header 'n,,' / 'y,,' (no channel binding) is accepted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Final

from pymongo.saslprep import saslprep

__all__ = [
    "SCRAM_SHA_1", "SCRAM_SHA_256", "MECHANISMS", "ScramMechanism", "ScramCredentials",
    "ScramError", "ScramServer", "ClientFirst", "derive_credentials", "mongo_password_digest",
    "prepare_password", "parse_client_first",
]


class ScramError(Exception):
    """A malformed or wrong SCRAM message; `code` is the error mongod logs for it (the
    client only ever hears AuthenticationFailed)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_BAD_VALUE: Final = 2
_AUTHENTICATION_FAILED: Final = 18


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    hash_name: str  # hashlib's name
    digest_size: int
    iteration_parameter: str  # the server parameter with its iteration count

    @property
    def salt_length(self) -> int:
        return self.digest_size - 4

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


SCRAM_SHA_1: Final = ScramMechanism("SCRAM-SHA-1", "sha1", 20, "scramIterationCount")
SCRAM_SHA_256: Final = ScramMechanism("SCRAM-SHA-256", "sha256", 32,
                                      "scramSHA256IterationCount")
MECHANISMS: Final[dict[str, ScramMechanism]] = {m.name: m for m in (SCRAM_SHA_1, SCRAM_SHA_256)}


@dataclass(frozen=True, slots=True)
class ScramCredentials:
    """One mechanism's entry of a user's `credentials`, as admin.system.users stores it."""

    iteration_count: int
    salt: str  # base64
    stored_key: str  # base64
    server_key: str  # base64

    def document(self) -> dict[str, Any]:
        return {"iterationCount": self.iteration_count, "salt": self.salt,
                "storedKey": self.stored_key, "serverKey": self.server_key}

    @classmethod
    def from_document(cls, doc: Any) -> ScramCredentials | None:
        """None when `doc` is not a complete, well-typed credentials entry."""
        if not isinstance(doc, dict):
            return None
        count, salt = doc.get("iterationCount"), doc.get("salt")
        stored, server = doc.get("storedKey"), doc.get("serverKey")
        if isinstance(count, bool) or not isinstance(count, int):
            return None
        if not (isinstance(salt, str) and isinstance(stored, str) and isinstance(server, str)
                and salt and stored and server):
            return None
        return cls(int(count), salt, stored, server)


def mongo_password_digest(user: str, password: str) -> str:
    """MongoDB's pre-hash of a SCRAM-SHA-1 password: md5 of "user:mongo:password", hex."""
    return hashlib.md5(f"{user}:mongo:{password}".encode(), usedforsecurity=False).hexdigest()


def prepare_password(mechanism: ScramMechanism, user: str, password: str, *,
                     digested: bool = False) -> bytes:
    """The bytes PBKDF2 takes for `mechanism`. `digested`: `password` is already
    `mongo_password_digest` (createUser's digestPassword: false), SCRAM-SHA-1 only.
    ValueError if SASLprep refuses the password."""
    if mechanism is SCRAM_SHA_1:
        return (password if digested else mongo_password_digest(user, password)).encode()
    return saslprep(password).encode()


def derive_credentials(mechanism: ScramMechanism, prepared: bytes, iterations: int,
                       salt: bytes | None = None) -> ScramCredentials:
    """Salt (random unless given), PBKDF2 and the two keys: the slow part, CPU-bound."""
    if salt is None:
        salt = secrets.token_bytes(mechanism.salt_length)
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, prepared, salt, iterations)
    client_key = mechanism.hmac(salted, b"Client Key")
    server_key = mechanism.hmac(salted, b"Server Key")
    return ScramCredentials(iterations, _b64(salt), _b64(mechanism.hash(client_key)),
                            _b64(server_key))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class ClientFirst:
    user: str  # decoded (=2C and =3D)
    nonce: str
    bare: str  # client-first-message-bare, for the AuthMessage


def parse_client_first(message: str) -> ClientFirst:
    """gs2-header client-first-message-bare; ScramError(BadValue) for anything else."""
    comma = message.find(",")
    if comma < 0:
        raise _bad_count("first", 1)
    flag = message[:comma]
    if flag.startswith("p="):
        raise ScramError(_BAD_VALUE, "Server does not support channel binding")
    if flag not in ("y", "n"):
        raise ScramError(_BAD_VALUE, f"Incorrect SCRAM client message prefix: {flag}")
    second = message.find(",", comma + 1)
    if second < 0:
        raise _bad_count("first", 2)
    authzid = message[comma + 1:second]
    if authzid:
        if not authzid.startswith("a="):
            raise ScramError(_BAD_VALUE, f"Incorrect SCRAM authzid: {authzid}")
        authzid = authzid[2:]
    bare = message[second + 1:]
    if bare.startswith("m="):
        raise ScramError(_BAD_VALUE, "SCRAM mandatory extensions are not supported")
    parts = [p for p in bare.split(",") if p]
    if len(parts) < 2:
        raise _bad_count("first", len(parts) + 2)
    if not parts[0].startswith("n=") or len(parts[0]) < 3:
        raise ScramError(_BAD_VALUE, f"Invalid SCRAM user name: {parts[0]}")
    user = parts[0][2:].replace("=2C", ",").replace("=3D", "=")
    if authzid and authzid != user:
        raise ScramError(_BAD_VALUE, f"SCRAM user name {user} does not match authzid {authzid}")
    if not parts[1].startswith("r=") or len(parts[1]) < 6:
        raise ScramError(_BAD_VALUE, f"Invalid SCRAM client nonce: {parts[1]}")
    return ClientFirst(user, parts[1][2:], bare)


def _bad_count(which: str, got: int) -> ScramError:
    return ScramError(_BAD_VALUE, f"Incorrect number of arguments for {which} SCRAM client "
                                  f"message, got {got} expected at least 3")


class ScramServer:
    """One conversation's server side, after the client-first message named the user:
    `server_first()` then `client_final(message)` (which returns the server-final
    message or raises ScramError)."""

    def __init__(self, mechanism: ScramMechanism, first: ClientFirst,
                 credentials: ScramCredentials, server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.credentials = credentials
        self.nonce = first.nonce + (server_nonce if server_nonce is not None
                                    else _b64(secrets.token_bytes(24)))
        self._server_first = (f"r={self.nonce},s={credentials.salt},"
                              f"i={credentials.iteration_count}")
        self._auth_message = f"{first.bare},{self._server_first}"

    def server_first(self) -> str:
        return self._server_first

    def client_final(self, message: str) -> str:
        last = message.rfind(",")
        if last < 0:
            raise _bad_count("second", 1)
        without_proof = message[:last]
        proof_field = message[last + 1:]
        if len(proof_field) < 3 or not proof_field.startswith("p="):
            raise ScramError(_BAD_VALUE, f"Incorrect SCRAM ClientProof: {proof_field}")
        parts = [p for p in without_proof.split(",") if p]
        if len(parts) < 2:
            raise _bad_count("second", len(parts) + 1)
        if not parts[0].startswith("c=") or len(parts[0]) < 3:
            raise ScramError(_BAD_VALUE, f"Incorrect SCRAM channel binding: {parts[0]}")
        if not parts[1].startswith("r=") or len(parts[1]) < 6:
            raise ScramError(_BAD_VALUE, f"Incorrect SCRAM client|server nonce: {parts[1]}")
        if not hmac.compare_digest(parts[1][2:].encode(), self.nonce.encode()):
            raise ScramError(_BAD_VALUE, "Unmatched SCRAM nonce received from client in "
                                         "second step")
        auth_message = f"{self._auth_message},{without_proof}".encode()
        proof = _unb64(proof_field[2:])
        stored_key = _unb64(self.credentials.stored_key)
        server_key = _unb64(self.credentials.server_key)
        if stored_key is None or server_key is None:
            raise ScramError(_AUTHENTICATION_FAILED, f"Unable to validate {self.mechanism.name} "
                             "authentication due to corrupted stored credentials")
        m = self.mechanism
        if proof is None or len(proof) != m.digest_size or not hmac.compare_digest(
                m.hash(_xor(m.hmac(stored_key, auth_message), proof)), stored_key):
            raise ScramError(_AUTHENTICATION_FAILED,
                             "SCRAM authentication failed, storedKey mismatch")
        return "v=" + _b64(m.hmac(server_key, auth_message))


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))

"""MONGODB-X509: a client proves who it is with the certificate its TLS handshake verified.

The user is the certificate's subject (RFC 2253, as `server.tls.subject` writes it) on
the `$external` database; the client may name it, and then must name exactly that. Each
refusal carries mongod's reason for the log; the client hears AuthenticationFailed.
"""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import ConnectionState, ServerState
from .principals import UserName
from .sasl import enabled_mechanisms
from .users import UserRecord, UserStore

__all__ = ["MONGODB_X509", "authenticate_x509"]

MONGODB_X509 = "MONGODB-X509"


async def authenticate_x509(server: ServerState, conn: ConnectionState, db: str,
                            body: dict[str, Any]) -> UserRecord:
    if MONGODB_X509 not in enabled_mechanisms(server):
        raise MongoError(ErrorCode.MechanismUnavailable,
                         f"Unsupported mechanism '{MONGODB_X509}' on authentication database "
                         f"'{db}'")
    if not conn.tls:
        raise MongoError(ErrorCode.ProtocolError,
                         "SSL support is required for the MONGODB-X509 mechanism.")
    if db != "$external":
        raise MongoError(ErrorCode.ProtocolError,
                         "X.509 authentication must always use the $external database.")
    subject = conn.peer_subject
    if not subject:
        raise MongoError(ErrorCode.AuthenticationFailed,
                         "No verified subject name available from client")
    if server.config.tls.ca_file is None:
        raise MongoError(ErrorCode.AuthenticationFailed,
                         "Unable to verify x.509 certificate, as no CA has been provided.")
    claimed = body.get("user")
    if claimed is not None and claimed != subject:
        raise MongoError(ErrorCode.AuthenticationFailed,
                         "There is no x.509 client certificate matching the user.")
    return await UserStore.for_server(server).require(UserName(subject, "$external"))


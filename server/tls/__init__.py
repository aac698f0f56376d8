"""TLS on the wire port, as mongod has it: the `net.tls` options, the server's
`ssl.SSLContext`, the listener that tells TLS from plaintext on one port, and the client
certificate's subject in mongod's RFC 2253 form."""

from __future__ import annotations

from .context import HANDSHAKE_TIMEOUT, TlsSetupError, build_server_context
from .options import (
    TLS_MODES,
    TlsConfig,
    TlsOptionError,
    add_tls_arguments,
    censor_argv,
    tls_config_from,
)
from .subject import escape_rfc2253, peer_subject, rfc2253_name

__all__ = [
    "HANDSHAKE_TIMEOUT",
    "TLS_MODES",
    "TlsConfig",
    "TlsOptionError",
    "TlsSetupError",
    "add_tls_arguments",
    "build_server_context",
    "censor_argv",
    "escape_rfc2253",
    "peer_subject",
    "rfc2253_name",
    "tls_config_from",
]

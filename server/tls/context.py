"""The server's `ssl.SSLContext` from a `TlsConfig`: TLS 1.2 or later, the certificate chain
(its private key decrypted with the password when given), and client certificates checked
against the CA file when there is one.

With a CA file, clients are asked for a certificate and it must chain to that CA
(`CERT_REQUIRED`; `CERT_OPTIONAL` with allowConnectionsWithoutCertificates: none is fine,
a bad one is not). With allowInvalidCertificates the server does not ask for one
(`CERT_NONE`): the stdlib has no way to ask and then accept whatever comes, so such a
server accepts every client, as mongod does, but learns no client subject, and mongod
would not authenticate with an invalid certificate either. Without a CA file no client
certificate is asked for, as with mongod.

Files that cannot be read or used are reported by `TlsSetupError` with one clear line;
the server refuses to start, as mongod does.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import time
from typing import Any

from .options import TlsConfig
from .subject import rfc2253_name

__all__ = ["HANDSHAKE_TIMEOUT", "TlsSetupError", "build_server_context", "certificate_info"]

# How long a connection may take from its first byte to the end of its TLS handshake.
HANDSHAKE_TIMEOUT = 10.0


class TlsSetupError(Exception):
    """The TLS files cannot be used: the server does not start."""


def build_server_context(cfg: TlsConfig) -> ssl.SSLContext:
    assert cfg.certificate_key_file is not None, "checked with the options"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(ctx, cfg.disabled_protocols)
    _load_chain(ctx, cfg.certificate_key_file, cfg.certificate_key_file_password)
    if cfg.ca_file:
        _load_ca(ctx, cfg.ca_file)
        if cfg.allow_invalid_certificates:
            ctx.verify_mode = ssl.CERT_NONE
        elif cfg.allow_connections_without_certificates:
            ctx.verify_mode = ssl.CERT_OPTIONAL
        else:
            ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _set_versions(ctx: ssl.SSLContext, disabled: tuple[str, ...]) -> None:
    off = {p for p in disabled if not p.startswith("-")}
    if {"TLS1_2", "TLS1_3"} <= off:
        raise TlsSetupError("tlsDisabledProtocols leaves no protocol: bucketd speaks TLS1_2 "
                            "and TLS1_3 only")
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3 if "TLS1_2" in off else ssl.TLSVersion.TLSv1_2
    if "TLS1_3" in off:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TlsSetupError(f"cannot read {what} {path}: {exc.strerror}") from None


def _load_chain(ctx: ssl.SSLContext, path: str, password: str | None) -> None:
    pem = _read(path, "TLS certificate key file")
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise TlsSetupError(f"TLS certificate key file {path} holds no PEM certificate")
    encrypted = b"ENCRYPTED" in pem
    if encrypted and password is None:
        raise TlsSetupError(f"the private key in {path} is encrypted: give its password with "
                            "tlsCertificateKeyFilePassword")
    # Never OpenSSL's interactive prompt: without a password, an empty one.
    secret: str = password if password is not None else ""
    try:
        ctx.load_cert_chain(path, password=lambda: secret)
    except ssl.SSLError as exc:
        if encrypted:
            reason = "wrong tlsCertificateKeyFilePassword"
        elif "KEY_VALUES_MISMATCH" in str(exc):
            reason = "its private key does not match its certificate"
        else:
            reason = "it must hold the certificate and its private key in PEM"
        raise TlsSetupError(f"cannot use TLS certificate key file {path}: {reason} "
                            f"({exc.reason or exc})") from None
    info = certificate_info(path)
    now = time.time()
    if info and not info["notBefore"] <= now <= info["notAfter"]:
        raise TlsSetupError(f"The provided SSL certificate is expired or not yet valid: {path}")


def _load_ca(ctx: ssl.SSLContext, path: str) -> None:
    pem = _read(path, "TLS CA file")
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise TlsSetupError(f"TLS CA file {path} holds no PEM certificate")
    try:
        ctx.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise TlsSetupError(f"cannot use TLS CA file {path}: {exc.reason or exc}") from None


def certificate_info(path: str) -> dict[str, Any] | None:
    """Subject and validity of the first certificate in a PEM file (for the start-up log and
    the expiry check), or None where this Python cannot decode it."""
    decode = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decode is None:
        return None
    with contextlib.suppress(ssl.SSLError, OSError, ValueError, KeyError):
        cert = decode(os.fspath(path))
        return {"subject": rfc2253_name(cert.get("subject", ())),
                "issuer": rfc2253_name(cert.get("issuer", ())),
                "notBefore": ssl.cert_time_to_seconds(cert["notBefore"]),
                "notAfter": ssl.cert_time_to_seconds(cert["notAfter"])}
    return None

"""The TLS options, with mongod's flag names and `net.tls` YAML keys, checked as mongod
checks them at start-up.

`tls_config_from(flags, net_tls)` merges the command line over the config file's `net.tls`
mapping and returns a `TlsConfig`, or raises `TlsOptionError` with mongod's message (the
caller reports it as a bad option). Only what is given appears in getCmdLineOpts'
`parsed.net.tls`, the key file's password as mongod shows it: `<password>`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

__all__ = ["TLS_MODES", "TlsConfig", "TlsOptionError", "add_tls_arguments", "tls_config_from",
           "censor_argv"]

TLS_MODES = ("disabled", "allowTLS", "preferTLS", "requireTLS")
PROTOCOL_NAMES = ("TLS1_0", "TLS1_1", "TLS1_2", "TLS1_3")
REDACTED = "<password>"
PASSWORD_FLAG = "--tlsCertificateKeyFilePassword"

# YAML key under net.tls → (flag's attribute on the argparse namespace, value type)
_KEYS: dict[str, tuple[str, type]] = {
    "mode": ("tlsMode", str),
    "certificateKeyFile": ("tlsCertificateKeyFile", str),
    "certificateKeyFilePassword": ("tlsCertificateKeyFilePassword", str),
    "CAFile": ("tlsCAFile", str),
    "allowConnectionsWithoutCertificates": ("tlsAllowConnectionsWithoutCertificates", bool),
    "allowInvalidCertificates": ("tlsAllowInvalidCertificates", bool),
    "disabledProtocols": ("tlsDisabledProtocols", str),
}


class TlsOptionError(ValueError):
    """A TLS option mongod would refuse at start-up (one line)."""


@dataclass(frozen=True, slots=True)
class TlsConfig:
    mode: str = "disabled"
    certificate_key_file: str | None = None
    certificate_key_file_password: str | None = None
    ca_file: str | None = None
    allow_connections_without_certificates: bool = False
    allow_invalid_certificates: bool = False
    disabled_protocols: tuple[str, ...] = ()  # TLS1_x names; "-TLS1_x" re-enables one
    given: tuple[str, ...] = ()  # the net.tls keys set by flag or file, for getCmdLineOpts

    @property
    def enabled(self) -> bool:
        return self.mode != "disabled"

    def parsed(self) -> dict[str, Any]:
        """`parsed.net.tls` of getCmdLineOpts: the options given, the password redacted."""
        values: dict[str, Any] = {
            "mode": self.mode,
            "certificateKeyFile": self.certificate_key_file,
            "certificateKeyFilePassword": REDACTED,
            "CAFile": self.ca_file,
            "allowConnectionsWithoutCertificates": self.allow_connections_without_certificates,
            "allowInvalidCertificates": self.allow_invalid_certificates,
            "disabledProtocols": ",".join(self.disabled_protocols),
        }
        return {key: values[key] for key in _KEYS if key in self.given}


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("TLS options (mongod's)")
    group.add_argument("--tlsMode", help="disabled (default), allowTLS, preferTLS or requireTLS")
    group.add_argument("--tlsCertificateKeyFile",
                       help="PEM file with the server's certificate and its private key")
    group.add_argument(PASSWORD_FLAG, help="password of the encrypted private key")
    group.add_argument("--tlsCAFile", help="CA certificates that client certificates must chain to")
    group.add_argument("--tlsAllowConnectionsWithoutCertificates", action="store_true",
                       default=None, help="with --tlsCAFile: clients may present no certificate")
    group.add_argument("--tlsAllowInvalidCertificates", action="store_true", default=None,
                       help="accept client certificates that do not validate")
    group.add_argument("--tlsDisabledProtocols",
                       help="comma list of TLS1_0, TLS1_1, TLS1_2, TLS1_3 to refuse (or none)")


def _merged(flags: argparse.Namespace, net_tls: dict[str, Any]) -> dict[str, Any]:
    """The value of each net.tls key: the flag if given, else the file's (type-checked)."""
    out: dict[str, Any] = {}
    for key, (attr, kind) in _KEYS.items():
        value = getattr(flags, attr, None)
        if value is None and key in net_tls:
            value = net_tls[key]
            if not isinstance(value, kind):
                wanted = "true or false" if kind is bool else "a string"
                raise TlsOptionError(f"net.tls.{key} must be {wanted}, got {value!r}")
        if value is not None:
            out[key] = value
    return out


def _disabled_protocols(text: str) -> tuple[str, ...]:
    tokens = [t.strip() for t in text.split(",") if t.strip()]
    if tokens == ["none"]:
        return ()
    for token in tokens:
        if token.removeprefix("-") not in PROTOCOL_NAMES:
            raise TlsOptionError(f"Unrecognized disabledProtocols '{token}'")
    return tuple(tokens)


def tls_config_from(flags: argparse.Namespace, net_tls: Any) -> TlsConfig:
    if net_tls is None:
        net_tls = {}
    if not isinstance(net_tls, dict):
        raise TlsOptionError("config file option net.tls must be a mapping")
    for key in net_tls:
        if key not in _KEYS:
            raise TlsOptionError(f"Unrecognized option: net.tls.{key}")
    values = _merged(flags, net_tls)
    mode = values.get("mode", "disabled")
    if mode not in TLS_MODES:
        raise TlsOptionError(f"unsupported value for tlsMode {mode}")
    key_file = values.get("certificateKeyFile") or None
    cfg = TlsConfig(
        mode=mode,
        certificate_key_file=key_file,
        certificate_key_file_password=values.get("certificateKeyFilePassword"),
        ca_file=values.get("CAFile") or None,
        allow_connections_without_certificates=bool(
            values.get("allowConnectionsWithoutCertificates", False)),
        allow_invalid_certificates=bool(values.get("allowInvalidCertificates", False)),
        disabled_protocols=_disabled_protocols(values.get("disabledProtocols", "")),
        given=tuple(values),
    )
    if cfg.enabled and cfg.certificate_key_file is None:
        raise TlsOptionError("need tlsCertificateKeyFile or certificateSelector when TLS is "
                             "enabled")
    if not cfg.enabled and (cfg.certificate_key_file or cfg.ca_file
                            or cfg.certificate_key_file_password is not None
                            or "disabledProtocols" in values
                            or cfg.allow_connections_without_certificates):
        raise TlsOptionError("need to enable TLS via the sslMode/tlsMode flag when using TLS "
                             "configuration parameters")
    return cfg


def censor_argv(argv: list[str]) -> list[str]:
    """The command line as getCmdLineOpts shows it: the key file's password replaced, as
    mongod does (argparse accepts unambiguous prefixes of a flag, so they count too)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if len(name) > len("--tlsCertificateKeyFile") and PASSWORD_FLAG.startswith(name):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out

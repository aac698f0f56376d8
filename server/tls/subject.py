"""A certificate's subject as mongod writes it: the RFC 2253 string that MONGODB-X509
authentication matches against a `$external` user name.

mongod reads the subject's entries last to first (so the most specific RDN comes first),
joins the attributes of a multi-valued RDN with `+` and the RDNs with `,`, names each
attribute by OpenSSL's short name (`CN`, `OU`, `DC`, `emailAddress`; an unknown attribute
by its dotted OID) and escapes each value by RFC 2253 section 2.4, every byte of a
non-ASCII character as `\\XX`. The input here is what `ssl.SSLObject.getpeercert()` gives:
the subject as a tuple of RDNs, each a tuple of (long name, value) pairs, in DER order.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["escape_rfc2253", "peer_subject", "rfc2253_name"]

_ALWAYS_ESCAPED = frozenset(',+"\\<>;')


@functools.lru_cache(maxsize=256)
def short_name(name: str) -> str:
    """OpenSSL's short name for the long name (or dotted OID) Python reports."""
    try:
        # The one lookup of OpenSSL's object table the stdlib exposes (used by ssl.Purpose).
        return ssl._ASN1Object.fromname(name).shortname
    except ValueError:
        return name  # an OID OpenSSL has no name for: mongod prints its dotted form too


def escape_rfc2253(value: str) -> str:
    out: list[str] = []
    data = value.encode("utf-8")
    for i, byte in enumerate(data):
        ch = chr(byte)
        if byte >= 0x80:
            out.append(f"\\{byte:02X}")
        elif (i == 0 and ch in " #") or ch in _ALWAYS_ESCAPED:
            out.append("\\" + ch)
        else:
            out.append(ch)
    text = "".join(out)
    # A trailing space is escaped as mongod does it: only past its first two characters.
    if len(text) > 2 and text.endswith(" "):
        text = text[:-1] + "\\ "
    return text


def rfc2253_name(rdns: Sequence[Iterable[tuple[str, str]]]) -> str:
    parts = []
    for rdn in reversed(rdns):
        attrs = list(rdn)
        parts.append("+".join(f"{short_name(name)}={escape_rfc2253(value)}"
                              for name, value in reversed(attrs)))
    return ",".join(parts)


def peer_subject(cert: dict[str, Any] | None) -> str | None:
    """The subject of a verified peer certificate (`getpeercert()`), or None without one."""
    if not cert or "subject" not in cert:
        return None
    return rfc2253_name(cert["subject"])

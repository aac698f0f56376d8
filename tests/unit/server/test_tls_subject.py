"""The client certificate's subject as mongod writes it (RFC 2253, last RDN first)."""

from __future__ import annotations

import shutil
import ssl
import subprocess

import pytest

from server.tls import escape_rfc2253, peer_subject, rfc2253_name
from tests.e2e.tls_certs import openssl


@pytest.mark.parametrize(("value", "escaped"), [
    # mongod's own table (ssl_manager_test.cpp, EscapeRFC2253)
    ("abc", "abc"),
    (" abc", "\\ abc"),
    ("#abc", "\\#abc"),
    ("a,c", "a\\,c"),
    ("a+c", "a\\+c"),
    ('a"c', 'a\\"c'),
    ("a\\c", "a\\\\c"),
    ("a<c", "a\\<c"),
    ("a>c", "a\\>c"),
    ("a;c", "a\\;c"),
    ("abc ", "abc\\ "),
    # every byte of a non-ASCII character, in upper-case hex
    ("café", "caf\\C3\\A9"),
    ("日", "\\E6\\97\\A5"),
    # '#' and ' ' only at the start; '=' never
    ("a#b c=d", "a#b c=d"),
    # mongod escapes a trailing space only past the value's first two characters
    ("a ", "a "),
    ("  ", "\\ \\ "),
    ("", ""),
])
def test_escape_rfc2253(value: str, escaped: str) -> None:
    assert escape_rfc2253(value) == escaped


def test_rdns_last_first_and_multi_valued() -> None:
    subject = ((("countryName", "US"),),
               (("organizationName", "MongoDB"),),
               (("organizationalUnitName", "Kernel"), ("userId", "u1")),
               (("commonName", "client, one"),))
    assert rfc2253_name(subject) == "CN=client\\, one,UID=u1+OU=Kernel,O=MongoDB,C=US"


def test_attribute_names() -> None:
    subject = ((("domainComponent", "com"),), (("domainComponent", "example"),),
               (("emailAddress", "a@b.c"),), (("localityName", "NYC"),),
               (("stateOrProvinceName", "NY"),), (("1.2.3.4.5", "x"),))
    assert rfc2253_name(subject) == "1.2.3.4.5=x,ST=NY,L=NYC,emailAddress=a@b.c,DC=example,DC=com"


def test_peer_subject_without_certificate() -> None:
    assert peer_subject(None) is None
    assert peer_subject({}) is None  # not validated: the stdlib gives an empty dict
    assert peer_subject({"subject": ((("commonName", "x"),),)}) == "CN=x"


@pytest.mark.parametrize("subj", [
    "/C=US/ST=New York/L=New York City/O=MongoDB/OU=KernelUser/CN=client",
    "/DC=com/DC=example/O=Acme, Inc./OU=a+UID=b+CN=c/emailAddress=x@example.com",
    "/O=quote \" and <angle> and ;semi/CN=\\#hash lead",
    "/O=Zürich Straße/CN=ünïcödé",
])
def test_real_certificates_match_openssl(tmp_path, subj: str) -> None:
    """Our string for a real certificate equals OpenSSL's RFC 2253 rendering (mongod builds
    its string the same way, from the same entries)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out",
            "c.pem", "-days", "1", "-utf8", "-multivalue-rdn", "-subj", subj, cwd=tmp_path)
    expected = subprocess.run(
        ["openssl", "x509", "-in", "c.pem", "-noout", "-subject", "-nameopt", "RFC2253"],
        cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    expected = expected.removeprefix("subject=")
    decoded = ssl._ssl._test_decode_cert(str(tmp_path / "c.pem"))  # type: ignore[attr-defined]
    assert rfc2253_name(decoded["subject"]) == expected
    assert peer_subject(decoded) == expected

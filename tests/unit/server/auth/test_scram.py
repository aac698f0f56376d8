"""SCRAM's server side against the RFC test vectors and MongoDB's own (the drivers' auth
specification), and its refusals of malformed or wrong client messages."""

from __future__ import annotations

import base64

import pytest

from server.auth.scram import (
    SCRAM_SHA_1,
    SCRAM_SHA_256,
    ScramError,
    ScramServer,
    derive_credentials,
    mongo_password_digest,
    parse_client_first,
    prepare_password,
)


def _server(mech, client_first: str, password: bytes, salt_b64: str, iterations: int,
            server_nonce: str) -> ScramServer:
    creds = derive_credentials(mech, password, iterations, base64.b64decode(salt_b64))
    return ScramServer(mech, parse_client_first(client_first), creds, server_nonce)


def test_rfc7677_scram_sha_256() -> None:
    srv = _server(SCRAM_SHA_256, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                  prepare_password(SCRAM_SHA_256, "user", "pencil"),
                  "W22ZaJ0SNY7soEsUEjb6gQ==", 4096, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert srv.server_first() == ("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                  "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = srv.client_final("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                             "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc5802_scram_sha_1_plain_password() -> None:
    # The RFC's vector takes the password as is; MongoDB pre-hashes it (next test).
    srv = _server(SCRAM_SHA_1, "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL", b"pencil",
                  "QSXCR+Q6sek8bf92", 4096, "3rfcNHYJY1ZVvWVs7j")
    final = srv.client_final("c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
                             "p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=")
    assert final == "v=rmF9pqV8S7suAoZWja4dJRkFsKQ="


def test_mongodb_scram_sha_1_vector() -> None:
    # The drivers' authentication specification's SCRAM-SHA-1 conversation.
    assert mongo_password_digest("user", "pencil") == "1c33006ec1ffd90f9cadcbcc0e118200"
    srv = _server(SCRAM_SHA_1, "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
                  prepare_password(SCRAM_SHA_1, "user", "pencil"),
                  "rQ9ZY3MntBeuP3E1TDVC4w==", 10000, "Ho+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE")
    final = srv.client_final("c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,"
                             "p=MC2T8BvbmWRckDw8oWl5IVghwCY=")
    assert final == "v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0="
    # digestPassword: false hands the server the digest itself: the same credentials
    assert prepare_password(SCRAM_SHA_1, "user", "1c33006ec1ffd90f9cadcbcc0e118200",
                            digested=True) == prepare_password(SCRAM_SHA_1, "user", "pencil")


def test_sha256_password_is_saslprepped() -> None:
    # RFC 4013: a non-ASCII space maps to a space, a soft hyphen to nothing.
    assert prepare_password(SCRAM_SHA_256, "u", "I\u00adX") == b"IX"
    assert prepare_password(SCRAM_SHA_256, "u", "a\u00a0b") == b"a b"
    with pytest.raises(ValueError):
        prepare_password(SCRAM_SHA_256, "u", "a\u0007b")  # a control character


def test_salt_lengths_and_server_nonce() -> None:
    a = derive_credentials(SCRAM_SHA_1, b"x", 10)
    b = derive_credentials(SCRAM_SHA_256, b"x", 10)
    assert len(base64.b64decode(a.salt)) == 16 and len(base64.b64decode(b.salt)) == 28
    srv = ScramServer(SCRAM_SHA_256, parse_client_first("n,,n=u,r=abcdefgh"), b)
    nonce = srv.server_first().split(",")[0][2:]
    assert nonce.startswith("abcdefgh") and len(base64.b64decode(nonce[8:])) == 24


def test_user_name_decoding_and_authzid() -> None:
    first = parse_client_first("n,,n=a=2Cb=3Dc,r=abcdefgh")
    assert first.user == "a,b=c" and first.bare == "n=a=2Cb=3Dc,r=abcdefgh"
    assert parse_client_first("y,a=user,n=user,r=abcdefgh").user == "user"
    with pytest.raises(ScramError, match="does not match authzid"):
        parse_client_first("n,a=other,n=user,r=abcdefgh")


@pytest.mark.parametrize("message, needle", [
    ("p=tls-unique,,n=user,r=abcdefgh", "channel binding"),
    ("x,,n=user,r=abcdefgh", "prefix"),
    ("n,,m=ext,n=user,r=abcdefgh", "mandatory extensions"),
    ("n,,n=user", "number of arguments"),
    ("n,,u=user,r=abcdefgh", "user name"),
    ("n,,n=user,r=abc", "client nonce"),
    ("nonsense", "number of arguments"),
])
def test_malformed_client_first(message: str, needle: str) -> None:
    with pytest.raises(ScramError, match=needle) as info:
        parse_client_first(message)
    assert info.value.code == 2  # BadValue, logged; the client hears AuthenticationFailed


def _vector_server() -> ScramServer:
    return _server(SCRAM_SHA_256, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", b"pencil",
                   "W22ZaJ0SNY7soEsUEjb6gQ==", 4096, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")


@pytest.mark.parametrize("message, needle, code", [
    ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
     "p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "storedKey mismatch", 18),
    ("c=biws,r=rOprNGfwEbeRWgbNEkqOTAMPERED,"
     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "Unmatched SCRAM nonce", 2),
    ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=!!notbase64",
     "storedKey mismatch", 18),
    ("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", "ClientProof", 2),
    ("x=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=abcd", "channel binding",
     2),
])
def test_wrong_client_final(message: str, needle: str, code: int) -> None:
    with pytest.raises(ScramError, match=needle) as info:
        _vector_server().client_final(message)
    assert info.value.code == code

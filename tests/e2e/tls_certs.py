"""Test certificates made with the `openssl` command line: a CA, a server certificate for
localhost/127.0.0.1, client certificates signed by that CA and by another one, and an
encrypted copy of the server's key."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

SERVER_KEY_PASSWORD = "s3cret pass"
# DER order; mongod writes it last RDN first: see CLIENT_SUBJECT.
CLIENT_SUBJ = "/C=US/ST=New York/O=bucketd tests/OU=clients+UID=u1/CN=client one"
CLIENT_SUBJECT = "CN=client one,UID=u1+OU=clients,O=bucketd tests,ST=New York,C=US"


@dataclass(frozen=True)
class Certs:
    dir: Path
    ca: Path  # the CA's certificate (tlsCAFile for both sides)
    server: Path  # server certificate + key (tlsCertificateKeyFile)
    server_encrypted: Path  # the same with the key encrypted by SERVER_KEY_PASSWORD
    client: Path  # client certificate + key, signed by the CA
    client_cert: Path  # the client certificate alone
    client_key: Path
    other_client: Path  # client certificate + key signed by another CA
    other_ca: Path
    not_a_cert: Path  # a text file
    key_only: Path  # the server's key without its certificate


def openssl(*args: str, cwd: Path) -> None:
    res = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, f"openssl {' '.join(args)}:\n{res.stderr}"


def _ca(d: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.pem", "-days", "30", "-subj", f"/O=bucketd tests/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _signed(d: Path, name: str, ca: str, subj: str, ext: str, *extra: str) -> None:
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.csr", "-subj", subj, *extra, cwd=d)
    (d / f"{name}.ext").write_text(ext)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "30", "-extfile", f"{name}.ext",
            cwd=d)
    (d / f"{name}.pem").write_bytes((d / f"{name}.crt").read_bytes()
                                    + (d / f"{name}.key").read_bytes())


def make_certs(d: Path) -> Certs:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "ca")
    _ca(d, "other-ca")
    _signed(d, "server", "ca", "/O=bucketd tests/CN=localhost",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    client_ext = "extendedKeyUsage=clientAuth\n"
    _signed(d, "client", "ca", CLIENT_SUBJ, client_ext, "-multivalue-rdn")
    _signed(d, "other-client", "other-ca", "/O=bucketd tests/CN=stranger", client_ext)
    openssl("pkey", "-in", "server.key", "-aes256", "-passout", f"pass:{SERVER_KEY_PASSWORD}",
            "-out", "server-encrypted.key", cwd=d)
    (d / "server-encrypted.pem").write_bytes((d / "server.crt").read_bytes()
                                             + (d / "server-encrypted.key").read_bytes())
    (d / "not-a-cert.pem").write_text("hello\n")
    return Certs(dir=d, ca=d / "ca.pem", server=d / "server.pem",
                 server_encrypted=d / "server-encrypted.pem", client=d / "client.pem",
                 client_cert=d / "client.crt", client_key=d / "client.key",
                 other_client=d / "other-client.pem", other_ca=d / "other-ca.pem",
                 not_a_cert=d / "not-a-cert.pem", key_only=d / "server.key")

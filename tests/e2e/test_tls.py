"""TLS as mongod has it: requireTLS/preferTLS/allowTLS on one port, client certificates
checked against the CA, the options' start-up checks, with pymongo (sync and async), motor,
mongosh and the Node.js driver."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pymongo
import pytest
from bson import encode
from pymongo.errors import ServerSelectionTimeoutError

from pytest_bucketd import BucketdProcess

from ..conftest import ROOT, mongosh_path, start_server
from .node_driver import node_modules
from .tls_certs import CLIENT_SUBJECT, SERVER_KEY_PASSWORD, Certs, make_certs
from .wire_client import RawConnection

REFUSED_MS = 1500  # server selection gives up this soon on a connection the server refuses


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("tls"))


def _serve(tmp_path_factory, *flags: str) -> Iterator[BucketdProcess]:
    proc = start_server(tmp_path_factory.mktemp("db"), *flags)
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_text()[-3000:]  # a clean shutdown with TLS too


@pytest.fixture(scope="module")
def require_tls(certs: Certs, tmp_path_factory) -> Iterator[BucketdProcess]:
    yield from _serve(tmp_path_factory, "--tlsMode", "requireTLS",
                      "--tlsCertificateKeyFile", str(certs.server), "--tlsCAFile", str(certs.ca))


@pytest.fixture(scope="module")
def prefer_tls(certs: Certs, tmp_path_factory) -> Iterator[BucketdProcess]:
    yield from _serve(tmp_path_factory, "--tlsMode", "preferTLS",
                      "--tlsCertificateKeyFile", str(certs.server), "--tlsCAFile", str(certs.ca),
                      "--tlsAllowConnectionsWithoutCertificates")


@pytest.fixture(scope="module")
def allow_tls(certs: Certs, tmp_path_factory) -> Iterator[BucketdProcess]:
    """allowTLS, no CA file, the server key encrypted (the password flag), TLS 1.2 only."""
    yield from _serve(tmp_path_factory, "--tlsMode", "allowTLS",
                      "--tlsCertificateKeyFile", str(certs.server_encrypted),
                      "--tlsCertificateKeyFilePassword", SERVER_KEY_PASSWORD,
                      "--tlsDisabledProtocols", "TLS1_3")


def _client(proc: BucketdProcess, certs: Certs, cert: Path | None = None, *, tls: bool = True,
            timeout_ms: int = 10_000) -> pymongo.MongoClient:
    opts: dict = {"serverSelectionTimeoutMS": timeout_ms}
    if tls:
        opts.update(tls=True, tlsCAFile=str(certs.ca))
        if cert is not None:
            opts["tlsCertificateKeyFile"] = str(cert)
    return pymongo.MongoClient(proc.uri, **opts)


def _roundtrip(client: pymongo.MongoClient, name: str) -> None:
    coll = client.tlsdb[name]
    coll.drop()
    coll.insert_many([{"i": i} for i in range(5)])
    assert sorted(d["i"] for d in coll.find({}, {"_id": 0})) == list(range(5))
    assert client.admin.command("ping")["ok"] == 1.0


def _refused(proc: BucketdProcess, certs: Certs, cert: Path | None, *, tls: bool = True) -> None:
    with _client(proc, certs, cert, tls=tls, timeout_ms=REFUSED_MS) as c, \
            pytest.raises(ServerSelectionTimeoutError):
        c.admin.command("ping")


def _log_lines(proc: BucketdProcess, predicate: Callable[[dict], bool]) -> list[dict]:
    """The server's log lines that satisfy predicate, once at least one has been written."""
    deadline = time.monotonic() + 30  # the log is read by a thread: wait for it to catch up
    while True:
        lines = [json.loads(line) for line in proc.log_text().splitlines()
                 if line.startswith("{")]
        found = [line for line in lines if predicate(line)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _refusals(proc: BucketdProcess, fragment: str) -> list[dict]:
    return _log_lines(proc, lambda line: line["id"] == 22988
                      and fragment in line["attr"]["error"]["errmsg"])


# -- requireTLS with a CA: a client certificate is required ------------------------------------

def test_require_tls_pymongo_with_client_certificate(require_tls, certs: Certs) -> None:
    with _client(require_tls, certs, certs.client) as c:
        _roundtrip(c, "sync")
    accepted = _log_lines(require_tls, lambda line: line["id"] == 6723802)
    assert accepted and accepted[0]["attr"]["peerSubjectName"] == CLIENT_SUBJECT
    started = _log_lines(require_tls, lambda line: line["id"] == 23016)
    assert started[0]["attr"]["ssl"] == "on"
    with _client(require_tls, certs, certs.client) as c:
        status = c.admin.command("serverStatus")
    by_version = status["transportSecurity"]
    assert by_version["1.3"] >= 1 and by_version["1.2"] == 0  # TLS 1.3 unless disabled
    assert status["network"]["totalIngressTLSConnections"] == sum(by_version.values())


def test_require_tls_async_pymongo_and_motor(require_tls, certs: Certs) -> None:
    motor_asyncio = pytest.importorskip("motor.motor_asyncio")
    opts = {"tls": True, "tlsCAFile": str(certs.ca), "tlsCertificateKeyFile": str(certs.client),
            "serverSelectionTimeoutMS": 10_000}

    async def main() -> None:
        ac: pymongo.AsyncMongoClient = pymongo.AsyncMongoClient(require_tls.uri, **opts)
        try:
            await ac.tlsdb.asyncc.insert_one({"via": "async pymongo"})
            assert (await ac.tlsdb.asyncc.find_one({}, {"_id": 0})) == {"via": "async pymongo"}
        finally:
            await ac.close()
        mc = motor_asyncio.AsyncIOMotorClient(require_tls.uri, **opts)
        try:
            await mc.tlsdb.motorc.insert_one({"via": "motor"})
            assert (await mc.tlsdb.motorc.find_one({}, {"_id": 0})) == {"via": "motor"}
        finally:
            mc.close()

    asyncio.run(main())


def test_require_tls_refuses_certificate_of_another_ca(require_tls, certs: Certs) -> None:
    _refused(require_tls, certs, certs.other_client)
    assert _refusals(require_tls, "SSL peer certificate validation failed")


def test_require_tls_refuses_client_without_certificate(require_tls, certs: Certs) -> None:
    _refused(require_tls, certs, None)
    assert _refusals(require_tls, "no SSL certificate provided by peer")


def test_require_tls_refuses_plaintext(require_tls, certs: Certs) -> None:
    _refused(require_tls, certs, None, tls=False)
    # a raw plaintext hello: no answer, the connection is closed
    raw = RawConnection(require_tls.port)
    body = encode({"hello": 1, "$db": "admin"})
    raw.send((21 + len(body)).to_bytes(4, "little") + (1).to_bytes(4, "little") + bytes(4)
             + (2013).to_bytes(4, "little") + bytes(5) + body)
    try:
        assert raw.recv_message() is None
    finally:
        raw.close()
    assert _refusals(require_tls, "The server is configured to only allow SSL connections")


@pytest.mark.mongosh
def test_mongosh_tls(require_tls, certs: Certs) -> None:
    exe = mongosh_path()
    if exe is None:
        pytest.fail("mongosh is not installed (the README test command installs it)")
    script = ("db.getSiblingDB('tlsdb').shell.insertOne({via: 'mongosh'});"
              "print(JSON.stringify({n: db.getSiblingDB('tlsdb').shell.countDocuments({}),"
              " ok: db.adminCommand({ping: 1}).ok}))")
    res = subprocess.run([exe, f"mongodb://localhost:{require_tls.port}/", "--quiet", "--tls",
                          "--tlsCAFile", str(certs.ca), "--tlsCertificateKeyFile",
                          str(certs.client), "--eval", script],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"n": 1, "ok": 1}


@pytest.mark.mongosh
def test_nodejs_driver_tls(require_tls, certs: Certs) -> None:
    modules = node_modules()
    if modules is None or shutil.which("node") is None:
        pytest.skip("the Node.js driver is not installed")
    script = """
const { MongoClient } = require('mongodb');
(async () => {
  const c = new MongoClient(process.env.URI, {tls: true, tlsCAFile: process.env.CA,
    tlsCertificateKeyFile: process.env.CERT, serverSelectionTimeoutMS: 10000});
  await c.connect();
  const coll = c.db('tlsdb').collection('node');
  await coll.insertOne({via: 'node'});
  const ping = await c.db('admin').command({ping: 1});
  console.log(JSON.stringify({ok: ping.ok, n: await coll.countDocuments({})}));
  await c.close();
})().catch((e) => { console.error(e); process.exit(1); });
"""
    env = {**os.environ, "NODE_PATH": str(modules), "URI": f"mongodb://localhost:{require_tls.port}/",
           "CA": str(certs.ca), "CERT": str(certs.client)}
    res = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=120,
                         env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"ok": 1, "n": 1}


# -- preferTLS and allowTLS: TLS and plaintext on the one port ---------------------------------

def test_prefer_tls_accepts_both(prefer_tls, certs: Certs) -> None:
    with _client(prefer_tls, certs, certs.client) as c:
        _roundtrip(c, "prefer_cert")
    with _client(prefer_tls, certs, None) as c:  # allowConnectionsWithoutCertificates
        _roundtrip(c, "prefer_nocert")
    with _client(prefer_tls, certs, tls=False) as c:
        _roundtrip(c, "prefer_plain")
    assert _log_lines(prefer_tls, lambda line: line["id"] == 23838)  # plaintext under preferTLS
    # without a certificate is allowed; with one that does not validate is not
    _refused(prefer_tls, certs, certs.other_client)


def test_allow_tls_accepts_both_with_encrypted_key(allow_tls, certs: Certs) -> None:
    with _client(allow_tls, certs, None) as c:
        _roundtrip(c, "allow_tls")
        opts = c.admin.command("getCmdLineOpts")
        tls_connections = c.admin.command("serverStatus")["transportSecurity"]
    with _client(allow_tls, certs, tls=False) as c:
        _roundtrip(c, "allow_plain")
        assert c.admin.command("serverStatus")["transportSecurity"] == tls_connections
    assert tls_connections["1.2"] >= 1 and tls_connections["1.3"] == 0  # TLS1_3 disabled
    # no CA file: no client certificate is asked for, so any is fine
    with _client(allow_tls, certs, certs.other_client) as c:
        assert c.admin.command("ping")["ok"] == 1.0
    assert opts["parsed"]["net"]["tls"] == {
        "mode": "allowTLS", "certificateKeyFile": str(certs.server_encrypted),
        "certificateKeyFilePassword": "<password>", "disabledProtocols": "TLS1_3"}
    assert SERVER_KEY_PASSWORD not in json.dumps(opts["argv"])
    assert "<password>" in opts["argv"]


def test_allow_invalid_certificates(certs: Certs, tmp_path) -> None:
    proc = start_server(tmp_path, "--tlsMode", "requireTLS", "--tlsCertificateKeyFile",
                        str(certs.server), "--tlsCAFile", str(certs.ca),
                        "--tlsAllowInvalidCertificates")
    try:
        with _client(proc, certs, certs.other_client) as c:
            assert c.admin.command("ping")["ok"] == 1.0
            warnings = c.admin.command("getLog", "startupWarnings")["log"]
        assert any('"id":22124' in w for w in warnings), warnings
    finally:
        proc.stop()


# -- a TLS client against a server without TLS -------------------------------------------------

def test_tls_client_hello_to_a_plaintext_server(tmp_path, certs: Certs) -> None:
    proc = start_server(tmp_path)
    try:
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        with socket.create_connection(("127.0.0.1", proc.port), timeout=30) as sock, \
                pytest.raises((ssl.SSLError, ConnectionError)):
            ctx.wrap_socket(sock, server_hostname="localhost")  # the server just closes
        assert _refusals(proc, "SSL handshake received but server is started without SSL")
        with pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=10_000) as c:
            assert c.admin.command("ping")["ok"] == 1.0
    finally:
        proc.stop()


# -- start-up checks ---------------------------------------------------------------------------

def _start(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "server", "--port", "0", "--dbpath",
                           str(tmp_path / "db"), *flags], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)


@pytest.mark.parametrize(("flags", "message"), [
    (["--tlsMode", "requireTLS"],
     "need tlsCertificateKeyFile or certificateSelector when TLS is enabled"),
    (["--tlsMode", "maybe", "--tlsCertificateKeyFile", "x.pem"],
     "unsupported value for tlsMode maybe"),
    (["--tlsCAFile", "ca.pem"], "need to enable TLS via the sslMode/tlsMode flag when using "
                                "TLS configuration parameters"),
])
def test_bad_options_exit_2(tmp_path, flags: list[str], message: str) -> None:
    res = _start(tmp_path, *flags)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip() == f"bucketd: error: {message}"
    assert not (tmp_path / "db").exists()  # refused before touching the data directory


@pytest.mark.parametrize(("which", "extra", "message"), [
    ("missing", [], "cannot read TLS certificate key file /no/such/server.pem: "
                    "No such file or directory"),
    ("not_a_cert", [], "holds no PEM certificate"),
    ("client_cert", [], "it must hold the certificate and its private key"),
    ("server_encrypted", [], "is encrypted: give its password"),
    ("server_encrypted", ["--tlsCertificateKeyFilePassword", "nope"],
     "wrong tlsCertificateKeyFilePassword"),
    ("server", ["--tlsCAFile", "/no/such/ca.pem"], "cannot read TLS CA file /no/such/ca.pem"),
])
def test_unusable_files_stop_the_start(tmp_path, certs: Certs, which: str, extra: list[str],
                                       message: str) -> None:
    path = "/no/such/server.pem" if which == "missing" else str(getattr(certs, which))
    res = _start(tmp_path, "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", path, *extra)
    assert res.returncode == 1, res.stdout + res.stderr
    errors = [json.loads(line) for line in res.stdout.splitlines()
              if line.startswith("{") and '"id":20568' in line]
    assert len(errors) == 1 and message in errors[0]["attr"]["error"], res.stdout
    assert "Waiting for connections" not in res.stdout
    assert "nope" not in res.stdout  # the password is never logged

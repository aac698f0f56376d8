"""Authentication and TLS together: MONGODB-X509 maps a verified client certificate to its
user on `$external`, and SCRAM users log in over TLS — pymongo (sync and async), motor,
mongosh and the Node.js driver. Failures are AuthenticationFailed (18), as in mongod."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest
from motor.motor_asyncio import AsyncIOMotorClient
from pymongo import AsyncMongoClient
from pymongo.errors import OperationFailure

from pytest_bucketd import BucketdProcess

from ..conftest import mongosh_path, start_server
from .node_driver import node_modules
from .tls_certs import CLIENT_SUBJECT, Certs, _signed, make_certs

ROOT_USER, ROOT_PWD = "root", "root-secret"
APP_USER, APP_PWD = "app", "app-secret"
UNKNOWN_SUBJECT = "CN=client two,O=bucketd tests"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    made = make_certs(tmp_path_factory.mktemp("x509"))
    _signed(made.dir, "client-two", "ca", "/O=bucketd tests/CN=client two",
            "extendedKeyUsage=clientAuth\n")
    return made


@pytest.fixture(scope="module")
def server(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BucketdProcess]:
    proc = start_server(tmp_path_factory.mktemp("db"), "--auth", "--tlsMode", "requireTLS",
                        "--tlsCertificateKeyFile", str(certs.server),
                        "--tlsCAFile", str(certs.ca))
    try:
        with _client(proc, certs) as first:  # the localhost exception: the first user
            first.admin.command("createUser", ROOT_USER, pwd=ROOT_PWD, roles=["root"])
        with _client(proc, certs, username=ROOT_USER, password=ROOT_PWD) as root:
            root["$external"].command("createUser", CLIENT_SUBJECT,
                                      roles=[{"role": "readWrite", "db": "app"}])
            root.app.command("createUser", APP_USER, pwd=APP_PWD, roles=["readWrite"])
        yield proc
    finally:
        proc.stop()
        proc.cleanup()


def _client(proc: BucketdProcess, certs: Certs, cert: Path | None = None,
            **kw: Any) -> pymongo.MongoClient[dict[str, Any]]:
    return pymongo.MongoClient(f"mongodb://localhost:{proc.port}/", tls=True,
                               tlsCAFile=str(certs.ca),
                               tlsCertificateKeyFile=str(cert or certs.client),
                               serverSelectionTimeoutMS=10_000, **kw)


def _auth_info(client: Any) -> dict[str, Any]:
    return client.admin.command("connectionStatus")["authInfo"]


def test_x509_logs_in_as_the_certificates_subject(server: BucketdProcess, certs: Certs) -> None:
    with _client(server, certs, authMechanism="MONGODB-X509") as c:
        assert _auth_info(c)["authenticatedUsers"] == [
            {"user": CLIENT_SUBJECT, "db": "$external"}]
        c.app.things.insert_one({"via": "x509"})
        assert c.app.things.count_documents({"via": "x509"}) == 1
        with pytest.raises(OperationFailure) as exc:
            c.other.things.insert_one({"x": 1})
        assert exc.value.code == 13
    # naming the subject explicitly is the same login
    with _client(server, certs, authMechanism="MONGODB-X509", username=CLIENT_SUBJECT) as c:
        assert _auth_info(c)["authenticatedUsers"][0]["user"] == CLIENT_SUBJECT
    assert "Successfully authenticated" in server.log_text()


@pytest.mark.parametrize("cert, username", [
    ("client-two.pem", None),  # verified, but no user on $external has its subject
    ("client.pem", "CN=someone else"),  # names a user the certificate is not
])
def test_x509_failures_are_authentication_failed(server: BucketdProcess, certs: Certs,
                                                 cert: str, username: str | None) -> None:
    kw: dict[str, Any] = {"authMechanism": "MONGODB-X509"}
    if username is not None:
        kw["username"] = username
    with _client(server, certs, certs.dir / cert, **kw) as c, \
            pytest.raises(OperationFailure) as exc:
        c.admin.command("ping")
    assert exc.value.code == 18
    with _client(server, certs, certs.dir / cert) as c, pytest.raises(OperationFailure) as e2:
        c.app.command("find", "things")  # unauthenticated over TLS: the gate refuses
    assert e2.value.code == 13


def test_x509_needs_the_external_database(server: BucketdProcess, certs: Certs) -> None:
    with _client(server, certs) as c, pytest.raises(OperationFailure) as exc:
        c.admin.command({"authenticate": 1, "mechanism": "MONGODB-X509"})
    assert exc.value.code == 18
    assert "X.509 authentication must always use the $external database." in server.log_text()


def test_scram_over_tls_with_sync_async_and_motor(server: BucketdProcess, certs: Certs) -> None:
    with _client(server, certs, username=APP_USER, password=APP_PWD, authSource="app") as c:
        assert _auth_info(c)["authenticatedUserRoles"] == [{"role": "readWrite", "db": "app"}]
    kw = {"tls": True, "tlsCAFile": str(certs.ca), "tlsCertificateKeyFile": str(certs.client),
          "username": APP_USER, "password": APP_PWD, "authSource": "app",
          "serverSelectionTimeoutMS": 10_000}
    uri = f"mongodb://localhost:{server.port}/"

    async def run() -> list[dict[str, Any]]:
        async_client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, **kw)
        motor_client: AsyncIOMotorClient[dict[str, Any]] = AsyncIOMotorClient(uri, **kw)
        try:
            return [(await c.admin.command("connectionStatus"))["authInfo"]
                    for c in (async_client, motor_client)]
        finally:
            await async_client.close()
            motor_client.close()

    for info in asyncio.run(run()):
        assert info["authenticatedUsers"] == [{"user": APP_USER, "db": "app"}]
    with pytest.raises(OperationFailure) as exc, \
            _client(server, certs, username=APP_USER, password="wrong", authSource="app") as c:
        c.admin.command("ping")
    assert exc.value.code == 18


@pytest.mark.mongosh
def test_mongosh_with_tls_and_auth(server: BucketdProcess, certs: Certs) -> None:
    exe = mongosh_path()
    if exe is None:
        pytest.fail("mongosh is not installed (the README test command installs it)")
    script = "print(EJSON.stringify(db.adminCommand({connectionStatus: 1}).authInfo))"
    common = [f"mongodb://localhost:{server.port}/", "--quiet", "--tls", "--tlsCAFile",
              str(certs.ca), "--tlsCertificateKeyFile", str(certs.client), "--eval", script]
    for login, user in (
            (["-u", APP_USER, "-p", APP_PWD, "--authenticationDatabase", "app"],
             {"user": APP_USER, "db": "app"}),
            (["--authenticationMechanism", "MONGODB-X509", "--authenticationDatabase",
              "$external"], {"user": CLIENT_SUBJECT, "db": "$external"})):
        res = subprocess.run([exe, *common, *login], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        assert json.loads(res.stdout.strip().splitlines()[-1])["authenticatedUsers"] == [user]


@pytest.mark.mongosh
def test_nodejs_driver_with_tls_and_auth(server: BucketdProcess, certs: Certs) -> None:
    modules = node_modules()
    if modules is None or shutil.which("node") is None:
        pytest.skip("the Node.js driver is not installed")
    script = """
const { MongoClient } = require('mongodb');
(async () => {
  const out = [];
  for (const auth of [
      {auth: {username: process.env.APP_USER, password: process.env.APP_PWD}, authSource: 'app'},
      {authMechanism: 'MONGODB-X509'}]) {
    const c = new MongoClient(process.env.URI, {tls: true, tlsCAFile: process.env.CA,
      tlsCertificateKeyFile: process.env.CERT, serverSelectionTimeoutMS: 10000, ...auth});
    await c.connect();
    out.push((await c.db('admin').command({connectionStatus: 1})).authInfo.authenticatedUsers);
    await c.close();
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
"""
    env = {**os.environ, "NODE_PATH": str(modules), "URI": f"mongodb://localhost:{server.port}/",
           "CA": str(certs.ca), "CERT": str(certs.client), "APP_USER": APP_USER,
           "APP_PWD": APP_PWD}
    res = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=120,
                         env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [
        [{"user": APP_USER, "db": "app"}], [{"user": CLIENT_SUBJECT, "db": "$external"}]]

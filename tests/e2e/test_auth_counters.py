"""serverStatus `security.authentication`, as mongod 8.0 reports it (its AuthCounter in
src/mongo/db/stats/counters.cpp, bumped by sasl_commands.cpp and authentication_session):
`saslSupportedMechsReceived`, and per mechanism (MONGODB-X509 and the enabled SCRAM ones,
sorted) `speculativeAuthenticate`, `clusterAuthenticate` and `authenticate`, each
`{received, successful}` as longs. Checked by differences around real pymongo logins."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pymongo
import pytest
from bson import Int64
from pymongo.errors import OperationFailure

from pytest_bucketd import BucketdProcess

from ..conftest import start_server

pytestmark = pytest.mark.skipif(bool(os.environ.get("BUCKETD_URI")),
                                reason="starts a server of its own")

Client = pymongo.MongoClient[dict[str, Any]]


def _client(proc: BucketdProcess, **kw: Any) -> Client:
    return pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=10_000, **kw)


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BucketdProcess]:
    p = start_server(tmp_path_factory.mktemp("counters"), "--auth")
    try:
        with _client(p) as c:
            c.admin.command("createUser", "root", pwd="pw", roles=["root"])
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="module")
def root(proc: BucketdProcess) -> Iterator[Client]:
    with _client(proc, username="root", password="pw") as c:
        yield c


def _section(root: Client) -> dict[str, Any]:
    section: dict[str, Any] = root.admin.command("serverStatus")["security"]["authentication"]
    return section


def _count(section: dict[str, Any], mech: str, kind: str, what: str) -> int:
    return int(section["mechanisms"][mech][kind][what])


def test_shape(root: Client) -> None:
    section = _section(root)
    assert list(section) == ["saslSupportedMechsReceived", "mechanisms"]
    assert list(section["mechanisms"]) == ["MONGODB-X509", "SCRAM-SHA-1", "SCRAM-SHA-256"]
    for counters in section["mechanisms"].values():
        assert list(counters) == ["speculativeAuthenticate", "clusterAuthenticate",
                                  "authenticate"]
        for pair in counters.values():
            assert list(pair) == ["received", "successful"]
            assert all(isinstance(v, Int64) for v in pair.values())
    assert section["mechanisms"]["MONGODB-X509"]["authenticate"] == {"received": 0,
                                                                     "successful": 0}


def test_successful_and_failed_logins(proc: BucketdProcess, root: Client) -> None:
    before = _section(root)
    with _client(proc, username="root", password="pw", authMechanism="SCRAM-SHA-256") as c:
        c.admin.command("ping")  # the driver authenticates inside hello (speculatively)
    with _client(proc, username="root", password="wrong", authMechanism="SCRAM-SHA-1") as c:
        with pytest.raises(OperationFailure) as info:
            c.admin.command("ping")
        assert info.value.code == 18
    after = _section(root)

    def delta(mech: str, kind: str, what: str) -> int:
        return _count(after, mech, kind, what) - _count(before, mech, kind, what)

    assert delta("SCRAM-SHA-256", "authenticate", "received") == 1
    assert delta("SCRAM-SHA-256", "authenticate", "successful") == 1
    assert delta("SCRAM-SHA-256", "speculativeAuthenticate", "received") == 1
    assert delta("SCRAM-SHA-256", "speculativeAuthenticate", "successful") == 1
    assert delta("SCRAM-SHA-1", "authenticate", "received") == 1
    assert delta("SCRAM-SHA-1", "authenticate", "successful") == 0
    for mech in ("SCRAM-SHA-1", "SCRAM-SHA-256"):
        assert delta(mech, "clusterAuthenticate", "received") == 0


def test_sasl_supported_mechs_and_unknown_mechanisms(proc: BucketdProcess,
                                                     root: Client) -> None:
    before = _section(root)
    root.admin.command("hello", saslSupportedMechs="admin.root")
    with _client(proc) as anonymous:
        with pytest.raises(OperationFailure) as info:
            anonymous.admin.command("saslStart", mechanism="PLAIN", payload=b"x")
        assert info.value.code == 334  # MechanismUnavailable, counted nowhere
    after = _section(root)
    assert after["saslSupportedMechsReceived"] == before["saslSupportedMechsReceived"] + 1
    assert after["mechanisms"] == before["mechanisms"]

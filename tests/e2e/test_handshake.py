"""Real drivers connect and run the handshake commands: pymongo sync/async and motor."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pymongo
import pytest
from motor.motor_asyncio import AsyncIOMotorClient
from pymongo import AsyncMongoClient

COMPRESSORS = ["zstd", "snappy", "zlib"]


def _compression_counters(client: pymongo.MongoClient, name: str) -> dict:
    status = client.admin.command("serverStatus")
    return status["network"]["compression"].get(name, {})


def test_pymongo_ping_and_server_info(client: pymongo.MongoClient) -> None:
    assert client.admin.command("ping") == {"ok": 1.0}
    info = client.server_info()
    assert info["version"].startswith("8.0.")
    assert info["versionArray"][:2] == [8, 0]
    assert info["maxBsonObjectSize"] == 16 * 1024 * 1024
    hello = client.admin.command("hello")
    assert hello["isWritablePrimary"] is True
    assert hello["maxWireVersion"] == 25
    assert hello["maxMessageSizeBytes"] == 48_000_000
    assert hello["maxWriteBatchSize"] == 100_000
    assert hello["logicalSessionTimeoutMinutes"] == 30
    assert hello["topologyVersion"]["counter"] == 0
    legacy = client.admin.command("isMaster")
    assert legacy["ismaster"] is True and "isWritablePrimary" not in legacy


def test_unknown_command_is_command_not_found(client: pymongo.MongoClient) -> None:
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        client.admin.command("atlasVersion")
    assert exc.value.code == 59
    assert exc.value.details["codeName"] == "CommandNotFound"
    assert exc.value.details["errmsg"] == "no such command: 'atlasVersion'"


def test_diagnostic_commands(client: pymongo.MongoClient, server: Any) -> None:
    opts = client.admin.command("getCmdLineOpts")
    argv = opts["argv"]
    configured = int(argv[argv.index("--port") + 1]) if "--port" in argv else 27017
    assert opts["parsed"]["net"]["port"] == configured
    assert "dbPath" in opts["parsed"]["storage"]
    fcv = client.admin.command({"getParameter": 1, "featureCompatibilityVersion": 1})
    assert fcv["featureCompatibilityVersion"] == {"version": "8.0"}
    params = client.admin.command({"getParameter": "*"})
    assert params["timeseriesBucketMaxCount"] == 1000
    assert params["timeseriesBucketMaxSize"] == 128000
    log = client.admin.command({"getLog": "startupWarnings"})
    assert isinstance(log["log"], list)
    glob = client.admin.command({"getLog": "global"})
    # the ring keeps the newest lines (a long-lived server has rolled its start-up off)
    assert glob["totalLinesWritten"] >= len(glob["log"]) > 0
    assert all(json.loads(line)["t"]["$date"] for line in glob["log"][-5:])
    you = client.admin.command("whatsmyuri")["you"]
    assert you.rpartition(":")[2].isdigit()
    credentials = getattr(server, "credentials", None)  # the compose server runs --auth
    expected = [] if credentials is None else [{"user": credentials[0], "db": credentials[2]}]
    assert client.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"] == expected
    host = client.admin.command("hostInfo")
    assert host["system"]["numCores"] >= 1
    status = client.admin.command("serverStatus")
    assert status["process"] == "mongod" and status["connections"]["current"] >= 1
    assert status["opcounters"]["command"] > 0
    cmds = client.admin.command("listCommands")["commands"]
    assert "hello" in cmds and cmds["ping"]["help"]


def test_set_parameter_rules(client: pymongo.MongoClient) -> None:
    before = client.admin.command({"getParameter": 1, "ttlMonitorSleepSecs": 1})
    res = client.admin.command({"setParameter": 1, "ttlMonitorSleepSecs": 5})
    assert res["was"] == before["ttlMonitorSleepSecs"]
    client.admin.command({"setParameter": 1, "ttlMonitorSleepSecs": res["was"]})
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        client.admin.command({"setParameter": 1, "timeseriesBucketMaxCount": 5})
    assert exc.value.code == 20  # IllegalOperation: startup-only
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        client.admin.command({"setParameter": 1, "noSuchParameter": 5})
    assert exc.value.code == 72
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        client.test.command({"setParameter": 1, "ttlMonitorSleepSecs": 5})
    assert exc.value.code == 13


@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_pymongo_compression_travels_compressed(uri: str, compressor: str) -> None:
    observer: pymongo.MongoClient = pymongo.MongoClient(uri)
    before = _compression_counters(observer, compressor)
    with pymongo.MongoClient(uri, compressors=compressor) as c:
        for _ in range(3):
            assert c.admin.command("ping")["ok"] == 1.0
        assert c.server_info()["version"].startswith("8.0")
        assert isinstance(c.list_database_names(), list)
    after = _compression_counters(observer, compressor)
    observer.close()
    before_in = before.get("decompressor", {}).get("bytesIn", 0)
    before_out = before.get("compressor", {}).get("bytesOut", 0)
    assert after["decompressor"]["bytesIn"] > before_in  # requests arrived compressed
    assert after["compressor"]["bytesOut"] > before_out  # replies left compressed


@pytest.mark.parametrize("compressor", COMPRESSORS)
async def test_async_pymongo_and_motor(uri: str, compressor: str) -> None:
    async_client: AsyncMongoClient = AsyncMongoClient(uri, compressors=compressor)
    motor_client: AsyncIOMotorClient = AsyncIOMotorClient(uri, compressors=compressor)
    try:
        for c in (async_client, motor_client):
            assert (await c.admin.command("ping"))["ok"] == 1.0
            info = await c.server_info()
            assert info["version"].startswith("8.0.")
            assert isinstance(await c.list_database_names(), list)
        pings = await asyncio.gather(*(async_client.admin.command("ping") for _ in range(20)))
        assert all(p["ok"] == 1.0 for p in pings)
    finally:
        await async_client.close()
        motor_client.close()
    with pymongo.MongoClient(uri) as observer:
        counters = _compression_counters(observer, compressor)
    assert counters["decompressor"]["bytesIn"] > 0


@pytest.mark.parametrize("value", [0, 501, 600_000, 10**9])
def test_journal_commit_interval_stays_within_mongods_range(client: pymongo.MongoClient,
                                                           value: int) -> None:
    # a wider window would let any client widen what a kill -9 loses (mongod: 1-500 ms)
    before = client.admin.command({"getParameter": 1, "journalCommitInterval": 1})
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        client.admin.command({"setParameter": 1, "journalCommitInterval": value})
    assert exc.value.code == 2 and "journalCommitInterval" in str(exc.value)
    assert client.admin.command({"getParameter": 1, "journalCommitInterval": 1}) == before
    for good in (1, 500, before["journalCommitInterval"]):
        client.admin.command({"setParameter": 1, "journalCommitInterval": good})


@pytest.mark.parametrize("name, value", [
    ("logLevel", 6), ("logLevel", -1), ("logLevel", 2.0 ** 63), ("logLevel", float("inf")),
    ("slowOpThresholdMs", float("-inf")), ("slowOpThresholdMs", 9.3e18),
    ("cursorTimeoutMillis", float("nan")),
])
def test_integer_parameters_refuse_values_out_of_range(client: pymongo.MongoClient,
                                                       name: str, value: float) -> None:
    # found by tools/fuzz_wire.py: an infinite double was an InternalError, and a logLevel
    # of 2**63 was stored, after which every setParameter reply failed to encode
    before = client.admin.command({"getParameter": 1, name: 1})
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        client.admin.command({"setParameter": 1, name: value})
    assert exc.value.code == 2 and name in str(exc.value)
    assert client.admin.command({"getParameter": 1, name: 1}) == before
    assert client.admin.command({"setParameter": 1, name: before[name]})["was"] == before[name]

"""Beanie (the async ODM) on a time-series collection: `init_beanie` creates it from
`Settings.timeseries`; `insert`, `save` (a findAndModify upsert with `$set`, for a new
document and for a changed one), `find`, `aggregate` and `delete` run end to end through
pymongo's AsyncMongoClient, and the measurements are read back with plain pymongo."""

from __future__ import annotations

import asyncio
import datetime as dt

import pymongo
from beanie import Document, TimeSeriesConfig, init_beanie
from pydantic import BaseModel
from pymongo import AsyncMongoClient, monitoring

DB = "beanie_ts"
T0 = dt.datetime(2024, 8, 1, 6, 0)


class Sensor(BaseModel):
    site: str
    n: int


class Reading(Document):
    ts: dt.datetime
    sensor: Sensor
    celsius: float

    class Settings:
        name = "readings"
        timeseries = TimeSeriesConfig(time_field="ts", meta_field="sensor")


class CommandNames(monitoring.CommandListener):
    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.names.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def _scenario(uri: str, listener: CommandNames) -> dict[str, object]:
    client: AsyncMongoClient = AsyncMongoClient(uri, serverSelectionTimeoutMS=10_000,
                                                event_listeners=[listener])
    try:
        await client.drop_database(DB)
        await init_beanie(database=client[DB], document_models=[Reading])
        for i in range(6):
            await Reading(ts=T0 + dt.timedelta(minutes=i), sensor=Sensor(site="n", n=i % 2),
                          celsius=20.0 + i).insert()
        # save() of a document never stored: an upsert through findAndModify
        fresh = Reading(ts=T0 + dt.timedelta(hours=1), sensor=Sensor(site="s", n=9),
                        celsius=-1.5)
        before = len(listener.names)
        await fresh.save()
        assert listener.names[before:] == ["findAndModify"]
        # save() of a changed document: findAndModify with $set of every field
        warm = await Reading.find_one(Reading.celsius == 23.0)
        assert warm is not None
        warm.celsius = 99.0
        warm.sensor = Sensor(site="n", n=7)
        await warm.save()
        found = await Reading.find(Reading.sensor.site == "n", Reading.celsius > 21.0) \
            .sort(+Reading.ts).to_list()
        per_site = await Reading.find().aggregate([
            {"$group": {"_id": "$sensor.site", "n": {"$sum": 1},
                        "hottest": {"$max": "$celsius"}}},
            {"$sort": {"_id": 1}}]).to_list()
        cold = await Reading.find_one(Reading.celsius == 20.0)
        assert cold is not None
        await cold.delete()
        return {"found": [(r.celsius, r.sensor.n) for r in found], "per_site": per_site,
                "fresh_id": fresh.id, "warm_id": warm.id, "left": await Reading.count()}
    finally:
        await client.close()


def test_beanie_document_on_a_time_series_collection(uri: str,
                                                     client: pymongo.MongoClient) -> None:
    listener = CommandNames()
    out = asyncio.run(_scenario(uri, listener))
    assert "findAndModify" in listener.names and "insert" in listener.names
    assert "aggregate" in listener.names and "delete" in listener.names
    assert out["found"] == [(22.0, 0), (99.0, 7), (24.0, 0), (25.0, 1)]
    assert out["per_site"] == [{"_id": "n", "n": 6, "hottest": 99.0},
                               {"_id": "s", "n": 1, "hottest": -1.5}]
    assert out["left"] == 6
    db = client[DB]
    info = db.command("listCollections", filter={"name": "readings"})["cursor"]["firstBatch"]
    assert info[0]["type"] == "timeseries"
    assert info[0]["options"]["timeseries"]["metaField"] == "sensor"
    stored = {d["_id"]: d for d in db.readings.find()}
    assert stored[out["fresh_id"]] == {"_id": out["fresh_id"], "ts": T0 + dt.timedelta(hours=1),
                                       "sensor": {"site": "s", "n": 9}, "celsius": -1.5}
    assert stored[out["warm_id"]] == {"_id": out["warm_id"], "ts": T0 + dt.timedelta(minutes=3),
                                      "sensor": {"n": 7, "site": "n"}, "celsius": 99.0}
    assert sorted(d["celsius"] for d in stored.values()) == [-1.5, 21.0, 22.0, 24.0, 25.0, 99.0]
    assert db.command("validate", "system.buckets.readings")["valid"] is True
    client.drop_database(DB)

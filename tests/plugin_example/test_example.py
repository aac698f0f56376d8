"""How a user's own test suite uses bucketd: only the plugin's fixtures, nothing else of
the project is imported (the `bucketd` executable runs in a child process)."""

import datetime as dt


def test_weather_station_series(bucketd_client):
    db = bucketd_client.example
    db.create_collection("weather", timeseries={"timeField": "ts", "metaField": "station"})
    t0 = dt.datetime(2024, 1, 1)
    db.weather.insert_many([{"ts": t0 + dt.timedelta(minutes=m), "station": s, "temp": 20 + m}
                            for m in range(3) for s in ("A", "B")])
    assert db.weather.count_documents({"station": "A"}) == 3
    hottest = db.weather.find({}, {"_id": 0, "temp": 1}).sort("temp", -1).limit(1)
    assert list(hottest) == [{"temp": 22}]


def test_server_uri_fixture(bucketd_server):
    assert bucketd_server.startswith("mongodb://127.0.0.1:")

"""BSON JavaScript code is not a string to the server (pymongo decodes it as `Code`, a
`str` subclass): a `$db`, collection name or time-series option sent as code is refused
with MongoDB's codes, nothing is stored under it, and the data directory still opens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymongo
import pytest
from bson import Code

from protocol import encode_op_msg

from ..conftest import start_server
from .wire_client import RawConnection


def _run(port: int, body: dict[str, Any]) -> dict[str, Any]:
    """`body` sent as it is (pymongo would put its own `$db` in)."""
    raw = RawConnection(port)
    try:
        raw.send(encode_op_msg(body, 1, 0))
        reply = raw.recv_reply_doc()
        assert reply is not None
        return reply
    finally:
        raw.close()


@pytest.mark.parametrize("body, code", [
    ({"insert": "c", "documents": [{"a": 1}], "$db": Code("evil")}, 73),
    ({"insert": Code("c"), "documents": [{"a": 1}], "$db": "db"}, 73),
    ({"create": Code("c"), "$db": "db"}, 73),
    ({"create": "ts", "timeseries": {"timeField": Code("t")}, "$db": "db"}, 14),
    ({"create": "ts", "timeseries": {"timeField": "t", "metaField": Code("m")}, "$db": "db"},
     14),
    ({"create": "ts", "timeseries": {"timeField": "t", "granularity": Code("hours")},
      "$db": "db"}, 14),
])
def test_code_is_refused_where_a_name_goes(tmp_path: Path, body: dict[str, Any],
                                           code: int) -> None:
    proc = start_server(tmp_path)
    try:
        reply = _run(proc.port, body)
        assert reply["ok"] == 0.0 and reply["code"] == code, reply
        with pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=10_000) as client:
            assert client.db.list_collection_names() == []
            client.db.ok.insert_one({"a": 1})
            names = client.list_database_names()
            assert "db" in names and "evil" not in names
        proc.stop()
        proc.start()  # the data directory opens again, with what a valid command made
        with pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=10_000) as client:
            assert client.db.list_collection_names() == ["ok"]
            assert all(type(n) is str for n in client.list_database_names())
    finally:
        proc.stop()

"""Malformed frames close only their own connection; bad content gets ok: 0 with MongoDB's code.

Throughout, a second client on the same server keeps working.
"""

from __future__ import annotations

import os
import struct
import time

import bson
import pymongo
import pytest

from protocol import encode_op_msg, encode_op_query

from ..unit.protocol.helpers import header, op_msg
from .wire_client import raw_connection


@pytest.fixture
def bystander(uri: str):
    c = pymongo.MongoClient(uri)
    assert c.admin.command("ping")["ok"] == 1.0
    yield c
    assert c.admin.command("ping")["ok"] == 1.0  # still serving after the abuse
    c.close()


def _ping_msg(request_id: int = 1) -> bytes:
    return encode_op_msg({"ping": 1, "$db": "admin"}, request_id, 0)


FATAL_FRAMES = {
    "random_bytes": os.urandom(64) + b"\xff\xff\xff\x7f",
    "length_below_16": header(12, 1, 0, 2013),
    "length_negative": header(-5, 1, 0, 2013),
    "length_above_max": header(48_000_001, 1, 0, 2013),
    "unknown_opcode": header(24, 1, 0, 4242) + b"\x00" * 8,
    "illegal_flag": op_msg({"ping": 1, "$db": "admin"}, flags=1 << 4),
}


@pytest.mark.parametrize("name", sorted(FATAL_FRAMES))
def test_fatal_frame_closes_only_that_connection(server, bystander, name: str) -> None:
    data = FATAL_FRAMES[name]
    if name == "random_bytes":
        data = struct.pack("<i", 5) + data  # a length below the 16-byte header
    raw = raw_connection(server)
    raw.send(data)
    assert raw.recv_message() is None
    raw.close()


def test_wrong_checksum_closes_connection(server, bystander) -> None:
    msg = bytearray(op_msg({"ping": 1, "$db": "admin"}, checksum=True))
    msg[-2] ^= 0x5A
    raw = raw_connection(server)
    raw.send(bytes(msg))
    assert raw.recv_message() is None


def test_good_checksum_gets_checksummed_reply(server) -> None:
    import crc32c

    raw = raw_connection(server)
    raw.send(op_msg({"ping": 1, "$db": "admin"}, checksum=True))
    reply = raw.recv_message()
    flags = struct.unpack_from("<I", reply, 16)[0]
    assert flags & 1
    assert struct.unpack("<I", reply[-4:])[0] == crc32c.crc32c(reply[:-4])
    raw.close()


def test_sequence_past_end_closes_connection(server, bystander) -> None:
    good = op_msg({"insert": "c", "$db": "t"}, sequences={"documents": [{"a": 1}]})
    at = 16 + 4 + 1 + len(bson.encode({"insert": "c", "$db": "t"})) + 1
    bad = bytearray(good)
    bad[at:at + 4] = struct.pack("<i", 5000)
    raw = raw_connection(server)
    raw.send(bytes(bad))
    assert raw.recv_message() is None


def test_truncated_header_then_disconnect(server, bystander) -> None:
    raw = raw_connection(server)
    raw.send(_ping_msg()[:9])
    raw.close()
    # A frame cut short and never finished: the server waits, then the client leaves.
    raw = raw_connection(server)
    raw.send(_ping_msg()[:30])
    time.sleep(0.1)
    raw.close()


def test_invalid_bson_body_answers_invalid_bson(server, bystander) -> None:
    body = bytearray(bson.encode({"ping": 1, "$db": "admin"}))
    body[4] = 0x66
    sections = b"\x00" + bytes(body)
    raw = raw_connection(server)
    raw.send(header(16 + 4 + len(sections), 77, 0, 2013) + b"\x00" * 4 + sections)
    reply = raw.recv_reply_doc()
    assert reply["ok"] == 0.0 and reply["code"] == 22 and reply["codeName"] == "InvalidBSON"
    raw.send(_ping_msg(78))  # the connection is still usable
    assert raw.recv_reply_doc() == {"ok": 1.0}
    raw.close()


def test_command_body_over_internal_limit(server, bystander) -> None:
    # Commands may exceed 16 MiB by 16 KiB (MongoDB's BSONObjMaxInternalSize), no more.
    big = {"ping": 1, "$db": "admin", "x": "a" * (16 * 1024 * 1024 + 16 * 1024 + 1)}
    data = bson.encode(big)
    sections = b"\x00" + data
    raw = raw_connection(server)
    raw.send(header(16 + 4 + len(sections), 5, 0, 2013) + b"\x00" * 4 + sections)
    reply = raw.recv_reply_doc()
    assert reply["ok"] == 0.0 and reply["code"] == 22
    raw.close()


def test_missing_db_and_op_query_rules(server, bystander) -> None:
    raw = raw_connection(server)
    raw.send(encode_op_msg({"ping": 1}, 1, 0))
    reply = raw.recv_reply_doc()
    assert reply["code"] == 40571 and reply["codeName"] == "Location40571"
    raw.send(encode_op_query({"isMaster": 1}, 2))
    reply = raw.recv_reply_doc()
    assert reply["ismaster"] is True and reply["ok"] == 1.0
    raw.send(encode_op_query({"ping": 1}, 3))
    reply = raw.recv_reply_doc()
    assert reply["code"] == 352 and reply["codeName"] == "UnsupportedOpQueryCommand"
    raw.close()


def test_transactions_refused_like_a_standalone(client) -> None:
    with pytest.raises(pymongo.errors.OperationFailure) as exc:
        client.admin.command({"ping": 1, "txnNumber": bson.Int64(1), "autocommit": False})
    assert exc.value.code == 20

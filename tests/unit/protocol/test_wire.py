"""The sans-IO protocol: framing, OP_MSG, OP_QUERY/OP_REPLY, OP_COMPRESSED, checksums, limits."""

from __future__ import annotations

import itertools
import struct
import tracemalloc

import bson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import (
    CompressorId,
    MessageDecoder,
    OpMsg,
    OpQuery,
    ProtocolError,
    compress_message,
    encode_op_msg,
    encode_op_query,
    encode_op_reply,
    merge_sequences,
)
from protocol.wire import parse_header
from storage.vocabulary.raw_documents import RawDocuments

from .helpers import header, op_msg


def feed_all_ways(data: bytes) -> list[list]:
    """Decode `data` whole, byte by byte, and with trailing garbage (h11's tr())."""
    results = []
    for chunks in ([data], [data[i:i + 1] for i in range(len(data))]):
        dec = MessageDecoder()
        out = []
        for c in chunks:
            dec.feed(c)
            while (m := dec.next_message()) is not None:
                out.append(m)
        assert dec.buffered == 0
        results.append(out)
    dec = MessageDecoder()
    dec.feed(data + b"\x05\x00")
    out = []
    while (m := dec.next_message()) is not None:
        out.append(m)
    assert dec.buffered == 2  # the partial next frame stays buffered
    results.append(out)
    return results


def test_op_msg_body_and_sequences_merge() -> None:
    data = op_msg({"insert": "c", "$db": "test"},
                  sequences={"documents": [{"_id": 1}, {"_id": 2, "x": "y"}]})
    for msgs in feed_all_ways(data):
        assert len(msgs) == 1
        m = msgs[0]
        assert isinstance(m, OpMsg)
        assert m.request_id == 7
        assert m.body == {"insert": "c", "$db": "test"}  # the sequence is not in the body
        raw = m.sequences["documents"]
        assert isinstance(raw, RawDocuments) and len(raw) == 2
        assert merge_sequences(m.body, m.sequences) == {
            "insert": "c", "$db": "test", "documents": [{"_id": 1}, {"_id": 2, "x": "y"}]}
        assert merge_sequences(m.body, m.sequences, keep={"documents"})["documents"] is raw
        assert m.compressor_id is None


def test_two_messages_in_one_feed() -> None:
    data = op_msg({"ping": 1, "$db": "a"}, request_id=1) + op_msg({"ping": 2, "$db": "b"},
                                                                  request_id=2)
    dec = MessageDecoder()
    dec.feed(data)
    first, second = dec.next_message(), dec.next_message()
    assert (first.request_id, second.request_id) == (1, 2)
    assert dec.next_message() is None


@settings(max_examples=200, deadline=None)
@given(pads=st.lists(st.integers(0, 3000), min_size=1, max_size=6),
       cuts=st.lists(st.integers(0, 20_000), max_size=12))
def test_any_split_of_a_stream_gives_its_messages_in_order(pads: list[int],
                                                            cuts: list[int]) -> None:
    frames = [op_msg({"ping": 1, "pad": "p" * pad, "$db": "a"}, request_id=i)
              for i, pad in enumerate(pads)]
    data = b"".join(frames)
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    dec = MessageDecoder()
    got: list = []
    for start, end in itertools.pairwise(bounds):
        dec.feed(data[start:end])
        assert dec.buffered == end - sum(len(frames[m.request_id]) for m in got)
        while (m := dec.next_message()) is not None:
            got.append(m)
    assert [m.request_id for m in got] == list(range(len(pads)))
    assert [m.body["pad"] for m in got] == ["p" * pad for pad in pads]
    assert dec.buffered == 0


def test_a_message_trickled_byte_by_byte_costs_about_its_bytes() -> None:
    frame = op_msg({"ping": 1, "pad": "p" * 300_000, "$db": "a"})
    dec = MessageDecoder()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(200_000):  # most of it, one byte per read
            dec.feed(frame[i:i + 1])
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert dec.next_message() is None and dec.buffered == 200_000
    assert held < 2 * 200_000  # an object per byte would be ~30 times that
    dec.feed(frame[200_000:])
    assert dec.next_message().body["pad"] == "p" * 300_000


def test_checksum_verified_and_produced() -> None:
    good = op_msg({"ping": 1, "$db": "admin"}, checksum=True)
    dec = MessageDecoder()
    dec.feed(good)
    assert dec.next_message().body["ping"] == 1
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    dec = MessageDecoder()
    dec.feed(bytes(bad))
    with pytest.raises(ProtocolError) as exc:
        dec.next_message()
    assert exc.value.code == 288 and exc.value.fatal
    # The encoder's checksum is one our decoder (and the helper's independent CRC) accepts.
    reply = encode_op_msg({"ok": 1.0}, 3, 7, flags=1)
    import crc32c

    assert struct.unpack("<I", reply[-4:])[0] == crc32c.crc32c(reply[:-4])


def test_flags_more_to_come_and_exhaust() -> None:
    dec = MessageDecoder()
    dec.feed(op_msg({"insert": "c", "$db": "t"}, flags=(1 << 1) | (1 << 16)))
    m = dec.next_message()
    assert m.more_to_come and m.exhaust_allowed


def test_unknown_required_flag_is_fatal() -> None:
    dec = MessageDecoder()
    dec.feed(op_msg({"ping": 1, "$db": "a"}, flags=1 << 3))
    with pytest.raises(ProtocolError) as exc:
        dec.next_message()
    assert exc.value.code == 223 and exc.value.fatal
    # Optional (high) bits are ignored.
    dec = MessageDecoder()
    dec.feed(op_msg({"ping": 1, "$db": "a"}, flags=1 << 20))
    assert dec.next_message().body["ping"] == 1


@pytest.mark.parametrize("length", [0, 15, -1, 48_000_001])
def test_message_length_out_of_bounds_is_fatal(length: int) -> None:
    dec = MessageDecoder()
    dec.feed(header(length, 1, 0, 2013) + b"\x00" * 8)
    with pytest.raises(ProtocolError) as exc:
        dec.next_message()
    assert exc.value.fatal
    with pytest.raises(ProtocolError):  # the stream cannot be trusted any more
        dec.next_message()


def test_unknown_opcode_is_fatal() -> None:
    dec = MessageDecoder()
    dec.feed(header(20, 1, 0, 9999) + b"\x00" * 4)
    with pytest.raises(ProtocolError) as exc:
        dec.next_message()
    assert exc.value.fatal


def test_sequence_running_past_message_is_fatal() -> None:
    good = op_msg({"insert": "c", "$db": "t"}, sequences={"documents": [{"a": 1}]})
    body_len = 1 + len(bson.encode({"insert": "c", "$db": "t"}))
    seq_size_at = 16 + 4 + body_len + 1
    bad = bytearray(good)
    bad[seq_size_at:seq_size_at + 4] = struct.pack("<i", 10_000)
    dec = MessageDecoder()
    dec.feed(bytes(bad))
    with pytest.raises(ProtocolError) as exc:
        dec.next_message()
    assert exc.value.fatal


def test_invalid_bson_body_is_not_fatal() -> None:
    body = bytearray(bson.encode({"ping": 1, "$db": "a"}))
    body[4] = 0x77  # unknown BSON type byte
    sections = b"\x00" + bytes(body)
    msg = header(16 + 4 + len(sections), 5, 0, 2013) + b"\x00" * 4 + sections
    dec = MessageDecoder()
    dec.feed(msg)
    with pytest.raises(ProtocolError) as exc:
        dec.next_message()
    assert exc.value.code == 22 and not exc.value.fatal and exc.value.request_id == 5
    # The stream stays usable after a non-fatal error.
    dec.feed(op_msg({"ping": 1, "$db": "a"}))
    assert dec.next_message().body["ping"] == 1


def test_missing_body_and_duplicate_sections() -> None:
    seq = b"documents\x00" + bson.encode({"a": 1})
    sections = b"\x01" + struct.pack("<i", 4 + len(seq)) + seq
    msg = header(16 + 4 + len(sections), 1, 0, 2013) + b"\x00" * 4 + sections
    dec = MessageDecoder()
    dec.feed(msg)
    with pytest.raises(ProtocolError) as exc:
        dec.next_message()
    assert exc.value.code == 40587
    dec = MessageDecoder()
    dec.feed(op_msg({"insert": "c", "documents": [], "$db": "t"},
                    sequences={"documents": [{"a": 1}]}))
    with pytest.raises(ProtocolError) as exc:
        dec.next_message()
    assert exc.value.code == 40433


@pytest.mark.parametrize("compressor", [CompressorId.SNAPPY, CompressorId.ZLIB,
                                        CompressorId.ZSTD, CompressorId.NOOP])
def test_op_compressed_round_trip(compressor: CompressorId) -> None:
    plain = op_msg({"find": "c", "filter": {"x": "y" * 200}, "$db": "t"}, request_id=42)
    packed = compress_message(plain, compressor)
    h = parse_header(packed)
    assert h.op_code == 2012 and h.request_id == 42
    for msgs in feed_all_ways(packed):
        (m,) = msgs
        assert m.compressor_id == compressor
        assert m.body["filter"]["x"] == "y" * 200
        assert m.length == len(plain) and m.wire_length == len(packed)


def test_compression_bomb_and_size_mismatch_rejected() -> None:
    plain = op_msg({"ping": 1, "$db": "a"})
    packed = bytearray(compress_message(plain, CompressorId.ZLIB))
    packed[20:24] = struct.pack("<i", len(plain) - 16 - 3)  # header lies about the size
    dec = MessageDecoder()
    dec.feed(bytes(packed))
    with pytest.raises(ProtocolError):
        dec.next_message()
    import zlib

    bomb = zlib.compress(b"\x00" * 10_000_000)
    body = struct.pack("<iiB", 2013, 100, CompressorId.ZLIB) + bomb
    dec = MessageDecoder()
    dec.feed(header(16 + len(body), 1, 0, 2012) + body)
    with pytest.raises(ProtocolError):
        dec.next_message()


def test_op_query_and_op_reply() -> None:
    data = encode_op_query({"isMaster": 1, "helloOk": True}, 9)
    for msgs in feed_all_ways(data):
        (q,) = msgs
        assert isinstance(q, OpQuery)
        assert q.database == "admin" and q.query == {"isMaster": 1, "helloOk": True}
    reply = encode_op_reply({"ok": 1.0}, 3, 9)
    h = parse_header(reply)
    assert (h.op_code, h.response_to, h.message_length) == (1, 9, len(reply))
    _flags, cursor_id, _start, n = struct.unpack_from("<iqii", reply, 16)
    assert (cursor_id, n) == (0, 1)
    assert bson.decode(reply[36:]) == {"ok": 1.0}


def test_encode_op_msg_is_parseable() -> None:
    data = encode_op_msg({"ok": 1.0, "n": 3}, 11, 7)
    dec = MessageDecoder()
    dec.feed(data)
    m = dec.next_message()
    assert m.body == {"ok": 1.0, "n": 3} and m.request_id == 11


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_protocol_error(data: bytes) -> None:
    dec = MessageDecoder()
    dec.feed(data)
    try:
        while (m := dec.next_message()) is not None:
            if isinstance(m, OpMsg):
                merge_sequences(m.body, m.sequences)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_messages_only_raise_protocol_error(data: st.DataObject) -> None:
    base = bytearray(op_msg({"insert": "c", "$db": "t"}, sequences={"documents": [{"a": 1}]},
                            checksum=data.draw(st.booleans())))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(base) - 1))
        base[i] = data.draw(st.integers(0, 255))
    dec = MessageDecoder()
    dec.feed(bytes(base))
    try:
        while (m := dec.next_message()) is not None:
            if isinstance(m, OpMsg):  # what is inside the framed documents, decoded
                merge_sequences(m.body, m.sequences)
    except ProtocolError:
        pass


def _nested_below_top(levels: int) -> dict:
    inner: dict = {"x": 1}
    for _ in range(levels - 1):
        inner = {"a": inner}
    return {"a": inner}  # `levels` objects below the top


@pytest.mark.parametrize("where", ["body", "sequence"])
def test_documents_nest_at_most_max_depth_below_their_top(where: str) -> None:
    dec = MessageDecoder(max_depth=21)
    def message(levels: int) -> bytes:
        if where == "body":
            return op_msg({"find": "c", "filter": _nested_below_top(levels - 1), "$db": "d"})
        return op_msg({"insert": "c", "$db": "d"},
                      sequences={"documents": [{"_id": 1}, _nested_below_top(levels)]})
    dec.feed(message(21))
    ok = dec.next_message()
    merge_sequences(ok.body, ok.sequences, max_depth=21)
    dec.feed(message(22))
    with pytest.raises(ProtocolError) as exc:
        deep = dec.next_message()
        merge_sequences(deep.body, deep.sequences, max_depth=21)
    assert (exc.value.code, exc.value.fatal, exc.value.message) == (
        15, False, "BSONObj exceeded maximum nested object depth: 21")
    dec.feed(message(3))  # the stream is still sound
    assert dec.next_message() is not None

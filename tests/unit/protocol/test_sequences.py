"""OP_MSG kind-1 document sequences: framed at parse (sizes and trailing NULs checked,
offsets recorded), decoded only by `merge_sequences`, with the errors the wire layer
gave when it decoded them at parse."""

from __future__ import annotations

import struct

import bson
import pytest

from protocol import MessageDecoder, OpMsg, ProtocolError, merge_sequences
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.raw_documents import MalformedDocument, RawDocuments

from .helpers import header

BODY = {"insert": "c", "$db": "t"}


def frame(*sections: tuple[str, bytes], body: dict | None = None, request_id: int = 9) -> bytes:
    """An OP_MSG with `body` and kind-1 sections of raw bytes (name, documents)."""
    out = b"\x00" + bson.encode(BODY if body is None else body)
    for name, data in sections:
        payload = name.encode() + b"\x00" + data
        out += b"\x01" + struct.pack("<i", 4 + len(payload)) + payload
    return header(16 + 4 + len(out), request_id, 0, 2013) + b"\x00" * 4 + out


def parse(data: bytes) -> OpMsg:
    dec = MessageDecoder()
    dec.feed(data)
    msg = dec.next_message()
    assert isinstance(msg, OpMsg) and dec.buffered == 0
    return msg


def parse_error(data: bytes) -> ProtocolError:
    dec = MessageDecoder()
    dec.feed(data)
    with pytest.raises(ProtocolError) as exc:
        dec.next_message()
    return exc.value


def docs(*ds: dict) -> bytes:
    return b"".join(bson.encode(d) for d in ds)


def test_sequence_is_framed_not_decoded() -> None:
    d0, d1, d2 = bson.encode({"a": 1}), bson.encode({"b": "x" * 50}), bson.encode({})
    msg = parse(frame(("documents", d0 + d1 + d2)))
    assert msg.body == BODY
    raw = msg.sequences["documents"]
    assert isinstance(raw, RawDocuments)
    assert raw.buffer == d0 + d1 + d2
    assert list(raw.offsets) == [0, len(d0), len(d0) + len(d1)]
    assert len(raw) == 3
    assert raw.bounds(2) == (len(d0) + len(d1), len(raw.buffer))
    assert bytes(raw.document(1)) == d1
    assert [bytes(d) for d in raw] == [d0, d1, d2]
    assert raw.decode(bson.DEFAULT_CODEC_OPTIONS) == [{"a": 1}, {"b": "x" * 50}, {}]
    assert "3 documents" in repr(raw)


def test_empty_sequence() -> None:
    msg = parse(frame(("documents", b"")))
    raw = msg.sequences["documents"]
    assert len(raw) == 0 and raw.buffer == b""
    assert merge_sequences(msg.body, msg.sequences) == {**BODY, "documents": []}


def test_two_sequences_keep_their_order_and_names() -> None:
    msg = parse(frame(("updates", docs({"q": {}, "u": {"$set": {"a": 1}}})),
                      ("documents", docs({"a": 1}, {"a": 2})),
                      body={"update": "c", "$db": "t"}))
    assert list(msg.sequences) == ["updates", "documents"]
    merged = merge_sequences(msg.body, msg.sequences, keep={"documents"})
    assert merged["updates"] == [{"q": {}, "u": {"$set": {"a": 1}}}]
    assert merged["documents"] is msg.sequences["documents"]
    assert msg.body == {"update": "c", "$db": "t"}  # merging copies


def test_third_sequence_is_fatal_and_duplicates_are_not() -> None:
    seq = ("documents", docs({"a": 1}))
    err = parse_error(frame(("a", b""), ("b", b""), ("c", b"")))
    assert err.code == ErrorCode.TooManyDocumentSequences and err.fatal
    err = parse_error(frame(seq, seq))
    assert err.code == 40431 and not err.fatal
    assert err.message == "Duplicate document sequence: documents"
    err = parse_error(frame(seq, body={**BODY, "documents": []}))
    assert err.code == 40433 and not err.fatal


@pytest.mark.parametrize("size", [4, 0, -1, 16 * 1024 * 1024 + 16 * 1024 + 1, 0x7FFFFFFF])
def test_bad_document_size_is_invalid_bson(size: int) -> None:
    bad = struct.pack("<i", size) + b"\x00" * 4
    err = parse_error(frame(("documents", docs({"a": 1}) + bad), request_id=31))
    assert err.code == 22 and not err.fatal and err.request_id == 31
    assert err.message == (f"BSONObj size: {size} (0x{size & 0xFFFFFFFF:X}) is invalid. Size "
                           "must be between 0 and 16793600(16MB)")


@pytest.mark.parametrize("tail", [b"\x10\x00\x00\x00\x00", b"\x00\x00\x00", b"\x06"])
def test_document_running_past_the_sequence_is_fatal(tail: bytes) -> None:
    # a size beyond the sequence, or fewer than 5 bytes left
    err = parse_error(frame(("documents", docs({"a": 1}) + tail)))
    assert err.code == ErrorCode.ProtocolError and err.fatal
    assert err.message == "BSON document runs past the end of the message"


def test_missing_trailing_nul_is_invalid_bson_in_the_decoders_words() -> None:
    good = bson.encode({"a": 1})
    bad = good[:-1] + b"\x01"
    with pytest.raises(bson.errors.InvalidBSON) as want:
        bson.decode(bad)
    err = parse_error(frame(("documents", good + bad)))
    assert err.code == 22 and not err.fatal
    assert err.message == f"invalid BSON in message: {want.value}"


def test_bad_content_is_found_when_decoded_and_names_the_document() -> None:
    good = bson.encode({"a": 1})
    bad = bytearray(bson.encode({"a": 1, "b": 2}))
    bad[4 + 7] = 0x77  # the second element's type byte: unknown type
    with pytest.raises(bson.errors.InvalidBSON) as want:
        bson.decode(bytes(bad))
    msg = parse(frame(("documents", good + bytes(bad) + good), request_id=12))
    raw = msg.sequences["documents"]
    assert len(raw) == 3
    with pytest.raises(MalformedDocument) as exc:
        raw.decode(bson.DEFAULT_CODEC_OPTIONS)
    assert exc.value.index == 1
    assert exc.value.message == f"invalid BSON in message: {want.value}"
    with pytest.raises(ProtocolError) as perr:
        merge_sequences(msg.body, msg.sequences, request_id=msg.request_id)
    assert perr.value.code == 22 and not perr.value.fatal and perr.value.request_id == 12
    assert perr.value.message == exc.value.message
    # a sequence kept raw is not decoded, so nothing is raised for it
    kept = merge_sequences(msg.body, msg.sequences, keep={"documents"})
    assert kept["documents"] is raw


def test_stream_stays_usable_after_a_bad_document() -> None:
    dec = MessageDecoder()
    dec.feed(frame(("documents", struct.pack("<i", 3) + b"\x00" * 4)))
    with pytest.raises(ProtocolError):
        dec.next_message()
    dec.feed(frame(("documents", docs({"a": 1}))))
    msg = dec.next_message()
    assert isinstance(msg, OpMsg) and len(msg.sequences["documents"]) == 1


def test_sequence_of_many_documents() -> None:
    ds = [{"i": i, "s": "v" * (i % 7)} for i in range(5000)]
    msg = parse(frame(("documents", docs(*ds))))
    raw = msg.sequences["documents"]
    assert len(raw) == 5000
    assert merge_sequences(msg.body, msg.sequences)["documents"] == ds
    assert bson.decode(raw.document(4321)) == ds[4321]

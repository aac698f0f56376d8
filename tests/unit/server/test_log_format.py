"""`server.log_format`: log lines cut at `maxLogSizeKB` as mongod's logv2 cuts them, and
the getLog buffer bounded as mongod's RamLog is.

Checked: a line that fits is the plain relaxed Extended JSON it always was; a large
document attribute is cut at the first value that would pass the limit, with the path
to it, its type and value size under `truncated` and the attribute's BSON size under
`size`; values after the cut value in its document and in enclosing ones are left out,
attributes after it are still written; a long string attribute keeps its first bytes
and never ends inside an escape; limit 0 turns truncation off; the RamLog bounds."""

from __future__ import annotations

import json

import bson
from bson import Binary, Int64, json_util

from server.log import RAMLOG_MAX_BYTES, RAMLOG_MAX_LINES, StructuredLog
from server.log_format import format_line

HEAD = {"t": {"$date": "2026-01-01T00:00:00.000+00:00"}, "s": "I", "c": "COMMAND",
        "id": 51803, "ctx": "conn7", "msg": "Slow query"}
LIMIT = 10 * 1024


def test_a_line_that_fits_is_unchanged() -> None:
    attr = {"ns": "db.$cmd", "command": {"find": "c", "filter": {"a": Int64(5)}}, "ok": 1}
    line = format_line(HEAD, attr, LIMIT)
    assert line == json_util.dumps({**HEAD, "attr": attr}, separators=(",", ":"),
                                   json_options=json_util.RELAXED_JSON_OPTIONS)
    assert "truncated" not in json.loads(line)


def test_a_large_document_is_cut_at_the_first_value_past_the_limit() -> None:
    big = "x" * 1_000_000
    command = {"insert": "c", "documents": [{"_id": 1, "pad": big, "after": 2}, {"_id": 2}],
               "ordered": True, "$db": "db"}
    line = format_line(HEAD, {"type": "command", "command": command, "durationMillis": 7}, LIMIT)
    assert len(line) < LIMIT
    doc = json.loads(line)
    assert doc["attr"]["command"] == {"insert": "c", "documents": [{"_id": 1}]}
    assert doc["attr"]["durationMillis"] == 7  # attributes after the cut one are written
    assert doc["truncated"] == {"command": {"documents": {"0": {"pad": {
        "type": "string", "size": len(big) + 5}}}}}
    assert doc["size"] == {"command": len(bson.encode(command))}


def test_the_cut_falls_where_the_line_reaches_the_limit() -> None:
    docs = [{"_id": i, "v": "y" * 100} for i in range(1000)]
    line = format_line(HEAD, {"command": {"insert": "c", "documents": docs}}, LIMIT)
    doc = json.loads(line)
    kept = doc["attr"]["command"]["documents"]
    n = len(kept) - 1
    assert kept[:n] == docs[:n] and kept[n] == {"_id": n}  # cut inside documents[n]
    assert doc["truncated"] == {"command": {"documents": {str(n): {"v": {"type": "string",
                                                                       "size": 105}}}}}
    written = len(line[:line.index(',"truncated":')])
    value = len(',"v":"' + "y" * 100 + '"')
    assert written <= LIMIT < written + value  # the next value would have passed it


def test_binary_and_nested_arrays_report_their_type() -> None:
    payload = Binary(b"\x01" * 50_000)
    line = format_line(HEAD, {"request": {"keys": [[1, 2], [3, payload]]}}, LIMIT)
    doc = json.loads(line)
    assert doc["attr"]["request"] == {"keys": [[1, 2], [3]]}
    assert doc["truncated"] == {"request": {"keys": {"1": {"1": {"type": "binData",
                                                                  "size": 50_005}}}}}


def test_a_long_string_attribute_keeps_its_first_bytes() -> None:
    text = 'é"\\' * 20_000
    doc = json.loads(format_line(HEAD, {"errmsg": text, "code": 2}, 1024))
    kept = doc["attr"]["errmsg"]
    assert text.startswith(kept) and 1000 < len(json.dumps(kept)) - 2 <= 1024
    assert doc["truncated"] == {"errmsg": {"type": "string", "size": len(json.dumps(text)) - 2}}
    assert "size" not in doc or "errmsg" not in doc["size"]
    assert doc["attr"]["code"] == 2


def test_limit_zero_turns_truncation_off() -> None:
    big = {"pad": "z" * 50_000}
    doc = json.loads(format_line(HEAD, {"command": big}, 0))
    assert doc["attr"]["command"] == big and "truncated" not in doc


def test_ramlog_keeps_at_most_its_lines_and_bytes() -> None:
    log = StructuredLog()
    log.quiet = True
    log._out = open("/dev/null", "w")  # noqa: SIM115
    log.max_attribute_size_kb = 0  # whole lines, to fill the byte bound
    for i in range(RAMLOG_MAX_LINES + 10):
        log.info("TEST", 1, "t", "line", i=i)
    assert len(log.recent) == RAMLOG_MAX_LINES
    assert json.loads(log.recent[-1])["attr"]["i"] == RAMLOG_MAX_LINES + 9
    for _ in range(40):
        log.info("TEST", 2, "t", "big", pad="p" * 100_000)
    assert sum(len(x) for x in log.recent) <= RAMLOG_MAX_BYTES
    assert 5 <= len(log.recent) <= 10
    log.info("TEST", 3, "t", "huge", pad="h" * (2 * RAMLOG_MAX_BYTES))
    assert len(log.recent) == 1  # the newest line always stays
    log._out.close()

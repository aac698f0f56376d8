"""`bucketd inspect`'s fast Extended JSON and column sizes equal the slow references:
json_util's relaxed output, and the size of the decoded `{"<row>": value}` document."""

from __future__ import annotations

import math
from typing import Any

import bson
import pytest
from bson import Decimal128, Int64, ObjectId, json_util
from bson.datetime_ms import DatetimeMS

from server.inspect_cli import _JSON, _fmt, _packed_sizes
from storage.bsoncolumn import compress, decompress
from storage.native import core


@pytest.mark.parametrize("value", [
    None, True, 3, Int64(2**40), 1.5, math.nan, -math.inf, "a\"b", Decimal128("1.5"),
    DatetimeMS(1_700_000_000_000), DatetimeMS(1_700_000_000_123), DatetimeMS(-5),
    DatetimeMS(253402300800000), ObjectId("65a1b2c3d4e5f60718293a4b"),
    {"host": "h1", "n": {"x": [1, DatetimeMS(0)]}}, [1, "x", None], b"\x00\x01",
    [1.5, Int64(3), True, None, "s"], [1.0, math.nan], [math.inf], [Int64(1), Decimal128("2")],
])
def test_fmt_is_json_utils_relaxed_output(value: Any) -> None:
    assert _fmt(value) == json_util.dumps(value, json_options=_JSON)


@pytest.mark.skipif(core is None, reason="the native core was not built")
@pytest.mark.parametrize("rows", [
    [1, 2, 3], list(range(1500)), [1, None, 3, None], [None, "x", None],
    [1.5, None, Int64(7), "s"] * 40,
])
def test_packed_sizes_are_the_decoded_documents(rows: list[Any]) -> None:
    column = compress(bson.encode({str(i): v for i, v in enumerate(rows) if v is not None}),
                      count=len(rows))
    packed = core.decode_column_packed(column, 1 << 22)
    plain = decompress(column)
    assert _packed_sizes(*packed) == (len(bson.decode(plain)), len(plain))

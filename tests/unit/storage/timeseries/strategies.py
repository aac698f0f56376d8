"""Hypothesis strategies for measurements over every BSON type (the native scan's and the
native ingest's differential tests): names, values nested or not, dates before 1970 and
after 2038, object metas in shuffled field orders, wrong or missing times."""

from __future__ import annotations

import math
from typing import Any

from bson import Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS
from hypothesis import strategies as st

NAME = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=5)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
DATE = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(10**13), -1),                    # before 1970
    st.integers(2**31 * 1000, 2**31 * 1000 + 10**12),  # after 2038
    st.integers(1_700_000_000_000, 1_700_000_100_000),
).map(DatetimeMS)
SCALAR = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.nan, 1.0]),
    TEXT,
    st.builds(Binary, st.binary(max_size=6), st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0x80])),
    st.binary(max_size=4),
    st.builds(ObjectId, st.binary(min_size=12, max_size=12)),
    st.booleans(),
    DATE,
    st.none(),
    st.builds(Regex, st.text(st.characters(blacklist_categories=("Cs",),
                                           blacklist_characters="\x00"), max_size=4),
              st.sampled_from(["", "i", "ms", "ilmsux", "x"])),
    st.builds(Code, TEXT),
    st.builds(Code, TEXT, st.dictionaries(NAME, st.integers(-5, 5), max_size=2)),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Int64),
    st.builds(Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    st.sampled_from(["0", "-0", "1.5E+10", "NaN", "-Infinity", "1E-6176"]).map(Decimal128),
    st.just(MinKey()), st.just(MaxKey()),
)
VALUE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(NAME.filter(lambda n: n not in ("$ref", "$id")),
                                            inner, max_size=3)),
    max_leaves=6)


@st.composite
def shuffled(draw: st.DrawFn, v: Any) -> Any:
    """`v` with the fields of every object in another order (arrays keep theirs)."""
    if type(v) is dict:
        items = draw(st.permutations(list(v.items())))
        return {k: draw(shuffled(x)) for k, x in items}
    if type(v) is list:
        return [draw(shuffled(x)) for x in v]
    return v


@st.composite
def measurement(draw: st.DrawFn, metas: list[Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    fields = draw(st.lists(st.tuples(NAME, VALUE), max_size=4))
    if draw(st.booleans()):
        doc["_id"] = draw(st.one_of(st.builds(ObjectId), SCALAR))
    time = draw(DATE) if draw(st.integers(0, 7)) else draw(st.one_of(
        st.none(), st.integers(0, 5), st.integers(0, 5).map(Int64), TEXT,
        st.builds(Timestamp, st.integers(0, 9), st.integers(0, 9)), st.just("missing")))
    for k, v in fields:
        if k not in ("t", "m", "_id"):
            doc[k] = v
    if time != "missing":
        doc["t"] = time
    if metas and draw(st.integers(0, 5)) > 0:
        doc["m"] = draw(shuffled(draw(st.sampled_from(metas))))
    items = draw(st.permutations(list(doc.items())))
    return dict(items)

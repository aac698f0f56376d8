"""`approx_size`, the memory accounting of `$sort` and `$group`: its inline fast path for
a document's scalar fields and its memo of shared embedded documents give the same
estimates as the plain recursive definition."""

from __future__ import annotations

from typing import Any

from bson import Decimal128, Int64, ObjectId
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from query.expressions.reducers import approx_size
from query.spill import SizeEstimator


def _reference(v: Any) -> int:
    t = type(v)
    if t is str:
        return len(v) + 5
    if t is dict:
        return 5 + sum(len(k) + 2 + _reference(x) for k, x in v.items())
    if t is list:
        return 5 + sum(4 + _reference(x) for x in v)
    if t is bytes:
        return len(v) + 5
    if t is Decimal128:
        return 16
    return 8


_SCALAR = st.one_of(st.integers(), st.text(max_size=8), st.binary(max_size=8), st.none(),
                    st.floats(), st.just(Decimal128("1.5")), st.just(Int64(3)),
                    st.just(ObjectId(b"a" * 12)), st.just(DatetimeMS(5)))
_VALUE = st.recursive(_SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(_VALUE)
def test_same_estimate_as_the_definition(v: Any) -> None:
    assert approx_size(v) == _reference(v)
    shared: dict[int, tuple[Any, int]] = {}
    assert approx_size({"a": v, "b": [v]}, shared) == _reference({"a": v, "b": [v]})
    assert approx_size({"a": v, "c": v}, shared) == _reference({"a": v, "c": v})


def test_shared_embedded_documents_are_measured_once() -> None:
    meta = {"hostname": "host_7", "region": "eu"}
    docs = [{"t": DatetimeMS(i), "tags": meta, "v": Int64(i)} for i in range(300)]
    est = SizeEstimator()
    sizes = [est.size(d) for d in docs]
    assert sizes[:256] == [_reference(d) + 64 for d in docs[:256]]
    assert list(est.shared.values()) == [(meta, _reference(meta))]

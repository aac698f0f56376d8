"""`bucket_keys`: a bucket's index keys from its id, meta keystring and time bounds are
the keys `KeyGenerator` gives its document."""

from __future__ import annotations

from typing import Any

import pytest
from bson import ObjectId
from bson.datetime_ms import DatetimeMS
from hypothesis import given
from hypothesis import strategies as st

from storage.indexes import IndexSpec, KeyGenerator
from storage.keystring import encode_date_ms, encode_value
from storage.timeseries.bucket_keys import bucket_keys, key_plans

from . import strategies as gen

_PATHS = ["_id", "meta", "control.min.t", "control.max.t"]
_MS = st.integers(-(2**62), 2**62)


def _spec(key: dict[str, Any], **options: Any) -> IndexSpec:
    return IndexSpec.from_document({"v": 2, "name": "i", "key": key, **options})


_SPECS = st.lists(
    st.builds(lambda paths, dirs, unique, sparse: _spec(
        {p: d for p, d in zip(paths, dirs)}, unique=unique, sparse=sparse),
        st.lists(st.sampled_from(_PATHS), min_size=1, max_size=4, unique=True),
        st.lists(st.sampled_from([1, -1]), min_size=4, max_size=4),
        st.booleans(), st.booleans()),
    min_size=1, max_size=3)


@given(specs=_SPECS, meta=st.dictionaries(gen.NAME, gen.VALUE, max_size=4),
       lo=_MS, hi=_MS)
def test_the_keys_are_the_documents_keys(specs: list[IndexSpec], meta: dict[str, Any],
                                         lo: int, hi: int) -> None:
    """For any index keying only the four parts, in any order and directions, unique
    or sparse, and any document meta: the keys `KeyGenerator` gives the document."""
    plans = key_plans(specs, "t")
    assert plans is not None
    oid = ObjectId()
    doc = {"_id": oid, "control": {"min": {"t": DatetimeMS(lo)}, "max": {"t": DatetimeMS(hi)}},
           "meta": meta}
    mine = bucket_keys(plans, encode_value(oid), encode_value(meta), encode_date_ms(lo), hi)
    theirs = [KeyGenerator(spec).keys(doc) for spec in specs]
    assert list(mine) == [tuple(kb for kb, _ in ks.entries) for ks in theirs]
    assert not any(ks.is_multikey for ks in theirs)


@pytest.mark.parametrize("spec", [
    _spec({"meta.a": 1, "control.min.t": 1}),
    _spec({"meta": 1, "control.min.x": 1}),
    _spec({"data.t": 1}),
    _spec({"meta": 1}, partialFilterExpression={"meta": {"$exists": True}}),
    _spec({"meta": 1}, collation={"locale": "en"}),
])
def test_an_index_keying_anything_else_has_no_plan(spec: IndexSpec) -> None:
    """A path into the meta, another time field, data, a partial filter or a collation:
    no plan, for that index and so for the collection's indexes."""
    assert key_plans([_spec({"_id": 1}), spec], "t") is None
    assert key_plans([_spec({"_id": 1})], "t") is not None

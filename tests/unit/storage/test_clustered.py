"""The clusteredIndex option: mongod's create checks, the stored canonical spec, and what
listIndexes shows for it."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Decimal128, Int64

from storage.clustered import (
    clustered_index_name,
    clustered_list_index,
    is_clustered,
    parse_clustered_index,
)
from storage.errors import MongoError

CANONICAL = {"v": 2, "key": {"_id": 1}, "name": "_id_", "unique": True}


def test_canonical_spec() -> None:
    assert parse_clustered_index({"key": {"_id": 1}, "unique": True}, buckets=False) == \
        {"clusteredIndex": CANONICAL}
    got = parse_clustered_index({"unique": 1, "name": "n", "key": {"_id": Decimal128("1")},
                                 "v": Int64(2)},
                                buckets=False)
    assert got == {"clusteredIndex": {**CANONICAL, "name": "n"}}
    assert list(got["clusteredIndex"]) == ["v", "key", "name", "unique"]
    assert parse_clustered_index(False, buckets=False) is None
    assert parse_clustered_index(True, buckets=True) == {"clusteredIndex": True}


@pytest.mark.parametrize(("value", "buckets", "code"), [
    ({"key": {"_id": 1}}, False, 40414),
    ({"key": {"_id": 1}, "unique": True, "x": 1}, False, 40415),
    ({"key": {"_id": 1}, "unique": 0}, False, 5979700),
    ({"key": {"a": 1}, "unique": True}, False, 197),
    ({"key": {"_id": 1}, "unique": True, "v": 3}, False, 5979704),
    ({"key": {"_id": 1}, "unique": True, "v": float("nan")}, False, 5979704),
    ({"key": {"_id": 1}, "unique": True, "v": Decimal128("2.5")}, False, None),
    ({"key": 1, "unique": True}, False, 14),
    ("x", False, 14),
    (True, False, 5979703),
    ({"key": {"_id": 1}, "unique": True}, True, 5979703),
])
def test_refusals(value: Any, buckets: bool, code: int | None) -> None:
    if code is None:  # v is an IDL safeInt: 2.5 truncates to 2
        assert parse_clustered_index(value, buckets=buckets) == {"clusteredIndex": CANONICAL}
        return
    with pytest.raises(MongoError) as exc:
        parse_clustered_index(value, buckets=buckets)
    assert exc.value.code == code


def test_how_the_id_index_is_shown() -> None:
    named = {"clusteredIndex": {**CANONICAL, "name": "ck"}, "expireAfterSeconds": Int64(5)}
    assert clustered_list_index(named) == {**CANONICAL, "name": "ck",
                                           "expireAfterSeconds": 5, "clustered": True}
    assert clustered_index_name(named) == "ck" and is_clustered(named)
    legacy = {"clusteredIndex": True}  # time-series buckets: no _id index to show
    assert clustered_list_index(legacy) is None and clustered_index_name(legacy) is None
    assert is_clustered(legacy) and not is_clustered({})

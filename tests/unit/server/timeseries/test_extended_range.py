"""MongoDB's heuristic for "this buckets collection may hold extended-range dates"
(`server.timeseries.service.may_hold_extended_range`): the greatest bucket `_id` has its top
bit set; an `_id` that is not an ObjectId proves nothing."""

from __future__ import annotations

from bson import ObjectId

from server.timeseries.service import may_hold_extended_range
from storage.catalog import Catalog


def _buckets(ids: list) -> bool:
    cat = Catalog.open(engine="memory")
    with cat.transaction():
        cat.create_collection("db", "system.buckets.c", {})
        coll = cat.get_collection("db", "system.buckets.c")
        if ids:
            coll.insert_many([{"_id": i} for i in ids])
    try:
        return may_hold_extended_range(coll)
    finally:
        cat.close()


def test_the_greatest_id_decides() -> None:
    standard = [ObjectId(bytes([0x65]) + bytes(11)), ObjectId(bytes([0x7F]) + b"\xff" * 11)]
    assert _buckets([]) is False
    assert _buckets(standard) is False
    assert _buckets([*standard, ObjectId(b"\x80" + bytes(11))]) is True   # 2038..2106
    assert _buckets([ObjectId(b"\xfa" + bytes(11))]) is True               # 1902..1969


def test_ids_that_are_not_object_ids_count_as_extended() -> None:
    standard = ObjectId(bytes([0x65]) + bytes(11))
    assert _buckets([standard, 5]) is True
    assert _buckets([standard, "x"]) is True
    assert _buckets([True, standard]) is True

"""Which fields a pipeline reads (used to decode only those time-series columns)."""

from __future__ import annotations

import pytest

from query.dependencies import pipeline_fields

CASES = [
    ([{"$match": {"t": {"$gt": 1}, "m.h": 1}}, {"$group": {"_id": "$m.h", "x": {"$max": "$v"}}}],
     {"t", "m", "v"}),
    ([{"$group": {"_id": {"$dateTrunc": {"date": "$time", "unit": "minute"}},
                  "a": {"$avg": "$usage"}}}, {"$sort": {"_id": 1}}], {"time", "usage"}),
    ([{"$sort": {"h": 1, "t": -1}}, {"$group": {"_id": "$h", "last": {"$first": "$$ROOT"}}}],
     None),
    ([{"$match": {"a": 1}}], None),  # documents themselves go to the client
    ([{"$project": {"a": 1, "b": "$c.d"}}], {"a", "c", "_id"}),
    ([{"$project": {"a": 0}}], None),
    ([{"$match": {"$where": "x"}}, {"$count": "n"}], None),
    ([{"$match": {"$expr": {"$gt": ["$a", "$b"]}}}, {"$count": "n"}], {"a", "b"}),
    ([{"$setWindowFields": {"partitionBy": "$p", "sortBy": {"t": 1},
                            "output": {"s": {"$sum": "$v"}}}},
      {"$group": {"_id": "$p", "m": {"$max": "$s"}}}], {"p", "t", "v", "s"}),
    ([{"$lookup": {"from": "x", "localField": "a", "foreignField": "b", "as": "c"}},
      {"$count": "n"}], None),
]


@pytest.mark.parametrize("stages,expected", CASES)
def test_pipeline_fields(stages, expected) -> None:
    assert pipeline_fields(stages) == expected

"""$setWindowFields window functions with the manual's examples (cakeSales, deliveryFleet,
powerConsumption, stockPrices; pages
https://www.mongodb.com/docs/manual/reference/operator/aggregation/<function>/) and
properties checking the sliding implementations against a naive recomputation."""

from __future__ import annotations

import math
from typing import Any

import pytest
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from query.pipeline import compile_pipeline
from storage.errors import MongoError

pytest.importorskip("query.sort", reason="needs the query.sort module (query-match branch)")


def d(s: str) -> DatetimeMS:
    from datetime import UTC, datetime
    return DatetimeMS(round(datetime.fromisoformat(s.replace("Z", "+00:00"))
                            .astimezone(UTC).timestamp() * 1000))


def run(stages: list[dict], docs: list[dict]) -> list[dict]:
    return list(compile_pipeline(stages).run(docs))


CAKES = [
    {"_id": 0, "type": "chocolate", "orderDate": d("2020-05-18T14:10:30Z"), "state": "CA",
     "price": 13, "quantity": 120},
    {"_id": 1, "type": "chocolate", "orderDate": d("2021-03-20T11:30:05Z"), "state": "WA",
     "price": 14, "quantity": 140},
    {"_id": 2, "type": "vanilla", "orderDate": d("2021-01-11T06:31:15Z"), "state": "CA",
     "price": 12, "quantity": 145},
    {"_id": 3, "type": "vanilla", "orderDate": d("2020-02-08T13:13:23Z"), "state": "WA",
     "price": 13, "quantity": 104},
    {"_id": 4, "type": "strawberry", "orderDate": d("2019-05-18T16:09:01Z"), "state": "CA",
     "price": 41, "quantity": 162},
    {"_id": 5, "type": "strawberry", "orderDate": d("2019-01-08T06:12:03Z"), "state": "WA",
     "price": 43, "quantity": 134},
]

BY_STATE_DATE = {"partitionBy": "$state", "sortBy": {"orderDate": 1}}
CUMULATIVE = {"documents": ["unbounded", "current"]}


def field(out: list[dict], name: str) -> list[Any]:
    return [o[name] for o in out]


@pytest.mark.parametrize("spec,expected", [
    # setWindowFields/: cumulative quantity per state (CA then WA, each by orderDate)
    ({**BY_STATE_DATE, "output": {"v": {"$sum": "$quantity", "window": CUMULATIVE}}},
     [162, 282, 427, 134, 238, 378]),
    # per year, moving average over the previous and current document
    ({"partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1},
      "output": {"v": {"$avg": "$quantity", "window": {"documents": [-1, 0]}}}},
     [134.0, 148.0, 104.0, 112.0, 145.0, 142.5]),
    ({**BY_STATE_DATE, "output": {"v": {"$avg": "$quantity", "window": CUMULATIVE}}},
     [162.0, 141.0, 142.33333333333334, 134.0, 119.0, 126.0]),
    ({**BY_STATE_DATE, "output": {"v": {"$count": {}, "window": CUMULATIVE}}}, [1, 2, 3, 1, 2, 3]),
    ({**BY_STATE_DATE, "output": {"v": {"$min": "$quantity", "window": CUMULATIVE}}},
     [162, 120, 120, 134, 104, 104]),
    ({**BY_STATE_DATE, "output": {"v": {"$max": "$quantity", "window": CUMULATIVE}}},
     [162, 162, 162, 134, 134, 140]),
    ({**BY_STATE_DATE, "output": {"v": {"$first": "$type", "window": CUMULATIVE}}},
     ["strawberry"] * 6),
    ({**BY_STATE_DATE, "output": {"v": {"$last": "$type",
                                         "window": {"documents": ["current", "unbounded"]}}}},
     ["vanilla"] * 3 + ["chocolate"] * 3),
    ({**BY_STATE_DATE, "output": {"v": {"$push": "$quantity", "window": CUMULATIVE}}},
     [[162], [162, 120], [162, 120, 145], [134], [134, 104], [134, 104, 140]]),
    ({**BY_STATE_DATE, "output": {"v": {"$stdDevPop": "$quantity", "window": CUMULATIVE}}},
     [0.0, 21.0, 17.249798710580816, 0.0, 15.0, 15.748015748023622]),
    ({**BY_STATE_DATE, "output": {"v": {"$stdDevSamp": "$quantity", "window": CUMULATIVE}}},
     [None, 29.698484809834994, 21.1266025033211, None, 21.213203435596427,
      19.28730152198591]),
    ({**BY_STATE_DATE, "output": {"v": {"$covariancePop": [{"$year": "$orderDate"},
                                                            "$quantity"], "window": CUMULATIVE}}},
     [0.0, -10.5, -5.666666666666667, 0.0, -7.5, 2.0]),
    ({**BY_STATE_DATE, "output": {"v": {"$covarianceSamp": [{"$year": "$orderDate"},
                                                             "$quantity"],
                                        "window": CUMULATIVE}}},
     [None, -21.0, -8.5, None, -15.0, 3.0]),
    # time-range window: orders up to 10 months after the current one
    ({**BY_STATE_DATE, "output": {"v": {"$push": "$_id",
                                        "window": {"range": ["unbounded", 10], "unit": "month"}}}},
     [[4], [4, 0, 2], [4, 0, 2], [5], [5, 3], [5, 3, 1]]),
    # rank/ denseRank/ documentNumber/ shift/ (partition by state, quantity descending)
    ({"partitionBy": "$state", "sortBy": {"quantity": -1}, "output": {"v": {"$rank": {}}}},
     [1, 2, 3, 1, 2, 3]),
    ({"partitionBy": "$state", "sortBy": {"quantity": -1},
      "output": {"v": {"$documentNumber": {}}}}, [1, 2, 3, 1, 2, 3]),
    ({"partitionBy": "$state", "sortBy": {"quantity": -1},
      "output": {"v": {"$shift": {"output": "$quantity", "by": 1,
                                  "default": "Not available"}}}},
     [145, 120, "Not available", 134, 104, "Not available"]),
    ({"partitionBy": "$state", "sortBy": {"quantity": -1},
      "output": {"v": {"$shift": {"output": "$quantity", "by": -1,
                                  "default": "Not available"}}}},
     ["Not available", 162, 145, "Not available", 140, 134]),
    # addToSet/ over the whole partition (order unspecified: compared as a set below)
    ({**BY_STATE_DATE, "output": {"v": {"$addToSet": "$type"}}}, None),
])
def test_cake_sales(spec: dict, expected: list | None) -> None:
    out = run([{"$setWindowFields": spec}], CAKES)
    got = field(out, "v")
    if expected is None:
        assert [sorted(g) for g in got] == [sorted(["strawberry", "chocolate", "vanilla"])] * 6
        return
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if isinstance(e, float):
            assert math.isclose(g, e, rel_tol=1e-12), (got, expected)
        else:
            assert g == e, (got, expected)


def test_rank_ties_and_dense_rank() -> None:
    docs = [{"q": 5}, {"q": 3}, {"q": 5}, {"q": 1}]
    out = run([{"$setWindowFields": {"sortBy": {"q": -1}, "output": {
        "r": {"$rank": {}}, "dr": {"$denseRank": {}}, "n": {"$documentNumber": {}}}}}], docs)
    assert [(o["q"], o["r"], o["dr"], o["n"]) for o in out] == \
        [(5, 1, 1, 1), (5, 1, 1, 2), (3, 3, 2, 3), (1, 4, 3, 4)]


FLEET = [
    {"truckID": "1", "timeStamp": d("2020-05-18T14:10:30Z"), "miles": 1295.1},
    {"truckID": "1", "timeStamp": d("2020-05-18T14:11:00Z"), "miles": 1295.63},
    {"truckID": "1", "timeStamp": d("2020-05-18T14:11:30Z"), "miles": 1296.16},
    {"truckID": "1", "timeStamp": d("2020-05-18T14:12:00Z"), "miles": 1298.19},
    {"truckID": "2", "timeStamp": d("2020-05-18T14:10:30Z"), "miles": 10234.1},
    {"truckID": "2", "timeStamp": d("2020-05-18T14:11:00Z"), "miles": 10234.33},
    {"truckID": "2", "timeStamp": d("2020-05-18T14:11:30Z"), "miles": 10234.73},
    {"truckID": "2", "timeStamp": d("2020-05-18T14:12:00Z"), "miles": 10235.13},
]


def test_derivative() -> None:
    # derivative/: average speed over the last 30 seconds, in miles per hour
    out = run([{"$setWindowFields": {
        "partitionBy": "$truckID", "sortBy": {"timeStamp": 1},
        "output": {"speed": {"$derivative": {"input": "$miles", "unit": "hour"},
                             "window": {"range": [-30, 0], "unit": "second"}}}}},
        {"$match": {"speed": {"$gt": 50}}}], FLEET)
    speeds = [(o["truckID"], o["speed"]) for o in out]
    expected = [("1", 63.60000000001273), ("1", 63.59999999999127), ("1", 243.60000000000582)]
    assert [t for t, _ in speeds] == [t for t, _ in expected]
    for (_, g), (_, e) in zip(speeds, expected):
        assert math.isclose(g, e, rel_tol=1e-9)


POWER = [
    {"powerMeterID": "1", "timeStamp": d("2020-05-18T14:10:30Z"), "kilowatts": 2.95},
    {"powerMeterID": "1", "timeStamp": d("2020-05-18T14:11:00Z"), "kilowatts": 2.7},
    {"powerMeterID": "1", "timeStamp": d("2020-05-18T14:11:30Z"), "kilowatts": 2.6},
    {"powerMeterID": "1", "timeStamp": d("2020-05-18T14:12:00Z"), "kilowatts": 2.98},
    {"powerMeterID": "2", "timeStamp": d("2020-05-18T14:10:30Z"), "kilowatts": 2.5},
    {"powerMeterID": "2", "timeStamp": d("2020-05-18T14:11:00Z"), "kilowatts": 2.25},
    {"powerMeterID": "2", "timeStamp": d("2020-05-18T14:11:30Z"), "kilowatts": 2.75},
    {"powerMeterID": "2", "timeStamp": d("2020-05-18T14:12:00Z"), "kilowatts": 2.82},
]


def test_integral() -> None:
    # integral/: kilowatt-hours so far per meter
    out = run([{"$setWindowFields": {
        "partitionBy": "$powerMeterID", "sortBy": {"timeStamp": 1},
        "output": {"kwh": {"$integral": {"input": "$kilowatts", "unit": "hour"},
                           "window": {"range": ["unbounded", "current"], "unit": "minute"}}}}}],
        POWER)
    expected = [0, 0.023541666666666666, 0.045625, 0.068875,
                0, 0.019791666666666666, 0.040625, 0.06383333333333334]
    for o, e in zip(out, expected):
        assert math.isclose(o["kwh"], e, rel_tol=1e-9, abs_tol=1e-15)


STOCKS = [
    {"stock": "ABC", "date": d("2020-05-18T20:00:00Z"), "price": 13},
    {"stock": "ABC", "date": d("2020-05-19T20:00:00Z"), "price": 15.4},
    {"stock": "ABC", "date": d("2020-05-20T20:00:00Z"), "price": 12},
    {"stock": "ABC", "date": d("2020-05-21T20:00:00Z"), "price": 11.7},
    {"stock": "DEF", "date": d("2020-05-18T20:00:00Z"), "price": 82},
    {"stock": "DEF", "date": d("2020-05-19T20:00:00Z"), "price": 94},
    {"stock": "DEF", "date": d("2020-05-20T20:00:00Z"), "price": 112},
    {"stock": "DEF", "date": d("2020-05-21T20:00:00Z"), "price": 97.3},
]


@pytest.mark.parametrize("arg,expected", [
    # expMovingAvg/: N = 2 and alpha = 0.75
    ({"N": 2}, [13, 14.6, 12.866666666666667, 12.088888888888889,
                82, 90, 104.66666666666667, 99.75555555555556]),
    ({"alpha": 0.75}, [13, 14.8, 12.7, 11.95, 82, 91, 106.75, 99.6625]),
])
def test_exp_moving_avg(arg: dict, expected: list) -> None:
    out = run([{"$setWindowFields": {"partitionBy": "$stock", "sortBy": {"date": 1},
                                     "output": {"ema": {"$expMovingAvg": {"input": "$price",
                                                                          **arg}}}}}], STOCKS)
    for o, e in zip(out, expected):
        assert math.isclose(o["ema"], e, rel_tol=1e-12), (o, e)


GAPS = [
    {"time": d("2021-03-08T09:00:00Z"), "price": 500},
    {"time": d("2021-03-08T10:00:00Z")},
    {"time": d("2021-03-08T11:00:00Z"), "price": 515},
    {"time": d("2021-03-08T12:00:00Z")},
    {"time": d("2021-03-08T13:00:00Z")},
    {"time": d("2021-03-08T14:00:00Z"), "price": 485},
]


def test_locf_and_linear_fill() -> None:
    # locf/ and linearFill/: the stock price gaps example
    out = run([{"$setWindowFields": {"sortBy": {"time": 1},
                                     "output": {"price": {"$locf": "$price"}}}}], GAPS)
    assert field(out, "price") == [500, 500, 515, 515, 515, 485]
    out = run([{"$setWindowFields": {"sortBy": {"time": 1},
                                     "output": {"price": {"$linearFill": "$price"}}}}], GAPS)
    assert field(out, "price") == [500, 507.5, 515, 505.0, 495.0, 485]


@pytest.mark.parametrize("spec,code", [
    ({"output": {"v": {"$foo": "$a"}}}, 9),
    ({"output": {"v": {"$sum": "$a", "window": {"documents": [-1, 0]}}}}, 5339901),
    ({"sortBy": {"a": 1, "b": 1},
      "output": {"v": {"$sum": "$a", "window": {"range": [-1, 0]}}}}, 5339902),
    ({"sortBy": {"a": 1}, "output": {"v": {"$sum": "$a", "window": {"documents": [1, 0]}}}},
     5339900),
    ({"output": {"v": {"$rank": {}}}}, 5371602),
    ({"sortBy": {"a": 1}, "output": {"v": {"$rank": 1}}}, 5371603),
    ({"sortBy": {"a": 1}, "output": {"v": {"$rank": {}, "window": {"documents": [0, 0]}}}},
     5371601),
    ({"sortBy": {"a": 1}, "output": {"v": {"$sum": 1}, "v.w": {"$sum": 1}}}, 6307900),
    ({"sortBy": {"a": 1}, "output": {"v": {"$sum": 1, "$max": 1}}}, 9),
    ({"sortBy": {"a": 1}, "output": {"v": 1}}, 9),
    ({"output": {"v": {"$sum": 1}}, "x": 1}, 40415),
    ({"sortBy": {"a": 1}}, 40414),
    ({"sortBy": {"a": 1}, "output": {"v": {"$shift": {"output": "$a", "by": 1.5}}}}, 9),
    ({"sortBy": {"a": 1}, "output": {"v": {"$expMovingAvg": {"input": "$a"}}}}, 9),
    ({"sortBy": {"a": 1},
      "output": {"v": {"$derivative": {"input": "$a", "unit": "month"},
                       "window": {"documents": [-1, 0]}}}}, 5490710),
])
def test_window_parse_errors(spec: dict, code: int) -> None:
    with pytest.raises(MongoError) as e:
        run([{"$setWindowFields": spec}], [{"a": 1}])
    assert e.value.code == code, e.value


@pytest.mark.parametrize("spec,docs,code", [
    ({"sortBy": {"a": 1}, "output": {"v": {"$sum": 1, "window": {"range": [-1, 0]}}}},
     [{"a": "x"}], 5429414),
    ({"sortBy": {"a": 1}, "output": {"v": {"$sum": 1, "window": {"range": [-1, 0]}}}},
     [{"a": DatetimeMS(0)}], 5429413),
    ({"sortBy": {"a": 1}, "output": {"v": {"$sum": 1, "window": {"range": [-1, 0],
                                                                  "unit": "day"}}}},
     [{"a": 5}], 5429513),
    ({"sortBy": {"a": 1}, "output": {"v": {"$derivative": {"input": "$b"},
                                           "window": {"documents": [-1, 0]}}}},
     [{"a": DatetimeMS(0), "b": 1}, {"a": DatetimeMS(1), "b": 2}], 5624901),
    ({"sortBy": {"a": 1}, "output": {"v": {"$linearFill": "$b"}}},
     [{"a": 1, "b": 1}, {"a": 1}], 6050106),
])
def test_window_runtime_errors(spec: dict, docs: list, code: int) -> None:
    with pytest.raises(MongoError) as e:
        run([{"$setWindowFields": spec}], docs)
    assert e.value.code == code, e.value


def _naive(values: list[Any], lo: int | None, hi: int | None, fn: Any) -> list[Any]:
    n = len(values)
    out = []
    for i in range(n):
        a = 0 if lo is None else max(0, i + lo)
        b = n - 1 if hi is None else min(n - 1, i + hi)
        window = [v for v in values[a:b + 1] if v is not None] if b >= a else []
        out.append(fn(window))
    return out


@settings(max_examples=60, deadline=None)
@given(values=st.one_of(
    st.lists(st.one_of(st.none(), st.integers(-50, 50)), min_size=1, max_size=40),
    st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=40)),
       lo=st.one_of(st.none(), st.integers(-5, 2)), width=st.integers(0, 6))
def test_sliding_windows_match_naive(values: list, lo: int | None, width: int) -> None:
    hi = None if lo is None and width > 4 else (lo or 0) + width
    docs = [{"i": i, "v": v} for i, v in enumerate(values)]
    window = {"documents": ["unbounded" if lo is None else lo,
                            "unbounded" if hi is None else hi]}
    out = run([{"$setWindowFields": {"sortBy": {"i": 1}, "output": {
        "s": {"$sum": "$v", "window": window}, "mn": {"$min": "$v", "window": window},
        "mx": {"$max": "$v", "window": window}, "c": {"$count": {}, "window": window},
        "a": {"$avg": "$v", "window": window},
        "sd": {"$stdDevPop": "$v", "window": window}}}}], docs)
    for g, e in zip(field(out, "s"), _naive(values, lo, hi, sum)):
        assert type(g) is type(e) and math.isclose(g, e, abs_tol=1e-9), (g, e)
    assert field(out, "mn") == _naive(values, lo, hi, lambda w: min(w) if w else None)
    assert field(out, "mx") == _naive(values, lo, hi, lambda w: max(w) if w else None)
    n = len(values)
    counts = []
    for i in range(n):
        a = 0 if lo is None else max(0, i + lo)
        b = n - 1 if hi is None else min(n - 1, i + hi)
        counts.append(max(0, b - a + 1))
    assert field(out, "c") == counts
    for g, e in zip(field(out, "a"), _naive(values, lo, hi,
                                            lambda w: sum(w) / len(w) if w else None)):
        assert (g is None and e is None) or math.isclose(g, e, abs_tol=1e-9)
    for g, e in zip(field(out, "sd"), _naive(values, lo, hi, lambda w: math.sqrt(
            sum((x - sum(w) / len(w)) ** 2 for x in w) / len(w)) if w else None)):
        scale = max([1.0] + [abs(v) for v in values if v is not None])
        # a sliding window removes values from running sums: the cancellation error is
        # in the variance (~1e-16 scale², so up to ~1e-8 scale in the deviation of a
        # window of equal values), so the variances are compared
        assert (g is None and e is None) or math.isclose(g * g, e * e,
                                                         abs_tol=1e-9 * scale * scale)


def test_range_window_over_numbers_and_current_bound() -> None:
    docs = [{"t": t} for t in (1, 2, 2, 4, 7, 8)]
    out = run([{"$setWindowFields": {"sortBy": {"t": 1}, "output": {
        "near": {"$push": "$t", "window": {"range": [-1, 1]}},
        "upto": {"$push": "$t", "window": {"range": ["unbounded", "current"]}}}}}], docs)
    assert field(out, "near") == [[1, 2, 2], [1, 2, 2], [1, 2, 2], [4], [7, 8], [7, 8]]
    assert field(out, "upto")[1] == [1, 2]   # "current" is the current document, not its value


def test_partition_by_missing_and_output_dotted_field() -> None:
    docs = [{"g": 1, "v": 1}, {"v": 2}, {"g": None, "v": 3}, {"g": 1, "v": 4}]
    out = run([{"$setWindowFields": {"partitionBy": "$g", "output": {"s.total": {"$sum": "$v"}}}}],
              docs)
    totals = sorted((o.get("g"), o["s"]["total"]) for o in out if o.get("g") is not None)
    assert totals == [(1, 5), (1, 5)]
    assert sorted(o["s"]["total"] for o in out if o.get("g") is None) == [5, 5]

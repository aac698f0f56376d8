"""Date expressions: parts, formatting, parsing, arithmetic, differences and truncation, with
time zones (Olson names and offsets), DST transitions and dates before 1970.

Expected values: the MongoDB manual's examples (pages cited per group,
https://www.mongodb.com/docs/manual/reference/operator/aggregation/<operator>/), and Python's
own calendar (`datetime` + `zoneinfo`) as an independent oracle for the property tests.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from bson import Int64
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from query.expressions import compile_expression
from storage.errors import MongoError


def d(s: str) -> DatetimeMS:
    dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return DatetimeMS(round(dt.timestamp() * 1000))


def ev(expr: Any, doc: dict | None = None) -> Any:
    return compile_expression(expr).evaluate(doc or {}, {})


SALE = {"date": d("2014-01-01T08:15:39.736Z")}

CASES = [
    # year/ month/ dayOfMonth/ hour/ minute/ second/ millisecond/ dayOfYear/ dayOfWeek/ week/
    ({"$year": "$date"}, SALE, 2014), ({"$month": "$date"}, SALE, 1),
    ({"$dayOfMonth": "$date"}, SALE, 1), ({"$hour": "$date"}, SALE, 8),
    ({"$minute": "$date"}, SALE, 15), ({"$second": "$date"}, SALE, 39),
    ({"$millisecond": "$date"}, SALE, 736), ({"$dayOfYear": "$date"}, SALE, 1),
    ({"$dayOfWeek": "$date"}, SALE, 4), ({"$week": "$date"}, SALE, 0),
    ({"$hour": {"date": "$date", "timezone": "America/Chicago"}}, SALE, 2),
    ({"$minute": {"date": "$date", "timezone": "+05:30"}}, SALE, 45),
    ({"$year": [d("2014-01-01T08:15:39.736Z")]}, {}, 2014),
    ({"$year": None}, {}, None), ({"$year": "$nope"}, {}, None),
    ({"$year": {"date": "$date", "timezone": None}}, SALE, None),
    # isoWeek/ isoWeekYear/ isoDayOfWeek/: 2016-01-01 is in ISO week 53 of 2015
    ({"$isoWeek": d("2016-01-01T00:00:00Z")}, {}, 53),
    ({"$isoWeekYear": d("2016-01-01T00:00:00Z")}, {}, 2015),
    ({"$isoDayOfWeek": d("2016-01-01T00:00:00Z")}, {}, 5),
    ({"$week": d("2016-01-03T00:00:00Z")}, {}, 1),
    # Before 1970 and before 1900
    ({"$year": DatetimeMS(-1)}, {}, 1969), ({"$millisecond": DatetimeMS(-1)}, {}, 999),
    ({"$second": DatetimeMS(-1)}, {}, 59), ({"$dayOfWeek": DatetimeMS(-1)}, {}, 4),
    ({"$dayOfYear": d("1800-12-31T12:00:00Z")}, {}, 365),
    ({"$month": d("1600-02-29T00:00:00Z")}, {}, 2),
    # DST: 01:30 happens twice in New York on 2021-11-07
    ({"$hour": {"date": d("2021-11-07T05:30:00Z"), "timezone": "America/New_York"}}, {}, 1),
    ({"$hour": {"date": d("2021-11-07T06:30:00Z"), "timezone": "America/New_York"}}, {}, 1),
    ({"$dateToString": {"date": d("2021-11-07T05:30:00Z"), "format": "%H:%M%z",
                        "timezone": "America/New_York"}}, {}, "01:30-0400"),
    ({"$dateToString": {"date": d("2021-11-07T06:30:00Z"), "format": "%H:%M%z",
                        "timezone": "America/New_York"}}, {}, "01:30-0500"),
    # dateToString/: the sales example with formats, time zones and offsets
    ({"$dateToString": {"format": "%Y-%m-%d", "date": "$date"}}, SALE, "2014-01-01"),
    ({"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$date",
                        "timezone": "America/New_York"}}, SALE, "03:15:39:736-0500"),
    ({"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$date", "timezone": "+04:30"}},
     SALE, "12:45:39:736+0430"),
    ({"$dateToString": {"format": "%Z", "date": "$date", "timezone": "America/New_York"}},
     SALE, "-300"),
    ({"$dateToString": {"format": "%Z", "date": "$date", "timezone": "+04:30"}}, SALE, "270"),
    ({"$dateToString": {"format": "%b", "date": "$date", "timezone": "+04:30"}}, SALE, "Jan"),
    ({"$dateToString": {"format": "%B", "date": "$date", "timezone": "+04:30"}}, SALE, "January"),
    ({"$dateToString": {"format": "%j %w %U %u %V %G %%", "date": "$date"}}, SALE,
     "001 4 00 3 01 2014 %"),
    ({"$dateToString": {"date": "$date"}}, SALE, "2014-01-01T08:15:39.736Z"),
    ({"$dateToString": {"date": "$date", "timezone": "Asia/Tokyo"}}, SALE,
     "2014-01-01T17:15:39.736"),
    ({"$dateToString": {"date": DatetimeMS(-1)}}, {}, "1969-12-31T23:59:59.999Z"),
    ({"$dateToString": {"date": "$nope", "onNull": "no date"}}, {}, "no date"),
    ({"$dateToString": {"date": "$nope"}}, {}, None),
    # dateToParts/
    ({"$dateToParts": {"date": d("2017-01-01T01:29:09.123Z")}}, {},
     {"year": 2017, "month": 1, "day": 1, "hour": 1, "minute": 29, "second": 9,
      "millisecond": 123}),
    ({"$dateToParts": {"date": d("2017-01-01T01:29:09.123Z"), "iso8601": True}}, {},
     {"isoWeekYear": 2016, "isoWeek": 52, "isoDayOfWeek": 7, "hour": 1, "minute": 29,
      "second": 9, "millisecond": 123}),
    ({"$dateToParts": {"date": d("2017-01-01T01:29:09.123Z"), "timezone": "America/New_York"}},
     {}, {"year": 2016, "month": 12, "day": 31, "hour": 20, "minute": 29, "second": 9,
          "millisecond": 123}),
    # dateFromParts/ (values outside the usual ranges carry over)
    ({"$dateFromParts": {"year": 2017, "month": 2, "day": 8, "hour": 12}}, {},
     d("2017-02-08T12:00:00Z")),
    ({"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 6, "isoDayOfWeek": 3, "hour": 12}}, {},
     d("2017-02-08T12:00:00Z")),
    ({"$dateFromParts": {"year": 2016, "month": 12, "day": 31, "hour": 23, "minute": 46,
                         "second": 12, "timezone": "America/New_York"}}, {},
     d("2017-01-01T04:46:12Z")),
    ({"$dateFromParts": {"year": 2017, "month": 14, "day": 1, "hour": 12}}, {},
     d("2018-02-01T12:00:00Z")),
    ({"$dateFromParts": {"year": 2017, "month": 0, "day": 1}}, {}, d("2016-12-01T00:00:00Z")),
    ({"$dateFromParts": {"year": 2017, "month": 3, "day": 0}}, {}, d("2017-02-28T00:00:00Z")),
    ({"$dateFromParts": {"year": 1969, "month": 12, "day": 31, "hour": 23, "minute": 59,
                         "second": 59, "millisecond": 999}}, {}, DatetimeMS(-1)),
    ({"$dateFromParts": {"year": 2017, "month": None}}, {}, None),
    # dateFromString/
    ({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787",
                          "timezone": "America/New_York"}}, {}, d("2017-02-08T17:10:40.787Z")),
    ({"$dateFromString": {"dateString": "2017-02-08", "timezone": "-05:00"}}, {},
     d("2017-02-08T05:00:00Z")),
    ({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787Z"}}, {},
     d("2017-02-08T12:10:40.787Z")),
    ({"$dateFromString": {"dateString": "06-15-2018", "format": "%m-%d-%Y"}}, {},
     d("2018-06-15T00:00:00Z")),
    ({"$dateFromString": {"dateString": "15/06/2018", "format": "%d/%m/%Y"}}, {},
     d("2018-06-15T00:00:00Z")),
    ({"$dateFromString": {"dateString": "2018-06-15 10:30:00 +02:00"}}, {},
     d("2018-06-15T08:30:00Z")),
    ({"$dateFromString": {"dateString": "1960-06-15T10:30:00Z"}}, {}, d("1960-06-15T10:30:00Z")),
    ({"$dateFromString": {"dateString": "not a date", "onError": "bad"}}, {}, "bad"),
    ({"$dateFromString": {"dateString": None, "onNull": "null!"}}, {}, "null!"),
    ({"$dateFromString": {"dateString": "2021-03-14T02:30:00", "timezone": "America/New_York"}},
     {}, d("2021-03-14T07:30:00Z")),
    # dateAdd/ dateSubtract/: days, month-end adjustment, DST (Denver, 2021-03-14)
    ({"$dateAdd": {"startDate": d("2020-10-31T12:10:05Z"), "unit": "day", "amount": 3}}, {},
     d("2020-11-03T12:10:05Z")),
    ({"$dateAdd": {"startDate": d("2021-01-31T00:00:00Z"), "unit": "month", "amount": 1}}, {},
     d("2021-02-28T00:00:00Z")),
    ({"$dateAdd": {"startDate": d("2020-01-31T00:00:00Z"), "unit": "month", "amount": 1}}, {},
     d("2020-02-29T00:00:00Z")),
    ({"$dateAdd": {"startDate": d("2021-03-13T12:00:00Z"), "unit": "day", "amount": 1,
                   "timezone": "America/Denver"}}, {}, d("2021-03-14T11:00:00Z")),
    ({"$dateAdd": {"startDate": d("2021-03-13T12:00:00Z"), "unit": "hour", "amount": 24,
                   "timezone": "America/Denver"}}, {}, d("2021-03-14T12:00:00Z")),
    ({"$dateAdd": {"startDate": d("2020-11-01T05:50:02Z"), "unit": "hour", "amount": 1,
                   "timezone": "America/New_York"}}, {}, d("2020-11-01T06:50:02Z")),
    ({"$dateSubtract": {"startDate": d("2021-01-01T00:00:00Z"), "unit": "month", "amount": 1}},
     {}, d("2020-12-01T00:00:00Z")),
    ({"$dateSubtract": {"startDate": d("1970-01-01T00:00:00Z"), "unit": "year", "amount": 1}},
     {}, d("1969-01-01T00:00:00Z")),
    ({"$dateAdd": {"startDate": d("2021-01-01T00:00:00Z"), "unit": "quarter", "amount": -1}}, {},
     d("2020-10-01T00:00:00Z")),
    ({"$dateAdd": {"startDate": None, "unit": "day", "amount": 1}}, {}, None),
    # dateDiff/: boundaries crossed; startOfWeek; DST hours
    ({"$dateDiff": {"startDate": d("2020-12-31T23:59:59Z"), "endDate": d("2021-01-01T00:00:01Z"),
                    "unit": "year"}}, {}, Int64(1)),
    ({"$dateDiff": {"startDate": d("2020-12-31T23:59:59Z"), "endDate": d("2021-01-01T00:00:01Z"),
                    "unit": "second"}}, {}, Int64(2)),
    ({"$dateDiff": {"startDate": d("2020-01-30T00:00:00Z"), "endDate": d("2020-02-02T00:00:00Z"),
                    "unit": "day"}}, {}, Int64(3)),
    ({"$dateDiff": {"startDate": d("2020-01-30T00:00:00Z"), "endDate": d("2020-02-02T00:00:00Z"),
                    "unit": "month"}}, {}, Int64(1)),
    ({"$dateDiff": {"startDate": d("2022-01-02T00:00:00Z"), "endDate": d("2022-01-03T00:00:00Z"),
                    "unit": "week"}}, {}, Int64(0)),
    ({"$dateDiff": {"startDate": d("2022-01-02T00:00:00Z"), "endDate": d("2022-01-03T00:00:00Z"),
                    "unit": "week", "startOfWeek": "monday"}}, {}, Int64(1)),
    ({"$dateDiff": {"startDate": d("2021-03-14T06:00:00Z"), "endDate": d("2021-03-14T07:00:00Z"),
                    "unit": "hour", "timezone": "America/New_York"}}, {}, Int64(1)),
    ({"$dateDiff": {"startDate": d("2021-03-14T04:00:00Z"), "endDate": d("2021-03-14T05:00:00Z"),
                    "unit": "day", "timezone": "America/New_York"}}, {}, Int64(1)),
    ({"$dateDiff": {"startDate": d("2022-01-01T00:00:00Z"), "endDate": d("2021-01-01T00:00:00Z"),
                    "unit": "quarter"}}, {}, Int64(-4)),
    ({"$dateDiff": {"startDate": DatetimeMS(-5), "endDate": DatetimeMS(5),
                    "unit": "millisecond"}}, {}, Int64(10)),
    # dateTrunc/: cakeSales (two-week bins starting Monday in Los Angeles), minute bins,
    # half-hour offset zones, before 1970
    ({"$dateTrunc": {"date": d("2020-05-18T14:10:30Z"), "unit": "week", "binSize": 2,
                     "timezone": "America/Los_Angeles", "startOfWeek": "Monday"}}, {},
     d("2020-05-11T07:00:00Z")),
    ({"$dateTrunc": {"date": d("2021-03-20T11:30:05Z"), "unit": "minute", "binSize": 5}}, {},
     d("2021-03-20T11:30:00Z")),
    ({"$dateTrunc": {"date": d("2021-03-20T11:34:05Z"), "unit": "minute", "binSize": 5}}, {},
     d("2021-03-20T11:30:00Z")),
    ({"$dateTrunc": {"date": d("2021-01-01T00:10:00Z"), "unit": "hour", "timezone": "+05:30"}},
     {}, d("2020-12-31T23:30:00Z")),
    ({"$dateTrunc": {"date": d("2021-05-18T14:10:30Z"), "unit": "month"}}, {},
     d("2021-05-01T00:00:00Z")),
    ({"$dateTrunc": {"date": d("2021-05-18T14:10:30Z"), "unit": "quarter"}}, {},
     d("2021-04-01T00:00:00Z")),
    ({"$dateTrunc": {"date": d("2021-05-18T14:10:30Z"), "unit": "year", "binSize": 5}}, {},
     d("2020-01-01T00:00:00Z")),
    ({"$dateTrunc": {"date": d("2021-11-07T07:00:00Z"), "unit": "day",
                     "timezone": "America/New_York"}}, {}, d("2021-11-07T04:00:00Z")),
    ({"$dateTrunc": {"date": DatetimeMS(-1), "unit": "second"}}, {}, DatetimeMS(-1000)),
    ({"$dateTrunc": {"date": d("1969-07-20T20:17:40Z"), "unit": "day"}}, {},
     d("1969-07-20T00:00:00Z")),
    ({"$dateTrunc": {"date": d("2021-05-18T14:10:30Z"), "unit": "week"}}, {},
     d("2021-05-16T00:00:00Z")),
]


@pytest.mark.parametrize("expr,doc,expected", CASES, ids=[str(c[0])[:70] for c in CASES])
def test_dates(expr: Any, doc: dict, expected: Any) -> None:
    got = ev(expr, doc)
    assert type(got) is type(expected) and got == expected, (got, expected)


ERRORS = [
    ({"$year": {"date": "$d", "timezone": "Foo/Bar"}}, 40485),
    ({"$year": {"date": "$d", "timezone": 5}}, 40517),
    ({"$year": 1}, 16006), ({"$year": {"date": "$d", "tz": 1}}, 40535),
    ({"$year": {"timezone": "UTC"}}, 40539),
    ({"$dateToString": {"date": "$d", "format": "%Q"}}, 18536),
    ({"$dateToString": {"date": "$d", "format": "abc%"}}, 18535),
    ({"$dateToString": 1}, 18629), ({"$dateToString": {"date": "$d", "x": 1}}, 18534),
    ({"$dateToString": {"format": "%Y"}}, 18628),
    ({"$dateFromString": {"dateString": "not a date"}}, 241),
    ({"$dateFromString": {"dateString": "2017-02-08T12:10:40Z", "timezone": "Europe/Paris"}}, 241),
    ({"$dateFromString": {"x": 1}}, 40541), ({"$dateFromString": {}}, 40542),
    ({"$dateFromParts": {"year": 10000}}, 40523), ({"$dateFromParts": {"month": 1}}, 40516),
    ({"$dateFromParts": {"year": 2017, "isoWeek": 1}}, 40489),
    ({"$dateFromParts": {"year": 2017, "month": 100000}}, 31034),
    ({"$dateFromParts": {"year": 2017.5}}, 40515),
    ({"$dateToParts": {"date": "$d", "iso8601": 1}}, 40521),
    ({"$dateDiff": {"startDate": 1, "endDate": "$d", "unit": "day"}}, 5166307),
    ({"$dateDiff": {"startDate": "$d", "endDate": "$d", "unit": "eon"}}, 9),
    ({"$dateDiff": {"startDate": "$d", "endDate": "$d"}}, 5166305),
    ({"$dateAdd": {"startDate": "$d", "unit": "day", "amount": 1.5}}, 5166405),
    ({"$dateAdd": {"startDate": 1, "unit": "day", "amount": 1}}, 5166403),
    ({"$dateAdd": {"startDate": "$d", "unit": "day"}}, 5166402),
    ({"$dateTrunc": {"date": "$d"}}, 5439010), ({"$dateTrunc": {"unit": "day"}}, 5439009),
    ({"$dateTrunc": {"date": "$d", "unit": "day", "binSize": 0}}, 5439018),
    ({"$dateTrunc": {"date": "$d", "unit": 5}}, 5439013),
    ({"$dateTrunc": {"date": "$d", "unit": "week", "startOfWeek": "funday"}}, 5439016),
    ({"$dateTrunc": {"date": 5, "unit": "day"}}, 5439012),
]


@pytest.mark.parametrize("expr,code", ERRORS, ids=[str(c[0])[:60] for c in ERRORS])
def test_date_errors(expr: Any, code: int) -> None:
    with pytest.raises(MongoError) as e:
        ev(expr, {"d": DatetimeMS(0)})
    assert e.value.code == code, e.value


# ---------------------------------------------------------------- oracle properties

ZONES = ["UTC", "America/New_York", "Europe/Paris", "Asia/Kolkata", "Australia/Lord_Howe",
         "America/Sao_Paulo", "+05:45", "-03:30"]
ms_range = st.integers(min_value=-62_000_000_000_000, max_value=250_000_000_000_000)


def _py(ms: int, tz: str) -> datetime:
    zone = ZoneInfo(tz) if "/" in tz or tz == "UTC" else None
    base = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    if zone is not None:
        return base.astimezone(zone)
    sign = 1 if tz[0] == "+" else -1
    h, m = int(tz[1:3]), int(tz[4:6])
    return base + sign * timedelta(hours=h, minutes=m)


@settings(max_examples=150, deadline=None)
@given(ms=ms_range, tz=st.sampled_from(ZONES))
def test_parts_match_python_calendar(ms: int, tz: str) -> None:
    p = _py(ms, tz)
    parts = ev({"$dateToParts": {"date": DatetimeMS(ms), "timezone": tz}})
    assert (parts["year"], parts["month"], parts["day"], parts["hour"], parts["minute"],
            parts["second"], parts["millisecond"]) == (p.year, p.month, p.day, p.hour, p.minute,
                                                       p.second, p.microsecond // 1000)
    iso = p.isocalendar()
    assert ev({"$isoWeek": {"date": DatetimeMS(ms), "timezone": tz}}) == iso[1]
    assert ev({"$isoWeekYear": {"date": DatetimeMS(ms), "timezone": tz}}) == iso[0]
    assert ev({"$isoDayOfWeek": {"date": DatetimeMS(ms), "timezone": tz}}) == iso[2]
    assert ev({"$dayOfYear": {"date": DatetimeMS(ms), "timezone": tz}}) == \
        p.timetuple().tm_yday
    assert ev({"$week": {"date": DatetimeMS(ms), "timezone": tz}}) == int(p.strftime("%U"))


@settings(max_examples=100, deadline=None)
@given(ms=ms_range, tz=st.sampled_from(ZONES))
def test_from_parts_inverts_to_parts(ms: int, tz: str) -> None:
    parts = ev({"$dateToParts": {"date": DatetimeMS(ms), "timezone": tz}})
    back = ev({"$dateFromParts": {**parts, "timezone": tz}})
    # Ambiguous wall times (DST fall-back) resolve to the first occurrence.
    assert int(back) == ms or ev({"$dateToParts": {"date": back, "timezone": tz}}) == parts


@settings(max_examples=100, deadline=None)
@given(a=ms_range, b=ms_range)
def test_date_diff_and_add_agree_in_utc(a: int, b: int) -> None:
    for unit in ("day", "hour", "minute", "second", "millisecond"):
        n = int(ev({"$dateDiff": {"startDate": DatetimeMS(a), "endDate": DatetimeMS(b),
                                  "unit": unit}}))
        t = ev({"$dateTrunc": {"date": DatetimeMS(a), "unit": unit}})
        moved = ev({"$dateAdd": {"startDate": t, "unit": unit, "amount": n}})
        assert ev({"$dateTrunc": {"date": DatetimeMS(b), "unit": unit}}) == moved

"""The calendar and time-zone library (`query.dates`) on its own, against Python's datetime."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from query.dates.arithmetic import date_add, date_diff, date_trunc
from query.dates.civil import civil_from_days, days_from_civil
from query.dates.formatting import format_date, format_iso_utc
from query.dates.parsing import parse_date_string
from query.dates.timezones import UTC_TZ, get_timezone
from storage.errors import MongoError
from storage.vocabulary.time_units import MS_PER_DAY

EPOCH = date(1970, 1, 1)
dates = st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31))
instants = st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999)


def _ms(dt: datetime) -> int:
    return (dt - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


@settings(max_examples=300, deadline=None)
@given(dates)
def test_civil_days_round_trip_match_datetime(d: date) -> None:
    days = (d - EPOCH).days
    assert days_from_civil(d.year, d.month, d.day) == days
    assert civil_from_days(days) == (d.year, d.month, d.day)


@settings(max_examples=300, deadline=None)
@given(dates)
def test_iso_week_and_weekday_match_datetime(d: date) -> None:
    p = UTC_TZ.parts((d - EPOCH).days * MS_PER_DAY)
    year, week, weekday = d.isocalendar()
    assert p.iso_week_and_year() == (week, year)
    assert p.iso_day_of_week == weekday
    assert p.day_of_year == d.timetuple().tm_yday


@settings(max_examples=200, deadline=None)
@given(instants)
def test_iso_format_parses_back(ms: int) -> None:
    assert parse_date_string(format_iso_utc(ms), None, None) == ms


def test_time_zones_by_offset_and_name() -> None:
    assert get_timezone("UTC") is UTC_TZ
    assert get_timezone("+0530").utc_offset_s(0) == 5 * 3600 + 30 * 60
    assert get_timezone("-03:00").utc_offset_s(0) == -3 * 3600
    ny = get_timezone("America/New_York")
    summer = _ms(datetime(2024, 7, 1, tzinfo=UTC))
    winter = _ms(datetime(2024, 1, 1, tzinfo=UTC))
    zone = ZoneInfo("America/New_York")
    for ms in (summer, winter):
        off = datetime.fromtimestamp(ms / 1000, zone).utcoffset()
        assert off is not None
        assert ny.utc_offset_s(ms) == off.total_seconds()
    with pytest.raises(MongoError) as e:
        get_timezone("Not/AZone")
    assert e.value.code == 40485


def test_format_with_specifiers() -> None:
    ms = _ms(datetime(2024, 2, 29, 13, 5, 9, 42_000, tzinfo=UTC))
    assert format_date("%Y-%m-%d %H:%M:%S.%L %j %u %V %G %b %B", ms, UTC_TZ) == \
        "2024-02-29 13:05:09.042 060 4 09 2024 Feb February"


def test_unit_arithmetic() -> None:
    jan31 = _ms(datetime(2023, 1, 31, tzinfo=UTC))
    assert date_add(jan31, "month", 1, UTC_TZ) == _ms(datetime(2023, 2, 28, tzinfo=UTC))
    assert date_add(jan31, "hour", -2, UTC_TZ) == jan31 - 2 * 3_600_000
    assert date_diff(jan31, _ms(datetime(2024, 1, 1, tzinfo=UTC)), "year", UTC_TZ) == 1
    mid = _ms(datetime(2023, 5, 17, 10, 30, tzinfo=UTC))
    assert date_trunc(mid, "month", 1, UTC_TZ) == _ms(datetime(2023, 5, 1, tzinfo=UTC))
    assert date_trunc(mid, "hour", 6, UTC_TZ) == _ms(datetime(2023, 5, 17, 6, tzinfo=UTC))

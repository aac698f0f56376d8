"""Date arithmetic over units, as MongoDB's dateAdd, dateDiff and dateTrunc compute it:
day-or-larger units on wall-clock time (DST-correct), smaller units on absolute time;
`date_trunc` bins relative to 2000-01-01 in the given zone."""

from __future__ import annotations

from typing import Final

from storage.errors import MongoError
from storage.vocabulary.time_units import MS_PER_DAY, UNIT_MS

from .civil import Parts, civil_from_days, days_from_civil, days_in_month
from .timezones import TimeZone

__all__ = ["TIME_UNITS", "REF_UTC_MS", "add_months", "date_add", "date_diff",
           "date_trunc"]

TIME_UNITS: Final = ("year", "quarter", "month", "week", "day", "hour", "minute", "second",
                     "millisecond")


def add_months(y: int, m: int, amount: int) -> tuple[int, int]:
    total = y * 12 + (m - 1) + amount
    return total // 12, total % 12 + 1


def date_add(ms: int, unit: str, amount: int, tz: TimeZone) -> int:
    """MongoDB's dateAdd: calendar units on wall-clock time, others on absolute time."""
    if unit in ("millisecond", "second", "minute", "hour"):
        return _check_date(ms + amount * UNIT_MS[unit])
    off = tz.utc_offset_s(ms)
    local = ms + off * 1000
    days, rem = divmod(local, MS_PER_DAY)
    if unit in ("year", "quarter", "month"):
        months = amount * (12 if unit == "year" else 3 if unit == "quarter" else 1)
        if abs(months) > 12 * 300_000_000:
            raise MongoError(5976500, f"invalid dateAdd 'amount' parameter value: {amount} "
                             f"{unit}")
        y, m, d = civil_from_days(days)
        ny, nm = add_months(y, m, months)
        nd = min(d, days_in_month(ny, nm))
        new_days = days_from_civil(ny, nm, nd)
    else:
        ndays = amount * (7 if unit == "week" else 1)
        if abs(ndays) > 110_000_000_000:
            raise MongoError(5976500, f"invalid dateAdd 'amount' parameter value: {amount} "
                             f"{unit}")
        new_days = days + ndays
    new_local = new_days * MS_PER_DAY + rem
    if tz.is_fixed:
        return _check_date(new_local - off * 1000)
    return _check_date(tz.local_to_utc(new_local))


def _check_date(ms: int) -> int:
    if not -(2**63) <= ms < 2**63:
        raise MongoError(5166406, "dateAdd overflowed")
    return ms


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def date_diff(start: int, end: int, unit: str, tz: TimeZone, start_of_week: int = 7) -> int:
    """MongoDB's dateDiff: the number of `unit` boundaries crossed between two instants."""
    if unit == "millisecond":
        return end - start
    a, b = tz.parts(start), tz.parts(end)
    if unit == "year":
        return b.year - a.year
    if unit == "quarter":
        return (b.month - 1) // 3 - (a.month - 1) // 3 + (b.year - a.year) * 4
    if unit == "month":
        return b.month - a.month + (b.year - a.year) * 12
    day_diff = b.days - a.days
    if unit == "day":
        return day_diff
    if unit == "week":
        def dow(p: Parts) -> int:
            return (p.iso_day_of_week - start_of_week + 7) % 7
        return _tdiv(day_diff + dow(a) - dow(b), 7)
    hour_raw = b.hour - a.hour + day_diff * 24
    dz = a.offset_s - b.offset_s
    if unit == "hour":
        return hour_raw + _tdiv(dz, 3600)
    minute_raw = b.minute - a.minute + hour_raw * 60
    if unit == "minute":
        return minute_raw + _tdiv(dz, 60)
    return b.second - a.second + minute_raw * 60 + dz


REF_UTC_MS: Final = 946_684_800_000  # 2000-01-01T00:00:00Z


def date_trunc(ms: int, unit: str, bin_size: int, tz: TimeZone, start_of_week: int = 7) -> int:
    """MongoDB's dateTrunc: the start of the `bin_size`-`unit` bin holding `ms`."""
    ref = REF_UTC_MS - tz.utc_offset_s(REF_UTC_MS) * 1000
    if unit in ("millisecond", "second", "minute", "hour"):
        size = bin_size * UNIT_MS[unit]
        if size >= 2**63:
            raise MongoError(5439002, "dateTrunc overflowed")
        return ms - (ms - ref) % size
    if bin_size > 100_000_000_000:
        raise MongoError(5439006, "dateTrunc unsupported binSize value")
    ref_day = 1
    if unit == "week":
        # 2000-01-01 is a Saturday (ISO 6); move forward to the first startOfWeek day.
        ref_dow = (6 - start_of_week + 7) % 7
        adjust = (7 - ref_dow) % 7
        ref += adjust * MS_PER_DAY
        ref_day += adjust
    p = tz.parts(ms)
    if unit == "day":
        dist = p.days - days_from_civil(2000, 1, ref_day)
    elif unit == "week":
        ref_days = days_from_civil(2000, 1, ref_day)
        ref_dow = (((ref_days + 3) % 7 + 1) - start_of_week + 7) % 7
        dow = (p.iso_day_of_week - start_of_week + 7) % 7
        dist = _tdiv(p.days - ref_days + ref_dow - dow, 7)
    elif unit == "month":
        dist = p.month - 1 + (p.year - 2000) * 12
    elif unit == "quarter":
        dist = (p.month - 1) // 3 + (p.year - 2000) * 4
    else:
        dist = p.year - 2000
    lower = dist - dist % bin_size
    return date_add(ref, unit, lower, tz)

"""Date operators: $year $month $dayOfMonth $hour $minute $second $millisecond $dayOfWeek
$dayOfYear $week $isoWeek $isoWeekYear $isoDayOfWeek $dateToParts $dateFromParts
$dateToString $dateFromString $dateAdd $dateSubtract $dateDiff $dateTrunc.

Dates are milliseconds since the epoch (any sign). Calendar fields are computed with integer
arithmetic on the proleptic Gregorian calendar (so dates before 1970 and outside Python's
datetime range work in UTC); time zones are "UTC", fixed offsets ("+hh", "+hhmm", "+hh:mm")
or Olson names through `zoneinfo`. `$dateAdd` with day-or-larger units works on wall-clock
time (DST-correct), with smaller units on absolute time; `$dateTrunc` bins relative to
2000-01-01 in the given zone, as MongoDB does.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Final
from zoneinfo import ZoneInfo

from bson.datetime_ms import DatetimeMS

from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING
from storage.vocabulary.time_units import MS_PER_DAY, UNIT_MS

from .core import (
    Fn,
    Scope,
    check_arity,
    compile_node,
    const_fn,
    const_value,
    is_const,
    operator,
    parse_args,
)
from .values import as_int, coerce_to_date_ms, coercible_to_date, is_integral64, value_repr

__all__ = [
    "TimeZone", "get_timezone", "UTC_TZ", "format_iso_utc", "format_date", "parse_date_string",
    "date_trunc", "date_add", "date_diff", "TIME_UNITS", "current_now", "days_from_civil",
    "civil_from_days", "parse_time_unit",
]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_NAIVE: Final = datetime(1970, 1, 1)

TIME_UNITS: Final = ("year", "quarter", "month", "week", "day", "hour", "minute", "second",
                     "millisecond")
_DAYS_OF_WEEK: Final = {"monday": 1, "mon": 1, "tuesday": 2, "tue": 2, "wednesday": 3,
                        "wed": 3, "thursday": 4, "thu": 4, "friday": 5, "fri": 5,
                        "saturday": 6, "sat": 6, "sunday": 7, "sun": 7}
_MONTHS: Final = ("January", "February", "March", "April", "May", "June", "July", "August",
                  "September", "October", "November", "December")


def current_now() -> DatetimeMS:
    return DatetimeMS(int(time.time() * 1000))


# ---------------------------------------------------------------- calendar arithmetic

def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def _is_leap(y: int) -> bool:
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


def _days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if _is_leap(y) else 28
    return 30 if m in (4, 6, 9, 11) else 31


@dataclass(frozen=True, slots=True)
class Parts:
    year: int
    month: int
    day: int
    hour: int
    minute: int
    second: int
    millisecond: int
    days: int           # local days since the epoch
    offset_s: int       # UTC offset in effect, seconds east

    @property
    def day_of_week(self) -> int:      # 1 = Sunday
        return (self.days + 4) % 7 + 1

    @property
    def iso_day_of_week(self) -> int:  # 1 = Monday
        return (self.days + 3) % 7 + 1

    @property
    def day_of_year(self) -> int:
        return self.days - days_from_civil(self.year, 1, 1) + 1

    @property
    def week(self) -> int:
        prev_sunday = self.day_of_year - self.day_of_week
        return (prev_sunday + 7) // 7

    def iso_week_and_year(self) -> tuple[int, int]:
        thursday = self.days - self.iso_day_of_week + 4
        iso_year = civil_from_days(thursday)[0]
        return (thursday - days_from_civil(iso_year, 1, 1)) // 7 + 1, iso_year


def _parts_from_local(local_ms: int, offset_s: int) -> Parts:
    days, rem = divmod(local_ms, MS_PER_DAY)
    y, m, d = civil_from_days(days)
    h, rem = divmod(rem, 3_600_000)
    mi, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return Parts(y, m, d, h, mi, s, ms, days, offset_s)


# ---------------------------------------------------------------- time zones

class TimeZone:
    """UTC, a fixed offset, or an Olson zone."""

    __slots__ = ("name", "offset_s", "zone")

    def __init__(self, name: str, offset_s: int = 0, zone: ZoneInfo | None = None) -> None:
        self.name = name
        self.offset_s = offset_s
        self.zone = zone

    @property
    def is_utc(self) -> bool:
        return self.zone is None and self.offset_s == 0

    @property
    def is_fixed(self) -> bool:
        return self.zone is None

    def utc_offset_s(self, ms: int) -> int:
        """Offset (seconds east of UTC) in effect at the instant `ms`."""
        if self.zone is None:
            return self.offset_s
        secs = ms // 1000
        try:
            dt = (_EPOCH + timedelta(seconds=secs)).astimezone(self.zone)
        except (OverflowError, ValueError):
            clamped = max(min(secs, 253402300799 - 86400), -62135596800 + 86400)
            dt = (_EPOCH + timedelta(seconds=clamped)).astimezone(self.zone)
        off = dt.utcoffset()
        return int(off.total_seconds()) if off is not None else 0

    def parts(self, ms: int) -> Parts:
        off = self.utc_offset_s(ms)
        return _parts_from_local(ms + off * 1000, off)

    def local_to_utc(self, local_ms: int) -> int:
        """The instant whose wall-clock time here is `local_ms` (earlier offset in a gap)."""
        if self.zone is None:
            return local_ms - self.offset_s * 1000
        secs = local_ms // 1000
        try:
            naive = _EPOCH_NAIVE + timedelta(seconds=secs)
            off = naive.replace(tzinfo=self.zone).utcoffset()
        except (OverflowError, ValueError):
            return local_ms - self.utc_offset_s(local_ms) * 1000
        return local_ms - (int(off.total_seconds()) if off is not None else 0) * 1000

    def __repr__(self) -> str:
        return f"TimeZone({self.name!r})"


UTC_TZ: Final = TimeZone("UTC")
_OFFSET_RE = re.compile(r"([+-])(\d\d)(?::?(\d\d))?\Z")


@lru_cache(maxsize=256)
def get_timezone(name: str) -> TimeZone:
    """A time zone by Olson name or UTC offset, or MongoDB's error 40485."""
    if name in ("UTC", "Etc/UTC", "Z"):
        return UTC_TZ
    m = _OFFSET_RE.match(name)
    if m and (len(name) in (3, 5, 6)) and (len(name) != 6 or ":" in name):
        sign = 1 if m.group(1) == "+" else -1
        off = sign * (int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60)
        return TimeZone(name, off) if off else UTC_TZ
    if name and not name.startswith(("/", ".")) and ".." not in name and "\0" not in name:
        try:
            return TimeZone(name, 0, ZoneInfo(name))
        except Exception:
            pass
    raise MongoError(40485, f'unrecognized time zone identifier: "{name}"')


def _tz_from_value(v: Any) -> TimeZone | None:
    if v is MISSING or v is None:
        return None
    if type(v) is not str:
        raise MongoError(40517, f"timezone must evaluate to a string, found {type_name(v)}")
    return get_timezone(v)


def _tz_getter(fn: Fn | None) -> Any:
    """A function (doc, vars) -> TimeZone | None (None: the timezone evaluated to null)."""
    if fn is None:
        return lambda doc, v: UTC_TZ
    if is_const(fn):
        tz = _tz_from_value(const_value(fn))
        return lambda doc, v: tz
    return lambda doc, v: _tz_from_value(fn(doc, v))


# ---------------------------------------------------------------- formatting

def _pad(n: int, width: int) -> str:
    if not 0 <= n <= 9999:
        raise MongoError(18537, "Could not convert date to string: date component was outside "
                         f"the supported range of 0-9999: {n}")
    return str(n).rjust(width, "0")


_TO_STRING_SPECS: Final = set("bBdGHjLmMSwuUVYzZ%")
_FROM_STRING_SPECS: Final = set("bBdGHjLmMSuVYzZ%")


def validate_format(fmt: str, allowed: set[str]) -> None:
    i = 0
    while i < len(fmt):
        if fmt[i] == "%":
            if i + 1 >= len(fmt):
                raise MongoError(18535, "Unmatched '%' at end of format string")
            if fmt[i + 1] not in allowed:
                raise MongoError(18536, f"Invalid format character '%{fmt[i + 1]}' in format "
                                 "string")
            i += 2
        else:
            i += 1


def format_date(fmt: str, ms: int, tz: TimeZone) -> str:
    p = tz.parts(ms)
    out = []
    i = 0
    n = len(fmt)
    while i < n:
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        s = fmt[i + 1]
        i += 2
        if s == "%":
            out.append("%")
        elif s == "Y":
            out.append(_pad(p.year, 4))
        elif s == "m":
            out.append(_pad(p.month, 2))
        elif s == "d":
            out.append(_pad(p.day, 2))
        elif s == "H":
            out.append(_pad(p.hour, 2))
        elif s == "M":
            out.append(_pad(p.minute, 2))
        elif s == "S":
            out.append(_pad(p.second, 2))
        elif s == "L":
            out.append(_pad(p.millisecond, 3))
        elif s == "j":
            out.append(_pad(p.day_of_year, 3))
        elif s == "w":
            out.append(_pad(p.day_of_week, 1))
        elif s == "U":
            out.append(_pad(p.week, 2))
        elif s == "G":
            out.append(_pad(p.iso_week_and_year()[1], 4))
        elif s == "V":
            out.append(_pad(p.iso_week_and_year()[0], 2))
        elif s == "u":
            out.append(_pad(p.iso_day_of_week, 1))
        elif s == "z":
            off = p.offset_s
            out.append("-" if off < 0 else "+")
            out.append(_pad(abs(off) // 3600, 2))
            out.append(_pad(abs(off) // 60 % 60, 2))
        elif s == "Z":
            out.append(str(int(p.offset_s / 60)))
        elif s == "b":
            out.append(_MONTHS[p.month - 1][:3])
        elif s == "B":
            out.append(_MONTHS[p.month - 1])
    return "".join(out)


ISO_Z: Final = "%Y-%m-%dT%H:%M:%S.%LZ"
ISO_NO_Z: Final = "%Y-%m-%dT%H:%M:%S.%L"


def format_iso_utc(ms: int) -> str:
    return format_date(ISO_Z, ms, UTC_TZ)


# ---------------------------------------------------------------- parsing

def _conv_fail(s: str, why: str) -> MongoError:
    return MongoError(ErrorCode.ConversionFailure, f"Error parsing date string '{s}'; {why}")


_ISO_RE = re.compile(
    r"\s*(?P<y>[+-]?\d{4,})(?P<sep>[-/])(?P<m>\d{1,2})(?P=sep)(?P<d>\d{1,2})"
    r"(?:(?:T|t|\s+)(?P<H>\d{1,2})(?::(?P<M>\d{2})(?::(?P<S>\d{2})(?:[.,](?P<f>\d+))?)?)?)?"
    r"\s*(?P<tz>Z|z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?\s*\Z")
_US_RE = re.compile(
    r"\s*(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})"
    r"(?:\s+(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:\.(?P<f>\d+))?)?)?"
    r"\s*(?P<tz>Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?\s*\Z")
_TEXT_RE = re.compile(
    r"\s*(?P<mon>[A-Za-z]{3,9})\.?\s+(?P<d>\d{1,2}),?\s+(?P<y>\d{4})"
    r"(?:\s+(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:\.(?P<f>\d+))?)?)?"
    r"\s*(?P<tz>Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?\s*\Z")


def _month_from_name(name: str) -> int | None:
    low = name.lower()
    for i, full in enumerate(_MONTHS):
        if low == full.lower() or low == full[:3].lower():
            return i + 1
    return None


def _tz_offset_from_text(tz: str) -> int:
    if tz in ("Z", "z", "UTC", "GMT"):
        return 0
    sign = -1 if tz[0] == "-" else 1
    digits = tz[1:].replace(":", "")
    h = int(digits[:2])
    mi = int(digits[2:4]) if len(digits) > 2 else 0
    return sign * (h * 3600 + mi * 60)


def _assemble(s: str, y: int, mo: int, d: int, h: int, mi: int, sec: int, frac: str | None,
              tz_text: str | None, tz: TimeZone | None) -> int:
    if not (1 <= mo <= 12) or not (1 <= d <= _days_in_month(y, mo)) or h > 24 or mi > 59 \
            or sec > 60:
        raise _conv_fail(s, "The parsed date was invalid")
    ms = int((frac or "0")[:3].ljust(3, "0"))
    local = (days_from_civil(y, mo, d) * MS_PER_DAY + h * 3_600_000 + mi * 60_000
             + sec * 1000 + ms)
    if tz_text is not None:
        if tz is not None and not tz.is_utc:
            raise MongoError(ErrorCode.ConversionFailure, "you cannot pass in a date/time string "
                             "with GMT offset together with a timezone argument")
        return local - _tz_offset_from_text(tz_text) * 1000
    return (tz or UTC_TZ).local_to_utc(local)


def parse_date_string(s: str, tz: TimeZone | None, fmt: str | None) -> int:
    """Milliseconds for a date string (free-form ISO-like, or per `fmt`), else 241."""
    if fmt is not None:
        return _parse_with_format(s, fmt, tz)
    for rx in (_ISO_RE, _US_RE):
        m = rx.match(s)
        if m:
            g = m.groupdict()
            return _assemble(s, int(g["y"]), int(g["m"]), int(g["d"]), int(g["H"] or 0),
                             int(g["M"] or 0), int(g["S"] or 0), g["f"], g["tz"], tz)
    m = _TEXT_RE.match(s)
    if m:
        g = m.groupdict()
        mon = _month_from_name(g["mon"])
        if mon is not None:
            return _assemble(s, int(g["y"]), mon, int(g["d"]), int(g["H"] or 0),
                             int(g["M"] or 0), int(g["S"] or 0), g["f"], g["tz"], tz)
    raise _conv_fail(s, "0: Unexpected data found.")


_FMT_PIECES: Final = {
    "Y": r"(?P<Y>\d{4})", "m": r"(?P<m>\d{1,2})", "d": r"(?P<d>\d{1,2})",
    "H": r"(?P<H>\d{1,2})", "M": r"(?P<M>\d{1,2})", "S": r"(?P<S>\d{1,2})",
    "L": r"(?P<L>\d{1,3})", "j": r"(?P<j>\d{1,3})", "G": r"(?P<G>\d{4})",
    "V": r"(?P<V>\d{1,2})", "u": r"(?P<u>\d)", "z": r"(?P<z>[+-]\d{2}:?\d{2})",
    "Z": r"(?P<Z>[+-]?\d+)", "b": r"(?P<b>[A-Za-z]{3})", "B": r"(?P<B>[A-Za-z]+)",
}


def _parse_with_format(s: str, fmt: str, tz: TimeZone | None) -> int:
    pattern = []
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c == "%":
            spec = fmt[i + 1]
            pattern.append("%" if spec == "%" else _FMT_PIECES[spec])
            i += 2
        else:
            pattern.append(re.escape(c))
            i += 1
    try:
        m = re.fullmatch("".join(pattern), s)
    except re.error:
        m = None
    if m is None:
        raise _conv_fail(s, "0: Format string doesn't match the input")
    g = m.groupdict()
    if g.get("G") is not None:
        week = int(g.get("V") or 1)
        dow = int(g.get("u") or 1)
        jan4 = days_from_civil(int(g["G"]), 1, 4)
        monday = jan4 - ((jan4 + 3) % 7)
        y, mo, d = civil_from_days(monday + (week - 1) * 7 + dow - 1)
    else:
        if g.get("Y") is None:
            raise MongoError(ErrorCode.ConversionFailure, "an incomplete date/time string has "
                             f'been found, with elements missing: "{s}"')
        y = int(g["Y"])
        if g.get("j") is not None:
            y, mo, d = civil_from_days(days_from_civil(y, 1, 1) + int(g["j"]) - 1)
        else:
            mon_name = g.get("b") or g.get("B")
            mo = _month_from_name(mon_name) if mon_name else int(g.get("m") or 1)
            if mo is None:
                raise _conv_fail(s, "0: A textual month could not be found")
            d = int(g.get("d") or 1)
    tz_text = None
    if g.get("z") is not None:
        tz_text = g["z"]
    elif g.get("Z") is not None:
        minutes = int(g["Z"])
        sign = "-" if minutes < 0 else "+"
        tz_text = f"{sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
    return _assemble(s, y, mo, d, int(g.get("H") or 0), int(g.get("M") or 0),
                     int(g.get("S") or 0), g.get("L"), tz_text, tz)


# ---------------------------------------------------------------- arithmetic

def parse_time_unit(v: Any, op: str) -> str:
    if type(v) is not str:
        raise MongoError(5439013, f"{op} requires 'unit' to be a string, but got "
                         f"{type_name(v)}")
    if v not in TIME_UNITS:
        raise MongoError(ErrorCode.FailedToParse, f"{op} parameter 'unit' value parsing failed "
                         f":: caused by :: unknown time unit value: {v}")
    return v


def _parse_day_of_week(v: Any, op: str) -> int:
    if type(v) is not str:
        raise MongoError(5439015, f"{op} requires 'startOfWeek' to be a string, but got "
                         f"{type_name(v)}")
    d = _DAYS_OF_WEEK.get(v.lower())
    if d is None:
        raise MongoError(5439016, f"{op} parameter 'startOfWeek' value cannot be recognized as "
                         f"a day of a week: {v}")
    return d


def _add_months(y: int, m: int, amount: int) -> tuple[int, int]:
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
        ny, nm = _add_months(y, m, months)
        nd = min(d, _days_in_month(ny, nm))
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


_REF_UTC_MS: Final = 946_684_800_000  # 2000-01-01T00:00:00Z


def date_trunc(ms: int, unit: str, bin_size: int, tz: TimeZone, start_of_week: int = 7) -> int:
    """MongoDB's dateTrunc: the start of the `bin_size`-`unit` bin holding `ms`."""
    ref = _REF_UTC_MS - tz.utc_offset_s(_REF_UTC_MS) * 1000
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


# ---------------------------------------------------------------- operator compilers

def _named_args(name: str, arg: Any, allowed: tuple[str, ...], codes: tuple[int, int]) -> dict:
    if type(arg) is not dict:
        raise MongoError(codes[0], f"{name} only supports an object as its argument")
    for k in arg:
        if k not in allowed:
            raise MongoError(codes[1], f"Unrecognized argument to {name}: {k}")
    return arg


def _date_ms(v: Any, op: str) -> int:
    return coerce_to_date_ms(v)


def _single_date_op(extract: Any) -> Any:
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        date_spec: Any
        tz_fn: Fn | None = None
        if type(arg) is dict and arg and not next(iter(arg)).startswith("$"):
            for k in arg:
                if k not in ("date", "timezone"):
                    raise MongoError(40535, f'unrecognized option to {name}: "{k}"')
            if "date" not in arg:
                raise MongoError(40539, f"missing 'date' argument to {name}, provided: "
                                 f"{value_repr(arg)}")
            date_spec = arg["date"]
            if "timezone" in arg:
                tz_fn = compile_node(arg["timezone"], scope)
            d_fn = compile_node(date_spec, scope)
        else:
            args = parse_args(arg, scope)
            check_arity(name, args, 1)
            d_fn = args[0]
        get_tz = _tz_getter(tz_fn)
        if tz_fn is None:
            def f_utc(doc: Any, v: dict) -> Any:
                d = d_fn(doc, v)
                if d is None or d is MISSING:
                    return None
                return extract(UTC_TZ.parts(coerce_to_date_ms(d)))
            return f_utc

        def f(doc: Any, v: dict) -> Any:
            d = d_fn(doc, v)
            if d is None or d is MISSING:
                return None
            ms = coerce_to_date_ms(d)
            tz = get_tz(doc, v)
            if tz is None:
                return None
            return extract(tz.parts(ms))
        return f
    return compiler


for _name, _fn in (
    ("$year", lambda p: p.year), ("$month", lambda p: p.month),
    ("$dayOfMonth", lambda p: p.day), ("$hour", lambda p: p.hour),
    ("$minute", lambda p: p.minute), ("$second", lambda p: p.second),
    ("$millisecond", lambda p: p.millisecond), ("$dayOfWeek", lambda p: p.day_of_week),
    ("$dayOfYear", lambda p: p.day_of_year), ("$week", lambda p: p.week),
    ("$isoWeek", lambda p: p.iso_week_and_year()[0]),
    ("$isoWeekYear", lambda p: p.iso_week_and_year()[1]),
    ("$isoDayOfWeek", lambda p: p.iso_day_of_week),
):
    operator(_name)(_single_date_op(_fn))


@operator("$dateToParts")
def _c_date_to_parts(arg: Any, scope: Scope, name: str) -> Fn:
    spec = _named_args(name, arg, ("date", "timezone", "iso8601"), (40524, 40520))
    if "date" not in spec:
        raise MongoError(40522, "Missing 'date' parameter to $dateToParts")
    d_fn = compile_node(spec["date"], scope)
    get_tz = _tz_getter(compile_node(spec["timezone"], scope) if "timezone" in spec else None)
    iso_fn = compile_node(spec["iso8601"], scope) if "iso8601" in spec else const_fn(False)

    def f(doc: Any, v: dict) -> Any:
        d = d_fn(doc, v)
        tz = get_tz(doc, v)
        if tz is None:
            return None
        iso = iso_fn(doc, v)
        if iso is None or iso is MISSING:
            return None
        if type(iso) is not bool:
            raise MongoError(40521, f"iso8601 must evaluate to a bool, found {type_name(iso)}")
        if d is None or d is MISSING:
            return None
        p = tz.parts(coerce_to_date_ms(d))
        if iso:
            week, year = p.iso_week_and_year()
            return {"isoWeekYear": year, "isoWeek": week, "isoDayOfWeek": p.iso_day_of_week,
                    "hour": p.hour, "minute": p.minute, "second": p.second,
                    "millisecond": p.millisecond}
        return {"year": p.year, "month": p.month, "day": p.day, "hour": p.hour,
                "minute": p.minute, "second": p.second, "millisecond": p.millisecond}
    return f


_PART_FIELDS: Final = ("year", "month", "day", "hour", "minute", "second", "millisecond",
                       "isoWeekYear", "isoWeek", "isoDayOfWeek", "timezone")


@operator("$dateFromParts")
def _c_date_from_parts(arg: Any, scope: Scope, name: str) -> Fn:
    spec = _named_args(name, arg, _PART_FIELDS, (40519, 40518))
    has_natural = any(k in spec for k in ("year", "month", "day"))
    has_iso = any(k in spec for k in ("isoWeekYear", "isoWeek", "isoDayOfWeek"))
    if has_natural and has_iso:
        raise MongoError(40489, "$dateFromParts does not allow mixing natural dates with ISO "
                         "dates")
    if "year" not in spec and "isoWeekYear" not in spec:
        raise MongoError(40516, "$dateFromParts requires either 'year' or 'isoWeekYear' to be "
                         "present")
    fns = {k: compile_node(x, scope) for k, x in spec.items() if k != "timezone"}
    get_tz = _tz_getter(compile_node(spec["timezone"], scope) if "timezone" in spec else None)
    iso = "isoWeekYear" in spec
    bounded = {"month", "day", "hour", "minute", "isoWeek", "isoDayOfWeek"}

    def num(doc: Any, v: dict, field: str, default: int) -> int | None:
        fn = fns.get(field)
        if fn is None:
            return default
        x = fn(doc, v)
        if x is None or x is MISSING:
            return None
        if not is_integral64(x):
            raise MongoError(40515, f"'{field}' must evaluate to an integer, found "
                             f"{type_name(x)} with value {value_repr(x)}")
        n = as_int(x)
        if field in bounded and not -32768 <= n <= 32767:
            raise MongoError(31034, f"'{field}' must evaluate to a value in the range "
                             f"[-32768, 32767]; value {n} is not in range")
        return n

    def f(doc: Any, v: dict) -> Any:
        vals = {}
        for field, default in (("hour", 0), ("minute", 0), ("second", 0), ("millisecond", 0)):
            n = num(doc, v, field, default)
            if n is None:
                return None
            vals[field] = n
        tz = get_tz(doc, v)
        if tz is None:
            return None
        if iso:
            for field, default in (("isoWeekYear", 1970), ("isoWeek", 1), ("isoDayOfWeek", 1)):
                n = num(doc, v, field, default)
                if n is None:
                    return None
                vals[field] = n
            if not 1 <= vals["isoWeekYear"] <= 9999:
                raise MongoError(31095, "'isoWeekYear' must evaluate to an integer in the range "
                                 f"1 to 9999, found {vals['isoWeekYear']}")
            jan4 = days_from_civil(vals["isoWeekYear"], 1, 4)
            monday = jan4 - ((jan4 + 3) % 7)
            days = monday + (vals["isoWeek"] - 1) * 7 + vals["isoDayOfWeek"] - 1
        else:
            for field, default in (("year", 1970), ("month", 1), ("day", 1)):
                n = num(doc, v, field, default)
                if n is None:
                    return None
                vals[field] = n
            if not 1 <= vals["year"] <= 9999:
                raise MongoError(40523, "'year' must evaluate to an integer in the range 1 to "
                                 f"9999, found {vals['year']}")
            y, m = _add_months(vals["year"], 1, vals["month"] - 1)
            days = days_from_civil(y, m, 1) + vals["day"] - 1
        local = (days * MS_PER_DAY + vals["hour"] * 3_600_000 + vals["minute"] * 60_000
                 + vals["second"] * 1000 + vals["millisecond"])
        return DatetimeMS(tz.local_to_utc(local))
    return f


@operator("$dateToString")
def _c_date_to_string(arg: Any, scope: Scope, name: str) -> Fn:
    spec = _named_args(name, arg, ("date", "format", "timezone", "onNull"), (18629, 18534))
    if "date" not in spec:
        raise MongoError(18628, "Missing 'date' parameter to $dateToString")
    d_fn = compile_node(spec["date"], scope)
    fmt_fn = compile_node(spec["format"], scope) if "format" in spec else None
    if fmt_fn is not None and is_const(fmt_fn):
        fv = const_value(fmt_fn)
        if fv is not None and fv is not MISSING:
            if type(fv) is not str:
                raise MongoError(18533, "$dateToString requires that 'format' be a string, "
                                 f"found: {type_name(fv)} with value {value_repr(fv)}")
            validate_format(fv, _TO_STRING_SPECS)
    get_tz = _tz_getter(compile_node(spec["timezone"], scope) if "timezone" in spec else None)
    on_null = compile_node(spec["onNull"], scope) if "onNull" in spec else None

    def f(doc: Any, v: dict) -> Any:
        d = d_fn(doc, v)
        fmt: Any = None
        if fmt_fn is not None:
            fmt = fmt_fn(doc, v)
            if fmt is not None and fmt is not MISSING:
                if type(fmt) is not str:
                    raise MongoError(18533, "$dateToString requires that 'format' be a string, "
                                     f"found: {type_name(fmt)} with value {value_repr(fmt)}")
                validate_format(fmt, _TO_STRING_SPECS)
        tz = get_tz(doc, v)
        if d is None or d is MISSING:
            return on_null(doc, v) if on_null is not None else None
        if tz is None:
            return None
        if fmt_fn is not None:
            if fmt is None or fmt is MISSING:
                return None
        else:
            fmt = ISO_Z if tz.is_utc else ISO_NO_Z
        return format_date(fmt, coerce_to_date_ms(d), tz)
    return f


@operator("$dateFromString")
def _c_date_from_string(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(40540, f"$dateFromString only supports an object as an argument, "
                         f"found: {type_name(arg)}")
    for k in arg:
        if k not in ("dateString", "format", "timezone", "onError", "onNull"):
            raise MongoError(40541, f"Unrecognized argument to $dateFromString: {k}")
    if "dateString" not in arg:
        raise MongoError(40542, "Missing 'dateString' parameter to $dateFromString")
    s_fn = compile_node(arg["dateString"], scope)
    fmt_fn = compile_node(arg["format"], scope) if "format" in arg else None
    get_tz = _tz_getter(compile_node(arg["timezone"], scope) if "timezone" in arg else None)
    on_error = compile_node(arg["onError"], scope) if "onError" in arg else None
    on_null = compile_node(arg["onNull"], scope) if "onNull" in arg else None
    if fmt_fn is not None and is_const(fmt_fn):
        fv = const_value(fmt_fn)
        if type(fv) is str:
            validate_format(fv, _FROM_STRING_SPECS)

    def f(doc: Any, v: dict) -> Any:
        s = s_fn(doc, v)
        fmt: Any = None
        if fmt_fn is not None:
            fmt = fmt_fn(doc, v)
            if fmt is not None and fmt is not MISSING:
                if type(fmt) is not str:
                    raise MongoError(40684, "$dateFromString requires that 'format' be a "
                                     f"string, found: {type_name(fmt)} with value "
                                     f"{value_repr(fmt)}")
                validate_format(fmt, _FROM_STRING_SPECS)
        tz = get_tz(doc, v)
        if s is None or s is MISSING:
            return on_null(doc, v) if on_null is not None else None
        try:
            if type(s) is not str:
                raise MongoError(ErrorCode.ConversionFailure, "$dateFromString requires that "
                                 f"'dateString' be a string, found: {type_name(s)} with value "
                                 f"{value_repr(s)}")
            if tz is None:
                return None
            if fmt_fn is not None and (fmt is None or fmt is MISSING):
                return None
            return DatetimeMS(parse_date_string(s, None if tz.is_utc else tz, fmt))
        except MongoError as e:
            if e.code == ErrorCode.ConversionFailure and on_error is not None:
                return on_error(doc, v)
            raise
    return f


def _date_arith(sign: int) -> Any:
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        if type(arg) is not dict:
            raise MongoError(5166400, f"{name} expects an object as its argument")
        for k in arg:
            if k not in ("startDate", "unit", "amount", "timezone"):
                raise MongoError(5166401, f"Unrecognized argument to {name}: {k}. Expected "
                                 "arguments are startDate, unit, amount, and optionally "
                                 "timezone.")
        for k in ("startDate", "unit", "amount"):
            if k not in arg:
                raise MongoError(5166402, f"{name} requires startDate, unit, and amount to be "
                                 "present")
        s_fn = compile_node(arg["startDate"], scope)
        u_fn = compile_node(arg["unit"], scope)
        a_fn = compile_node(arg["amount"], scope)
        get_tz = _tz_getter(compile_node(arg["timezone"], scope) if "timezone" in arg else None)
        if is_const(u_fn) and const_value(u_fn) not in (None, MISSING):
            parse_time_unit(const_value(u_fn), name)

        def f(doc: Any, v: dict) -> Any:
            start = s_fn(doc, v)
            if start is None or start is MISSING:
                return None
            unit = u_fn(doc, v)
            if unit is None or unit is MISSING:
                return None
            unit = parse_time_unit(unit, name)
            amount = a_fn(doc, v)
            if amount is None or amount is MISSING:
                return None
            tz = get_tz(doc, v)
            if tz is None:
                return None
            if not coercible_to_date(start):
                raise MongoError(5166403, f"{name} requires startDate to be convertible to a "
                                 "date")
            if not is_integral64(amount):
                raise MongoError(5166405, f"{name} expects integer amount of time units")
            n = as_int(amount)
            if sign < 0 and n == -(2**63):
                raise MongoError(6045000, f"invalid $dateSubtract 'amount' parameter value: {n}")
            return DatetimeMS(date_add(coerce_to_date_ms(start), unit, sign * n, tz))
        return f
    return compiler


operator("$dateAdd")(_date_arith(1))
operator("$dateSubtract")(_date_arith(-1))


@operator("$dateDiff")
def _c_date_diff(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(5166301, "$dateDiff only supports an object as its argument")
    for k in arg:
        if k not in ("startDate", "endDate", "unit", "timezone", "startOfWeek"):
            raise MongoError(5166302, f"Unrecognized argument to $dateDiff: {k}")
    for k, code in (("startDate", 5166303), ("endDate", 5166304), ("unit", 5166305)):
        if k not in arg:
            raise MongoError(code, f"Missing '{k}' parameter to $dateDiff")
    s_fn = compile_node(arg["startDate"], scope)
    e_fn = compile_node(arg["endDate"], scope)
    u_fn = compile_node(arg["unit"], scope)
    w_fn = compile_node(arg["startOfWeek"], scope) if "startOfWeek" in arg else None
    get_tz = _tz_getter(compile_node(arg["timezone"], scope) if "timezone" in arg else None)

    def f(doc: Any, v: dict) -> Any:
        s = s_fn(doc, v)
        if s is None or s is MISSING:
            return None
        e = e_fn(doc, v)
        if e is None or e is MISSING:
            return None
        unit = u_fn(doc, v)
        if unit is None or unit is MISSING:
            return None
        unit = parse_time_unit(unit, "$dateDiff")
        sow = 7
        if unit == "week" and w_fn is not None:
            w = w_fn(doc, v)
            if w is None or w is MISSING:
                return None
            sow = _parse_day_of_week(w, "$dateDiff")
        tz = get_tz(doc, v)
        if tz is None:
            return None
        for what, x in (("startDate", s), ("endDate", e)):
            if not coercible_to_date(x):
                raise MongoError(5166307, f"$dateDiff requires '{what}' to be a date, but got "
                                 f"{type_name(x)}")
        from bson import Int64
        return Int64(date_diff(coerce_to_date_ms(s), coerce_to_date_ms(e), unit, tz, sow))
    return f


@operator("$dateTrunc")
def _c_date_trunc(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(5439007, "$dateTrunc only supports an object as its argument")
    for k in arg:
        if k not in ("date", "unit", "binSize", "timezone", "startOfWeek"):
            raise MongoError(5439008, f"Unrecognized argument to $dateTrunc: {k}. Expected "
                             "arguments are date, unit, and optionally, binSize, timezone, "
                             "startOfWeek")
    if "date" not in arg:
        raise MongoError(5439009, "Missing 'date' parameter to $dateTrunc")
    if "unit" not in arg:
        raise MongoError(5439010, "Missing 'unit' parameter to $dateTrunc")
    d_fn = compile_node(arg["date"], scope)
    u_fn = compile_node(arg["unit"], scope)
    b_fn = compile_node(arg["binSize"], scope) if "binSize" in arg else None
    w_fn = compile_node(arg["startOfWeek"], scope) if "startOfWeek" in arg else None
    tz_spec = compile_node(arg["timezone"], scope) if "timezone" in arg else None
    get_tz = _tz_getter(tz_spec)

    def bin_size_of(x: Any) -> int:
        if not is_integral64(x):
            raise MongoError(5439017, "$dateTrunc requires 'binSize' to be a 64-bit integer, "
                             f"but got value '{value_repr(x)}' of type {type_name(x)}")
        n = as_int(x)
        if n <= 0:
            raise MongoError(5439018, "$dateTrunc requires 'binSize' to be greater than 0, but "
                             f"got value {n}")
        return n

    # Fast path: constant unit below a day, constant bin size, UTC or fixed offset.
    if is_const(u_fn) and (b_fn is None or is_const(b_fn)) and w_fn is None and \
            (tz_spec is None or is_const(tz_spec)):
        unit = const_value(u_fn)
        bsv = 1 if b_fn is None else const_value(b_fn)
        if unit not in (None, MISSING) and bsv not in (None, MISSING):
            unit = parse_time_unit(unit, "$dateTrunc")
            bs = bin_size_of(bsv)
            tz = get_tz(None, {})
            if tz is not None and unit in UNIT_MS and unit not in ("day", "week"):
                size = bs * UNIT_MS[unit]
                ref = _REF_UTC_MS - tz.utc_offset_s(_REF_UTC_MS) * 1000

                # Consecutive documents often share a bin: remember the last one (a tuple
                # swapped in one assignment, so concurrent evaluations stay consistent).
                last: list[tuple[Any, Any]] = [(None, None)]

                def fast(doc: Any, v: dict) -> Any:
                    d = d_fn(doc, v)
                    if type(d) is DatetimeMS:
                        ms = d._value
                        lo = ms - (ms - ref) % size
                        cached = last[0]
                        if cached[0] == lo:
                            return cached[1]
                        out = DatetimeMS(lo)
                        last[0] = (lo, out)
                        return out
                    if d is None or d is MISSING:
                        return None
                    if not coercible_to_date(d):
                        raise MongoError(5439012, "$dateTrunc requires 'date' to be a date, "
                                         f"but got {type_name(d)}")
                    ms = coerce_to_date_ms(d)
                    return DatetimeMS(ms - (ms - ref) % size)
                return fast

    def f(doc: Any, v: dict) -> Any:
        d = d_fn(doc, v)
        if d is None or d is MISSING:
            return None
        bs = 1
        if b_fn is not None:
            x = b_fn(doc, v)
            if x is None or x is MISSING:
                return None
            bs = bin_size_of(x)
        unit = u_fn(doc, v)
        if unit is None or unit is MISSING:
            return None
        unit = parse_time_unit(unit, "$dateTrunc")
        sow = 7
        if unit == "week" and w_fn is not None:
            w = w_fn(doc, v)
            if w is None or w is MISSING:
                return None
            sow = _parse_day_of_week(w, "$dateTrunc")
        tz = get_tz(doc, v)
        if tz is None:
            return None
        if not coercible_to_date(d):
            raise MongoError(5439012, f"$dateTrunc requires 'date' to be a date, but got "
                             f"{type_name(d)}")
        return DatetimeMS(date_trunc(coerce_to_date_ms(d), unit, bs, tz, sow))
    return f

"""Parsing date strings: ISO-like, US (m/d/y) and textual-month forms, or a `%`-format
(`$dateFromString`, `$toDate`); MongoDB's error 241 when a string is not a date."""

from __future__ import annotations

import re
from typing import Final

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.time_units import MS_PER_DAY

from .civil import MONTHS, civil_from_days, days_from_civil, days_in_month
from .timezones import UTC_TZ, TimeZone

__all__ = ["parse_date_string"]


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
    for i, full in enumerate(MONTHS):
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
    if not (1 <= mo <= 12) or not (1 <= d <= days_in_month(y, mo)) or h > 24 or mi > 59 \
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
            if mon_name:
                month = _month_from_name(mon_name)
                if month is None:
                    raise _conv_fail(s, "0: A textual month could not be found")
                mo = month
            else:
                mo = int(g.get("m") or 1)
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

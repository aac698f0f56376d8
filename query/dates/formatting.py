"""Formatting dates with MongoDB's `%`-specifiers (`$dateToString`, value rendering)."""

from __future__ import annotations

from typing import Final

from storage.errors import MongoError

from .civil import MONTHS
from .timezones import UTC_TZ, TimeZone

__all__ = ["TO_STRING_SPECS", "FROM_STRING_SPECS", "validate_format", "format_date", "ISO_Z",
           "ISO_NO_Z", "format_iso_utc"]


def _pad(n: int, width: int) -> str:
    if not 0 <= n <= 9999:
        raise MongoError(18537, "Could not convert date to string: date component was outside "
                         f"the supported range of 0-9999: {n}")
    return str(n).rjust(width, "0")


TO_STRING_SPECS: Final = set("bBdGHjLmMSwuUVYzZ%")
FROM_STRING_SPECS: Final = set("bBdGHjLmMSuVYzZ%")


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
            out.append(MONTHS[p.month - 1][:3])
        elif s == "B":
            out.append(MONTHS[p.month - 1])
    return "".join(out)


ISO_Z: Final = "%Y-%m-%dT%H:%M:%S.%LZ"
ISO_NO_Z: Final = "%Y-%m-%dT%H:%M:%S.%L"


def format_iso_utc(ms: int) -> str:
    return format_date(ISO_Z, ms, UTC_TZ)

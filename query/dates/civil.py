"""Civil calendar arithmetic: days since the epoch ⇄ proleptic Gregorian dates, and the
calendar parts of an instant (weekday, day of year, weeks, ISO week and year)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from storage.vocabulary.time_units import MS_PER_DAY

__all__ = ["MONTHS", "days_from_civil", "civil_from_days", "is_leap",
           "days_in_month", "Parts", "parts_from_local"]

MONTHS: Final = ("January", "February", "March", "April", "May", "June", "July", "August",
                 "September", "October", "November", "December")


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


def is_leap(y: int) -> bool:
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


def days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if is_leap(y) else 28
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


def parts_from_local(local_ms: int, offset_s: int) -> Parts:
    days, rem = divmod(local_ms, MS_PER_DAY)
    y, m, d = civil_from_days(days)
    h, rem = divmod(rem, 3_600_000)
    mi, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return Parts(y, m, d, h, mi, s, ms, days, offset_s)

"""Time zones: UTC, fixed offsets ("+hh", "+hhmm", "+hh:mm") and Olson names through
`zoneinfo`; the offset in effect at an instant and the instant of a wall-clock time."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Final
from zoneinfo import ZoneInfo

from storage.errors import MongoError

from .civil import Parts, parts_from_local

__all__ = ["TimeZone", "UTC_TZ", "get_timezone"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_NAIVE: Final = datetime(1970, 1, 1)


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
        return parts_from_local(ms + off * 1000, off)

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

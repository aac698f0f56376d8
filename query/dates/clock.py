"""The current time as a BSON date (`$$NOW` when the command did not fix it)."""

from __future__ import annotations

import time

from bson.datetime_ms import DatetimeMS

__all__ = ["current_now"]


def current_now() -> DatetimeMS:
    return DatetimeMS(int(time.time() * 1000))

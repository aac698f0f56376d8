"""Time units of fixed length in milliseconds (``$dateAdd``, ``$dateTrunc``, window units).

Months, quarters and years have no fixed length and are not here; callers that need a
bin aligned to something other than the epoch (a week starts on ``startOfWeek``) say so
where they use the table.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MS_PER_DAY", "UNIT_MS"]

MS_PER_DAY: Final = 86_400_000

# A plain dict: it is read in per-document loops.
UNIT_MS: Final[dict[str, int]] = {
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": MS_PER_DAY,
    "week": 7 * MS_PER_DAY,
}

"""The calendar and time-zone library behind the date operators, `$densify` and window ranges.

Dates are milliseconds since the epoch (any sign). Calendar fields are computed with integer
arithmetic on the proleptic Gregorian calendar (so dates before 1970 and outside Python's
datetime range work in UTC); time zones are "UTC", fixed offsets or Olson names.

- `civil`: days ⇄ (year, month, day), a date's calendar parts (ISO weeks included)
- `timezones`: `TimeZone` (offset in effect at an instant, wall clock → instant), lookup
- `formatting`: `%`-format strings (`format_date`, `format_iso_utc`)
- `parsing`: date strings, free-form or per format
- `arithmetic`: MongoDB's dateAdd, dateDiff and dateTrunc over units
- `clock`: the current time as a BSON date
"""

"""Date operators: $year $month $dayOfMonth $hour $minute $second $millisecond $dayOfWeek
$dayOfYear $week $isoWeek $isoWeekYear $isoDayOfWeek $dateToParts $dateFromParts
$dateToString $dateFromString $dateAdd $dateSubtract $dateDiff $dateTrunc.

The compilers only parse and check arguments; the calendar, time zones, formatting, parsing
and unit arithmetic are the `query.dates` library.
"""


from __future__ import annotations

from typing import Any, Final

from bson import Int64
from bson.datetime_ms import DatetimeMS

from query.dates.arithmetic import (
    REF_UTC_MS,
    TIME_UNITS,
    add_months,
    date_add,
    date_diff,
    date_trunc,
)
from query.dates.civil import days_from_civil
from query.dates.formatting import (
    FROM_STRING_SPECS,
    ISO_NO_Z,
    ISO_Z,
    TO_STRING_SPECS,
    format_date,
    validate_format,
)
from query.dates.parsing import parse_date_string
from query.dates.timezones import UTC_TZ, TimeZone, get_timezone
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING
from storage.vocabulary.time_units import MS_PER_DAY, UNIT_MS

from .core import (
    Scope,
    check_arity,
    compile_node,
    const_fn,
    const_value,
    is_const,
    parse_args,
)
from .registry import Fn, operator
from .values import as_int, coerce_to_date_ms, coercible_to_date, is_integral64, value_repr

__all__ = ["parse_time_unit"]

_DAYS_OF_WEEK: Final = {"monday": 1, "mon": 1, "tuesday": 2, "tue": 2, "wednesday": 3,
                        "wed": 3, "thursday": 4, "thu": 4, "friday": 5, "fri": 5,
                        "saturday": 6, "sat": 6, "sunday": 7, "sun": 7}


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
            y, m = add_months(vals["year"], 1, vals["month"] - 1)
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
            validate_format(fv, TO_STRING_SPECS)
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
                validate_format(fmt, TO_STRING_SPECS)
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
            validate_format(fv, FROM_STRING_SPECS)

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
                validate_format(fmt, FROM_STRING_SPECS)
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
                ref = REF_UTC_MS - tz.utc_offset_s(REF_UTC_MS) * 1000

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

"""Skipping buckets by `control.min` / `control.max` of measurement fields.

A measurement filter's top-level comparisons of a measurement field with a constant
(`{f: c}`, `$eq`, `$gt`, `$gte`, `$lt`, `$lte`, `$in`) say something about every bucket
holding a match, given the bucket's minimum and maximum of `f` in BSON order (what
MongoDB's bucket-level predicates on `control.min.f`/`control.max.f` do):

- no measurement of the bucket has `f` (it is in neither `control.min` nor `control.max`):
  none of these operators matches a missing field, so the bucket holds no match;
- `control.min.f` and `control.max.f` have the same canonical type, not object or array:
  then every value of `f` in the bucket has that type (nothing else sorts between two
  values of one type), so when `c` has another type the comparison, which is
  type-bracketed, matches none of them; otherwise `f > c` needs `max > c`, `f < c` needs
  `min < c`, `f == c` needs `min <= c <= max`;
- anything else (mixed types, objects, arrays, whose minimum and maximum are taken field
  by field or element by element) says nothing, and the bucket is read.

Constants that are null, MinKey/MaxKey, undefined, regular expressions, objects or arrays
(which have other matching rules) make no check, nor does a string under a collation
other than the simple one. The check only ever skips buckets that hold no match; the whole
filter is applied to the measurements of the others, so a wider stored range (after
deletes or direct writes) only reads more. The time field (whose bounds the bucket filter
already gives) and the meta field (exact at bucket level) are left to `bucket_predicates`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bson.raw_bson import RawBSONDocument
from bson.regex import Regex

from storage.bson_order import (
    RANK_ARRAY,
    RANK_MAXKEY,
    RANK_MINKEY,
    RANK_NULL,
    RANK_OBJECT,
    RANK_REGEX,
    RANK_STRING,
    RANK_UNDEFINED,
    sort_key,
    type_rank,
)
from storage.bsonutil import CODEC_OPTIONS
from storage.vocabulary.missing import MISSING

from .constants import CONTROL, CONTROL_MAX, CONTROL_MIN
from .options import TimeseriesOptions

__all__ = ["ControlFilter", "compile_control_filter", "raw_control"]

_NO_CHECK_RANKS: Final = frozenset({RANK_MINKEY, RANK_UNDEFINED, RANK_NULL, RANK_OBJECT,
                                    RANK_ARRAY, RANK_REGEX, RANK_MAXKEY})
_UNKNOWN_RANKS: Final = frozenset({RANK_OBJECT, RANK_ARRAY})
_OPS: Final = frozenset({"$eq", "$gt", "$gte", "$lt", "$lte", "$in"})
_RAW_OPTIONS: Final = CODEC_OPTIONS.with_options(document_class=RawBSONDocument)

# One check: (field, operator, constants' sort keys, the constants' canonical type ranks)
_Check = tuple[str, str, tuple[tuple[Any, ...], ...], tuple[int, ...]]


class ControlFilter:
    """Whether a bucket's `control` can hold a measurement matching the filter."""

    __slots__ = ("_checks", "fields")

    def __init__(self, checks: list[_Check]) -> None:
        self._checks = checks
        self.fields = frozenset(c[0] for c in checks)

    def may_match(self, control: Mapping[str, Any]) -> bool:
        """False only when no measurement summarised by `control` can match."""
        mins, maxs = control.get(CONTROL_MIN), control.get(CONTROL_MAX)
        if not isinstance(mins, Mapping) or not isinstance(maxs, Mapping):
            return True
        for field, op, keys, ranks in self._checks:
            lo, hi = mins.get(field, MISSING), maxs.get(field, MISSING)
            if lo is MISSING and hi is MISSING:
                return False  # no measurement of the bucket has the field
            if lo is MISSING or hi is MISSING:
                continue
            rank = _rank(lo)
            if rank != _rank(hi) or rank in _UNKNOWN_RANKS:
                continue
            if not any(_holds(op, rank, lo, hi, key, r) for key, r in zip(keys, ranks)):
                return False
        return True


def _rank(v: Any) -> int:
    # objects inside a raw `control` stay raw documents
    return RANK_OBJECT if isinstance(v, Mapping) else type_rank(v)


def raw_control(bucket: bytes) -> Mapping[str, Any]:
    """The `control` of a stored bucket, read without decoding its data."""
    control = RawBSONDocument(bucket, _RAW_OPTIONS).get(CONTROL)
    return control if isinstance(control, Mapping) else {}


def _holds(op: str, rank: int, lo: Any, hi: Any, key: tuple[Any, ...], key_rank: int) -> bool:
    if rank != key_rank:
        return False  # every value has another type than the constant: type bracketing
    if op in ("$gt", "$gte"):
        k = sort_key(hi)
        return k > key if op == "$gt" else k >= key
    if op in ("$lt", "$lte"):
        k = sort_key(lo)
        return k < key if op == "$lt" else k <= key
    return sort_key(lo) <= key <= sort_key(hi)  # $eq, each $in value


def compile_control_filter(flt: Mapping[str, Any] | None, options: TimeseriesOptions, *,
                           simple_strings: bool = True) -> ControlFilter | None:
    """The checks `flt` allows (None when it allows none); `simple_strings` is False under
    a collation other than simple (string constants then make no check)."""
    if not flt:
        return None
    checks: list[_Check] = []
    _collect(flt, options, simple_strings, checks)
    return ControlFilter(checks) if checks else None


def _collect(flt: Mapping[str, Any], options: TimeseriesOptions, simple_strings: bool,
             out: list[_Check]) -> None:
    skip = {options.time_field, options.meta_field}
    for path, cond in flt.items():
        if path == "$and" and isinstance(cond, list):
            for sub in cond:
                if isinstance(sub, Mapping):
                    _collect(sub, options, simple_strings, out)
            continue
        if path.startswith("$") or "." in path or path in skip:
            continue
        if isinstance(cond, Mapping) and any(k.startswith("$") for k in cond):
            for op, value in cond.items():
                if op in _OPS:
                    _add(out, path, op, value, simple_strings)
        elif not isinstance(cond, Mapping):
            _add(out, path, "$eq", cond, simple_strings)


def _add(out: list[_Check], path: str, op: str, value: Any, simple_strings: bool) -> None:
    values = value if op == "$in" else [value]
    if op == "$in" and not isinstance(value, list):
        return
    keys, ranks = [], []
    for v in values:
        rank = type_rank(v)
        if rank in _NO_CHECK_RANKS or isinstance(v, Regex) or hasattr(v, "pattern"):
            return
        if rank == RANK_STRING and not simple_strings:
            return
        keys.append(sort_key(v))
        ranks.append(rank)
    if keys:
        out.append((path, "$eq" if op == "$in" else op, tuple(keys), tuple(ranks)))


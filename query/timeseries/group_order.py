"""The `_id`s and the output order of block processing's groups, made per meta value.

A group of the native fold is a (series class, time bin) pair. Its `_id` is the `_id`
expression evaluated once per distinct meta value with a placeholder time (the meta's
template), with each `$dateTrunc` part replaced by the bin's start: a bin's start is its
own truncation, so that is what evaluating the expression on any row of the bin gives.
Two groups never share an `_id`: classes differ by their templates' group keys, which
the bin does not change, and one class's groups differ by their bins.

A `$sort` right after the `$group` is fused into the fold when each of its keys is a path
into the `_id` reaching either a `$dateTrunc` part (ordered by the bin) or a part with
none below it (the same for every group of a meta value: ordered by the generic sort's
key of the meta's template there). Python's sort is stable, as the generic one is, so
ties keep the groups' first-seen order (a descending bin is sorted with `reverse`, which
keeps ties in order too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bson.datetime_ms import DatetimeMS

from query.accumulators import approx_size
from query.sort import SortSpec, parse_sort
from storage.collation import Collator
from storage.errors import MongoError
from storage.vocabulary.missing import MISSING

__all__ = ["FusedSort", "MetaTemplate", "bin_substitution", "fused_sort"]

Substitute = Callable[[Any, DatetimeMS], Any]


def _is_trunc(spec: Any) -> bool:
    return type(spec) is dict and bool(spec) and next(iter(spec)).startswith("$")


def _has_trunc(spec: Any) -> bool:
    if _is_trunc(spec):
        return True
    return type(spec) is dict and any(_has_trunc(v) for v in spec.values())


def bin_substitution(id_spec: Any) -> Substitute | None:
    """How a template becomes a group's `_id` given its bin start (None: the `_id` has no
    `$dateTrunc`, the template is the `_id`). The columnar plan admits only `$dateTrunc`
    as an operator in the `_id`, and no arrays."""
    if _is_trunc(id_spec):
        return lambda _v, d: d
    if type(id_spec) is not dict:
        return None
    parts = [(k, f) for k, s in id_spec.items() if (f := bin_substitution(s)) is not None]
    if not parts:
        return None

    def substitute(v: Any, d: DatetimeMS) -> Any:
        out = dict(v)  # the template is shared by the meta's groups
        for k, f in parts:
            out[k] = f(out[k], d)  # a $dateTrunc of the time is never missing
        return out

    return substitute


@dataclass(slots=True)
class MetaTemplate:
    """A meta value's `_id` template (time placeholder), its size for the memory limit,
    and its keys for a fused sort (filled on first use)."""

    template: Any
    size: int
    sort_keys: list[Any] | None = None

    @classmethod
    def of(cls, gid: Any) -> MetaTemplate:
        if gid is MISSING:
            gid = None
        return cls(gid, approx_size(gid))


@dataclass(slots=True)
class FusedSort:
    """Per sort key: a SortSpec of the key alone (a per-meta part) or None (the bin), and
    its direction."""

    keys: list[tuple[SortSpec | None, int]] = field(default_factory=list)

    def order(self, groups: list[Any], meta_of: Callable[[Any], MetaTemplate]) -> None:
        """Sort the core's groups `(class, bin start, ...)` in place, `meta_of` giving a
        group's meta template: one stable pass per key, the last key first."""
        for i in range(len(self.keys) - 1, -1, -1):
            spec, d = self.keys[i]
            if spec is None:
                groups.sort(key=lambda g: g[1], reverse=d < 0)
            else:
                groups.sort(key=lambda g: self._meta_key(meta_of(g), i))

    def _meta_key(self, meta: MetaTemplate, i: int) -> Any:
        if meta.sort_keys is None:
            doc = {"_id": meta.template}
            meta.sort_keys = [spec(doc) if spec is not None else None
                              for spec, _ in self.keys]
        return meta.sort_keys[i]


def fused_sort(id_spec: Any, rest: list[Any], collator: Collator | None) -> FusedSort | None:
    """The fused form of `rest`'s leading `$sort`, or None when it has none or cannot be
    fused."""
    if not rest or type(rest[0]) is not dict or list(rest[0]) != ["$sort"]:
        return None
    try:
        fields = parse_sort(rest[0]["$sort"])
    except MongoError:
        return None  # the generic $sort reports it
    if not fields:
        return None
    out = FusedSort()
    for path, d in fields:
        parts = path.split(".")
        if parts[0] != "_id":
            return None  # an accumulator's value
        spec = id_spec
        for p in parts[1:]:
            if _is_trunc(spec):
                return None  # into a date
            spec = spec.get(p) if type(spec) is dict else None
        if _is_trunc(spec):
            out.keys.append((None, d))
        elif _has_trunc(spec):
            return None  # a document holding the bin and per-meta parts
        else:
            out.keys.append((SortSpec([(path, d)], collator), d))
    return out

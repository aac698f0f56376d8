"""The `_id`s and the output order of block processing's groups, made per meta value.

A group of the native fold is a (series class, time bin) pair. Its `_id` is the `_id`
expression evaluated once per distinct meta value with a placeholder time (the meta's
template), with each part made from the time (`$dateTrunc`, `$dateToString`) replaced by
its value at the bin's start: the plan admits only bins whose rows all give that value,
so it is what evaluating the expression on any row of the bin gives.
Two groups never share an `_id`: classes differ by their templates' group keys, which
the bin does not change, and one class's groups differ by their bins.

A `$sort` right after the `$group` is fused into the fold when each of its keys is a path
into the `_id` reaching either a `$dateTrunc` part (ordered by the bin; a `$dateToString`
part is not fused) or a part with none below it (the same for every group of a meta
value: ordered by the generic sort's key of the meta's template there). The core sorts the groups (native/src/blocks/
results.rs) by the bin and by each meta value's rank under those keys, stably, as the
generic sort is: ties keep the groups' first-seen order.
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

__all__ = ["FusedSort", "MetaTemplate", "bin_parts", "bin_paths", "fused_sort"]

def _is_bin(spec: Any) -> bool:
    """A part of the `_id` made from the time (the columnar plan admits only `$dateTrunc`
    and `$dateToString` of it as operators there, and no arrays)."""
    return type(spec) is dict and bool(spec) and next(iter(spec)).startswith("$")


def _has_bin(spec: Any) -> bool:
    if _is_bin(spec):
        return True
    return type(spec) is dict and any(_has_bin(v) for v in spec.values())


def bin_paths(id_spec: Any) -> list[list[str]]:
    """The paths in the `_id` of its parts made from the time (`[]`: the `_id` is one),
    which a group's bin decides; none when the `_id` has none (its template is the
    `_id`)."""
    if _is_bin(id_spec):
        return [[]]
    if type(id_spec) is not dict:
        return []
    return [[k, *p] for k, s in id_spec.items() for p in bin_paths(s)]


def bin_parts(id_fn: Callable[[dict[str, Any], dict[str, Any]], Any],
              variables: dict[str, Any], time_field: str, paths: list[list[str]]
              ) -> Callable[[int], list[Any]]:
    """The values a bin (its start, ms) gives the `_id`'s time parts at `paths`: the `_id`
    expression (`id_fn`) evaluated on a row at the bin's start, which is what it gives any
    row of the bin (an error there, `MongoError`, is the caller's to decline)."""
    def values(start: int) -> list[Any]:
        gid = id_fn({time_field: DatetimeMS(start)}, variables)
        out = []
        for path in paths:
            v = gid
            for k in path:
                v = v[k]
            out.append(v)
        return out

    return values


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

    def native_keys(self, metas: list[MetaTemplate | None]
                    ) -> list[tuple[int, list[int] | None]]:
        """The keys as the core's fold orders its groups (by meta value number): per key
        `(direction, None)` for the bin, or `(1, ranks)`, each meta value's dense rank
        under the generic sort's key of its template there (equal keys, equal ranks: the
        core's stable sort then keeps their groups' first-seen order, as the generic
        `$sort` does). A meta value of no group (None) ranks 0."""
        out: list[tuple[int, list[int] | None]] = []
        for i, (spec, d) in enumerate(self.keys):
            if spec is None:
                out.append((d, None))
                continue
            present = [(self._meta_key(m, i), j) for j, m in enumerate(metas) if m is not None]
            present.sort(key=lambda kj: kj[0])
            ranks = [0] * len(metas)
            rank, prev = 0, None
            for n, (k, j) in enumerate(present):
                if n and prev < k:
                    rank += 1
                ranks[j] = rank
                prev = k
            out.append((1, ranks))
        return out

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
            if _is_bin(spec):
                return None  # into a date
            spec = spec.get(p) if type(spec) is dict else None
        if _is_bin(spec):
            if "$dateTrunc" not in spec:
                return None  # strings: not fused (their order is not always the bins')
            out.keys.append((None, d))
        elif _has_bin(spec):
            return None  # a document holding the bin and per-meta parts
        else:
            out.keys.append((SortSpec([(path, d)], collator), d))
    return out

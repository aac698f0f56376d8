"""Access-path choice for find/count/update/delete: a collection scan or one index scan.

    plan = plan_query(filter_spec, sort_spec, index_specs, hint=None)
    plan.stage          # "COLLSCAN" | "IXSCAN"
    plan.bounds         # per index field: [Interval(lower, lower_inclusive, upper, upper_inclusive)]
    plan.explain()      # queryPlanner.winningPlan-shaped document

Bounds are *loose but never too tight*: the caller re-applies the whole filter to the
fetched documents. Rules that keep them safe without knowing which index fields are
multikey:

- one predicate per index field gives that field's intervals (equality / ``$in``
  preferred, then a range); predicates are not intersected, because on an array
  ``{a: {$gt: 5, $lt: 3}}`` can match ``[1, 10]``; except ranges of one type bracket on
  ``_id``, which is never an array, and on any field of an index that is not multikey
  (no document has put an array into it, as MongoDB's multikey flag says);
- ranges stay within the operand's type bracket (``$gt: 5`` → ``(5, inf]``), as the
  matcher never compares across brackets;
- equality to null also covers MinKey/undefined keys (``[MinKey, null]``): a path
  through an empty array or scalars reaches "missing";
- ``$ne $nin $not $nor $exists $type $elemMatch``, ``$or``, and equality to arrays give
  no bounds (the field is scanned whole);
- a sparse index is used only when the first field's bounds exclude null; a partial
  index only when the filter's own predicates imply its partialFilterExpression;
  hidden indexes never (hinting one is an error, as in MongoDB).

Interval values are BSON values in value order (lower <= upper) whatever the
index field's direction; MinKey/MaxKey mark open ends. `provides_sort` says the scan
order (`direction` over the key pattern) already yields the requested sort; that is
only claimed for indexes whose spec says ``multikey: False``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from bson import MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.datetime_ms import DatetimeMS

from query.match import Matcher, compile_filter
from query.match.compiler import Node
from query.match.regex import regex_parts
from query.match.values import is_nan
from query.sort import parse_sort
from storage.bson_order import (
    RANK_BINDATA,
    RANK_BOOL,
    RANK_DATE,
    RANK_NULL,
    RANK_NUMBER,
    RANK_OBJECT,
    RANK_OBJECTID,
    RANK_STRING,
    RANK_TIMESTAMP,
    sort_key,
    type_rank,
)
from storage.collation import Collator, translate_fn
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["Interval", "IndexInfo", "QueryPlan", "plan_query", "FULL_RANGE"]


class Interval(NamedTuple):
    lower: Any
    lower_inclusive: bool
    upper: Any
    upper_inclusive: bool


FULL_RANGE: Final = Interval(MinKey(), True, MaxKey(), True)
_INF: Final = float("inf")

# [min, max] of each type bracket usable for ranges: (lower, upper, upper_inclusive).
_BRACKETS: Final[dict[int, tuple[Any, Any, bool]]] = {
    RANK_NUMBER: (-_INF, _INF, True),
    RANK_STRING: ("", {}, False),
    RANK_OBJECT: ({}, [], False),
    RANK_BINDATA: (b"", ObjectId("000000000000000000000000"), False),
    RANK_OBJECTID: (ObjectId("000000000000000000000000"), ObjectId("ffffffffffffffffffffffff"),
                    True),
    RANK_BOOL: (False, True, True),
    RANK_DATE: (DatetimeMS(-(2**63)), DatetimeMS(2**63 - 1), True),
    RANK_TIMESTAMP: (Timestamp(0, 0), Timestamp(2**32 - 1, 2**32 - 1), True),
}


@dataclass
class IndexInfo:
    name: str
    key: list[tuple[str, Any]]
    sparse: bool = False
    partial: dict[str, Any] | None = None
    hidden: bool = False
    multikey: bool = True
    unique: bool = False
    #: the name a clustered collection's `_id` index goes by (it is scanned as the
    #: collection itself, CLUSTERED_IXSCAN); None for every other index
    clustered_name: str | None = None

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> IndexInfo:
        return cls(name=spec["name"], key=list(spec["key"].items()),
                   sparse=bool(spec.get("sparse", False)),
                   partial=spec.get("partialFilterExpression"),
                   hidden=bool(spec.get("hidden", False)),
                   multikey=bool(spec.get("multikey", True)),
                   unique=bool(spec.get("unique", False)),
                   clustered_name=spec.get("clusteredName"))

    @property
    def key_pattern(self) -> dict[str, Any]:
        return dict(self.key)


@dataclass
class QueryPlan:
    stage: str
    direction: int = 1
    index_name: str | None = None
    key_pattern: dict[str, Any] | None = None
    bounds: list[list[Interval]] = field(default_factory=list)
    provides_sort: bool = False
    filter: dict[str, Any] = field(default_factory=dict)
    index: IndexInfo | None = None  # the scanned index (IXSCAN)
    clustered: bool = False  # a scan of a clustered collection's `_id` index

    @property
    def is_collscan(self) -> bool:
        return self.stage == "COLLSCAN"

    def summary(self) -> str:
        """mongod's `planSummary`: "COLLSCAN" or "IXSCAN { a: 1, b: -1 }"."""
        if self.key_pattern is None:
            return self.stage
        keys = ", ".join(f"{k}: {v}" for k, v in self.key_pattern.items())
        return f"{self.stage} {{ {keys} }}"

    def explain(self) -> dict[str, Any]:
        direction = "forward" if self.direction == 1 else "backward"
        if self.stage == "COLLSCAN":
            return {"stage": "COLLSCAN", "filter": self.filter, "direction": direction}
        if self.clustered:
            return _clustered_explain(self.filter, direction, self.bounds[0])
        assert self.key_pattern is not None
        ix = self.index
        ixscan = {
            "stage": "IXSCAN", "keyPattern": self.key_pattern, "indexName": self.index_name,
            "isMultiKey": bool(ix is not None and ix.multikey),
            "isUnique": bool(ix is not None and ix.unique),
            "isSparse": bool(ix is not None and ix.sparse),
            "isPartial": bool(ix is not None and ix.partial is not None),
            "indexVersion": 2,
            "direction": "forward" if self.direction == 1 else "backward",
            "indexBounds": {f: [format_interval(iv) for iv in ivs]
                            for (f, _), ivs in zip(self.key_pattern.items(), self.bounds)},
        }
        fetch: dict[str, Any] = {"stage": "FETCH", "inputStage": ixscan}
        if self.filter:
            fetch = {"stage": "FETCH", "filter": self.filter, "inputStage": ixscan}
        return fetch


# --------------------------------------------------------------------------- intervals

def _point(v: Any) -> Interval:
    return Interval(v, True, v, True)


def _eq_intervals(v: Any) -> list[Interval] | None:
    if v is None:
        return [Interval(MinKey(), True, None, True)]
    if isinstance(v, list):
        return None
    if is_nan(v):
        return [_point(float("nan"))]
    return [_point(v)]


def _range_interval(op: str, v: Any) -> list[Interval] | None:
    rank = type_rank(v)
    if rank == RANK_NULL:
        return [Interval(MinKey(), True, None, True)] if op in ("$gte", "$lte") else []
    if is_nan(v):
        return [_point(float("nan"))] if op in ("$gte", "$lte") else []
    bracket = _BRACKETS.get(rank)
    if bracket is None:
        return None
    lo, hi, hi_inc = bracket
    if op == "$gt":
        return [Interval(v, False, hi, hi_inc)]
    if op == "$gte":
        return [Interval(v, True, hi, hi_inc)]
    if op == "$lt":
        return [Interval(lo, True, v, False)]
    return [Interval(lo, True, v, True)]


_REGEX_META: Final = set(".^$*+?()[]{}|\\")


def _regex_intervals(pattern: str, options: str, collated: bool = False) -> list[Interval]:
    regex_bracket = Interval(Regex("", ""), True, MaxKey(), False)
    if not collated and pattern.startswith("^") and "i" not in options and "x" not in options \
            and "m" not in options:
        prefix = []
        for ch in pattern[1:]:
            if ch in _REGEX_META:
                break
            prefix.append(ch)
        p = "".join(prefix)
        rest = pattern[1 + len(p):]
        if p and not rest.startswith(("*", "?", "{")):
            upper = p[:-1] + chr(ord(p[-1]) + 1)
            return [Interval(p, True, upper, False), regex_bracket]
    return [Interval("", True, {}, False), regex_bracket]


def _sorted_points(ivs: list[Interval]) -> list[Interval]:
    seen: dict[Any, Interval] = {}
    for iv in ivs:
        seen.setdefault((sort_key(iv.lower), iv.lower_inclusive, sort_key(iv.upper)), iv)
    return [seen[k] for k in sorted(seen, key=lambda k: k[0])]


def _leaf_intervals(node: Node, collator: Collator | None = None
                    ) -> tuple[int, list[Interval]] | None:
    """(preference, intervals) for a top-level path node; None if unusable. Under a
    collation the bounds are in collation-key space (the index's keys are), and a regex,
    which matches the strings themselves, bounds nothing within the string bracket."""
    op, arg = node.op, node.arg
    tr = translate_fn(collator)
    if op == "$eq":
        ivs = _eq_intervals(tr(arg))
        return None if ivs is None else (3, ivs)
    if op == "$in":
        out: list[Interval] = []
        for v in arg:
            if isinstance(v, Regex | re.Pattern):
                out.extend(_regex_intervals(*regex_parts(v), collator is not None))
                continue
            ivs = _eq_intervals(tr(v))
            if ivs is None:
                return None
            out.extend(ivs)
        return (2, _sorted_points(out))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        ivs = _range_interval(op, tr(arg))
        return None if ivs is None else (1, ivs)
    if op == "$regex":
        pattern, options = arg
        return (1, _regex_intervals(pattern, options, collator is not None))
    return None


_RANGE_OPS: Final = frozenset(("$gt", "$gte", "$lt", "$lte"))


def _intersect_ranges(ivs: list[Interval]) -> list[Interval] | None:
    """The intersection of range intervals of one type bracket (no interval when it is
    empty), or None when they are not all of one bracket."""
    if any(isinstance(iv.lower, MinKey) for iv in ivs) or \
            len({type_rank(iv.lower) for iv in ivs}) != 1:  # a range's lower end is in its
        return None                                          # bracket (null's is MinKey)
    lo = max(ivs, key=lambda iv: (sort_key(iv.lower), not iv.lower_inclusive))
    hi = min(ivs, key=lambda iv: (sort_key(iv.upper), iv.upper_inclusive))
    low, high = sort_key(lo.lower), sort_key(hi.upper)
    if low > high or (low == high and not (lo.lower_inclusive and hi.upper_inclusive)):
        return []
    return [Interval(lo.lower, lo.lower_inclusive, hi.upper, hi.upper_inclusive)]


def _top_level_leaves(root: Node) -> list[Node]:
    if root.kind == "path":
        return [root]
    if root.kind == "and":
        out: list[Node] = []
        for c in root.children:
            out.extend(_top_level_leaves(c))
        return out
    return []


# --------------------------------------------------------------------------- choosing

@dataclass
class _Candidate:
    index: IndexInfo
    bounds: list[list[Interval]]
    eq_prefix: int
    bounded_prefix: int
    direction: int
    provides_sort: bool


def _candidate(ix: IndexInfo, by_field: dict[str, tuple[int, list[Interval]]],
               sort_fields: list[tuple[str, int]],
               ranges: dict[str, list[Interval]] | None = None) -> _Candidate:
    """`ranges`: each field's single-interval range predicates, intersected on `_id` (never
    an array) and on every field of an `ix` that is not multikey."""
    bounds: list[list[Interval]] = []
    eq_prefix = 0
    bounded = 0
    still_eq = still_bounded = True
    for f, _ in ix.key:
        got = by_field.get(f)
        if got is None:
            bounds.append([FULL_RANGE])
            still_eq = still_bounded = False
            continue
        rank, ivs = got
        if rank == 1 and ranges is not None and (f == "_id" or not ix.multikey) \
                and len(ranges.get(f, ())) > 1:
            merged = _intersect_ranges(ranges[f])
            if merged is not None:
                ivs = merged
        bounds.append(ivs)
        is_point = all(iv.lower_inclusive and iv.upper_inclusive and
                       sort_key(iv.lower) == sort_key(iv.upper) for iv in ivs) and len(ivs) == 1
        if still_eq and is_point:
            eq_prefix += 1
        else:
            still_eq = False
        if still_bounded:
            bounded += 1
    direction, provides = 1, False
    if sort_fields and not ix.multikey:
        keys = ix.key
        for start in {0, eq_prefix}:
            window = keys[start:start + len(sort_fields)]
            if len(window) != len(sort_fields):
                continue
            if any(f != sf for (f, _), (sf, _) in zip(window, sort_fields)):
                continue
            same = all(_dir(d) == sd for (_, d), (_, sd) in zip(window, sort_fields))
            flipped = all(_dir(d) == -sd for (_, d), (_, sd) in zip(window, sort_fields))
            if same or flipped:
                direction, provides = (1 if same else -1), True
                break
    return _Candidate(ix, bounds, eq_prefix, bounded, direction, provides)


def _dir(d: Any) -> int:
    try:
        return -1 if float(d) < 0 else 1
    except (TypeError, ValueError):
        return 1


def _partial_implied(partial: dict[str, Any], leaves: list[Node]) -> bool:
    pm = compile_filter(partial)
    for pleaf in _top_level_leaves(pm.root):
        implied = False
        for q in leaves:
            if q.path is None or q.path != pleaf.path:
                continue
            if (q.op == pleaf.op and sort_key(_hashable(q.arg)) == sort_key(_hashable(pleaf.arg))) or (q.op == "$eq" and pleaf.fn({q.path: q.arg} if "." not in q.path
                                            else _nest(q.path, q.arg), None)):
                implied = True
            if implied:
                break
        if not implied:
            return False
    return pm.root.kind in ("path", "and")


def _hashable(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    return v


def _nest(path: str, value: Any) -> dict[str, Any]:
    parts = path.split(".")
    doc: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        doc = {part: doc}
    return doc


def _eligible(ix: IndexInfo, cand: _Candidate, leaves: list[Node]) -> bool:
    if ix.hidden:
        return False
    if ix.sparse:
        first = cand.bounds[0] if cand.bounds else [FULL_RANGE]
        if any(_covers_null(iv) for iv in first):
            return False
    return not (ix.partial is not None and not _partial_implied(ix.partial, leaves))


def _covers_null(iv: Interval) -> bool:
    null = sort_key(None)
    lo, hi = sort_key(iv.lower), sort_key(iv.upper)
    return (lo < null or (lo == null and iv.lower_inclusive)) and (
        hi > null or (hi == null and iv.upper_inclusive))


def _find_hint(hint: Any, indexes: list[IndexInfo]) -> IndexInfo:
    for ix in indexes:
        if (isinstance(hint, str) and hint in (ix.name, ix.clustered_name)) or (
                isinstance(hint, dict) and list(hint.items()) == ix.key):
            if ix.hidden:
                break
            return ix
    raise MongoError(ErrorCode.BadValue,
                     "error processing query: planner returned error :: caused by :: hint "
                     "provided does not correspond to an existing index")


def plan_query(filter_spec: dict[str, Any] | Matcher | None, sort_spec: dict[str, Any] | None,
               index_specs: list[dict[str, Any]] | list[IndexInfo], *, hint: Any = None,
               collator: Collator | None = None,
               other_collation_specs: list[dict[str, Any]] | None = None) -> QueryPlan:
    """Choose COLLSCAN or one IXSCAN for a filter (+ optional sort and hint). The indexes
    given must have the query's collation (`collator`, None: simple): bounds on strings
    are built in its key space. An index of `other_collation_specs` is used only when
    hinted, scanned whole (its key order is not the query's)."""
    matcher = filter_spec if isinstance(filter_spec, Matcher) else compile_filter(filter_spec)
    spec = matcher.spec
    indexes = [ix if isinstance(ix, IndexInfo) else IndexInfo.from_spec(ix) for ix in index_specs]
    sort_fields = parse_sort(sort_spec) if sort_spec else []
    leaves = _top_level_leaves(matcher.root)
    by_field: dict[str, tuple[int, list[Interval]]] = {}
    ranges: dict[str, list[Interval]] = {}
    for leaf in leaves:
        got = _leaf_intervals(leaf, collator)
        if got is None or leaf.path is None:
            continue
        if leaf.op in _RANGE_OPS and len(got[1]) == 1:
            ranges.setdefault(leaf.path, []).append(got[1][0])
        prev = by_field.get(leaf.path)
        if prev is None or got[0] > prev[0]:
            by_field[leaf.path] = got

    if hint is not None and hint != {}:
        if isinstance(hint, dict) and "$natural" in hint:
            return QueryPlan("COLLSCAN", direction=_dir(hint["$natural"]), filter=spec)
        try:
            ix = _find_hint(hint, indexes)
        except MongoError:
            if not other_collation_specs:
                raise
            other = _find_hint(hint, [IndexInfo.from_spec(s) for s in other_collation_specs])
            return _to_plan(_candidate(other, {}, []), spec)
        cand = _candidate(ix, by_field, sort_fields, ranges)
        if ix.partial is not None and not _partial_implied(ix.partial, leaves):
            raise MongoError(ErrorCode.BadValue,
                             "error processing query: planner returned error :: caused by :: "
                             "hint provided does not correspond to an existing index")
        return _to_plan(cand, spec)

    best: _Candidate | None = None
    best_score: tuple[Any, ...] = ()
    for ix in indexes:
        cand = _candidate(ix, by_field, sort_fields, ranges)
        if not _eligible(ix, cand, leaves):
            continue
        if cand.bounded_prefix == 0 and not cand.provides_sort:
            continue
        if cand.bounded_prefix == 0 and (ix.sparse or ix.partial is not None):
            continue
        score = (cand.eq_prefix, cand.bounded_prefix, cand.provides_sort, -len(ix.key),
                 ix.name == "_id_")
        if best is None or score > best_score:
            best, best_score = cand, score
    if best is None:
        return QueryPlan("COLLSCAN", filter=spec)
    return _to_plan(best, spec)


def _to_plan(c: _Candidate, spec: dict[str, Any]) -> QueryPlan:
    return QueryPlan("IXSCAN", direction=c.direction, index_name=c.index.name,
                     key_pattern=c.index.key_pattern, bounds=c.bounds,
                     provides_sort=c.provides_sort, filter=spec,
                     clustered=c.index.clustered_name is not None, index=c.index)


def _open_end(v: Any, lower: bool) -> bool:
    """Whether an interval end is no bound of the query's own (MinKey/MaxKey or an end of
    a type bracket, which the planner adds)."""
    if isinstance(v, MinKey | MaxKey):
        return True
    ends = [b[0] if lower else b[1] for b in _BRACKETS.values()]
    return any(type(e) is type(v) and sort_key(e) == sort_key(v) for e in ends)


def _clustered_explain(flt: dict[str, Any], direction: str, intervals: list[Interval]
                       ) -> dict[str, Any]:
    """A clustered collection's `_id` range as mongod shows it: one bounded collection
    scan, CLUSTERED_IXSCAN with the range's ends as `minRecord`/`maxRecord`; several
    ranges (`$in`) or none are a plain COLLSCAN there."""
    if len(intervals) != 1 or intervals[0] == FULL_RANGE:
        return {"stage": "COLLSCAN", "filter": flt, "direction": direction}
    iv = intervals[0]
    out: dict[str, Any] = {"stage": "CLUSTERED_IXSCAN", "filter": flt, "direction": direction}
    if not _open_end(iv.lower, True):
        out["minRecord"] = iv.lower
    if not _open_end(iv.upper, False):
        out["maxRecord"] = iv.upper
    return out


# --------------------------------------------------------------------------- explain text

def _fmt_value(v: Any) -> str:
    if isinstance(v, MinKey):
        return "MinKey"
    if isinstance(v, MaxKey):
        return "MaxKey"
    if isinstance(v, float):
        if v == _INF:
            return "inf.0"
        if v == -_INF:
            return "-inf.0"
        if v != v:
            return "nan.0"
        return repr(v)
    if isinstance(v, str):
        return '"' + v + '"'
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, dict) and not v:
        return "{}"
    if isinstance(v, list) and not v:
        return "[]"
    if isinstance(v, ObjectId):
        return f"ObjectId('{v}')"
    if isinstance(v, DatetimeMS):
        return f"new Date({int(v)})"
    if isinstance(v, Regex):
        p, o = regex_parts(v)
        return f"/{p}/{o}"
    return str(v)


def format_interval(iv: Interval) -> str:
    """MongoDB's explain rendering: ``[5, inf.0]``, ``("a", {})``, ``[MinKey, MaxKey]``."""
    return (("[" if iv.lower_inclusive else "(") + _fmt_value(iv.lower) + ", "
            + _fmt_value(iv.upper) + ("]" if iv.upper_inclusive else ")"))

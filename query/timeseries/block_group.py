"""Block processing: the columnar `$group` folded by the native core over stored buckets.

The first try of the columnar `$group` path (`columnar_group`): the candidate buckets come
from the bucket scan as the bytes the storage returns (never decoded into Python); the
native core (`storage._native.BlockGroup`, native/src/blocks/) decodes only the time
column and the needed `data.<field>` columns into typed arrays, applies the per-row filter
(time range, numeric comparisons, `$in`s and `$or`s of fields) and folds each group's
accumulators. Python sees one object per distinct meta value and one per group: each
distinct meta is given a series class (the `_id`'s meta part, under the `$match`'s meta
conditions) before the fold. The core then makes the result documents: each group's
`_id` from its meta value's template with its bin's values in place (`group_order`),
each accumulator's value from its partial state as the generic accumulator types it
(native/src/blocks/results.rs, against `SumState`, `StdDevAcc` and `BestNAcc`), in the
order of a following `$sort` on the `_id` when it is fused (the meta values' ranks come
from the generic sort's keys, `FusedSort.native_keys`). So the result is the generic
`$group`'s, value and type.

The core declines (`Declined`) anything it does not reproduce exactly — v1 buckets, types
other than int32/int64/double/bool/date/null in a needed column, NaN in a filtered
field, times outside the bins' range — and `block_group` then returns None: the numpy
path, else the general path, answers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any, Final

from bson import Int64
from bson.datetime_ms import DatetimeMS

from query.stages.group import group_key
from storage import native
from storage.bsonutil import decode
from storage.collection import Collection
from storage.errors import MongoError
from storage.timeseries import ControlFilter
from storage.vocabulary.bson_types import T_BOOL, T_DOUBLE, T_INT32, T_INT64, T_NULL

from .group_order import FusedSort, MetaTemplate, bin_parts, bin_paths
from .scan import BucketScan, MetaGate, ReadStats, stored_control

__all__ = ["Decline", "block_group", "group_raw"]

_BATCH: Final = 256  # buckets per call into the core
_TIME: Final = -1
_CONST: Final = -2


class Decline(Exception):
    """A columnar path does not apply: the next path answers (raised by both columnar
    folds, and by the groups they share)."""


def _value_tuple(v: Any) -> tuple[int, int, float]:
    """A constant as the core reads it (see native/src/blocks/bindings.rs)."""
    t = type(v)
    if t is int:
        if -(2**31) <= v < 2**31:
            return T_INT32, v, 0.0
        if -(2**63) <= v < 2**63:
            return T_INT64, v, 0.0
        raise Decline
    if t is Int64:
        return T_INT64, int(v), 0.0
    if t is float:
        return T_DOUBLE, 0, v
    if t is bool:
        return T_BOOL, int(v), 0.0
    if v is None:
        return T_NULL, 0, 0.0
    if t is str:
        return 0, 0, 0.0  # $sum of a string constant adds nothing, as missing does
    raise Decline


def _core_group(plan: Any) -> Any:
    assert native.core is not None
    fields: list[str] = plan.fields
    col = {f: k for k, f in enumerate(fields)}

    def arg_of(f: str) -> int:
        return _TIME if f == plan.time_field else col[f]

    accs, bests = [], []
    for i, a in enumerate(plan.accs):
        if a.best is not None:
            b = a.best
            bests.append((i, b.descending, a.op.startswith("$bottom"), b.n or 1,
                          [arg_of(f) for f in b.outputs], b.listed))
        if a.field is None:
            arg = _CONST if a.op != "$count" else _TIME
            accs.append((a.op, arg, _value_tuple(a.const) if arg == _CONST else (0, 0, 0.0)))
        else:
            accs.append((a.op, arg_of(a.field), (0, 0, 0.0)))
    preds = [(col[f], op, _number_tuple(v)) for f, op, v in plan.row_preds]
    ors = [[[(col[f], op, _number_tuple(v)) for f, op, v in branch] for branch in branches]
           for branches in plan.row_ors]
    return native.core.BlockGroup(plan.time_field, fields, plan.time_preds, preds,
                                  plan.bin_ms, accs, ors, bests)


def _number_tuple(v: Any) -> tuple[int, int, float]:
    """A row predicate's constant as the core reads it: a number, never NaN."""
    c = _value_tuple(v)
    if c[0] not in (T_INT32, T_INT64, T_DOUBLE) or (type(v) is float and math.isnan(v)):
        raise Decline
    return c


class _Classes:
    """The series class of each distinct meta value (buckets whose rows may share a
    group share a class; -1 for a meta the `$match` excludes) and its `_id` template;
    the core asks once per meta value."""

    def __init__(self, plan: Any, variables: dict[str, Any]) -> None:
        self.plan = plan
        self.variables = variables
        self.keys: dict[Any, int] = {}

    def of(self, meta_doc: bytes | None) -> tuple[int, MetaTemplate | None]:
        plan = self.plan
        doc = {plan.meta_field: decode(meta_doc)["m"]} if meta_doc is not None else {}
        if plan.meta_matcher is not None and not plan.meta_matcher.matches(doc):
            return -1, None
        # the _id with a fixed time: equal for two metas exactly when their rows of one
        # bin share a group in the generic $group
        try:
            gid = plan.group.id_fn({**doc, plan.time_field: DatetimeMS(0)}, self.variables)
        except MongoError:
            raise Decline from None
        meta = MetaTemplate.of(gid)
        if not plan.id_uses_meta:
            return 0, meta
        key = gid if type(gid) in (str, int) else group_key(gid)
        return self.keys.setdefault(key, len(self.keys)), meta


def block_group(buckets: Collection, bucket_filter: dict[str, Any] | None,
                control: ControlFilter | None, plan: Any, groups: Any,
                variables: dict[str, Any], stats: ReadStats | None,
                sort: FusedSort | None = None) -> list[dict[str, Any]] | None:
    """The `$group` output of `plan` over the buckets (its groups counted against the
    memory budget of `groups`, the columnar path's `_Groups`), ordered by `sort` when
    given, or None when block processing declines."""
    if native.core is None:
        return None
    try:
        return _block_group(buckets, bucket_filter, control, plan, groups, variables, stats,
                            sort)
    except (Decline, native.Declined, native.core.NativeError):
        return None


def _batches(scan: BucketScan, control: ControlFilter | None, stats: ReadStats
             ) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    gate = MetaGate(scan.filter if scan.collator is None else None)
    for _rid, raw in scan.raw():
        stats.buckets_scanned += 1
        if gate.active and not gate.passes(raw):
            continue
        if control is not None and not control.may_match(stored_control(raw)):
            stats.buckets_skipped += 1
            continue
        batch.append(raw)
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _block_group(buckets: Collection, bucket_filter: dict[str, Any] | None,
                 control: ControlFilter | None, plan: Any, groups: Any,
                 variables: dict[str, Any], stats: ReadStats | None,
                 sort: FusedSort | None) -> list[dict[str, Any]]:
    mine = ReadStats()  # copied to `stats` only when this path answers
    docs, (_fed, matched, columns, rows) = _fold(
        _batches(BucketScan(buckets, bucket_filter, mine), control, mine), plan, groups,
        variables, sort)
    if stats is not None:
        stats.scan = mine.scan
        stats.buckets_skipped += mine.buckets_skipped
        stats.buckets_matched += matched
        stats.buckets_unpacked += matched
        stats.buckets_scanned += mine.buckets_scanned
        stats.columns_decoded += columns
        stats.measurements += rows
        stats.path = "blockGroup"
    return docs


def group_raw(batches: Iterable[list[bytes]], plan: Any, groups: Any,
              variables: dict[str, Any], sort: FusedSort | None = None
              ) -> list[dict[str, Any]] | None:
    """The `$group` output of `plan` over stored buckets given as bytes, in batches (scan
    order), ordered by `sort` when given, or None when block processing declines."""
    if native.core is None:
        return None
    try:
        return _fold(batches, plan, groups, variables, sort)[0]
    except (Decline, native.Declined, native.core.NativeError):
        return None


def _fold(batches: Iterable[list[bytes]], plan: Any, groups: Any, variables: dict[str, Any],
          sort: FusedSort | None = None
          ) -> tuple[list[dict[str, Any]], tuple[int, int, int, int]]:
    """The documents (ordered by `sort` when given), and (buckets fed, buckets matched,
    columns decoded, rows passing the filter)."""
    assert native.core is not None
    fold = _core_group(plan)
    classes = _Classes(plan, variables)
    metas: list[MetaTemplate | None] = []  # by the core's meta number, for the groups' _id

    def classify(m: bytes | None) -> int:
        c, meta = classes.of(m)
        metas.append(meta)
        return c

    for batch in batches:
        fold.feed(batch, classify)
    # each group holds its meta value's _id: counted against the memory limit first
    counts = fold.groups_per_meta()
    groups.reserve_many(sum(n * meta.size for meta, n in zip(metas, counts) if meta is not None),
                        sum(counts))
    paths = bin_paths(plan.group.spec["_id"]) if plan.bin_ms is not None else []
    parts = bin_parts(plan.group.id_fn, variables, plan.time_field, paths)

    def bin_values(start: int) -> list[Any]:
        try:
            return parts(start)
        except MongoError:
            raise Decline from None

    docs = fold.documents(
        [None if m is None else m.template for m in metas], paths, bin_values,
        [a.name for a in plan.accs], [a.op for a in plan.accs],
        [] if sort is None else sort.native_keys(metas), DatetimeMS, Int64)
    return docs, fold.counters()

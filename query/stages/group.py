"""$group and $sortByCount.

Groups are keyed by a hashable canonical form of the `_id` value (numbers by value across
types, NaN equal to NaN, null and missing together), so 1, 1.0 and NumberLong(1) share a
group; the output `_id` is the first value seen. A composite `_id` object is evaluated field
by field, a missing field becoming null as in MongoDB.

Memory: each new group is charged its key size plus a per-accumulator overhead, growing
accumulators charge what they keep. Over `ctx.memory_limit_bytes`: error 292 without
allowDiskUse; with it, documents of groups not already in memory are routed to hash
partitions on disk and grouped partition by partition afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any, Final

from bson import Decimal128, Int64
from bson.datetime_ms import DatetimeMS

from query.accumulators import AccumulatorDef, compile_accumulator
from query.context import PipelineContext
from query.expressions.core import Scope, compile_node
from query.expressions.reducers import Tracker, approx_size
from query.expressions.registry import Fn
from query.spill import SpillFile, group_limit_error
from storage.bson_order import sort_key
from storage.collation import Collator
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .base import Env, Stage, register_stage
from .sort import SortStage

__all__ = ["GroupStage", "group_key", "group_key_fn", "parse_accumulator_fields", "make_group_id_fn"]

_NAN_KEY: Final = ("\x00nan",)
_ACC_OVERHEAD: Final = 48
_GROUP_OVERHEAD: Final = 96
_CHECK_EVERY: Final = 128
_PARTITIONS: Final = 16
_MAX_DEPTH: Final = 4


def group_key(v: Any) -> Any:
    """A hashable key equal for values MongoDB considers equal (simple collation)."""
    t = type(v)
    if t is str:
        return v
    if t is int:
        return v
    if t is float:
        return v if v == v else _NAN_KEY
    if v is None or v is MISSING:
        return None
    if t is Int64:
        return int(v)
    if t is DatetimeMS:
        return (45, v._value)      # == sort_key(v)
    if t is Decimal128:
        d: Decimal = v.to_decimal()
        if d.is_nan():
            return _NAN_KEY
        if d.is_infinite():
            return float("inf") if d > 0 else float("-inf")
        return d
    return sort_key(v)


def group_key_fn(collator: Collator | None) -> Callable[[Any], Any]:
    """`group_key` under a collation: strings equal by the collation share a group."""
    if collator is None:
        return group_key
    tr = collator.translate
    return lambda v: group_key(tr(v))


def parse_accumulator_fields(spec: dict, scope: Scope, skip: tuple[str, ...] = ("_id",)
                             ) -> list[tuple[str, AccumulatorDef]]:
    """The accumulator fields of a $group (or $bucket/$bucketAuto 'output') spec."""
    out: list[tuple[str, AccumulatorDef]] = []
    for name, acc in spec.items():
        if name in skip:
            continue
        if name.startswith("$"):
            raise MongoError(40236, f"The field name '{name}' cannot be an operator name")
        if "." in name:
            raise MongoError(40235, f"The field name '{name}' cannot contain '.'")
        if type(acc) is not dict:
            raise MongoError(40234, f"The field '{name}' must be an accumulator object")
        if len(acc) != 1:
            raise MongoError(40238, f"The field '{name}' must specify one accumulator")
        op, arg = next(iter(acc.items()))
        out.append((name, compile_accumulator(op, arg, scope=scope)))
    return out


def make_group_id_fn(id_spec: Any, scope: Scope) -> Fn:
    """The `_id` expression. An object of expressions is evaluated field by field: with one
    field a missing value becomes null, with several it stays missing (field omitted)."""
    if type(id_spec) is dict and id_spec and not next(iter(id_spec)).startswith("$"):
        fields = [(k, compile_node(v, scope)) for k, v in id_spec.items()]
        for k, _ in fields:
            if "." in k or k.startswith("$"):
                raise MongoError(16410 if k.startswith("$") else 16412,
                                 "FieldPath field names may not start with '$'." if
                                 k.startswith("$") else
                                 "FieldPath field names may not contain '.'.")

        if len(fields) == 1:
            (k1, f1), = fields

            def single(doc: Any, variables: dict) -> Any:
                v = f1(doc, variables)
                return {k1: None if v is MISSING else v}
            return single

        def composite(doc: Any, variables: dict) -> Any:
            # MongoDB keeps a missing part missing (not null) in a multi-field _id.
            out = {}
            for k, f in fields:
                v = f(doc, variables)
                if v is not MISSING:
                    out[k] = v
            return out
        return composite
    return compile_node(id_spec, scope)


class _Grouper:
    """Groups documents in memory; reports when it is over its memory limit."""

    def __init__(self, id_fn: Fn, accs: list[tuple[str, AccumulatorDef]],
                 key: Callable[[Any], Any] = group_key) -> None:
        self.id_fn = id_fn
        self.key = key
        self.names = [n for n, _ in accs]
        self.defs = [d for _, d in accs]
        self.args = [d.argument for d in self.defs]
        self.groups: dict[Any, tuple[Any, list]] = {}
        self.tracker = Tracker()
        self.fixed = 0

    @property
    def used(self) -> int:
        return self.fixed + self.tracker.used

    def adder(self) -> Callable[..., bool]:
        """A function folding one document in; it returns False (and does nothing) if the
        document's group is new and `create` is False."""
        id_fn = self.id_fn
        groups = self.groups
        defs = self.defs
        tracker = self.tracker
        overhead = _GROUP_OVERHEAD + _ACC_OVERHEAD * len(defs)
        pairs_single = len(defs) == 1
        arg0 = self.args[0] if defs else None
        args = self.args
        key = self.key
        simple = key is group_key

        def add(doc: dict, variables: dict, create: bool = True) -> bool:
            gid = id_fn(doc, variables)
            t = type(gid)
            hk = gid if t is int or (t is str and simple) else key(gid)
            g = groups.get(hk)
            if g is None:
                if not create:
                    return False
                if gid is MISSING:
                    gid = None
                g = (gid, [dd.new(gid, tracker) for dd in defs])
                groups[hk] = g
                self.fixed += approx_size(gid) + overhead
            if pairs_single:
                g[1][0].process(arg0(doc, variables))  # type: ignore[misc]
            else:
                for arg, acc in zip(args, g[1]):
                    acc.process(arg(doc, variables))
            return True
        return add

    def results(self) -> Iterator[dict]:
        names = self.names
        for gid, accs in self.groups.values():
            out = {"_id": gid}
            for name, acc in zip(names, accs):
                out[name] = acc.result()
            yield out


class GroupStage(Stage):
    name = "$group"
    blocking = True

    def __init__(self, spec: dict, ctx: PipelineContext) -> None:
        self.spec = spec
        scope = ctx.scope()
        if "_id" not in spec:
            raise MongoError(15955, "a group specification must include an _id")
        self.id_fn = make_group_id_fn(spec["_id"], scope)
        self.key = group_key_fn(ctx.collator)
        self.accs = parse_accumulator_fields(spec, scope)

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        yield from self._group(docs, env, 0)

    def _group(self, docs: Iterator[dict], env: Env, depth: int) -> Iterator[dict]:
        ctx = env.ctx
        limit = ctx.memory_limit_bytes
        variables = env.variables
        g = _Grouper(self.id_fn, self.accs, self.key)
        add = g.adder()
        n = 0
        it = iter(docs)
        spilling = False
        for d in it:
            add(d, variables)
            n += 1
            if n % _CHECK_EVERY == 0 and g.used > limit:
                if not ctx.allow_disk_use:
                    raise group_limit_error()
                if depth < _MAX_DEPTH:
                    spilling = True
                    break
        if not spilling:
            yield from g.results()
            return
        # Keep folding documents of groups already held; route the rest to partitions.
        parts = [SpillFile(ctx.temp_dir) for _ in range(_PARTITIONS)]
        try:
            id_fn = self.id_fn
            for d in it:
                if not add(d, variables, create=False):
                    hk = self.key(id_fn(d, variables))
                    parts[hash((depth, hk)) % _PARTITIONS].write(d)
                if n % _CHECK_EVERY == 0 and g.tracker.used > limit:
                    raise MongoError(ErrorCode.ExceededMemoryLimit,
                                     "$group accumulators used too much memory and cannot spill "
                                     f"to disk. Memory limit: {limit} bytes")
                n += 1
            yield from g.results()
            del g
            for p in parts:
                if p.count:
                    yield from self._group(iter(p), env, depth + 1)
                p.close()
        finally:
            for p in parts:
                p.close()


def _c_group(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict:
        raise MongoError(15947, "a group's fields must be specified in an object")
    return GroupStage(spec, ctx)


def _c_sort_by_count(spec: Any, ctx: PipelineContext) -> list[Stage]:
    if type(spec) is str:
        if not spec.startswith("$"):
            raise MongoError(40148, "the sortByCount field must be defined as a $-prefixed "
                             "path or an expression")
    elif type(spec) is dict:
        if not spec or not next(iter(spec)).startswith("$"):
            raise MongoError(40147, "the sortByCount field must be defined as a $-prefixed "
                             "path or an expression")
    else:
        raise MongoError(40149, "the sortByCount field must be specified as a string or as an "
                         "object")
    group = GroupStage({"_id": spec, "count": {"$sum": 1}}, ctx)
    return [group, SortStage({"count": -1}, ctx)]


register_stage("$group", _c_group)
register_stage("$sortByCount", _c_sort_by_count)

"""Run reads and writes on one storage collection: plan, fetch, filter, sort, project, modify.

The commands parse their arguments and call these functions on the storage thread.
Reads are lazy iterators (a cursor pulls batches from them); writes run to completion
inside one storage transaction opened by the caller.

The access path comes from `query.planner`; the whole filter is re-applied to every
fetched document (plans are loose by design). A blocking sort holds at most
`max_sort_bytes` unless disk use is allowed (MongoDB's 100 MB rule, code 292).
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Final

from bson import ObjectId, Regex
from bson.raw_bson import RawBSONDocument

from query.match import Matcher, compile_filter
from query.planner import QueryPlan, plan_query
from query.projection import Projection, compile_projection
from query.sort import SortSpec, compile_sort
from query.update import Update, compile_update, validate_document_for_storage
from query.variables import CommandVariables
from storage.bounds import Interval as StorageInterval
from storage.bsonutil import CODEC_OPTIONS, MAX_BSON_SIZE, encode
from storage.clustered import clustered_index_name
from storage.collation import (
    Collator,
    CollectionDefault,
    OperationCollation,
    collation_key_fn,
    effective_collator,
)
from storage.collection_results import ScanStats
from storage.errors import MongoError
from storage.indexes import ID_INDEX_NAME
from storage.vocabulary.bson_decode import decode_document
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

__all__ = [
    "FindSpec", "FindCounts", "PreparedFind", "prepare_find", "count_documents", "distinct_values",
    "UpdateStatement", "UpdateOutcome", "apply_update_statement", "delete_matching",
    "compile_statement_update", "statement_variables",
    "find_one_for_modify", "select_for_modify", "distinct_of", "distinct_leaf_values", "prepare_document_for_insert",
    "DEFAULT_MAX_SORT_BYTES",
]

DEFAULT_MAX_SORT_BYTES: Final = 100 * 1024 * 1024
_decode = decode_document


@dataclass
class FindSpec:
    filter: dict[str, Any] | None = None
    projection: dict[str, Any] | None = None
    sort: dict[str, Any] | None = None
    skip: int = 0
    limit: int = 0  # 0: no limit
    hint: Any = None
    let: dict[str, Any] | None = None  # variable values by name (`CommandVariables.values()`)
    allow_disk_use: bool = True
    max_sort_bytes: int = DEFAULT_MAX_SORT_BYTES
    return_key: bool = False
    show_record_id: bool = False
    # the operation's collation (None: simple); prepare_find resolves COLLECTION_DEFAULT
    collator: OperationCollation = None


@dataclass
class PreparedFind:
    plan: QueryPlan
    matcher: Matcher
    projection: Projection | None
    sort: SortSpec | None
    spec: FindSpec
    # what running it examined and returned (explain's executionStats read them)
    scan: ScanStats = field(default_factory=ScanStats)
    counts: FindCounts = field(default_factory=lambda: FindCounts())

    @property
    def collator(self) -> Collator | None:
        """The collation the query runs with (the collection's default already applied)."""
        c = self.spec.collator
        assert not isinstance(c, CollectionDefault)
        return c


@dataclass
class FindCounts:
    """Documents a find's filter passed (`matched`) and the find returned (`returned`)."""

    matched: int = 0
    returned: int = 0


def index_specs(coll: Any, collator: Collator | None = None, *, same_collation: bool = True
                ) -> list[dict[str, Any]]:
    """listIndexes-shaped specs plus what the planner needs (the multikey flag and, on a
    clustered collection's `_id` index, the clustered index's name): the indexes whose
    collation is the query's (their key order is the order the query compares by), or
    with `same_collation` False the others."""
    want = None if collator is None else collator.document
    out = []
    clustered_name = clustered_index_name(coll.options)
    for ix in coll.entry.indexes:
        spec = dict(ix.spec.document)
        if (spec.get("collation") == want) != same_collation:
            continue
        spec["multikey"] = bool(ix.multikey)
        if clustered_name is not None and ix.name == ID_INDEX_NAME:
            spec["clusteredName"] = clustered_name
        out.append(spec)
    return out


def prepare_find(coll: Any, spec: FindSpec) -> PreparedFind:
    if isinstance(spec.collator, CollectionDefault):
        spec = replace(spec, collator=effective_collator(
            spec.collator, None if coll is None else coll.entry.options.get("collation")))
    assert not isinstance(spec.collator, CollectionDefault)
    matcher = compile_filter(spec.filter or {}, variables=spec.let, collator=spec.collator)
    sort = compile_sort(spec.sort, spec.collator) if spec.sort else None
    projection = compile_projection(spec.projection, filter_matcher=matcher) \
        if spec.projection else None
    usable = index_specs(coll, spec.collator) if coll is not None else []
    others = index_specs(coll, spec.collator, same_collation=False) \
        if coll is not None else []
    if others and not spec.sort and _collation_free(spec.filter):
        # No string is compared: every index's keys order the filter's values alike.
        usable, others = usable + others, []
    plan = plan_query(matcher, spec.sort, usable, collator=spec.collator, hint=spec.hint,
                      other_collation_specs=others)
    return PreparedFind(plan, matcher, projection, sort, spec)


def _collation_free(v: Any) -> bool:
    """Whether a filter compares no string (no string, regex, `$expr` or `$where`)."""
    if isinstance(v, dict):
        return all(k not in ("$expr", "$where") and _collation_free(x) for k, x in v.items())
    if isinstance(v, list):
        return all(_collation_free(x) for x in v)
    return not isinstance(v, str | Regex | re.Pattern)


def _storage_bounds(plan: QueryPlan) -> list[list[StorageInterval]]:
    return [[StorageInterval(iv.lower, iv.lower_inclusive, iv.upper, iv.upper_inclusive)
             for iv in ivs] for ivs in plan.bounds]


def candidates(coll: Any, plan: QueryPlan, stats: ScanStats | None = None
               ) -> Iterator[tuple[int, bytes]]:
    """(RecordId, document bytes) along the plan's access path; `stats` counts the keys
    and documents examined."""
    if coll is None:
        return iter(())
    if plan.is_collscan:
        scan = coll.scan(reverse=plan.direction < 0)
        return scan if stats is None else _counted(scan, stats)
    assert plan.index_name is not None
    coll.note_index_use(plan.index_name)
    return coll.index_scan(plan.index_name, _storage_bounds(plan), reverse=plan.direction < 0,
                           stats=stats)


def _counted(scan: Iterator[tuple[int, bytes]], stats: ScanStats
             ) -> Iterator[tuple[int, bytes]]:
    for item in scan:
        stats.docs_examined += 1
        yield item


def matching(coll: Any, prepared: PreparedFind
             ) -> Generator[tuple[int, bytes, dict[str, Any]], None, None]:
    """(RecordId, bytes, decoded document) of every document the filter matches."""
    matches = prepared.matcher.matches
    counts = prepared.counts
    trivial = prepared.matcher.is_trivial
    for rid, raw in candidates(coll, prepared.plan, prepared.scan):
        doc = _decode(raw, CODEC_OPTIONS)
        if trivial or matches(doc):
            counts.matched += 1
            yield rid, raw, doc


def _sorted(items: Iterable[Any], key: Callable[[Any], Any], size_of: Callable[[Any], int],
            spec: FindSpec, keep: int | None) -> list[Any]:
    """Blocking sort with MongoDB's memory rule; `keep` bounds a top-k sort."""
    if keep is not None:
        # A top-k sort holds only k documents: no memory limit applies in practice.
        return heapq.nsmallest(keep, items, key=key)
    buf: list[Any] = []
    total = 0
    for item in items:
        buf.append(item)
        total += size_of(item)
        if total > spec.max_sort_bytes and not spec.allow_disk_use:
            raise MongoError(ErrorCode.QueryExceededMemoryLimitNoDiskUseAllowed,
                             "Executor error during find command :: caused by :: Sort exceeded "
                             f"memory limit of {spec.max_sort_bytes} bytes, but did not opt in "
                             "to external sorting.")
    buf.sort(key=key)  # stable: ties keep the access path's order, as MongoDB
    return buf


def run_find(coll: Any, prepared: PreparedFind, *, raw_ok: bool = False) -> Iterator[Any]:
    """The documents a find returns, lazily, in order (skip, limit and projection applied).

    With `raw_ok`, documents that need no evaluation come back as `RawBSONDocument`s
    (their stored bytes, not decoded): for replies, not for further processing."""
    spec = prepared.spec
    plan = prepared.plan
    projection = prepared.projection
    counts = prepared.counts
    fast = (raw_ok and prepared.matcher.is_trivial and projection is None
            and prepared.sort is None)
    if fast:
        # Nothing to evaluate: hand the stored bytes to the reply as they are.
        source: Iterator[Any] = (RawBSONDocument(raw)
                                 for _rid, raw in candidates(coll, plan, prepared.scan))
    else:
        rows: Iterator[tuple[int, bytes, dict[str, Any]]] = matching(coll, prepared)
        if prepared.sort is not None and not plan.provides_sort:
            sort_key_fn = prepared.sort
            keep = spec.skip + spec.limit if spec.limit else None
            rows = iter(_sorted(rows, key=lambda r: sort_key_fn(r[2]),
                                size_of=lambda r: len(r[1]), spec=spec, keep=keep))
        if projection is not None:
            source = (projection.apply(r[2]) for r in rows)
        else:
            source = (r[2] for r in rows)
    if spec.skip:
        source = itertools.islice(source, spec.skip, None)
    if spec.limit:
        source = itertools.islice(source, spec.limit)
    for doc in source:
        counts.returned += 1
        yield doc


# --- count / distinct -------------------------------------------------------------------------

def count_documents(coll: Any, flt: dict[str, Any] | None, *, skip: int = 0, limit: int = 0,
                    hint: Any = None, collator: OperationCollation = None) -> int:
    if coll is None:
        return 0
    if not flt and hint is None:
        n = max(0, coll.count() - skip)
        return min(n, limit) if limit else n
    prepared = prepare_find(coll, FindSpec(filter=flt, hint=hint, collator=collator))
    n = 0
    for _ in matching(coll, prepared):
        n += 1
    n = max(0, n - skip)
    return min(n, limit) if limit else n


def distinct_leaf_values(doc: Any, parts: list[str]) -> Iterator[Any]:
    """Values at a dotted path for distinct: arrays along the path and at the leaf unwind."""
    if not parts:
        if isinstance(doc, list):
            yield from doc
        else:
            yield doc
        return
    if isinstance(doc, dict):
        if parts[0] in doc:
            yield from distinct_leaf_values(doc[parts[0]], parts[1:])
    elif isinstance(doc, list):
        if parts[0].isdigit():
            idx = int(parts[0])
            if idx < len(doc):
                yield from distinct_leaf_values(doc[idx], parts[1:])
        for item in doc:
            if isinstance(item, dict):
                yield from distinct_leaf_values(item, parts)


def distinct_values(coll: Any, key: str, flt: dict[str, Any] | None, hint: Any = None,
                    collator: OperationCollation = None) -> list[Any]:
    """The distinct values at `key`; strings equal under `collator` count once (the first
    met is returned)."""
    if coll is None:
        return []
    prepared = prepare_find(coll, FindSpec(filter=flt, hint=hint, collator=collator))
    return distinct_of((doc for _rid, _raw, doc in matching(coll, prepared)), key,
                       prepared.collator)


def distinct_of(docs: Iterable[Any], key: str, collator: Collator | None) -> list[Any]:
    """The distinct values at dotted path `key` of `docs`, in order (equal under the
    collation counted once, the first one seen kept)."""
    sort_key = collation_key_fn(collator)
    seen: dict[Any, Any] = {}
    parts = key.split(".")
    for doc in docs:
        for v in distinct_leaf_values(doc, parts):
            if v is MISSING:
                continue
            k = sort_key(v)
            if k not in seen:
                seen[k] = v
    return [seen[k] for k in sorted(seen)]


# --- writes -----------------------------------------------------------------------------------

def prepare_document_for_insert(doc: dict[str, Any]) -> dict[str, Any]:
    """`_id` first (generated when missing), storage rules checked (MongoError otherwise)."""
    if "_id" not in doc:
        doc = {"_id": ObjectId(), **doc}
    elif next(iter(doc)) != "_id":
        doc = {"_id": doc["_id"], **{k: v for k, v in doc.items() if k != "_id"}}
    validate_document_for_storage(doc, for_insert=True)
    return doc


def check_size(doc: dict[str, Any], encoded: bytes | None = None) -> bytes:
    data = encoded if encoded is not None else encode(doc)
    if len(data) > MAX_BSON_SIZE:
        raise MongoError(ErrorCode.BSONObjectTooLarge,
                         f"object to insert too large. size in bytes: {len(data)}, max size: "
                         f"{MAX_BSON_SIZE}")
    return data


@dataclass
class UpdateStatement:
    q: dict[str, Any]
    u: Any
    multi: bool = False
    upsert: bool = False
    array_filters: list[dict[str, Any]] | None = None
    hint: Any = None
    sort: dict[str, Any] | None = None
    constants: dict[str, Any] | None = None  # the statement's `c`
    variables: CommandVariables | None = None  # the command's `let`, $$NOW, ...
    collator: OperationCollation = None  # the statement's collation; None: simple


@dataclass
class UpdateOutcome:
    n: int = 0
    n_modified: int = 0
    upserted_id: Any = MISSING
    old_doc: dict[str, Any] | None = None
    new_doc: dict[str, Any] | None = None


def select_for_modify(coll: Any, prepared: PreparedFind, multi: bool, sort: dict[str, Any] | None
            ) -> list[tuple[int, bytes, dict[str, Any]]]:
    """Documents to modify, materialised first so writes never revisit them."""
    rows = matching(coll, prepared)
    if sort:
        key = compile_sort(sort, prepared.collator)
        chosen = sorted(rows, key=lambda r: key(r[2]))
        return chosen if multi else chosen[:1]
    if multi:
        return list(rows)
    first = next(rows, None)
    return [] if first is None else [first]


def compile_statement_update(stmt: UpdateStatement, collator: Collator | None = None
                             ) -> Update:
    """The statement's compiled update (operators, replacement or pipeline); array filters,
    $pull, $addToSet, $push's $sort and $min/$max compare strings by `collator`."""
    update = compile_update(stmt.u, array_filters=stmt.array_filters, is_upsert=stmt.upsert,
                            variables=stmt.variables, constants=stmt.constants,
                            collator=collator)
    if update.is_replacement and stmt.multi:
        raise MongoError(ErrorCode.FailedToParse,
                         "multi update is not supported for replacement-style update")
    return update


def statement_variables(stmt: UpdateStatement) -> dict[str, Any]:
    """The variables the statement's filter reads: the command's and its constants."""
    return (stmt.variables or CommandVariables()).with_constants(stmt.constants).values()


def positional_match(matcher: Matcher, doc: dict[str, Any]) -> int:
    """The array position the filter matched in `doc`, for an update's `$`."""
    _, pos = matcher.match_position(doc)
    if pos is None:
        raise MongoError(ErrorCode.BadValue,
                         "The positional operator did not find the match needed from the query.")
    return pos


def apply_update_statement(coll_getter: Callable[[], Any], stmt: UpdateStatement, *,
                           validator: Callable[..., None] | None = None,
                           want_docs: bool = False) -> UpdateOutcome:
    """One update statement: match, modify, write back; upsert when nothing matched.

    `coll_getter` returns the collection, creating it only if an upsert needs it.
    `validator(new_doc, old_doc)` checks a modified document (`old_doc` None for an
    upsert's insert) and raises to refuse it."""
    update = compile_statement_update(stmt)
    coll = coll_getter()
    if coll is None and not stmt.upsert:
        return UpdateOutcome()
    prepared = prepare_find(coll, FindSpec(filter=stmt.q, hint=stmt.hint,
                                           let=statement_variables(stmt),
                                           collator=stmt.collator))
    if prepared.collator is not None:  # compiled again now that the collation is known
        update = compile_statement_update(stmt, prepared.collator)
    outcome = UpdateOutcome()
    matcher = prepared.matcher

    def modify(rid: int, raw: bytes, doc: dict[str, Any]) -> None:
        pos = positional_match(matcher, doc) if update.uses_positional else None
        new_doc, modified = update.apply(doc, matched_position=pos)
        if want_docs:
            outcome.old_doc, outcome.new_doc = doc, new_doc
        if modified:
            validate_document_for_storage(new_doc, for_insert=False)
            if validator is not None:
                validator(new_doc, doc)
            data = encode(new_doc)
            if len(data) > MAX_BSON_SIZE:
                raise MongoError(ErrorCode.BSONObjectTooLarge,
                                 f"Resulting document after update is larger than "
                                 f"{MAX_BSON_SIZE}")
            coll.update(rid, new_doc, encoded=data, old_doc=doc, expected=raw)
            outcome.n_modified += 1

    for rid, raw, doc in select_for_modify(coll, prepared, stmt.multi, stmt.sort):
        if retry_on_conflict(coll, rid, raw, doc, matcher, modify):
            outcome.n += 1
    if outcome.n == 0 and stmt.upsert:
        new_doc = update.upsert_document(stmt.q)
        new_doc = prepare_document_for_insert(new_doc)
        if validator is not None:
            validator(new_doc)
        data = check_size(new_doc)
        result = coll.insert_many([new_doc], encoded=[data])
        if result.errors:
            raise result.errors[0][1]
        outcome.upserted_id = new_doc["_id"]
        if want_docs:
            outcome.new_doc = new_doc
    return outcome


def delete_matching(coll: Any, flt: dict[str, Any], *, limit_one: bool, hint: Any = None,
                    sort: dict[str, Any] | None = None, let: dict[str, Any] | None = None,
                    want_doc: bool = False, collator: OperationCollation = None
                    ) -> tuple[int, dict[str, Any] | None]:
    """Delete the matching documents (or the first); returns (count, deleted doc if asked)."""
    if coll is None:
        return 0, None
    prepared = prepare_find(coll, FindSpec(filter=flt, hint=hint, let=let, collator=collator))
    rows = select_for_modify(coll, prepared, not limit_one, sort)
    deleted: list[dict[str, Any]] = []

    def remove(rid: int, raw: bytes, doc: dict[str, Any]) -> None:
        coll.delete(rid, old_doc=doc, expected=raw)
        deleted.append(doc)

    for rid, raw, doc in rows:
        retry_on_conflict(coll, rid, raw, doc, prepared.matcher, remove)
    return len(deleted), (deleted[-1] if want_doc and deleted else None)


_CONFLICT_RETRIES: Final = 100


def retry_on_conflict(coll: Any, rid: int, raw: bytes, doc: dict[str, Any], matcher: Matcher,
                      write: Callable[[int, bytes, dict[str, Any]], None]) -> bool:
    """`write(rid, raw, doc)` a selected document; when another process changed it since
    it was read (WriteConflict, see `RecordStore.update`), read it again and, if it still
    matches, write again, as mongod retries a write stage after a write conflict. A
    document deleted or no longer matching meanwhile is skipped (False)."""
    for _ in range(_CONFLICT_RETRIES):
        try:
            write(rid, raw, doc)
            return True
        except MongoError as e:
            if e.code != ErrorCode.WriteConflict:
                raise
        fresh = coll.get(rid)
        if fresh is None:
            return False
        raw, doc = fresh, _decode(fresh, CODEC_OPTIONS)
        if not (matcher.is_trivial or matcher.matches(doc)):
            return False
    raise MongoError(ErrorCode.WriteConflict, f"document {rid} kept changing under the write")


def find_one_for_modify(coll: Any, flt: dict[str, Any], sort: dict[str, Any] | None
                        ) -> tuple[int, dict[str, Any]] | None:
    prepared = prepare_find(coll, FindSpec(filter=flt))
    rows = select_for_modify(coll, prepared, False, sort)
    return (rows[0][0], rows[0][2]) if rows else None

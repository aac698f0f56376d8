"""Parsing an update document into a tree of paths, and applying it to a document.

Like MongoDB's `UpdateObjectNode`, every modifier path is inserted into a tree keyed
by path component; two operators on the same path, or on a path and its prefix, are
a ConflictingUpdateOperators (40) error at parse time. Children of a node are applied
in MongoDB 5.0+'s order: field names lexicographically, numeric names numerically, so
new fields are appended in that order. Positional ``$`` takes the matched array
position from the query; ``$[]`` visits every element; ``$[<id>]`` the elements its
array filter matches.
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field
from typing import Any, Final

from bson import ObjectId, Timestamp
from bson.datetime_ms import DatetimeMS

from query.match import Matcher, compile_filter
from query.paths import is_array_index
from query.update.ops import MODIFIERS, Leaf, get_place, make_leaf, rename_leaves, set_place
from query.update.pipeline import UpdatePipeline
from query.update.upsert import upsert_seed
from query.update.validate import (
    check_id_for_storage,
    check_replacement,
    check_written_top_level,
)
from query.update.values import identical, short_repr
from query.variables import CommandVariables, resolve_constants
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

__all__ = ["Update", "ApplyContext", "compile_update"]

_IDENT: Final = re.compile(r"^[a-z][a-zA-Z0-9]*$")


@dataclass
class ObjNode:
    children: dict[str, ObjNode | Leaf] = field(default_factory=dict)

    @property
    def has_array_ops(self) -> bool:
        return any(k == "$[]" or (k.startswith("$[") and k.endswith("]")) for k in self.children)


@dataclass
class ApplyContext:
    root: dict[str, Any]
    pos: int | None
    is_insert: bool
    array_filters: dict[str, Matcher]
    _now: tuple[DatetimeMS, Timestamp] | None = None

    def _clock(self) -> tuple[DatetimeMS, Timestamp]:
        if self._now is None:
            ms = time.time_ns() // 1_000_000
            self._now = (DatetimeMS(ms), Timestamp(ms // 1000, 1))
        return self._now

    def now_date(self) -> DatetimeMS:
        return self._clock()[0]

    def now_timestamp(self) -> Timestamp:
        return self._clock()[1]


def _child_order(name: str) -> tuple[int, Any]:
    return (0, int(name)) if is_array_index(name) else (1, name)


class Update:
    """A compiled update: operators (a path tree), a replacement document, or a pipeline."""

    def __init__(self, spec: Any, kind: str, root: ObjNode | None,
                 replacement: dict[str, Any] | None, array_filters: dict[str, Matcher],
                 leaf_paths: list[str], is_upsert: bool,
                 pipeline: UpdatePipeline | None = None) -> None:
        self.spec = spec
        self.kind = kind  # "operators" | "replacement" | "pipeline"
        self._root = root
        self.replacement = replacement
        self._array_filters = array_filters
        self.leaf_paths = leaf_paths
        self.is_upsert = is_upsert
        self._pipeline = pipeline

    @property
    def is_replacement(self) -> bool:
        return self.kind == "replacement"

    @property
    def uses_positional(self) -> bool:
        return any(part == "$" for p in self.leaf_paths for part in p.split("."))

    def apply(self, doc: dict[str, Any], *, matched_position: int | None = None,
              is_insert: bool = False) -> tuple[dict[str, Any], bool]:
        """Return ``(new_doc, modified)``; `doc` itself is never changed."""
        if self.kind == "replacement":
            assert self.replacement is not None
            if not is_insert:  # an upsert's new document is validated as an insert
                check_replacement(self.replacement)
            return self._replace(doc, is_insert, self.replacement)
        if self.kind == "pipeline":
            assert self._pipeline is not None
            # the pipeline's result replaces the document, as mongod's PipelineExecutor does
            return self._replace(doc, is_insert, self._pipeline.transform(doc))
        new = copy.deepcopy(doc)
        ctx = ApplyContext(new, matched_position, is_insert, self._array_filters)
        assert self._root is not None
        _apply_obj(self._root, new, [], ctx)
        if not is_insert:
            old_id = doc.get("_id", MISSING)
            new_id = new.get("_id", MISSING)
            if old_id is not MISSING and (new_id is MISSING or not identical(old_id, new_id)):
                path = next((p for p in self.leaf_paths if p == "_id" or p.startswith("_id.")),
                            "_id")
                raise MongoError(ErrorCode.ImmutableField, f"Performing an update on the path "
                                 f"'{path}' would modify the immutable field '_id'")
        if "_id" in new:
            check_id_for_storage(new["_id"])
        if not is_insert:
            self._check_written_dollar_fields(doc, new)
        return new, not identical(doc, new)

    def _check_written_dollar_fields(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """The top-level `$`-prefixed fields the operators wrote: created, or replaced as a
        whole (a path below an existing one writes only below the top level)."""
        for path in self.leaf_paths:
            parts = path.split(".")
            first = parts[0]
            if not first.startswith("$") or first not in new:
                continue
            if first not in old or (len(parts) == 1 and not identical(old[first], new[first])):
                check_written_top_level(new, first)

    def _replace(self, doc: dict[str, Any], is_insert: bool,
                 replacement: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        repl = copy.deepcopy(replacement)
        old_id = doc.get("_id", MISSING)
        if "_id" in repl:
            if old_id is not MISSING and not identical(old_id, repl["_id"]) and not is_insert:
                raise MongoError(ErrorCode.ImmutableField,
                                 "After applying the update, the (immutable) field '_id' was "
                                 f"found to have been altered to _id: {short_repr(repl['_id'])}")
            new = {"_id": repl.pop("_id"), **repl}
        elif old_id is not MISSING:
            new = {"_id": old_id, **repl}
        else:
            new = repl
        if "_id" in new:
            check_id_for_storage(new["_id"])
        return new, not identical(doc, new)

    def upsert_document(self, filter_spec: dict[str, Any] | None) -> dict[str, Any]:
        """The document an upsert inserts: seeded from the filter's equalities, then updated.

        `_id` comes first; an ObjectId is generated when neither filter nor update gives one.
        """
        seed = upsert_seed(filter_spec or {})
        if self.kind == "replacement":
            base = {"_id": seed["_id"]} if "_id" in seed else {}
            assert self.replacement is not None
            new, _ = self._replace(base, True, self.replacement)
        else:
            new, _ = self.apply(seed, is_insert=True)
            if "_id" in seed and ("_id" not in new or not identical(seed["_id"], new["_id"])):
                shown = short_repr(new.get("_id")) if "_id" in new else "missing"
                raise MongoError(ErrorCode.ImmutableField,
                                 "After applying the update, the (immutable) field '_id' was "
                                 f"found to have been altered to _id: {shown}")
        if "_id" not in new:
            new = {"_id": ObjectId(), **new}
        elif next(iter(new)) != "_id":
            new = {"_id": new["_id"], **{k: v for k, v in new.items() if k != "_id"}}
        return new

    def __repr__(self) -> str:
        return f"Update({self.spec!r})"


# --------------------------------------------------------------------------- application

def _apply_obj(node: ObjNode, value: Any, path: list[str], ctx: ApplyContext) -> None:
    for name in sorted(node.children, key=_child_order):
        child = node.children[name]
        if name == "$":
            if ctx.pos is None:
                raise MongoError(ErrorCode.BadValue,
                                 "The positional operator did not find the match needed from "
                                 "the query.")
            _apply_child(child, value, str(ctx.pos), path, ctx)
        elif name == "$[]":
            for i in range(len(value)):
                _apply_child(child, value, str(i), path, ctx)
        elif name.startswith("$[") and name.endswith("]"):
            ident = name[2:-1]
            m = ctx.array_filters[ident]
            for i in range(len(value)):
                if m.matches({ident: value[i]}):
                    _apply_child(child, value, str(i), path, ctx)
        else:
            _apply_child(child, value, name, path, ctx)


def _apply_child(child: ObjNode | Leaf, container: Any, key: str, path: list[str],
                 ctx: ApplyContext) -> None:
    exists, cur = get_place(container, key)
    here = [*path, key]
    if isinstance(child, Leaf):
        if type(container) is not dict and type(container) is not list:
            return
        child.apply(container, key, exists, cur, here, ctx)
        return
    if child.has_array_ops:
        if not exists:
            raise MongoError(ErrorCode.BadValue, f"The path '{'.'.join(here)}' must exist in the "
                             "document in order to apply array updates.")
        if type(cur) is not list:
            raise MongoError(ErrorCode.BadValue, "Cannot apply array updates to non-array "
                             f"element {key}: {short_repr(cur)}")
    if exists and (type(cur) is dict or type(cur) is list):
        _apply_obj(child, cur, here, ctx)
        return
    # Missing (or a scalar in the way): let the children create into a fresh document.
    fresh: dict[str, Any] = {}
    _apply_obj(child, fresh, here, ctx)
    if not fresh:
        return
    if exists:
        first = next(iter(fresh))
        raise MongoError(ErrorCode.PathNotViable, f"Cannot create field '{first}' in element "
                         f"{{{key}: {short_repr(cur)}}}")
    set_place(container, key, fresh, here)


# --------------------------------------------------------------------------- parsing

def _check_path(path: str) -> list[str]:
    parts = path.split(".")
    if any(p == "" for p in parts):
        raise MongoError(ErrorCode.EmptyFieldName, f"The update path '{path}' contains an empty "
                         "field name, which is not allowed.")
    positional = [i for i, p in enumerate(parts) if p == "$"]
    if len(positional) > 1:
        raise MongoError(ErrorCode.BadValue, "Too many positional (i.e. '$') elements found in "
                         f"path '{path}'")
    if positional and positional[0] == 0:
        raise MongoError(ErrorCode.BadValue, "Cannot have positional (i.e. '$') element in the "
                         f"first position in path '{path}'")
    first = parts[0]
    if first.startswith("$[") and first.endswith("]"):
        raise MongoError(ErrorCode.BadValue, "Cannot have array filter identifier (i.e. "
                         f"'$[<id>]') element in the first position in path '{path}'")
    return parts


def _insert(root: ObjNode, parts: list[str], leaf: Leaf) -> None:
    node = root
    full = ".".join(parts)
    for i, part in enumerate(parts[:-1]):
        child = node.children.get(part)
        if child is None:
            child = ObjNode()
            node.children[part] = child
        elif isinstance(child, Leaf):
            raise MongoError(ErrorCode.ConflictingUpdateOperators, f"Updating the path '{full}' "
                             f"would create a conflict at '{'.'.join(parts[:i + 1])}'")
        node = child
    if parts[-1] in node.children:
        raise MongoError(ErrorCode.ConflictingUpdateOperators, f"Updating the path '{full}' "
                         f"would create a conflict at '{full}'")
    node.children[parts[-1]] = leaf


def _parse_array_filters(array_filters: list[Any] | None) -> dict[str, Matcher]:
    out: dict[str, Matcher] = {}
    if array_filters is not None and not isinstance(array_filters, list):
        raise MongoError(ErrorCode.TypeMismatch, "BSON field 'arrayFilters' is the wrong type "
                         f"'{type_name(array_filters)}', expected type 'array'")
    for af in array_filters or []:
        if not isinstance(af, dict):
            raise MongoError(ErrorCode.TypeMismatch, "Each array filter must be an object")
        m = compile_filter(af)
        idents = {p.split(".")[0] for p in m.fields()}
        if not idents:
            raise MongoError(ErrorCode.FailedToParse, "Cannot use an expression without a "
                             "top-level field name in arrayFilters")
        if len(idents) > 1:
            a, b = sorted(idents)[:2]
            raise MongoError(ErrorCode.FailedToParse, "Error parsing array filter :: caused by "
                             f":: Expected a single top-level field name, found '{a}' and '{b}'")
        ident = idents.pop()
        if not _IDENT.match(ident):
            raise MongoError(ErrorCode.BadValue, "Error parsing array filter :: caused by :: The "
                             "top-level field name must be an alphanumeric string beginning "
                             f"with a lowercase letter, found '{ident}'")
        if ident in out:
            raise MongoError(ErrorCode.FailedToParse, "Found multiple array filters with the "
                             f"same top-level field name {ident}")
        out[ident] = m
    return out


def compile_update(spec: Any, *, array_filters: list[dict[str, Any]] | None = None,
                   is_upsert: bool = False, variables: CommandVariables | None = None,
                   constants: dict[str, Any] | None = None) -> Update:
    """Compile an update: operators, a replacement document or a pipeline (a list of
    stages, which may read `variables` and the statement's `constants`); raises
    MongoError on bad input."""
    if not isinstance(spec, dict | list):
        raise MongoError(ErrorCode.FailedToParse, "Update argument must be either an object or "
                         "an array")
    filters = _parse_array_filters(array_filters)
    if isinstance(spec, list):
        if filters:
            raise MongoError(ErrorCode.FailedToParse, "arrayFilters may not be specified for "
                             "pipeline-style updates")
        pipeline = UpdatePipeline(spec, variables or CommandVariables(),
                                  resolve_constants(constants))
        return Update(spec, "pipeline", None, None, {}, [], is_upsert, pipeline)
    if constants is not None:
        raise MongoError(51198, "Constant values may only be specified for pipeline updates")
    if not spec or not next(iter(spec)).startswith("$"):
        if filters:
            raise MongoError(ErrorCode.FailedToParse, "arrayFilters may not be specified for "
                             "replacement-style updates")
        return Update(spec, "replacement", None, dict(spec), {}, [], is_upsert)
    root = ObjNode()
    leaf_paths: list[str] = []
    used: set[str] = set()
    for op, fields in spec.items():
        if op not in MODIFIERS:
            raise MongoError(ErrorCode.FailedToParse, f"Unknown modifier: {op}. Expected a valid "
                             "update modifier or pipeline-style update specified as an array")
        if not isinstance(fields, dict):
            raise MongoError(ErrorCode.FailedToParse, "Modifiers operate on fields but we found "
                             f"type {type_name(fields)} instead. For example: {{$mod: {{<field>: "
                             f"...}}}} not {{{op}: {short_repr(fields)}}}")
        if not fields:
            raise MongoError(ErrorCode.FailedToParse, f"'{op}' is empty. You must specify a field "
                             f"like so: {{{op}: {{<field>: ...}}}}")
        for path, arg in fields.items():
            parts = _check_path(path)
            for part in parts:
                if part.startswith("$[") and part.endswith("]") and part != "$[]":
                    ident = part[2:-1]
                    if ident not in filters:
                        raise MongoError(ErrorCode.BadValue, "No array filter found for "
                                         f"identifier '{ident}' in path '{path}'")
                    used.add(ident)
            if op == "$rename":
                dest, placeholder = rename_leaves(path, arg)
                dparts = _check_path(arg)
                _insert(root, parts, placeholder)
                _insert(root, dparts, dest)
                leaf_paths.extend((path, arg))
                continue
            _insert(root, parts, make_leaf(op, path, arg))
            leaf_paths.append(path)
    for ident in filters:
        if ident not in used:
            raise MongoError(ErrorCode.FailedToParse, f"The array filter for identifier '{ident}' "
                             f"was not used in the update {short_repr(spec)}")
    return Update(spec, "operators", root, None, filters, leaf_paths, is_upsert)

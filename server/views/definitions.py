"""View definitions as mongod keeps and checks them, and their resolution.

A view is a catalog entry of kind "view" whose options are ``{viewOn, pipeline}`` (the
names mongod's listCollections shows). The catalog is the one durable record: the
`<db>.system.views` collection mongod keeps is answered here, virtually, from the
catalog's entries (`system_views_documents`), so the two can never disagree and a
database written before views existed needs no migration.

`check_definition` is mongod's validation of a new or changed view (the IDL types, the
stages a view may hold, the namespace rules, the view graph: cycles and the depth limit of
20); `resolve_view` walks a view down to the namespace underneath and concatenates the
pipelines (the deepest view's first), as mongod's `resolveView` does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from bson.binary import Binary

from query.context import PipelineContext
from query.pipeline import compile_pipeline
from query.stages import STAGES
from storage.bsontext import to_mongo_string
from storage.catalog import Catalog, validate_collection_name
from storage.catalog_entries import CollectionEntry
from storage.errors import MongoError
from storage.timeseries import TimeseriesOptions
from storage.timeseries.options import view_pipeline
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from ..namespaces import BUCKETS_PREFIX, buckets_name

__all__ = ["MAX_VIEW_DEPTH", "SYSTEM_VIEWS", "ResolvedView", "ViewDefinition",
           "check_definition", "describe_system_views", "existing_view_conflict",
           "involved_namespaces", "not_a_collection", "resolve_view", "system_views_documents",
           "system_views_exists", "view_definition"]

#: ViewGraph::kMaxViewDepth
MAX_VIEW_DEPTH: Final = 20
SYSTEM_VIEWS: Final = "system.views"
_WRITING_STAGES: Final = ("$out", "$merge")
# a fixed namespace for the virtual system.views' UUID: one stable UUID per database
_SYSTEM_VIEWS_UUID_NS: Final = uuid.UUID("6f1c1a52-3a3e-4c07-9f0e-0d2b5c1e7a11")


@dataclass(frozen=True, slots=True)
class ViewDefinition:
    """One view: `db.name` is `pipeline` over `db.view_on`."""

    db: str
    name: str
    view_on: str
    pipeline: list[dict[str, Any]]
    # the view's default collation, normalised (None: simple; a view does not inherit one)
    collation: dict[str, Any] | None = None

    @property
    def ns(self) -> str:
        return f"{self.db}.{self.name}"

    def options(self) -> dict[str, Any]:
        """The catalog options (listCollections' `options`) of this view."""
        out: dict[str, Any] = {"viewOn": self.view_on, "pipeline": self.pipeline}
        if self.collation is not None:
            out["collation"] = self.collation
        return out


@dataclass(frozen=True, slots=True)
class ResolvedView:
    """A view resolved: `pipeline` (every view's, the deepest first) over `source`, the
    first namespace down the chain that is not a view (a collection, a time-series
    collection, `system.views`, or a namespace that does not exist)."""

    db: str
    name: str
    source: str
    pipeline: list[dict[str, Any]]
    collation: dict[str, Any] | None = None  # the named view's default collation

    @property
    def ns(self) -> str:
        return f"{self.db}.{self.name}"


def view_definition(entry: CollectionEntry) -> ViewDefinition:
    """The definition an entry of kind "view" holds."""
    collation = entry.options.get("collation")
    return ViewDefinition(entry.db, entry.name, entry.options["viewOn"],
                          list(entry.options.get("pipeline", [])),
                          dict(collation) if collation else None)


def not_a_collection(db: str, name: str) -> MongoError:
    """What mongod answers a command that needs a collection and was given a view."""
    return MongoError(ErrorCode.CommandNotSupportedOnView,
                      f"Namespace {db}.{name} is a view, not a collection")


def resolve_view(catalog: Catalog, db: str, name: str) -> ResolvedView | None:
    """`db.name` resolved, or None when it is not a view (storage thread)."""
    entry = catalog.entry(db, name)
    if entry is None or entry.kind != "view":
        return None
    pipeline: list[dict[str, Any]] = []
    collation = view_definition(entry).collation
    current = name
    for _ in range(MAX_VIEW_DEPTH):
        entry = catalog.entry(db, current)
        if entry is None or entry.kind != "view":
            return ResolvedView(db, name, current, pipeline, collation)
        view = view_definition(entry)
        pipeline = [*view.pipeline, *pipeline]
        current = view.view_on
    raise MongoError(ErrorCode.ViewDepthLimitExceeded,
                     f"View depth too deep or view cycle detected; maximum depth is "
                     f"{MAX_VIEW_DEPTH}")


# --- validation ----------------------------------------------------------------------------

def _wrong_type(command: str, field: str, value: Any, expected: str) -> MongoError:
    return MongoError(ErrorCode.TypeMismatch,
                      f"BSON field '{command}.{field}' is the wrong type '{type_name(value)}', "
                      f"expected type '{expected}'")


def parse_view_on(command: str, value: Any) -> str:
    """`viewOn` as the IDL parser and CollectionOptions check it."""
    if type(value) is not str:
        raise _wrong_type(command, "viewOn", value, "string")
    if not value:
        raise MongoError(ErrorCode.BadValue, "'viewOn' cannot be empty")
    return value


def parse_pipeline(command: str, value: Any) -> list[dict[str, Any]]:
    """`pipeline` as the IDL parser checks it: an array of objects."""
    if type(value) is not list:
        raise _wrong_type(command, "pipeline", value, "array")
    for i, stage in enumerate(value):
        if type(stage) is not dict:
            raise _wrong_type(command, f"pipeline.{i}", stage, "object")
    return value


def involved_namespaces(pipeline: list[Any]) -> list[str]:
    """The collections of the same database a pipeline reads besides its source
    (`$lookup`, `$graphLookup`, `$unionWith`, also inside sub-pipelines and `$facet`)."""
    return list(dict.fromkeys(_involved(pipeline)))


def _involved(pipeline: Any) -> Iterator[str]:
    if type(pipeline) is not list:
        return
    for stage in pipeline:
        if type(stage) is not dict or len(stage) != 1:
            continue
        name, spec = next(iter(stage.items()))
        if name in ("$lookup", "$graphLookup") and isinstance(spec, Mapping):
            if type(spec.get("from")) is str:
                yield spec["from"]
            elif isinstance(spec.get("from"), Mapping) and type(spec["from"].get("coll")) is str:
                yield spec["from"]["coll"]
            yield from _involved(spec.get("pipeline"))
        elif name == "$unionWith":
            if type(spec) is str:
                yield spec
            elif isinstance(spec, Mapping):
                if type(spec.get("coll")) is str:
                    yield spec["coll"]
                yield from _involved(spec.get("pipeline"))
        elif name == "$facet" and isinstance(spec, Mapping):
            for sub in spec.values():
                yield from _involved(sub)


def _check_pipeline(view: ViewDefinition) -> None:
    """The stages a view may hold: what mongod's lite parse refuses comes as it is, what its
    full parse refuses comes with "Invalid pipeline for view <ns> :: caused by :: "."""
    for stage in view.pipeline:
        if len(stage) != 1:
            raise MongoError(40323, "A pipeline stage specification object must contain "
                             "exactly one field.")
        name = next(iter(stage))
        if name != "$changeStream" and name not in STAGES:
            raise MongoError(40324, f"Unrecognized pipeline stage name: '{name}'")

    def invalid(code: int, why: str) -> MongoError:
        return MongoError(code, f"Invalid pipeline for view {view.ns} :: caused by :: {why}")

    if view.pipeline and "$changeStream" in view.pipeline[0]:
        raise invalid(ErrorCode.OptionNotSupportedOnView,
                      "$changeStream cannot be used in a view definition")
    try:
        compile_pipeline(view.pipeline, PipelineContext(db=view.db, coll=view.view_on))
    except MongoError as exc:
        raise invalid(exc.code, exc.errmsg) from None
    for i, stage in enumerate(view.pipeline):
        name = next(iter(stage))
        if name in _WRITING_STAGES:
            raise invalid(ErrorCode.OptionNotSupportedOnView,
                          f"The aggregation stage {name} in location {i} of the pipeline "
                          f"cannot be used in the view definition of {view.ns} because it "
                          f"writes to disk")


def _graph(catalog: Catalog, db: str) -> dict[str, list[str]]:
    """Every view of `db` (time-series collections are views over their buckets) with the
    namespaces it reads."""
    graph: dict[str, list[str]] = {}
    for entry in catalog.list_collections(db):
        if entry.kind == "view":
            view = view_definition(entry)
            graph[entry.name] = [*involved_namespaces(view.pipeline), view.view_on]
        elif entry.kind == "timeseries":
            graph[entry.name] = [buckets_name(entry.name)]
    return graph


def _check_graph(catalog: Catalog, view: ViewDefinition) -> None:
    """No cycle through the view and no chain of views deeper than 20 (ViewGraph)."""
    graph = _graph(catalog, view.db)
    graph[view.name] = [*involved_namespaces(view.pipeline), view.view_on]

    def ns(name: str) -> str:
        return f"{view.db}.{name}"

    path = [view.name]
    checked: set[str] = set()

    def cycle_from(node: str, depth: int) -> list[str] | None:
        if depth > 0 and node == view.name:
            return list(path)
        if depth > MAX_VIEW_DEPTH:
            raise _depth_exceeded()
        for child in graph.get(node, ()):
            if child in checked:
                continue
            path.append(child)
            found = cycle_from(child, depth + 1)
            if found is not None:
                return found
            path.pop()
        checked.add(node)
        return None

    cycle = cycle_from(view.name, 0)
    if cycle is not None:
        raise MongoError(ErrorCode.GraphContainsCycle,
                         "View cycle detected: " + ns(cycle[-1]) +
                         "".join(f" => {ns(n)}" for n in reversed(cycle)))

    down: dict[str, int] = {}

    def height_down(node: str) -> int:
        if node not in down:
            down[node] = 1 + max((height_down(c) for c in graph.get(node, ())), default=0)
        return down[node]

    parents: dict[str, list[str]] = {}
    for parent, children in graph.items():
        for child in children:
            parents.setdefault(child, []).append(parent)
    up: dict[str, int] = {}

    def height_up(node: str, depth: int) -> int:
        if depth > MAX_VIEW_DEPTH:
            raise _depth_exceeded()
        if node not in up:
            up[node] = 1 + max((height_up(p, depth + 1) for p in parents.get(node, ())),
                               default=0)
        return up[node]

    if height_up(view.name, 0) + height_down(view.name) - 2 > MAX_VIEW_DEPTH:
        raise _depth_exceeded()


def _depth_exceeded() -> MongoError:
    return MongoError(ErrorCode.ViewDepthLimitExceeded,
                      f"View depth limit exceeded; maximum depth is {MAX_VIEW_DEPTH}")


def check_definition(catalog: Catalog, view: ViewDefinition) -> None:
    """mongod's checks of a view about to be created or changed, after the namespace itself
    was found free (create) or to be this view (collMod); raises MongoError."""
    try:
        validate_collection_name(view.db, view.view_on, for_create=False)
    except MongoError:
        raise MongoError(ErrorCode.InvalidNamespace,
                         f"invalid name for 'viewOn': {view.view_on}") from None
    _check_pipeline(view)
    _check_graph(catalog, view)
    _check_collations(catalog, view)
    if view.view_on.startswith(BUCKETS_PREFIX):
        raise MongoError(ErrorCode.InvalidNamespace,
                         "Invalid view: cannot define a view over a system.buckets namespace "
                         "except by creating a time-series collection")


def _check_collations(catalog: Catalog, view: ViewDefinition) -> None:
    """Every view the view reads (viewOn, $lookup, $unionWith, $facet) has its collation."""
    for name in [view.view_on, *involved_namespaces(view.pipeline)]:
        entry = catalog.entry(view.db, name)
        if entry is not None and entry.kind == "view" and \
                view_definition(entry).collation != view.collation:
            raise MongoError(ErrorCode.OptionNotSupportedOnView,
                             f"View {view.ns} has conflicting collation with view "
                             f"{view.db}.{name}")


def existing_view_conflict(existing: ViewDefinition, view_on: str,
                           pipeline: list[dict[str, Any]]) -> MongoError | None:
    """Repeating `create` of a view with its own definition succeeds; otherwise mongod
    names the difference (NamespaceExists)."""
    if existing.view_on != view_on:
        return MongoError(ErrorCode.NamespaceExists,
                          f"namespace {existing.ns} already exists, but is a view on "
                          f"{existing.db}.{existing.view_on} rather than "
                          f"{existing.db}.{view_on}")
    if existing.pipeline != pipeline:
        return MongoError(ErrorCode.NamespaceExists,
                          f"namespace {existing.ns} already exists, but with pipeline "
                          f"{to_mongo_string(existing.pipeline)} rather than "
                          f"{to_mongo_string(pipeline)}")
    return None


# --- system.views ----------------------------------------------------------------------------

def system_views_documents(catalog: Catalog, db: str) -> list[dict[str, Any]]:
    """`<db>.system.views` as mongod keeps it: one `{_id: "<db>.<view>", viewOn, pipeline}`
    per view, time-series collections' views included."""
    docs: list[dict[str, Any]] = []
    for entry in catalog.list_collections(db):
        if entry.kind == "view":
            view = view_definition(entry)
            docs.append({"_id": view.ns, **view.options()})
        elif entry.kind == "timeseries":
            options = TimeseriesOptions.from_document(entry.options["timeseries"])
            docs.append({"_id": entry.ns, "viewOn": buckets_name(entry.name),
                         "pipeline": view_pipeline(options)})
    return docs


def system_views_exists(catalog: Catalog, db: str) -> bool:
    """mongod creates `system.views` with a database's first view (or time-series
    collection); here it exists while the database holds one."""
    return catalog.entry(db, SYSTEM_VIEWS) is None and any(
        e.kind in ("view", "timeseries") for e in catalog.list_collections(db))


def describe_system_views(db: str) -> dict[str, Any]:
    """The listCollections document of the virtual `system.views` (a stable UUID per
    database)."""
    uid = uuid.uuid5(_SYSTEM_VIEWS_UUID_NS, db)
    return {"name": SYSTEM_VIEWS, "type": "collection", "options": {},
            "info": {"readOnly": False, "uuid": Binary(uid.bytes, 4)},
            "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"}}

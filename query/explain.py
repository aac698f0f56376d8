"""explain of a find on one collection: the plan tree as mongod's classic engine renders
it, and with `executionStats` the counters of actually running it.

A find's plan is a chain of stages, innermost first: the access path (`COLLSCAN`, or
`IXSCAN` under `FETCH`), then `SORT` (with `limitAmount` when a limit bounds it),
`SKIP`, `LIMIT` (folded into the sort when there is one) and the projection. Each
stage's `nReturned` follows from what the run counted: the keys and documents the access
path examined, the documents the filter passed, and the documents returned.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from .executor import PreparedFind, run_find, select_for_modify
from .update import Update

__all__ = ["EXEC_VERBOSITIES", "Layer", "explain_find", "explain_modify", "find_stages",
           "keys_examined", "nest", "query_planner", "with_counters"]

EXEC_VERBOSITIES: Final = ("executionStats", "allPlansExecution")


@dataclass
class Layer:
    """One stage of a chain: its own fields, and what it returned in the run."""

    node: dict[str, Any]
    n_returned: int = 0
    n_input: int = 0      # what it pulled from the stage below (or examined, for a leaf)


def with_counters(layer: Layer, millis: int) -> dict[str, Any]:
    """The stage's fields with the classic engine's common execution counters."""
    node = dict(layer.node)
    specific = {k: node.pop(k) for k in list(node) if k not in ("stage", "filter")}
    works = layer.n_input + 1
    node.update({"nReturned": layer.n_returned, "executionTimeMillisEstimate": millis,
                 "works": works, "advanced": layer.n_returned,
                 "needTime": max(0, works - layer.n_returned - 1), "needYield": 0,
                 "saveState": 0, "restoreState": 0, "isEOF": 1})
    node.update(specific)
    return node


def nest(layers: list[Layer], millis: int | None) -> dict[str, Any]:
    """The chain as one tree (outermost stage at the top); with counters unless
    `millis` is None (queryPlanner verbosity)."""
    tree: dict[str, Any] | None = None
    for layer in layers:
        node = dict(layer.node) if millis is None else with_counters(layer, millis)
        if tree is not None:
            node["inputStage"] = tree
        tree = node
    assert tree is not None
    return tree


def _access_layers(prepared: PreparedFind, run: bool) -> list[Layer]:
    plan, scan, counts = prepared.plan, prepared.scan, prepared.counts
    direction = "forward" if plan.direction == 1 else "backward"
    if plan.is_collscan:
        node: dict[str, Any] = {"stage": "COLLSCAN"}
        if plan.filter:
            node["filter"] = plan.filter
        node["direction"] = direction
        if run:
            node["docsExamined"] = scan.docs_examined
        return [Layer(node, counts.matched, scan.docs_examined)]
    if plan.clustered:  # the collection itself, scanned by `_id` (no index keys to count)
        node = plan.explain()
        if run:
            node["docsExamined"] = scan.docs_examined
        return [Layer(node, counts.matched, scan.docs_examined)]
    fetch_tree = plan.explain()
    ixscan = dict(fetch_tree["inputStage"])
    fetched = scan.docs_examined
    if run:
        ixscan.update({"keysExamined": scan.keys_examined, "seeks": len(plan.bounds) and 1,
                       "dupsTested": scan.keys_examined if ixscan["isMultiKey"] else 0,
                       "dupsDropped": scan.dups_dropped})
    fetch: dict[str, Any] = {"stage": "FETCH"}
    if plan.filter:
        fetch["filter"] = plan.filter
    if run:
        fetch.update({"docsExamined": fetched, "alreadyHasObj": 0})
    return [Layer(ixscan, scan.keys_examined - scan.dups_dropped, scan.keys_examined),
            Layer(fetch, counts.matched, fetched)]


def keys_examined(prepared: PreparedFind) -> int:
    """The index keys the run examined (a clustered collection's `_id` scan reads none)."""
    return 0 if prepared.plan.clustered else prepared.scan.keys_examined


def find_stages(prepared: PreparedFind, run: bool) -> list[Layer]:
    """The find's stages, innermost first; with `run`, with what its run counted."""
    spec = prepared.spec
    layers = _access_layers(prepared, run)
    n = prepared.counts.matched
    if prepared.sort is not None and not prepared.plan.provides_sort:
        node: dict[str, Any] = {"stage": "SORT", "sortPattern": spec.sort,
                                "memLimit": spec.max_sort_bytes}
        kept = n
        if spec.limit:
            node["limitAmount"] = spec.skip + spec.limit
            kept = min(n, spec.skip + spec.limit)
        node["type"] = "simple"
        if run:
            node.update({"totalDataSizeSorted": 0, "usedDisk": False, "spills": 0,
                         "spilledDataStorageSize": 0})
        layers.append(Layer(node, kept, n))
        n = kept
        folded_limit = True
    else:
        folded_limit = False
    if spec.skip:
        layers.append(Layer({"stage": "SKIP", "skipAmount": spec.skip},
                            max(0, n - spec.skip), n))
        n = max(0, n - spec.skip)
    if spec.limit and not folded_limit:
        layers.append(Layer({"stage": "LIMIT", "limitAmount": spec.limit},
                            min(n, spec.limit), n))
        n = min(n, spec.limit)
    if prepared.projection is not None:
        layers.append(Layer({"stage": "PROJECTION_DEFAULT", "transformBy": spec.projection},
                            n, n))
    return layers


def query_planner(ns: str, parsed: dict[str, Any] | None, winning: dict[str, Any]
                  ) -> dict[str, Any]:
    """The `queryPlanner` section around a winning plan."""
    return {
        "namespace": ns,
        "parsedQuery": parsed or {},
        "indexFilterSet": False,
        "planCacheShapeHash": "0" * 8,
        "maxIndexedOrSolutionsReached": False,
        "maxIndexedAndSolutionsReached": False,
        "maxScansToExplodeReached": False,
        "prunedSimilarIndexes": False,
        "winningPlan": winning,
        "rejectedPlans": [],
    }


def explain_find(coll: Any, prepared: PreparedFind, verbosity: str, ns: str
                 ) -> dict[str, Any]:
    """The explain of a find (call on the storage thread). With an execution verbosity
    the find runs to the end, as mongod runs it, and the counters are its own."""
    run = verbosity in EXEC_VERBOSITIES
    millis: int | None = None
    if run:
        started = time.perf_counter()
        returned: Iterator[Any] = run_find(coll, prepared)
        for _ in returned:
            pass
        millis = int((time.perf_counter() - started) * 1000)
    out: dict[str, Any] = {
        "explainVersion": "1",
        "queryPlanner": query_planner(ns, prepared.spec.filter,
                                      nest(find_stages(prepared, False), None)),
    }
    if run:
        assert millis is not None
        stats: dict[str, Any] = {
            "executionSuccess": True,
            "nReturned": prepared.counts.returned,
            "executionTimeMillis": millis,
            "totalKeysExamined": keys_examined(prepared),
            "totalDocsExamined": prepared.scan.docs_examined,
            "executionStages": nest(find_stages(prepared, True), millis),
        }
        if verbosity == "allPlansExecution":
            stats["allPlansExecution"] = []
        out["executionStats"] = stats
    return out


def explain_modify(coll: Any, prepared: PreparedFind, verbosity: str, ns: str, *,
                   update: Update | None, multi: bool, sort: dict[str, Any] | None,
                   upsert: bool = False) -> dict[str, Any]:
    """The explain of an update (`update` given) or a delete: the find's plan under an
    `UPDATE` or `DELETE` stage. With an execution verbosity the documents are selected
    and, for an update, modified in memory; nothing is written (mongod's nWould*)."""
    run = verbosity in EXEC_VERBOSITIES
    n_selected = n_would_modify = 0
    millis = 0
    if run:
        started = time.perf_counter()
        chosen = select_for_modify(coll, prepared, multi, sort)
        n_selected = len(chosen)
        if update is not None:
            n_would_modify = sum(1 for _rid, _raw, doc in chosen if update.apply(doc)[1])
        millis = int((time.perf_counter() - started) * 1000)

    def stages(with_run: bool) -> list[Layer]:
        layers = find_stages(prepared, with_run)
        if sort:
            sort_node: dict[str, Any] = {"stage": "SORT", "sortPattern": sort,
                                         "memLimit": prepared.spec.max_sort_bytes,
                                         "type": "simple"}
            if not multi:
                sort_node["limitAmount"] = 1
            layers.append(Layer(sort_node, n_selected, prepared.counts.matched))
        node: dict[str, Any] = {"stage": "UPDATE" if update is not None else "DELETE"}
        if with_run:
            if update is not None:
                node.update({"nMatched": n_selected, "nWouldModify": n_would_modify,
                             "nWouldUpsert": int(upsert and n_selected == 0)})
            else:
                node["nWouldDelete"] = n_selected
        layers.append(Layer(node, 0, n_selected))
        return layers

    out: dict[str, Any] = {
        "explainVersion": "1",
        "queryPlanner": query_planner(ns, prepared.spec.filter, nest(stages(False), None)),
    }
    if run:
        out["executionStats"] = {
            "executionSuccess": True, "nReturned": 0, "executionTimeMillis": millis,
            "totalKeysExamined": keys_examined(prepared),
            "totalDocsExamined": prepared.scan.docs_examined,
            "executionStages": nest(stages(True), millis),
        }
        if verbosity == "allPlansExecution":
            out["executionStats"]["allPlansExecution"] = []
    return out

"""Which top-level fields a pipeline reads: lets time-series reads decode only those columns.

Conservative: returns None ("every field") unless every stage is one whose reads are
known from its spec. Field paths are strings beginning with a single `$` (`"$a.b"`
reads `a`), and the keys of `$match` filters, `$sort`/`sortBy` documents and inclusion
projections. `$$ROOT`/`$$CURRENT` anywhere means the whole document.
"""

from __future__ import annotations

from typing import Any

__all__ = ["expression_reads_document", "pipeline_fields"]

_STRING_STAGES = {"$group", "$addFields", "$set", "$unwind", "$sortByCount", "$bucket",
                  "$bucketAuto", "$replaceRoot", "$replaceWith"}
_PASS_STAGES = {"$limit", "$skip", "$count", "$sample"}
_STOP_STAGES = {"$group", "$bucket", "$bucketAuto", "$sortByCount", "$count", "$replaceRoot",
                "$replaceWith", "$project"}


def _paths_in(value: Any, out: set[str]) -> bool:
    """Add field paths found in an expression; False if it reads the whole document."""
    if isinstance(value, str):
        if value.startswith("$$"):
            name = value[2:].split(".", 1)[0]
            if name in ("ROOT", "CURRENT"):
                if "." in value[2:]:
                    out.add(value[2:].split(".")[1])
                    return True
                return False
            return True
        if value.startswith("$") and len(value) > 1:
            out.add(value[1:].split(".", 1)[0])
        return True
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "$literal":
                continue
            if not _paths_in(v, out):
                return False
        return True
    if isinstance(value, list):
        return all(_paths_in(v, out) for v in value)
    return True


def expression_reads_document(value: Any) -> bool:
    """True if the expression reads a field of its input document (or the whole of it)."""
    out: set[str] = set()
    return not _paths_in(value, out) or bool(out)


def _filter_fields(flt: Any, out: set[str]) -> bool:
    if not isinstance(flt, dict):
        return False
    for k, v in flt.items():
        if k in ("$and", "$or", "$nor"):
            if not isinstance(v, list) or not all(_filter_fields(x, out) for x in v):
                return False
        elif k == "$expr":
            if not _paths_in(v, out):
                return False
        elif k == "$comment":
            continue
        elif k.startswith("$"):
            return False  # $where, $text, ...: anything goes
        else:
            out.add(k.split(".", 1)[0])
    return True


def pipeline_fields(stages: list[Any]) -> set[str] | None:
    """Top-level fields the pipeline may read from its input documents, or None for all."""
    out: set[str] = set()
    for stage in stages:
        if not isinstance(stage, dict) or len(stage) != 1:
            return None
        name, spec = next(iter(stage.items()))
        if name == "$match":
            if not _filter_fields(spec, out):
                return None
        elif name == "$sort":
            if not isinstance(spec, dict):
                return None
            out.update(k.split(".", 1)[0] for k in spec)
        elif name == "$project":
            if not isinstance(spec, dict):
                return None
            for k, v in spec.items():
                if isinstance(v, bool | int | float):
                    if not v and k != "_id":
                        return None  # an exclusion projection passes everything else on
                    if v:
                        out.add(k.split(".", 1)[0])
                elif not _paths_in(v, out):
                    return None
            if spec.get("_id", 1):
                out.add("_id")
        elif name == "$setWindowFields":
            if not isinstance(spec, dict):
                return None
            if not _paths_in(spec.get("partitionBy"), out) or \
                    not _paths_in(spec.get("output"), out):
                return None
            out.update(k.split(".", 1)[0] for k in (spec.get("sortBy") or {}))
            continue  # passes every field on: later stages still read the input
        elif name in _STRING_STAGES:
            if not _paths_in(spec, out):
                return None
        elif name not in _PASS_STAGES:
            return None
        if name in _STOP_STAGES:
            return out  # later stages read this stage's output, not the measurements
    return None  # the documents themselves reach the client

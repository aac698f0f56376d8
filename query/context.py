"""What a pipeline needs from the outside world (`PipelineContext`).

The aggregation engine is pure; everything with side effects or knowledge of the catalog comes
in through this object, filled by the server's `aggregate` command: the database name, the
query's `$$NOW`, memory/spill settings, a way to read another collection (for `$lookup`,
`$unionWith`) and write sinks for `$out` and `$merge`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from bson import Timestamp
from bson.datetime_ms import DatetimeMS

from storage.collation import Collator

if TYPE_CHECKING:
    from query.expressions.core import Scope

__all__ = ["PipelineContext", "DEFAULT_MEMORY_LIMIT"]

# 100 MiB: MongoDB's internalQueryMaxBlockingSortMemoryUsageBytes and
# internalDocumentSourceGroupMaxMemoryBytes defaults.
DEFAULT_MEMORY_LIMIT: Final = 100 * 1024 * 1024


def _now() -> DatetimeMS:
    return DatetimeMS(int(time.time() * 1000))


@dataclass
class PipelineContext:
    """Per-aggregate settings and services.

    - ``resolve_collection(db, coll)`` returns the documents of another collection (a view or
      time-series collection already unpacked); used by `$lookup`, `$unionWith`. None means
      those stages fail with NamespaceNotFound-like errors.
    - ``out(db, coll, docs)`` replaces a collection's contents atomically (`$out`);
      ``merge(db, coll, docs, on, when_matched, when_not_matched, let)`` applies `$merge`
      (``when_matched`` is a string or a compiled update pipeline: a list of stage specs).
    - ``coll_stats``, ``index_stats``, ``current_op``, ``list_local_sessions``: optional
      providers for the corresponding first stages; each takes the stage spec and returns
      documents.
    """

    db: str = "test"
    coll: str | None = None
    now: DatetimeMS = field(default_factory=_now)
    cluster_time: Timestamp | None = None
    allow_disk_use: bool = False
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT
    temp_dir: str | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    # Names of user variables bound around this pipeline (a $lookup's `let` for its
    # sub-pipeline); their values arrive at run time.
    variables_in_scope: tuple[str, ...] = ()
    resolve_collection: Callable[[str, str], Iterable[dict]] | None = None
    out: Callable[[str, str, Iterable[dict]], None] | None = None
    merge: Callable[..., None] | None = None
    coll_stats: Callable[[dict], Iterable[dict]] | None = None
    index_stats: Callable[[dict], Iterable[dict]] | None = None
    current_op: Callable[[Any], Iterable[dict]] | None = None
    list_local_sessions: Callable[[Any], Iterable[dict]] | None = None
    # Maximum documents $densify may generate (internalQueryMaxAllowedDensifyDocs).
    max_densify_docs: int = 500_000
    # The operation's collation (None: simple): string comparisons in $match, $sort,
    # $group keys, expressions and $lookup use it.
    collator: Collator | None = None

    def scope(self, *, current_rebound: bool = False, redact: bool = False) -> Scope:
        """The expression scope of a stage: the variables in scope and the collation."""
        from query.expressions.core import Scope
        return Scope(self.scope_vars(), current_rebound, redact, self.collator)

    def scope_vars(self) -> frozenset[str]:
        """User variable names an expression in this pipeline may reference."""
        return frozenset(self.variables) | frozenset(self.variables_in_scope)

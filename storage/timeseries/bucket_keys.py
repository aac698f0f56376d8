"""A bucket's index keys made from what the catalog knows of it: its `_id`, its meta
value's keystring and its time bounds, for buckets collections whose every index keys
nothing else. The group commit writes one bucket per measurement where series are many;
this gives each write's keys without a key document or a key generator (the keys are
those `storage.indexes.KeyGenerator` gives the bucket document: the tests hold them
equal).

A plan lists, per index, which of the four parts each key field takes and whether it is
descending. Only plain indexes get one: no partial filter, no collation, no path into the
meta value, nothing but `_id`, the meta and control.min/max.<time field>. A bucket's keys
are then single keys (never multikey: a meta that is a document is not an array)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from storage.indexes import IndexSpec
from storage.keystring import encode_date_ms, invert

from .constants import META
from .index_schema import time_bound_paths

__all__ = ["KeyPlans", "bucket_keys", "key_plans"]

# the parts of a key, as `bucket_keys` lists them (a descending part: its complement, 4 on)
_ID: Final = 0
_META: Final = 1
_MIN: Final = 2
_MAX: Final = 3
_DESCENDING: Final = 4


@dataclass(frozen=True, slots=True)
class KeyPlans:
    """Per index, the parts its key joins (ascending or descending)."""

    indexes: tuple[tuple[int, ...], ...]
    descending: bool


def key_plans(specs: Sequence[IndexSpec], time_field: str) -> KeyPlans | None:
    """The plans of a buckets collection's indexes (None: some index keys more, or
    otherwise, than a plan gives)."""
    lo, hi = time_bound_paths(time_field)
    parts = {"_id": _ID, META: _META, lo: _MIN, hi: _MAX}
    plans = []
    for spec in specs:
        if spec.partial_filter is not None or spec.collator is not None:
            return None
        plan = []
        for f, d in zip(spec.fields, spec.directions, strict=True):
            part = parts.get(f)
            if part is None:
                return None
            plan.append(part + _DESCENDING if d < 0 else part)
        plans.append(tuple(plan))
    return KeyPlans(tuple(plans), any(p >= _DESCENDING for plan in plans for p in plan))


def bucket_keys(plans: KeyPlans, id_keystring: bytes, meta_keystring: bytes,
                min_keystring: bytes, max_ms: int) -> tuple[tuple[bytes], ...]:
    """Per index, the one key of the bucket with this id, meta and control.min.<time
    field> (as `encode_value` gives them: the parts every write of a bucket shares) and
    control.max.<time field> (milliseconds)."""
    parts = [id_keystring, meta_keystring, min_keystring, encode_date_ms(max_ms)]
    if plans.descending:
        parts += [invert(p) for p in parts]
    return tuple([(parts[plan[0]] if len(plan) == 1 else b"".join([parts[p] for p in plan]),)
                  for plan in plans.indexes])

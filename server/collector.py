"""How the server process runs Python's cyclic garbage collector.

Objects made at start-up never die, so they are moved out of the collector's way
(`gc.freeze`). The young generation is collected after `YOUNG_THRESHOLD` more tracked
objects than were freed, not Python's 700: with the default, the collector took a
quarter of time-series insert throughput. A collection of the young generation costs
what its objects reference, old objects included, so its cost follows the objects alive
at once rather than the allocations: a group commit of many buckets holds a write, its
document parts and its index keys per bucket until it ends. Measured on the high-
cardinality ingest (`bench/bucket_writes.py`, 1,000,000 measurements, 100,000 series,
each batch a write to 1,000 cold buckets), the collector took 6.6% of the ingest's CPU at
50,000 (278 young collections of 13 ms each, most during group commits) and 0.7% at
200,000 (9 of about 50 ms): the writes of a commit mostly die before a collection. The
price is a pause of that size now and then and reference cycles kept a little longer.
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["YOUNG_THRESHOLD", "tune_collector"]

YOUNG_THRESHOLD: Final = 200_000


def tune_collector() -> None:
    """Freeze what exists now and set the thresholds (the server at start-up; the
    in-process benchmarks, to run as it does)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, 50, 100)

"""Names, versions and server parameters of time-series buckets (timeseries_constants.h,
timeseries.idl)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BUCKET_ID", "CONTROL", "CONTROL_CLOSED", "CONTROL_COUNT", "CONTROL_MAX", "CONTROL_MIN",
    "CONTROL_VERSION", "DATA", "META",
    "VERSION_UNCOMPRESSED", "VERSION_COMPRESSED_SORTED", "VERSION_COMPRESSED_UNSORTED",
    "LARGE_MEASUREMENTS_MAX_BUCKET_SIZE", "MAX_BUCKET_DOCUMENT_SIZE",
    "TimeseriesParameters",
]

BUCKET_ID: Final = "_id"
CONTROL: Final = "control"
CONTROL_VERSION: Final = "version"
CONTROL_MIN: Final = "min"
CONTROL_MAX: Final = "max"
CONTROL_COUNT: Final = "count"
CONTROL_CLOSED: Final = "closed"
META: Final = "meta"
DATA: Final = "data"

VERSION_UNCOMPRESSED: Final = 1
VERSION_COMPRESSED_SORTED: Final = 2
VERSION_COMPRESSED_UNSORTED: Final = 3

# 16 MiB - 4 MiB: the ceiling a bucket may grow to while it still holds fewer than
# timeseriesBucketMinCount measurements (Bucket::kLargeMeasurementsMaxBucketSize).
LARGE_MEASUREMENTS_MAX_BUCKET_SIZE: Final = 16 * 1024 * 1024 - 4 * 1024 * 1024
# BSONObjMaxInternalSize: the largest document the server itself writes.
MAX_BUCKET_DOCUMENT_SIZE: Final = 16 * 1024 * 1024 + 16 * 1024


@functools.cache
def _system_memory_bytes() -> int:  # read once: the catalog asks on every measurement
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


@dataclass(slots=True)
class TimeseriesParameters:
    """The server parameters the bucket catalog reads (names are MongoDB's).

    `storage_cache_size_bytes` stands for WiredTiger's cache size, from which MongoDB
    derives a smaller bucket size limit when many buckets are active
    (getCacheDerivedBucketMaxSize); default: max(256 MiB, 50% of (RAM - 1 GiB)), like
    WiredTiger's default cache.
    """

    timeseriesBucketMaxCount: int = 1000
    timeseriesBucketMaxSize: int = 128000
    timeseriesBucketMinCount: int = 10
    timeseriesBucketMinSize: int = 5120
    timeseriesLargeMeasurementThreshold: int = 32
    timeseriesIdleBucketExpiryMemoryUsageThreshold: int = 5
    timeseriesIdleBucketExpiryMaxCountPerAttempt: int = 3
    timeseriesInsertMaxRetriesOnDuplicates: int = 32
    storage_cache_size_bytes: int | None = None
    system_memory_bytes: int | None = None

    def memory_threshold_bytes(self) -> int:
        """timeseriesIdleBucketExpiryMemoryUsageThreshold in bytes.

        1..100 is a percentage of system memory, larger values are bytes, and values <= 0
        fall back to the default percentage.
        """
        v = self.timeseriesIdleBucketExpiryMemoryUsageThreshold
        mem = self.system_memory_bytes or _system_memory_bytes()
        if v <= 0:
            v = 5
        if v <= 100:
            return mem * v // 100
        return v

    def cache_size_bytes(self) -> int:
        if self.storage_cache_size_bytes is not None:
            return self.storage_cache_size_bytes
        mem = self.system_memory_bytes or _system_memory_bytes()
        return max(256 * 1024 * 1024, (mem - 1024**3) // 2)

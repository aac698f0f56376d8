"""Time-series collections: options, bucket documents, the bucket catalog, unpacking,
bucket-level predicates and index translation. See README.md."""

from .bucket_catalog import BucketCatalog
from .bucket_predicates import bucket_filter, meta_only_filter, ttl_expired_filter
from .bucket_rewrite import rebuild_bucket
from .constants import TimeseriesParameters
from .control_filter import ControlFilter, compile_control_filter, raw_control
from .index_schema import (
    bucket_index_key,
    bucket_index_spec,
    default_index_spec,
    drop_index_key,
    supports_reopening_query,
    timeseries_index_spec,
)
from .metadata import normalize_meta
from .options import (
    TimeseriesOptions,
    buckets_collection_options,
    coll_mod_timeseries,
    options_equal,
    parse_coll_mod_expire_after_seconds,
    parse_expire_after_seconds,
    parse_timeseries_options,
    view_pipeline,
)
from .reopening import BucketSource, ReopeningQuery
from .rollover import RolloverAction, RolloverReason
from .stats import ExecutionStats
from .unpack import BucketSpec, count_measurements, unpack_bucket, unpack_columns
from .write_batch import BatchResult, BucketWrite

__all__ = [
    "BatchResult",
    "BucketCatalog",
    "BucketSource",
    "BucketSpec",
    "BucketWrite",
    "ExecutionStats",
    "ReopeningQuery",
    "RolloverAction",
    "RolloverReason",
    "TimeseriesOptions",
    "TimeseriesParameters",
    "bucket_filter",
    "ControlFilter",
    "compile_control_filter",
    "raw_control",
    "bucket_index_key",
    "bucket_index_spec",
    "buckets_collection_options",
    "coll_mod_timeseries",
    "count_measurements",
    "default_index_spec",
    "drop_index_key",
    "meta_only_filter",
    "normalize_meta",
    "options_equal",
    "parse_coll_mod_expire_after_seconds",
    "parse_expire_after_seconds",
    "parse_timeseries_options",
    "rebuild_bucket",
    "supports_reopening_query",
    "timeseries_index_spec",
    "ttl_expired_filter",
    "unpack_bucket",
    "unpack_columns",
    "view_pipeline",
]

"""bucketd's storage layer: engines, catalog, indexes, time-series buckets and BSONColumn.

Imports nothing from `server`, `query` or `protocol`.
"""

"""Time-series collections: options, bucket documents, the bucket catalog, unpacking,
bucket-level predicates and index translation. See README.md."""

"""Reading time-series buckets: the pure parts of a time-series read.

`read_plan` picks a read's path (last point, columnar `$group`, row pre-filter, general);
`scan` is the one bucket scan they share (candidates → decode → bucket-filter re-check);
`measurements` unpacks the scanned buckets into measurements (with the columnar row
pre-filter when the filter allows it); `lastpoint` and `columnar_group` are the two
aggregation shapes that skip most of the unpacking. Nothing here knows the server: the
caller hands in the buckets collection, the options and what it decided about `_id`
bounds.
"""

__all__: list[str] = []

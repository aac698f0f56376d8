"""Time-series collections in the server: the service and the commands' entry points.

`service` owns the bucket catalog, the pending bucket writes (group commit) and the
statistics; `ddl` creates and modifies collections; `indexes` translates index commands
to the buckets collection; `writes` inserts, updates and deletes measurements; `reads`
answers find, count, distinct, explain and the pipeline source through the read planner
(`query.timeseries.read_plan`); `expiry` is the TTL monitor's part. Every entry point takes
the command's `TimeseriesTarget` (`server.namespaces.resolve_namespace`).

Namespaces: the view `db.coll` is a catalog entry of kind "timeseries" whose options
hold `timeseries` (and `expireAfterSeconds`); its buckets live in the ordinary
collection `db.system.buckets.coll`. The bucket catalog keys collections by the view's
namespace string.
"""

__all__: list[str] = []

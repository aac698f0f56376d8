"""Views: definitions kept in the catalog (kind "view", options {viewOn, pipeline}), their
validation as mongod validates them, resolution to the namespace underneath, the virtual
`<db>.system.views`, and reads through a view (`definitions`, `reads`).

Nothing is imported here, so importing `server.views.definitions` does not pull in the
reads (which run pipelines through `server.aggregation`, which resolves views).
"""

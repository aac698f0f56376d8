"""The words every layer shares: `MISSING`, BSON type bytes and names, time units, error codes.

This package sits at the bottom of `storage/` and imports nothing else of ours, so
`protocol/` may use it too. Import from the modules themselves
(`storage.vocabulary.bson_types`, ...); this file only names them.
"""

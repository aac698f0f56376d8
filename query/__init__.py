"""bucketd's query layer: matching, projection, sorting, updates and aggregation.

Pure evaluation over decoded documents (and decoded column blocks); no I/O.
Imports only `storage` (value ordering, errors, codec types).
"""

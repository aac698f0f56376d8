"""BSONColumn: MongoDB's compressed column format (BinData subtype 7), byte for byte.

Stable entry points: `compress(doc, count=None)` and `decompress(column)`.
Writing incrementally: `BSONColumnBuilder` (append, skip, intermediate, finalize,
from_column). Reading: `BSONColumn` (values, len, indexing, aggregates, numpy arrays),
`decompress_paths`, `decode_numeric`. Malformed input raises `BSONColumnError`.
See README.md in this directory for the format.
"""

from .api import compress, decompress
from .blocks import NotNumericColumn, NumericColumn, decode_numeric
from .builder import BinaryDiff, BSONColumnBuilder
from .errors import BSONColumnError
from .reader import BSONColumn, decompress_paths

__all__ = [
    "BSONColumn",
    "BSONColumnBuilder",
    "BSONColumnError",
    "BinaryDiff",
    "NotNumericColumn",
    "NumericColumn",
    "compress",
    "decode_numeric",
    "decompress",
    "decompress_paths",
]

"""BSONColumn: MongoDB's compressed column format (BinData subtype 7), byte for byte.

Stable entry points: `compress(doc, count=None)` and `decompress(column)`.
Incremental writing: `BSONColumnBuilder`. Reading: `BSONColumn`, `decompress_paths`,
`decode_numeric`. Malformed input raises `BSONColumnError`. See README.md.
"""

from .api import compress, decompress
from .builder import MISSING, BinaryDiff, BSONColumnBuilder
from .errors import BSONColumnError

__all__ = [
    "MISSING",
    "BSONColumnBuilder",
    "BSONColumnError",
    "BinaryDiff",
    "compress",
    "decompress",
]

"""The version bucketd reports: MongoDB's wire-compatible version and our own."""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = ["MONGODB_VERSION", "VERSION_ARRAY", "BUCKETD_VERSION", "GIT_VERSION"]

MONGODB_VERSION: Final = "8.0.4"
VERSION_ARRAY: Final = [8, 0, 4, 0]
BUCKETD_VERSION: Final = "0.1.0"
# Not a MongoDB commit: a stable 40-hex id of this bucketd release, in gitVersion's shape.
GIT_VERSION: Final = hashlib.sha1(f"bucketd {BUCKETD_VERSION}".encode()).hexdigest()

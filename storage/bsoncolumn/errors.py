"""The one exception BSONColumn decoding raises on malformed input."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError

__all__ = ["BSONColumnError", "INVALID_BSON_COLUMN"]

# MongoDB 8.0 reports a malformed column with location code 6067602 ("Invalid BSON Column
# encoding"); later versions name it InvalidBSONColumn. The code is only a default.
INVALID_BSON_COLUMN = 6067602


class BSONColumnError(MongoError):
    """A BSONColumn binary (or a value appended to a builder) is not valid."""

    def __init__(self, errmsg: str, code: int = INVALID_BSON_COLUMN, **extra: Any) -> None:
        super().__init__(code, errmsg, **extra)

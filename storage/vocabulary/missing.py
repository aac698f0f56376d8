"""`MISSING`: the one value of a field or path that does not exist (MongoDB's EOO).

Every layer uses this same object (paths, expressions, index keys, time-series meta,
BSONColumn skipped rows), so an identity check means the same everywhere. It is falsy,
never equal to None, and survives pickling and copying as itself.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MISSING", "Missing"]


class Missing:
    """The type of `MISSING`; a singleton."""

    __slots__ = ()
    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        # pickle and copy look the name up in this module: the same object comes back
        return "MISSING"


MISSING: Final = Missing()

"""`MongoError`, the one exception a command fails with.

Its code is MongoDB's: an `ErrorCode` (`storage.vocabulary.error_codes`, generated from
MongoDB's `error_codes.yml`) or a plain location code, rendered ``Location<code>``.
`MongoError` is raised wherever a problem is detected (storage, query, command
parsing) and is turned into ``{ok: 0, errmsg, code, codeName}`` in exactly one place,
the server's dispatcher.
"""

from __future__ import annotations

from typing import Any

from storage.vocabulary.error_codes import code_name

__all__ = ["MongoError"]


class MongoError(Exception):
    """A command failure with MongoDB's `code`; rendered once, by the dispatcher.

    `extra` holds additional reply fields MongoDB sends with some errors
    (for example `keyPattern`/`keyValue` with DuplicateKey).
    """

    __slots__ = ("code", "errmsg", "extra")

    def __init__(self, code: int, errmsg: str, **extra: Any) -> None:
        if code <= 0:
            raise ValueError(f"MongoError code must be positive, got {code}")
        super().__init__(errmsg)
        self.code = int(code)
        self.errmsg = errmsg
        self.extra = extra

    @property
    def code_name(self) -> str:
        return code_name(self.code)

    def to_reply(self) -> dict[str, Any]:
        reply: dict[str, Any] = {"ok": 0.0, "errmsg": self.errmsg, "code": self.code,
                                 "codeName": self.code_name}
        reply.update(self.extra)
        return reply

    def to_write_error(self, index: int) -> dict[str, Any]:
        """This error as one entry of a write command's `writeErrors`."""
        err: dict[str, Any] = {"index": index, "code": self.code, "errmsg": self.errmsg}
        err.update(self.extra)
        return err

    def __repr__(self) -> str:
        return f"MongoError({self.code_name}({self.code}), {self.errmsg!r})"


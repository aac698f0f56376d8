"""Errors raised while reading the wire.

`ProtocolError` carries MongoDB's error code. `fatal=True` means the bytes can no
longer be trusted (bad framing, illegal flags, checksum mismatch): the server closes
that connection, as mongod does for its ConnectionFatalMessageParseError category.
`fatal=False` means the frame was sound but its content was not (for example a body
that is not valid BSON): the server answers `ok: 0` and keeps the connection.
"""

from __future__ import annotations

__all__ = ["ProtocolError"]


class ProtocolError(Exception):
    def __init__(self, code: int, code_name: str, message: str, *, fatal: bool = True,
                 request_id: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.code_name = code_name
        self.message = message
        self.fatal = fatal
        self.request_id = request_id

"""Errors raised while reading the wire.

`ProtocolError` carries MongoDB's error code (an `ErrorCode` from the shared vocabulary,
or a plain location code); its codeName follows from the code. `fatal=True` means the
bytes can no longer be trusted (bad framing, illegal flags, checksum mismatch): the
server closes that connection, as mongod does for its ConnectionFatalMessageParseError
category. `fatal=False` means the frame was sound but its content was not (for example a
body that is not valid BSON): the server answers `ok: 0` and keeps the connection.
"""

from __future__ import annotations

from storage.vocabulary.error_codes import code_name

__all__ = ["ProtocolError"]


class ProtocolError(Exception):
    def __init__(self, code: int, message: str, *, fatal: bool = True,
                 request_id: int = 0) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.fatal = fatal
        self.request_id = request_id

    @property
    def code_name(self) -> str:
        return code_name(self.code)

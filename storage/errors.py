"""MongoDB's error vocabulary, shared by every layer.

`ErrorCode` lists the numbered errors of MongoDB's `error_codes.yml` that bucketd can
raise (names and numbers are MongoDB's). Location codes that MongoDB raises with no
name (for example 40324 for an unknown pipeline stage) are written as plain ints and
render as ``Location<code>``, MongoDB's own convention.

`MongoError` is raised wherever a problem is detected (storage, query, command
parsing) and is turned into ``{ok: 0, errmsg, code, codeName}`` in exactly one place,
the server's dispatcher.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["ErrorCode", "MongoError", "code_name"]


class ErrorCode(enum.IntEnum):
    InternalError = 1
    BadValue = 2
    NoSuchKey = 4
    UnknownError = 8
    FailedToParse = 9
    CannotMutateObject = 10
    Unauthorized = 13
    TypeMismatch = 14
    Overflow = 15
    InvalidLength = 16
    ProtocolError = 17
    AuthenticationFailed = 18
    IllegalOperation = 20
    EmptyArrayOperation = 21
    InvalidBSON = 22
    NamespaceNotFound = 26
    IndexNotFound = 27
    PathNotViable = 28
    NonExistentPath = 29
    InvalidPath = 30
    ConflictingUpdateOperators = 40
    CursorNotFound = 43
    NoMatchingDocument = 47
    NamespaceExists = 48
    MaxTimeMSExpired = 50
    DollarPrefixedFieldName = 52
    InvalidIdField = 53
    NotSingleValueField = 54
    InvalidDBRef = 55
    EmptyFieldName = 56
    DottedFieldName = 57
    CommandNotFound = 59
    ImmutableField = 66
    CannotCreateIndex = 67
    IndexAlreadyExists = 68
    InvalidOptions = 72
    InvalidNamespace = 73
    IndexOptionsConflict = 85
    IndexKeySpecsConflict = 86
    NetworkTimeout = 89
    ShutdownInProgress = 91
    OperationFailed = 96
    DBPathInUse = 98
    WriteConflict = 112
    CommandNotSupported = 115
    ConflictingOperationInProgress = 117
    DocumentValidationFailure = 121
    CommandFailed = 125
    CursorInUse = 143
    ExceededMemoryLimit = 146
    ZLibError = 147
    CollectionIsEmpty = 162
    CommandNotSupportedOnView = 166
    OptionNotSupportedOnView = 167
    InvalidPipelineOperator = 168
    CannotIndexParallelArrays = 171
    QueryPlanKilled = 175
    AmbiguousIndexKeyPattern = 181
    InvalidViewDefinition = 182
    InvalidIndexSpecificationOption = 197
    CannotBuildIndexKeys = 201
    NoSuchSession = 206
    InvalidUUID = 207
    IllegalOpMsgFlag = 223
    TooManyDocumentSequences = 233
    CursorKilled = 237
    NotImplemented = 238
    ConversionFailure = 241
    CannotCreateCollection = 242
    TransactionTooLarge = 257
    OperationNotSupportedInTransaction = 263
    ClientDisconnect = 279
    ChecksumMismatch = 288
    QueryExceededMemoryLimitNoDiskUseAllowed = 292
    DataCorruptionDetected = 301
    APIVersionError = 322
    APIStrictError = 323
    UnsupportedOpQueryCommand = 352
    InvalidBSONType = 357
    CollectionUUIDMismatch = 361
    NonConformantBSON = 378
    CannotInsertTimeseriesBucketsWithMixedSchema = 408
    TimeseriesBucketCompressionFailed = 409
    NotWritablePrimary = 10107
    BSONObjectTooLarge = 10334
    DuplicateKey = 11000
    InterruptedAtShutdown = 11600
    Interrupted = 11601
    DatabaseDifferCase = 13297
    OutOfDiskSpace = 14031
    IDLDuplicateField = 40413
    IDLFailedToParse = 40414
    IDLUnknownField = 40415


def code_name(code: int) -> str:
    """MongoDB's codeName for `code`: the enum name, else ``Location<code>``."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"Location{code}"


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


"""ErrorCode: MongoDB's numbers and names (error_codes.yml), and its generator."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode, code_name

from ._source_scan import ROOT

# Every name bucketd's hand-written enum held, with its number.
FORMERLY_HAND_WRITTEN = {
    "InternalError": 1, "BadValue": 2, "NoSuchKey": 4, "UnknownError": 8, "FailedToParse": 9,
    "CannotMutateObject": 10, "Unauthorized": 13, "TypeMismatch": 14, "Overflow": 15,
    "InvalidLength": 16, "ProtocolError": 17, "AuthenticationFailed": 18,
    "IllegalOperation": 20, "EmptyArrayOperation": 21, "InvalidBSON": 22,
    "NamespaceNotFound": 26, "IndexNotFound": 27, "PathNotViable": 28, "NonExistentPath": 29,
    "InvalidPath": 30, "ConflictingUpdateOperators": 40, "CursorNotFound": 43,
    "NoMatchingDocument": 47, "NamespaceExists": 48, "MaxTimeMSExpired": 50,
    "DollarPrefixedFieldName": 52, "InvalidIdField": 53, "NotSingleValueField": 54,
    "InvalidDBRef": 55, "EmptyFieldName": 56, "DottedFieldName": 57, "CommandNotFound": 59,
    "ImmutableField": 66, "CannotCreateIndex": 67, "IndexAlreadyExists": 68,
    "InvalidOptions": 72, "InvalidNamespace": 73, "IndexOptionsConflict": 85,
    "IndexKeySpecsConflict": 86, "NetworkTimeout": 89, "ShutdownInProgress": 91,
    "OperationFailed": 96, "DBPathInUse": 98, "WriteConflict": 112,
    "CommandNotSupported": 115, "ConflictingOperationInProgress": 117,
    "DocumentValidationFailure": 121, "CommandFailed": 125, "CursorInUse": 143,
    "ExceededMemoryLimit": 146, "ZLibError": 147, "CollectionIsEmpty": 162,
    "CommandNotSupportedOnView": 166, "OptionNotSupportedOnView": 167,
    "InvalidPipelineOperator": 168, "CannotIndexParallelArrays": 171, "QueryPlanKilled": 175,
    "AmbiguousIndexKeyPattern": 181, "InvalidViewDefinition": 182,
    "InvalidIndexSpecificationOption": 197, "CannotBuildIndexKeys": 201, "NoSuchSession": 206,
    "InvalidUUID": 207, "IllegalOpMsgFlag": 223, "TooManyDocumentSequences": 233,
    "CursorKilled": 237, "NotImplemented": 238, "ConversionFailure": 241,
    "CannotCreateCollection": 242, "TransactionTooLarge": 257,
    "OperationNotSupportedInTransaction": 263, "ClientDisconnect": 279,
    "ChecksumMismatch": 288, "QueryExceededMemoryLimitNoDiskUseAllowed": 292,
    "DataCorruptionDetected": 301, "APIVersionError": 322, "APIStrictError": 323,
    "UnsupportedOpQueryCommand": 352, "InvalidBSONType": 357, "CollectionUUIDMismatch": 361,
    "NonConformantBSON": 378, "CannotInsertTimeseriesBucketsWithMixedSchema": 408,
    "TimeseriesBucketCompressionFailed": 409, "NotWritablePrimary": 10107,
    "BSONObjectTooLarge": 10334, "DuplicateKey": 11000, "InterruptedAtShutdown": 11600,
    "Interrupted": 11601, "DatabaseDifferCase": 13297, "OutOfDiskSpace": 14031,
    "IDLDuplicateField": 40413, "IDLFailedToParse": 40414, "IDLUnknownField": 40415,
}


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_error_codes",
                                                  ROOT / "tools" / "gen_error_codes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_error_codes", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("name", "code"), sorted(FORMERLY_HAND_WRITTEN.items()))
def test_former_names_keep_their_numbers(name: str, code: int) -> None:
    assert ErrorCode[name] == code
    assert code_name(code) == name


def test_spot_checks_against_error_codes_yml() -> None:
    assert ErrorCode.OK == 0
    assert ErrorCode.HostUnreachable == 6
    assert ErrorCode.MergeStageNoMatchingDocument == 13113
    assert ErrorCode.ClientMetadataCannotBeMutated == 186
    assert ErrorCode.StaleConfig == 13388
    assert ErrorCode.IDLUnknownFieldPossibleMongocryptd == 4662500
    assert 44 not in set(ErrorCode)          # a gap in MongoDB's numbering
    assert len(ErrorCode) > 400


def test_unnamed_codes_render_as_locations() -> None:
    assert code_name(40324) == "Location40324"
    assert MongoError(40324, "x").to_reply()["codeName"] == "Location40324"
    assert MongoError(ErrorCode.BadValue, "x").to_reply()["codeName"] == "BadValue"


def test_generator_reads_codes_and_names_only() -> None:
    gen = _generator()
    yml = """error_categories:
  - NetworkError
error_codes:
  - {code: 1, name: InternalError}
  # - {code: 253, name: Removed}
  - {
      code: 50,
      name: MaxTimeMSExpired,
      categories: [Interruption, ExceededTimeLimitError],
    }
  - {code: 11000, name: DuplicateKey, extra: DuplicateKeyErrorInfo}
"""
    assert gen.parse_error_codes(yml) == [
        ("InternalError", 1), ("MaxTimeMSExpired", 50), ("DuplicateKey", 11000)]
    with pytest.raises(ValueError):
        gen.parse_error_codes("error_codes:\n  - {code: 1, name: A}\n  - {code: 1, name: B}\n")


def test_committed_module_is_the_generators_output() -> None:
    gen = _generator()
    text = (ROOT / "storage" / "vocabulary" / "error_codes.py").read_text(encoding="utf-8")
    assert text.startswith("# GENERATED by tools/gen_error_codes.py from MongoDB's "
                           "error_codes.yml — do not edit\n")
    assert text == gen.render_module([(c.name, c.value) for c in ErrorCode])

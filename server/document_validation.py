"""A collection's document validation: its `validator` compiled once per write command,
applied per `validationLevel` (off, strict, moderate) and `validationAction` (error: fail
with DocumentValidationFailure 121 and MongoDB's `errInfo`; warn: log mongod's warning
20294 and write anyway). Also parses those options for `create` and `collMod`.

The write commands, `$out` and `$merge` call `make_validator` unless the command has
`bypassDocumentValidation: true`; bucketd's own bucket writes never come here.
"""

from __future__ import annotations

from typing import Any, Final

from query.match import Matcher, compile_validator
from query.match.validation_error import validation_error_info
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from .log import LOG

__all__ = ["DocumentValidator", "make_validator", "check_validation_options"]

LEVELS: Final = ("off", "strict", "moderate")
ACTIONS: Final = ("error", "warn")


class DocumentValidator:
    """`validator(new_doc, old_doc=None)`: raises 121 (or logs, for `warn`) when `new_doc`
    fails. `old_doc` is the document an update replaces: under `moderate`, a document that
    already failed is not checked."""

    __slots__ = ("matcher", "moderate", "ns", "warn")

    def __init__(self, matcher: Matcher, ns: str, *, moderate: bool, warn: bool) -> None:
        self.matcher = matcher
        self.ns = ns
        self.moderate = moderate
        self.warn = warn

    def _passes(self, doc: dict[str, Any]) -> bool:
        # a validator that fails to evaluate (an $expr dividing by zero) does not pass
        try:
            return self.matcher.matches(doc)
        except MongoError:
            return False

    def __call__(self, doc: dict[str, Any], old_doc: dict[str, Any] | None = None) -> None:
        if self._passes(doc):
            return
        if self.moderate and old_doc is not None and not self._passes(old_doc):
            return
        info = validation_error_info(self.matcher, doc)
        if self.warn:
            LOG.warning("STORAGE", 20294, "conn", "Document would fail validation",
                        namespace=self.ns, document=doc, errInfo=info)
            return
        raise MongoError(ErrorCode.DocumentValidationFailure, "Document failed validation",
                         errInfo=info)


def make_validator(options: dict[str, Any], ns: str) -> DocumentValidator | None:
    """The collection's document validator, or None when it validates nothing."""
    spec = options.get("validator")
    if not spec or options.get("validationLevel") == "off":
        return None
    moderate = options.get("validationLevel") == "moderate"
    warn = options.get("validationAction") == "warn"
    matcher = compile_validator(spec, allow_encryption=not (moderate or warn))
    return DocumentValidator(matcher, ns, moderate=moderate, warn=warn)


def check_validation_options(command: str, db: str, name: str, body: dict[str, Any],
                             current: dict[str, Any] | None = None) -> None:
    """`validator`, `validationLevel`, `validationAction` of a create/collMod on `db.name`
    (whose options are `current` for collMod), checked as mongod does: nothing is written
    when they fail."""
    if not any(k in body for k in ("validator", "validationLevel", "validationAction")):
        return
    for key, allowed in (("validationLevel", LEVELS), ("validationAction", ACTIONS)):
        if key not in body:
            continue
        value = body[key]
        if not isinstance(value, str):
            raise MongoError(ErrorCode.TypeMismatch, f"BSON field '{command}.{key}' is the "
                             "wrong type, expected type string")
        if value not in allowed:
            raise MongoError(ErrorCode.BadValue, f"Enumeration value '{value}' for field "
                             f"'{command}.{key}' is not a valid value.")
    options = {**(current or {}), **body}
    if "validator" not in options:
        return
    # a new level or action re-parses the validator: encryption may become refused
    validator = options["validator"]
    if not isinstance(validator, dict):
        raise MongoError(ErrorCode.TypeMismatch, f"BSON field '{command}.validator' is the "
                         "wrong type, expected object")
    if not validator:
        return
    if db in ("admin", "local", "config"):
        raise MongoError(ErrorCode.InvalidOptions, f"Document validators are not allowed on "
                         f"collection {db}.{name} in the {db} internal database")
    if name.startswith("system.") and not name.startswith("system.buckets."):
        raise MongoError(ErrorCode.InvalidOptions,
                         f"Document validators not allowed on system collection {db}.{name}")
    # encryption keywords are refused under warn/moderate, keeping plaintext out of the log
    plain = options.get("validationAction") == "warn" or \
        options.get("validationLevel") == "moderate"
    try:
        matcher = compile_validator(validator, allow_encryption=not plain)
    except MongoError as exc:
        raise MongoError(exc.code, f"Parsing of collection validator failed :: caused by :: "
                         f"{exc.errmsg}", **exc.extra) from None
    if _rejects_every_id(matcher):
        LOG.warning("QUERY", 3216000, "conn", "$jsonSchema validator does not allow '_id' "
                    "field. This validator will reject all documents, consider adding '_id' "
                    "to the allowed fields.")


def _rejects_every_id(matcher: Matcher) -> bool:
    """A top-level `$jsonSchema` with `additionalProperties: false` that neither requires
    `_id` nor has a pattern for it (mongod warns, though `properties` may name `_id`)."""
    root = matcher.root
    for node in (root, *root.children):
        if node.kind != "jsonschema":
            continue
        schema = node.arg.schema
        if schema.additional_properties is False and "_id" not in schema.required and \
                not any(p.compiled.fullmatch("_id") for p in schema.pattern_properties):
            return True
    return False

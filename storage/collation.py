"""Collations: MongoDB's collation document parsed and checked, and the ICU collator it names.

    collator = parse_collation({"locale": "en", "strength": 2})   # None: the simple collation
    collator.compare("a", "A")        # -> 0
    collator.sort_key(["b", {"x": "A"}])  # like bson_order.sort_key, strings by ICU sort key
    collator.document                 # the normalised spec mongod shows (version "57.1")

Parsing follows mongod's collator factory: `locale` first (a string without NUL; "simple"
alone means no collator; ICU must recognise the locale exactly as written, else BadValue
"Field 'locale' is invalid in: ..." with ICU's suggestion), then each option with its type
check (TypeMismatch), its value check (FailedToParse) and finally unknown fields
(FailedToParse). Options left out take the locale's ICU defaults.

Only strings (and symbols, which decode as `str`) are collated; every other value keeps its
BSON order, and strings inside objects and arrays are collated too, as mongod's comparison
with a collator does. ICU comes from the `pyicu-wheels` binary wheels (module `icu`).
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Mapping
from typing import Any, Final

import icu
from bson import Code, Decimal128, Int64
from bson.dbref import DBRef

from storage.bson_order import RANK_ARRAY, RANK_OBJECT, RANK_STRING, sort_key, type_rank
from storage.bsontext import to_mongo_string
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["Collator", "parse_collation", "collation_key_fn", "COLLATION_VERSION",
           "is_simple_spec", "translate_fn",
           "COLLECTION_DEFAULT", "CollectionDefault", "has_string", "OperationCollation", "effective_collator"]

# mongod reports the ICU version it was built with; drivers and tests expect this string.
COLLATION_VERSION: Final = "57.1"

_A = icu.UCollAttribute
_V = icu.UCollAttributeValue
_CASE_FIRST: Final = {"upper": _V.UPPER_FIRST, "lower": _V.LOWER_FIRST, "off": _V.OFF}
_ALTERNATE: Final = {"non-ignorable": _V.NON_IGNORABLE, "shifted": _V.SHIFTED}
_STRENGTH: Final = {1: _V.PRIMARY, 2: _V.SECONDARY, 3: _V.TERTIARY, 4: _V.QUATERNARY,
                    5: _V.IDENTICAL}
# The last character of each variable group: ICU sets maxVariable to the group holding it.
_MAX_VARIABLE_TOP: Final = {"space": " ", "punct": "\uff64"}
_FIELDS: Final = ("locale", "caseLevel", "caseFirst", "strength", "numericOrdering",
                  "alternate", "maxVariable", "normalization", "backwards", "version")
_BOOL_ATTRS: Final = (("caseLevel", _A.CASE_LEVEL), ("numericOrdering", _A.NUMERIC_COLLATION),
                      ("normalization", _A.NORMALIZATION_MODE),
                      ("backwards", _A.FRENCH_COLLATION))


class Collator:
    """An ICU collator and the normalised collation document it was made from."""

    __slots__ = ("_icu", "document", "key", "locale", "string_key")

    def __init__(self, icu_collator: Any, document: dict[str, Any]) -> None:
        self._icu = icu_collator
        self.document = document
        self.locale: str = document["locale"]
        # ICU sort keys compare bytewise exactly as the collator compares strings.
        self.key = functools.lru_cache(maxsize=65536)(icu_collator.getSortKey)
        self.string_key = functools.lru_cache(maxsize=65536)(self._string_key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Collator) and other.document == self.document

    def __hash__(self) -> int:
        return hash(tuple(self.document.items()))

    def __repr__(self) -> str:
        return f"Collator({self.document!r})"

    def _string_key(self, s: str) -> str:
        # ICU ends a sort key with its only zero byte; as Latin-1 code points the bytes keep
        # their order, so the result orders (and encodes in index keys) like the collation.
        return self.key(s)[:-1].decode("latin-1")

    def translate(self, v: Any) -> Any:
        """`v` with every string (in objects and arrays too) replaced by its collation key
        string: the simple order of the result is this collation's order of `v`, as
        mongod's index keys under a collation."""
        t = type(v)
        if t is str:
            return self.string_key(v)
        if t is dict:
            return {k: self.translate(x) for k, x in v.items()}
        if t is list:
            return [self.translate(x) for x in v]
        if isinstance(v, Mapping):  # SON, RawBSONDocument
            return {k: self.translate(x) for k, x in v.items()}
        return v

    def compare(self, a: Any, b: Any) -> int:
        """-1, 0 or 1: BSON order with strings compared by this collation."""
        ka, kb = self.sort_key(a), self.sort_key(b)
        return (ka > kb) - (ka < kb)

    def sort_key(self, v: Any) -> tuple[Any, ...]:
        """`bson_order.sort_key` with every string replaced by its ICU sort key."""
        if type(v) is str:
            return (RANK_STRING, self.key(v))
        r = type_rank(v)
        if r == RANK_STRING:
            return (RANK_STRING, self.key(str(v)))
        if r == RANK_OBJECT:
            if isinstance(v, DBRef):
                v = v.as_doc()
            return (r, tuple((type_rank(x), k, self.sort_key(x)) for k, x in v.items()))
        if r == RANK_ARRAY:
            return (r, tuple(self.sort_key(x) for x in v))
        return sort_key(v)


def collation_key_fn(collator: Collator | None) -> Any:
    """The sort-key function of a collation (`bson_order.sort_key` for the simple one)."""
    return sort_key if collator is None else collator.sort_key


class CollectionDefault:
    """Marks an operation that gave no collation: it takes its collection's default."""

    _instance: CollectionDefault | None = None

    def __new__(cls) -> CollectionDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "COLLECTION_DEFAULT"


COLLECTION_DEFAULT: Final = CollectionDefault()

# What an operation asks for: a collator, None (simple) or its collection's default.
OperationCollation = Collator | None | CollectionDefault


def effective_collator(asked: OperationCollation, default: dict[str, Any] | None
                       ) -> Collator | None:
    """The collator an operation uses, given its collection's default collation document."""
    if isinstance(asked, CollectionDefault):
        return parse_collation(default) if default else None
    return asked


def translate_fn(collator: Collator | None) -> Any:
    """`Collator.translate`, or the identity for the simple collation."""
    return (lambda v: v) if collator is None else collator.translate


def has_string(v: Any) -> bool:
    """Whether a value holds a string anywhere (no collation changes how it compares
    otherwise)."""
    t = type(v)
    if t is str:
        return True
    if t is dict:
        return any(has_string(x) for x in v.values())
    if t is list:
        return any(has_string(x) for x in v)
    return False


def is_simple_spec(spec: Any) -> bool:
    return isinstance(spec, dict) and dict(spec) == {"locale": "simple"}


@functools.lru_cache(maxsize=256)
def _make(locale: str, options: tuple[tuple[str, Any], ...]) -> Collator:
    coll = icu.Collator.createInstance(icu.Locale(locale))
    opts = dict(options)
    for name, attr in _BOOL_ATTRS:
        if name in opts:
            coll.setAttribute(attr, _V.ON if opts[name] else _V.OFF)
    if "caseFirst" in opts:
        coll.setAttribute(_A.CASE_FIRST, _CASE_FIRST[opts["caseFirst"]])
    if "strength" in opts:
        coll.setAttribute(_A.STRENGTH, _STRENGTH[opts["strength"]])
    if "alternate" in opts:
        coll.setAttribute(_A.ALTERNATE_HANDLING, _ALTERNATE[opts["alternate"]])
    if "maxVariable" in opts:
        coll.setVariableTop(_MAX_VARIABLE_TOP[opts["maxVariable"]])
    doc: dict[str, Any] = {"locale": locale}
    doc["caseLevel"] = coll.getAttribute(_A.CASE_LEVEL) == _V.ON
    doc["caseFirst"] = {v: k for k, v in _CASE_FIRST.items()}[coll.getAttribute(_A.CASE_FIRST)]
    doc["strength"] = {v: k for k, v in _STRENGTH.items()}[coll.getAttribute(_A.STRENGTH)]
    doc["numericOrdering"] = coll.getAttribute(_A.NUMERIC_COLLATION) == _V.ON
    doc["alternate"] = {v: k for k, v in _ALTERNATE.items()}[
        coll.getAttribute(_A.ALTERNATE_HANDLING)]
    doc["maxVariable"] = opts.get("maxVariable", "punct")
    doc["normalization"] = coll.getAttribute(_A.NORMALIZATION_MODE) == _V.ON
    doc["backwards"] = coll.getAttribute(_A.FRENCH_COLLATION) == _V.ON
    doc["version"] = COLLATION_VERSION
    return Collator(coll, doc)


@functools.lru_cache(maxsize=256)
def _valid_locale(locale: str) -> str:
    """The locale ICU's collator actually serves for `locale` ("root" when none)."""
    try:
        name: str = icu.Collator.createInstance(icu.Locale(locale)).getLocale(
            icu.ULocDataLocaleType.VALID_LOCALE).getName()
    except icu.ICUError:  # an ID ICU cannot even parse: no locale it would use instead
        return "root"
    return name or "root"


# The collation document is MongoDB's `Collation` IDL struct (basic_types.idl): strict,
# `locale` required, typed fields, the enums and strength's 0..5 range checked by the
# parser, before the collator factory's own checks.
_IDL_TYPES: Final = {
    "locale": "string", "caseLevel": "bool", "caseFirst": "string", "strength": "safeInt",
    "numericOrdering": "bool", "alternate": "string", "maxVariable": "string",
    "normalization": "bool", "backwards": "bool", "version": "string",
}
_IDL_ENUMS: Final = {"caseFirst": ("upper", "lower", "off"),
                     "alternate": ("non-ignorable", "shifted"),
                     "maxVariable": ("punct", "space")}
_SAFE_INT_TYPES: Final = "[long, int, decimal, double]"


def _check_idl(spec: dict[str, Any], ctx: str) -> None:
    """The IDL parser's refusals of a collation document, `ctx` naming it in messages
    (``collation``, or ``create.collation`` where the command types the field)."""
    for name, v in spec.items():
        kind = _IDL_TYPES.get(name)
        if kind is None:
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field '{ctx}.{name}' is an unknown field.")
        if v is None and name == "locale":
            continue  # reads as missing
        if kind == "safeInt":
            if isinstance(v, bool) or not isinstance(v, int | float | Int64 | Decimal128):
                raise MongoError(ErrorCode.TypeMismatch,
                                 f"BSON field '{ctx}.{name}' is the wrong type "
                                 f"'{type_name(v)}', expected types {_SAFE_INT_TYPES}")
            n = _safe_int(v)
            if not 0 <= n <= 5:
                op, limit = (">=", 0) if n < 0 else ("<=", 5)
                raise MongoError(51024, f"BSON field '{name}' value must be {op} {limit}, "
                                 f"actual value '{n}'")
            continue
        want = str if kind == "string" else bool
        if type(v) is not want:
            raise MongoError(ErrorCode.TypeMismatch,
                             f"BSON field '{ctx}.{name}' is the wrong type '{type_name(v)}', "
                             f"expected type '{kind}'")
        allowed = _IDL_ENUMS.get(name)
        if allowed is not None and v not in allowed:
            raise MongoError(ErrorCode.BadValue, f"Enumeration value '{v}' for field "
                             f"'{ctx}.{name}' is not a valid value.")
    if spec.get("locale") is None:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         f"BSON field '{ctx}.locale' is missing but a required field")


def _safe_int(v: Any) -> int:
    """safeNumberInt: a number as int32 (NaN 0, beyond the range saturated, truncated)."""
    x = v.to_decimal() if isinstance(v, Decimal128) else v
    if isinstance(x, decimal.Decimal):
        if x.is_nan():
            return 0
        if x.is_infinite():
            return 2**31 - 1 if x > 0 else -(2**31)
        x = int(x)
    elif isinstance(x, float):
        if math.isnan(x):
            return 0
        if math.isinf(x):
            return 2**31 - 1 if x > 0 else -(2**31)
        x = int(x)
    return max(-(2**31), min(2**31 - 1, int(x)))


def parse_collation(spec: Any, ctx: str = "collation") -> Collator | None:
    """The collator a collation document names (None for ``{locale: "simple"}``); `ctx`
    names the document in the parser's messages.

    Raises MongoError with mongod's codes for anything mongod refuses.
    """
    if isinstance(spec, Code) or not isinstance(spec, dict):
        raise MongoError(ErrorCode.TypeMismatch, "collation must be an object")
    spec = dict(spec)
    shown = to_mongo_string(spec)
    _check_idl(spec, ctx)
    locale: str = spec["locale"]
    if "\0" in locale:
        raise MongoError(ErrorCode.BadValue,
                         f"Field 'locale' cannot contain null byte. Collation spec: {shown}")
    if locale == "simple":
        if len(spec) > 1:
            raise MongoError(ErrorCode.FailedToParse,
                             f"If locale=simple, no other fields should be present in: {shown}")
        return None
    if not locale:
        raise MongoError(ErrorCode.BadValue,
                         f"Field 'locale' cannot be the empty string in: {shown}")
    valid = _valid_locale(locale)
    if valid != locale:
        hint = f". Did you mean '{valid}'?" if valid != "root" else ""
        raise MongoError(ErrorCode.BadValue, f"Field 'locale' is invalid in: {shown}{hint}")
    options: dict[str, Any] = {}
    for name in ("caseLevel", "numericOrdering", "normalization", "backwards",
                 "caseFirst", "alternate", "maxVariable"):
        if name in spec:
            options[name] = spec[name]
    if "strength" in spec:
        strength = _safe_int(spec["strength"])
        if strength not in _STRENGTH:
            raise MongoError(ErrorCode.FailedToParse,
                             f"Field 'strength' must be an integer 1 through 5. Got: {strength}")
        options["strength"] = strength
    version = spec.get("version")
    if version is not None and version != COLLATION_VERSION:
        raise MongoError(ErrorCode.IncompatibleCollationVersion,
                         f"Requested collation version {version} but the only available "
                         f"collator version was {COLLATION_VERSION}. Requested collation spec: "
                         f"{shown}")
    return _make(locale, tuple(sorted(options.items())))

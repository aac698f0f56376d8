"""`$jsonSchema`: a schema document parsed into a tree of `Schema` nodes, with MongoDB's
keyword set and its parse errors (`json_schema_parser.cpp`'s codes and messages).

A `Schema` keeps each keyword's parsed form and the raw schema (for `errInfo`'s
`specifiedAs`, `title`, `description`); `query.match.jsonschema.evaluate` compiles it into a
predicate and `query.match.jsonschema.errors` explains a failure. The keywords supported are
MongoDB's; `$ref $schema default definitions format id` are refused as "not currently
supported", anything else as unknown, and the encryption keywords only in a collection
validator (`allow_encryption`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from bson import Decimal128

from query.match.regex import compile_regex
from storage.bson_order import sort_key
from storage.bsontext import to_mongo_string
from storage.errors import MongoError
from storage.vocabulary.bson_types import TYPE_ALIASES, BsonType, is_number, type_name
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["Schema", "Dependency", "PatternProperty", "parse_schema", "unordered_key",
           "NUMBER_TYPES", "KEYWORDS"]

NUMBER_TYPES: Final = frozenset({BsonType.DOUBLE, BsonType.INT32, BsonType.INT64,
                                 BsonType.DECIMAL128})

KEYWORDS: Final = frozenset({
    "additionalItems", "additionalProperties", "allOf", "anyOf", "bsonType", "dependencies",
    "description", "encrypt", "encryptMetadata", "enum", "exclusiveMaximum",
    "exclusiveMinimum", "items", "maxItems", "maxLength", "maxProperties", "maximum",
    "minItems", "minLength", "minProperties", "minimum", "multipleOf", "not", "oneOf",
    "pattern", "patternProperties", "properties", "required", "title", "type", "uniqueItems"})
_UNSUPPORTED: Final = frozenset({"$ref", "$schema", "default", "definitions", "format", "id"})

# JSON Schema's own type names (keyword "type"); "integer" is refused separately
_JSON_TYPES: Final[dict[str, frozenset[BsonType]]] = {
    "array": frozenset({BsonType.ARRAY}), "boolean": frozenset({BsonType.BOOL}),
    "null": frozenset({BsonType.NULL}), "number": NUMBER_TYPES,
    "object": frozenset({BsonType.OBJECT}), "string": frozenset({BsonType.STRING})}


@dataclass(frozen=True, slots=True)
class PatternProperty:
    regex: str
    compiled: re.Pattern[str]
    schema: Schema


@dataclass(frozen=True, slots=True)
class Dependency:
    """`dependencies: {name: [properties]}` (`properties`) or `{name: {schema}}` (`schema`)."""

    name: str
    properties: list[str] | None = None
    schema: Schema | None = None


@dataclass(eq=False)
class Schema:
    """One (sub)schema. `top` for the `$jsonSchema` document itself, which only ever sees
    whole documents: its scalar and array keywords are inert, as in MongoDB."""

    spec: dict[str, Any]
    top: bool
    type_keyword: str | None = None
    types: frozenset[BsonType] | None = None
    pattern: re.Pattern[str] | None = None
    max_length: int | None = None
    min_length: int | None = None
    multiple_of: Decimal | None = None
    maximum: Any = None
    exclusive_maximum: bool = False
    minimum: Any = None
    exclusive_minimum: bool = False
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    items: Schema | list[Schema] | None = None
    additional_items: bool | Schema | None = None
    encrypt: bool = False
    required: list[str] = field(default_factory=list)
    properties: dict[str, Schema] | None = None
    pattern_properties: list[PatternProperty] = field(default_factory=list)
    additional_properties: bool | Schema | None = None
    min_properties: int | None = None
    max_properties: int | None = None
    dependencies: list[Dependency] = field(default_factory=list)
    all_of: list[Schema] | None = None
    any_of: list[Schema] | None = None
    one_of: list[Schema] | None = None
    not_schema: Schema | None = None
    enum: list[Any] | None = None
    enum_keys: list[Any] = field(default_factory=list)

    @property
    def annotations(self) -> dict[str, Any]:
        """`title` and `description`, as errInfo repeats them."""
        return {k: self.spec[k] for k in ("title", "description") if k in self.spec}


def unordered_key(v: Any) -> Any:
    """A key equal for values MongoDB's unordered-fields comparison calls equal (enum,
    uniqueItems): documents compare whatever their field order."""
    if isinstance(v, dict):
        return sort_key({k: _unordered(v[k]) for k in sorted(v)})
    return sort_key(_unordered(v))


def _unordered(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _unordered(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [_unordered(e) for e in v]
    return v


def _err(code: ErrorCode, msg: str) -> MongoError:
    return MongoError(code, msg)


def _kw(name: str) -> str:
    return f"$jsonSchema keyword '{name}'"


def _type_of(v: Any) -> str:
    return type_name(v)


def parse_schema(spec: Any, *, allow_encryption: bool = False) -> Schema:
    """Parse a `$jsonSchema` argument; MongoError with MongoDB's code when it is invalid."""
    if not isinstance(spec, dict):
        raise _err(ErrorCode.TypeMismatch, "$jsonSchema must be an object")
    return _parse(spec, True, allow_encryption)


def _parse(spec: dict[str, Any], top: bool, enc: bool) -> Schema:
    for key in spec:
        if key not in KEYWORDS:
            if key in _UNSUPPORTED:
                raise _err(ErrorCode.FailedToParse, f"{_kw(key)} is not currently supported")
            raise _err(ErrorCode.FailedToParse, f"Unknown $jsonSchema keyword: {key}")
    for key in ("description", "title"):
        if key in spec and not isinstance(spec[key], str):
            raise _err(ErrorCode.TypeMismatch, f"{_kw(key)} must be of type string")
    s = Schema(spec, top)
    if "type" in spec and "bsonType" in spec:
        raise _err(ErrorCode.FailedToParse,
                   "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'")
    for kw in ("type", "bsonType"):
        if kw in spec and "encrypt" in spec:
            raise _err(ErrorCode.FailedToParse, f"{_kw('encrypt')} cannot be used in "
                       f"conjunction with '{kw}', 'encrypt' implies type 'bsonType::BinData'")
        if kw in spec:
            s.type_keyword = kw
            s.types = _parse_types(kw, spec[kw])
    _parse_scalar(s, spec)
    _parse_array(s, spec, enc)
    _parse_encryption(s, spec, enc)
    _parse_object(s, spec, enc)
    _parse_logical(s, spec, enc)
    return s


def _parse_types(kw: str, arg: Any) -> frozenset[BsonType]:
    if not isinstance(arg, str | list):
        raise _err(ErrorCode.TypeMismatch,
                   f"{_kw(kw)} must be either a string or an array of strings")
    names = [arg] if isinstance(arg, str) else arg
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str):
            raise _err(ErrorCode.TypeMismatch, f"{_kw(kw)} array elements must be strings")
        if name == "integer":
            raise _err(ErrorCode.FailedToParse,
                       "$jsonSchema type 'integer' is not currently supported.")
        if name in seen:
            raise _err(ErrorCode.FailedToParse, f"{_kw(kw)} has duplicate value: {name}")
        seen.add(name)
    out: set[BsonType] = set()
    for name in names:
        if kw == "type":
            found = _JSON_TYPES.get(name)
            if found is None:
                raise _err(ErrorCode.BadValue, f"Unknown type name alias: {name}")
            out |= found
        elif name == "number":
            out |= NUMBER_TYPES
        else:
            code = TYPE_ALIASES.get(name)
            if code is None:
                raise _err(ErrorCode.BadValue, f"Unknown type name alias: {name}")
            out.add(BsonType.MIN_KEY if code == -1 else BsonType(code))
    if not out:
        raise _err(ErrorCode.FailedToParse, f"{_kw(kw)} must name at least one type")
    return frozenset(out)


def _non_negative_long(kw: str, v: Any) -> int:
    shown = f"{kw}: {to_mongo_string(v)}"
    if not is_number(v):
        raise _err(ErrorCode.FailedToParse, f"Expected a number in: {shown}")
    if isinstance(v, float):
        if v != v:
            raise _err(ErrorCode.FailedToParse, f"Expected an integer, but found NaN in: {shown}")
        if v >= 2.0 ** 63 or v < -(2.0 ** 63):
            raise _err(ErrorCode.FailedToParse, f"Cannot represent as a 64-bit integer: {shown}")
        if not v.is_integer():
            raise _err(ErrorCode.FailedToParse, f"Expected an integer: {shown}")
        n = int(v)
    elif isinstance(v, Decimal128):
        d = v.to_decimal()
        if d.is_nan():
            raise _err(ErrorCode.FailedToParse, f"Expected an integer, but found NaN in: {shown}")
        if d != d.to_integral_value():
            raise _err(ErrorCode.FailedToParse, f"Expected an integer: {shown}")
        n = int(d)
    else:
        n = int(v)
    if n < 0:
        raise _err(ErrorCode.FailedToParse, f"Expected a positive number in: {shown}")
    return n


def _as_decimal(v: Any) -> Decimal:
    if isinstance(v, Decimal128):
        return v.to_decimal()
    if isinstance(v, float):
        # a double as MongoDB widens it to a decimal: 15 significant digits
        return Decimal(f"{v:.15g}") if v == v and abs(v) != float("inf") else Decimal(str(v))
    return Decimal(int(v))


def _parse_scalar(s: Schema, spec: dict[str, Any]) -> None:
    if "pattern" in spec:
        if not isinstance(spec["pattern"], str):
            raise _err(ErrorCode.TypeMismatch, f"{_kw('pattern')} must be a string")
        s.pattern = compile_regex(spec["pattern"], "")
    for kw in ("maxLength", "minLength"):
        if kw in spec:
            setattr(s, "max_length" if kw == "maxLength" else "min_length",
                    _non_negative_long(kw, spec[kw]))
    if "multipleOf" in spec:
        m = spec["multipleOf"]
        if not is_number(m):
            raise _err(ErrorCode.TypeMismatch, f"{_kw('multipleOf')} must be a number")
        d = _as_decimal(m)
        if d.is_nan() or d <= 0:
            raise _err(ErrorCode.FailedToParse, f"{_kw('multipleOf')} must have a positive value")
        s.multiple_of = d
    for bound, exclusive in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
        if bound in spec:
            is_excl = False
            if exclusive in spec:
                if not isinstance(spec[exclusive], bool):
                    raise _err(ErrorCode.TypeMismatch, f"{_kw(exclusive)} must be a boolean")
                is_excl = spec[exclusive]
            if not is_number(spec[bound]):
                raise _err(ErrorCode.TypeMismatch, f"{_kw(bound)} must be a number")
            setattr(s, bound, spec[bound])
            setattr(s, "exclusive_" + bound, is_excl)
        elif exclusive in spec:
            raise _err(ErrorCode.FailedToParse,
                       f"{_kw(bound)} must be a present if {exclusive} is present")


def _parse_array(s: Schema, spec: dict[str, Any], enc: bool) -> None:
    for kw in ("minItems", "maxItems"):
        if kw in spec:
            setattr(s, "min_items" if kw == "minItems" else "max_items",
                    _non_negative_long(kw, spec[kw]))
    if "uniqueItems" in spec:
        if not isinstance(spec["uniqueItems"], bool):
            raise _err(ErrorCode.TypeMismatch, f"{_kw('uniqueItems')} must be a boolean")
        s.unique_items = spec["uniqueItems"]
    if "items" in spec:
        items = spec["items"]
        if isinstance(items, list):
            parsed = []
            for sub in items:
                if not isinstance(sub, dict):
                    raise _err(ErrorCode.TypeMismatch, f"{_kw('items')} requires that each "
                               f"element of the array is an object, but found a {_type_of(sub)}")
                parsed.append(_parse(sub, False, enc))
            s.items = parsed
        elif isinstance(items, dict):
            s.items = _parse(items, False, enc)
        else:
            raise _err(ErrorCode.TypeMismatch,
                       f"{_kw('items')} must be an array or an object, not {_type_of(items)}")
    if "additionalItems" in spec:
        extra = spec["additionalItems"]
        if isinstance(extra, bool):
            s.additional_items = extra
        elif isinstance(extra, dict):
            s.additional_items = _parse(extra, False, enc)
        else:
            raise _err(ErrorCode.TypeMismatch, f"{_kw('additionalItems')} must be either an "
                       f"object or a boolean, but got a {_type_of(extra)}")


def _parse_encryption(s: Schema, spec: dict[str, Any], enc: bool) -> None:
    has_encrypt, has_meta = "encrypt" in spec, "encryptMetadata" in spec
    if not (has_encrypt or has_meta):
        return
    if not enc:
        raise _err(ErrorCode.QueryFeatureNotAllowed,
                   "Encryption-related validator keywords are not allowed in this context")
    if has_encrypt and has_meta:
        raise _err(ErrorCode.FailedToParse,
                   "Cannot specify both $jsonSchema keywords 'encrypt' and 'encryptMetadata'")
    if has_meta:
        meta = spec["encryptMetadata"]
        if not isinstance(meta, dict):
            raise _err(ErrorCode.TypeMismatch, f"{_kw('encryptMetadata')} must be an object ")
        if not meta:
            raise _err(ErrorCode.FailedToParse,
                       f"{_kw('encryptMetadata')} cannot be an empty object ")
        _check_idl_fields("encryptMetadata", meta, ("algorithm", "keyId"))
    if has_encrypt:
        info = spec["encrypt"]
        if not isinstance(info, dict):
            raise _err(ErrorCode.TypeMismatch, f"{_kw('encrypt')} must be an object ")
        _check_idl_fields("encrypt", info, ("bsonType", "algorithm", "keyId"))
        s.encrypt = True


def _check_idl_fields(struct: str, doc: dict[str, Any], known: tuple[str, ...]) -> None:
    for key in doc:
        if key not in known:
            raise MongoError(40415, f"BSON field '{struct}.{key}' is an unknown field.")


def _parse_object(s: Schema, spec: dict[str, Any], enc: bool) -> None:
    if "required" in spec:
        req = spec["required"]
        if not isinstance(req, list):
            raise _err(ErrorCode.TypeMismatch, f"{_kw('required')} must be an array, but found "
                       f"an element of type {_type_of(req)}")
        names: list[str] = []
        for name in req:
            if not isinstance(name, str):
                raise _err(ErrorCode.TypeMismatch, f"{_kw('required')} must be an array of "
                           f"strings, but found an element of type: {_type_of(name)}")
            if name in names:
                raise _err(ErrorCode.FailedToParse,
                           f"{_kw('required')} array cannot contain duplicate values")
            names.append(name)
        if not names:
            raise _err(ErrorCode.FailedToParse, f"{_kw('required')} cannot be an empty array")
        s.required = names
    if "properties" in spec:
        props = spec["properties"]
        if not isinstance(props, dict):
            raise _err(ErrorCode.TypeMismatch, f"{_kw('properties')} must be an object")
        s.properties = {}
        for name, sub in props.items():
            if not isinstance(sub, dict):
                raise _err(ErrorCode.TypeMismatch,
                           f"Nested schema for $jsonSchema property '{name}' must be an object")
            s.properties[name] = _parse(sub, False, enc)
    if "patternProperties" in spec:
        pats = spec["patternProperties"]
        if not isinstance(pats, dict):
            raise _err(ErrorCode.TypeMismatch, f"{_kw('patternProperties')} must be an object")
        for regex, sub in pats.items():
            if not isinstance(sub, dict):
                raise _err(ErrorCode.TypeMismatch, f"{_kw('patternProperties')} has property "
                           f"'{regex}' which is not an object")
            s.pattern_properties.append(
                PatternProperty(regex, compile_regex(regex, ""), _parse(sub, False, enc)))
    if "additionalProperties" in spec:
        extra = spec["additionalProperties"]
        if isinstance(extra, bool):
            s.additional_properties = extra
        elif isinstance(extra, dict):
            s.additional_properties = _parse(extra, False, enc)
        else:
            raise _err(ErrorCode.TypeMismatch,
                       f"{_kw('additionalProperties')} must be an object or a boolean")
    for kw in ("minProperties", "maxProperties"):
        if kw in spec:
            setattr(s, "min_properties" if kw == "minProperties" else "max_properties",
                    _non_negative_long(kw, spec[kw]))
    if "dependencies" in spec:
        _parse_dependencies(s, spec["dependencies"], enc)


def _parse_dependencies(s: Schema, deps: Any, enc: bool) -> None:
    where = "in $jsonSchema keyword 'dependencies'"
    if not isinstance(deps, dict):
        raise _err(ErrorCode.TypeMismatch, f"{_kw('dependencies')} must be an object")
    for name, dep in deps.items():
        if isinstance(dep, dict):
            s.dependencies.append(Dependency(name, schema=_parse(dep, s.top, enc)))
        elif isinstance(dep, list):
            if not dep:
                raise _err(ErrorCode.FailedToParse,
                           f"property '{name}' {where} cannot be an empty array")
            props: list[str] = []
            for p in dep:
                if not isinstance(p, str):
                    raise _err(ErrorCode.TypeMismatch, f"array '{name}' {where} can only "
                               f"contain strings, but found element of type: {_type_of(p)}")
                if p in props:
                    raise _err(ErrorCode.FailedToParse,
                               f"array '{name}' {where} contains duplicate element: {p}")
                props.append(p)
            s.dependencies.append(Dependency(name, properties=props))
        elif name in ("title", "description") and isinstance(dep, str):
            continue
        else:
            raise _err(ErrorCode.TypeMismatch,
                       f"property '{name}' {where} must be either an object or an array")


def _parse_logical(s: Schema, spec: dict[str, Any], enc: bool) -> None:
    for kw, attr in (("allOf", "all_of"), ("anyOf", "any_of"), ("oneOf", "one_of")):
        if kw not in spec:
            continue
        arg = spec[kw]
        if not isinstance(arg, list):
            raise _err(ErrorCode.TypeMismatch, f"{_kw(kw)} must be an array")
        if not arg:
            raise _err(ErrorCode.BadValue, f"{_kw(kw)} must be a non-empty array")
        subs = []
        for sub in arg:
            if not isinstance(sub, dict):
                raise _err(ErrorCode.TypeMismatch, f"{_kw(kw)} must be an array of objects, "
                           f"but found an element of type {_type_of(sub)}")
            subs.append(_parse(sub, s.top, enc))
        setattr(s, attr, subs)
    if "not" in spec:
        arg = spec["not"]
        if not isinstance(arg, dict):
            raise _err(ErrorCode.TypeMismatch, f"{_kw('not')} must be an object, but found an "
                       f"element of type {_type_of(arg)}")
        s.not_schema = _parse(arg, s.top, enc)
    if "enum" in spec:
        arg = spec["enum"]
        if not isinstance(arg, list):
            raise _err(ErrorCode.TypeMismatch, f"{_kw('enum')} must be an array, but found an "
                       f"element of type {_type_of(arg)}")
        if not arg:
            raise _err(ErrorCode.FailedToParse, f"{_kw('enum')} cannot be an empty array")
        keys: list[Any] = []
        for v in arg:
            k = unordered_key(v)
            if k in keys:
                raise _err(ErrorCode.FailedToParse,
                           f"{_kw('enum')} array cannot contain duplicate values.")
            keys.append(k)
        s.enum = arg
        s.enum_keys = keys

"""`$jsonSchema` (MongoDB's JSON Schema draft 4 subset): `schema` parses, `evaluate`
matches, `errors` explains a failure in `errInfo`'s words.

    js = compile_json_schema({"required": ["a"]})
    js.matches({"a": 1})            # -> True
"""

from __future__ import annotations

from typing import Any

from query.match.jsonschema.evaluate import compile_schema
from query.match.jsonschema.schema import Schema, parse_schema

__all__ = ["JsonSchema", "compile_json_schema"]


class JsonSchema:
    """A parsed and compiled `$jsonSchema`: `schema` (the tree), `matches(doc)`."""

    __slots__ = ("matches", "schema", "spec")

    def __init__(self, spec: dict[str, Any], schema: Schema) -> None:
        self.spec = spec
        self.schema = schema
        self.matches = compile_schema(schema)


def compile_json_schema(spec: Any, *, allow_encryption: bool = False) -> JsonSchema:
    """Parse and compile a `$jsonSchema` argument (MongoError when invalid)."""
    return JsonSchema(spec, parse_schema(spec, allow_encryption=allow_encryption))

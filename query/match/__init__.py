"""The query matcher: a filter document compiled once, then applied to many documents.

    m = compile_filter({"a.b": {"$gt": 5}, "tags": "x"})
    m.matches(doc)                 # -> bool
    m.match_position(doc)          # -> (bool, array position for the positional $ or None)

Errors in the filter raise `storage.errors.MongoError` with MongoDB's code and
message when `compile_filter` is called, never while matching.
"""

from __future__ import annotations

from typing import Any

from query.match.compiler import (
    ENCRYPTION_ALLOWED,
    PARSING_VALIDATOR,
    MatchDetails,
    Node,
    expr_truthy,
    parse_filter,
)

__all__ = ["Matcher", "MatchDetails", "Node", "compile_filter", "compile_validator",
           "expr_truthy"]


class Matcher:
    """A compiled filter. `root` is the predicate tree (see `query.match.compiler.Node`)."""

    __slots__ = ("_fn", "root", "spec")

    def __init__(self, spec: dict[str, Any], root: Node) -> None:
        self.spec = spec
        self.root = root
        self._fn = root.fn

    def matches(self, doc: dict[str, Any]) -> bool:
        return self._fn(doc, None)

    __call__ = matches

    def match_position(self, doc: dict[str, Any]) -> tuple[bool, int | None]:
        """Whether `doc` matches, and the array position the positional ``$`` refers to."""
        details = MatchDetails()
        ok = self._fn(doc, details)
        return ok, (details.pos if ok else None)

    def fields(self) -> set[str]:
        """Every field path the filter reads (``$expr`` contents excluded)."""
        out: set[str] = set()

        def walk(n: Node) -> None:
            if n.path is not None:
                out.add(n.path)
            for c in n.children:
                walk(c)
        walk(self.root)
        return out

    @property
    def has_expr(self) -> bool:
        """Whether the filter may read fields `fields()` does not name ($expr, $jsonSchema)."""
        def walk(n: Node) -> bool:
            return n.kind in ("expr", "jsonschema") or any(walk(c) for c in n.children)
        return walk(self.root)

    @property
    def is_trivial(self) -> bool:
        """True when the filter matches every document (``{}``)."""
        return self.root.kind == "and" and not self.root.children

    def __repr__(self) -> str:
        return f"Matcher({self.spec!r})"


def compile_filter(spec: dict[str, Any] | None, *,
                   variables: dict[str, Any] | None = None) -> Matcher:
    """Compile a query filter. `variables` (a find's ``let``) reach ``$expr``."""
    if spec is None:
        spec = {}
    return Matcher(spec, parse_filter(spec, variables=variables))


def compile_validator(spec: dict[str, Any], *, allow_encryption: bool = True) -> Matcher:
    """Compile a collection's `validator`: a filter whose `$jsonSchema` may use the
    encryption keywords (`encrypt`, `encryptMetadata`) when `allow_encryption`."""
    token = PARSING_VALIDATOR.set(True)
    enc_token = ENCRYPTION_ALLOWED.set(allow_encryption)
    try:
        return Matcher(spec, parse_filter(spec))
    finally:
        ENCRYPTION_ALLOWED.reset(enc_token)
        PARSING_VALIDATOR.reset(token)

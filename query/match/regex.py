"""Regular expressions as MongoDB runs them (PCRE), approximated with Python's `re`.

Accepted options: ``i`` (case-insensitive), ``m`` (multi-line anchors), ``s`` (dot
matches newline), ``x`` (extended: whitespace and ``#`` comments ignored), and
``u`` (always on in Python). PCRE's ``(?<name>...)`` named groups are rewritten to
Python's ``(?P<name>...)``. Compiled patterns are cached.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final

from bson import Regex

from storage.errors import MongoError

__all__ = ["compile_regex", "regex_parts", "is_regex_value"]

_FLAG_BITS: Final = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE,
                     "u": 0, "l": 0}
_NAMED_GROUP: Final = re.compile(r"\(\?<(?=[A-Za-z_])")


def is_regex_value(v: Any) -> bool:
    return isinstance(v, Regex | re.Pattern)


def regex_parts(v: Any) -> tuple[str, str]:
    """(pattern, options letters in alphabetical order) of a bson `Regex` or `re.Pattern`."""
    if isinstance(v, Regex):
        flags = v.flags
        if isinstance(flags, str):
            return v.pattern if isinstance(v.pattern, str) else v.pattern.decode(), "".join(
                sorted(flags))
        return (v.pattern if isinstance(v.pattern, str) else v.pattern.decode(),
                _letters_from_bits(flags))
    if isinstance(v, re.Pattern):
        return v.pattern if isinstance(v.pattern, str) else v.pattern.decode(), _letters_from_bits(
            v.flags)
    raise TypeError(f"not a regex: {type(v).__name__}")


def _letters_from_bits(bits: int) -> str:
    out = []
    if bits & re.IGNORECASE:
        out.append("i")
    if bits & re.MULTILINE:
        out.append("m")
    if bits & re.DOTALL:
        out.append("s")
    if bits & re.VERBOSE:
        out.append("x")
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def compile_regex(pattern: str, options: str = "") -> re.Pattern[str]:
    flags = 0
    for ch in options:
        bit = _FLAG_BITS.get(ch)
        if bit is None:
            raise MongoError(51108, f"invalid flag in regex options: {ch}")
        flags |= bit
    if "\0" in pattern:
        raise MongoError(51109, "Regular expression cannot contain an embedded null byte")
    py_pattern = _NAMED_GROUP.sub("(?P<", pattern)
    try:
        return re.compile(py_pattern, flags)
    except re.error as exc:
        raise MongoError(51091, f"Regular expression is invalid: {exc}") from None


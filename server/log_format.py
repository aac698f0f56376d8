"""One log line as mongod's JSON, with its large attributes truncated as mongod's logv2 does.

`format_line(head, attr, limit)` writes ``{<head>,"attr":{...}}``. With a limit (the
`maxLogSizeKB` parameter in bytes; 0 turns truncation off) an attribute that is a
document or an array is written element by element, and the first value whose text
would take the line past `limit` bytes is left out together with everything after it
in its document and in every enclosing one; a string attribute keeps its first `limit`
bytes. The line then says what was cut, as mongod's does:

    "truncated":{"command":{"documents":{"0":{"x":{"type":"string","size":48000005}}}}},
    "size":{"command":48000080}

`truncated` follows the path of field names down to the value left out, with its BSON
type name and its value size in bytes; `size` is the whole attribute's BSON size (none
for a string attribute). Values are written in relaxed Extended JSON, as the log always
was; a line whose attributes fit is written in one go.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import bson
from bson import json_util
from bson.binary import Binary
from bson.raw_bson import RawBSONDocument

from storage.bsonutil import CODEC_OPTIONS
from storage.vocabulary.bson_types import type_name

__all__ = ["format_line", "JSON_OPTIONS"]

JSON_OPTIONS: Final = json_util.JSONOptions(json_mode=json_util.JSONMode.RELAXED)
_SEPARATORS: Final = (",", ":")


def _dumps(value: Any) -> str:
    return json_util.dumps(value, json_options=JSON_OPTIONS, separators=_SEPARATORS)


def format_line(head: dict[str, Any], attr: dict[str, Any] | None, limit: int) -> str:
    """The line for `head` (the fields before `attr`) and its attributes, cut at `limit`
    bytes as described above (no cut when `limit` is 0)."""
    if not attr:
        return _dumps(head)
    whole = {**head, "attr": attr}
    if limit <= 0 or _lower_bound(attr, limit) <= limit:
        text = _dumps(whole)
        if limit <= 0 or len(text) <= limit:
            return text  # every value fits, so none is cut
    return _Writer(limit).line(head, attr)


def _lower_bound(value: Any, budget: int) -> int:
    """At most the length of `value`'s JSON text, or more than `budget` as soon as that
    is certain: a cheap test of whether a value may fit, that never reads far past
    `budget` bytes' worth of a large value."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, bytes | Binary):
        return len(value) * 4 // 3
    if isinstance(value, RawBSONDocument):
        return len(value.raw) // 4  # an element's JSON is rarely under a quarter of its BSON
    if isinstance(value, Mapping):
        total = 2
        for k, v in value.items():
            total += len(k) + 4 + _lower_bound(v, budget - total)
            if total > budget:
                return total
        return total
    if isinstance(value, list | tuple):
        total = 2
        for v in value:
            total += 1 + _lower_bound(v, budget - total)
            if total > budget:
                return total
        return total
    return 1


def _value_size(value: Any) -> int:
    """The size of `value` as a BSON element's value (mongod's `valuesize()`)."""
    if isinstance(value, RawBSONDocument):
        return len(value.raw)
    if type(value) is str:
        return len(value.encode("utf-8", "surrogatepass")) + 5  # length, text, NUL
    try:
        return len(bson.encode({"": value}, codec_options=CODEC_OPTIONS)) - 7
    except Exception:  # not a BSON value: say so by its text's length
        return len(str(value))


def _object_size(value: Any) -> int:
    """A document's or an array's BSON size (mongod's `objsize()`)."""
    if isinstance(value, RawBSONDocument):
        return len(value.raw)
    if not isinstance(value, Mapping):
        value = {str(i): v for i, v in enumerate(value)}
    try:
        return len(bson.encode(value, codec_options=CODEC_OPTIONS))
    except Exception:
        return 0


class _Writer:
    """Writes one line piece by piece, counting its length (the text is ASCII: Extended
    JSON escapes everything else, so characters are bytes)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    def _put(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def _rollback(self, mark: tuple[int, int]) -> None:
        del self.parts[mark[0]:]
        self.size = mark[1]

    def line(self, head: dict[str, Any], attr: dict[str, Any]) -> str:
        self._put(_dumps(head)[:-1])
        self._put(',"attr":{')
        truncated: dict[str, Any] = {}
        sizes: dict[str, Any] = {}
        for i, (name, value) in enumerate(attr.items()):
            self._put(("," if i else "") + json.dumps(name) + ":")
            if isinstance(value, Mapping | list | tuple):
                cut = self._container(value)
                if cut is not None:
                    truncated[name] = cut
                    sizes[name] = _object_size(value)
            elif isinstance(value, str) and not isinstance(value, bson.Code):
                cut_string = self._string(value)
                if cut_string is not None:
                    truncated[name] = cut_string
            else:
                self._put(_dumps(value))
        self._put("}")
        if truncated:
            self._put(',"truncated":' + _dumps(truncated))
            self._put(',"size":' + _dumps(sizes))
        self._put("}")
        return "".join(self.parts)

    def _string(self, value: str) -> dict[str, Any] | None:
        """A string attribute: its escaped text cut to `limit` bytes (never inside an
        escape sequence)."""
        text = json.dumps(value)
        if len(text) - 2 <= self.limit:
            self._put(text)
            return None
        lo, hi = 0, min(len(value), self.limit)  # the longest prefix whose text fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(json.dumps(value[:mid])) - 2 <= self.limit:
                lo = mid
            else:
                hi = mid - 1
        self._put(json.dumps(value[:lo]))
        return {"type": "string", "size": len(text) - 2}

    def _container(self, value: Any) -> dict[str, Any] | None:
        """Write a document or an array; the report of what was cut, if anything was."""
        is_array = not isinstance(value, Mapping)
        items = enumerate(value) if is_array else value.items()
        self._put("[" if is_array else "{")
        cut: dict[str, Any] | None = None
        for i, (key, item) in enumerate(items):
            cut = self._element(str(key), item, separator=i > 0, with_name=not is_array)
            if cut is not None:
                break
        self._put("]" if is_array else "}")
        return cut

    def _element(self, name: str, value: Any, *, separator: bool, with_name: bool
                 ) -> dict[str, Any] | None:
        mark = (len(self.parts), self.size)
        if separator:
            self._put(",")
        if with_name:
            self._put(json.dumps(name) + ":")
        budget = self.limit - self.size
        if isinstance(value, Mapping | list | tuple):
            if _lower_bound(value, budget) <= budget:
                whole = _dumps(value)
                if len(whole) <= budget:
                    self._put(whole)
                    return None
            inner = self._container(value)
            return None if inner is None else {name: inner}
        text: str | None = None  # None: certainly too long, not worth writing out
        if not isinstance(value, str | bytes | Binary) or _lower_bound(value, budget) <= budget:
            text = _dumps(value)
        if text is None or len(text) > budget:
            self._rollback(mark)
            return {name: {"type": type_name(value), "size": _value_size(value)}}
        self._put(text)
        return None

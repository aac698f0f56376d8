"""Decoding chosen paths of an object column (`decompress_paths`).

A path is a dotted field name ("a", "b.c"; an array element is named by its index,
"a.0"). For each row the result holds the value found at that path, or None when the
row is missing or has no such field. Objects stored whole (regular mode) are searched in
their bytes; in interleaved sections only the sub-field streams under a requested path
are decoded, the others are merely counted to stay in step. (So deltas of streams that
are not requested are not checked; their blocks and control bytes are.)
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.vocabulary.bson_types import T_ARRAY, T_OBJECT

from .control import is_interleaved_start, is_literal
from .decoder import (
    _ENTER,
    _EXIT,
    _SCALAR,
    DEFAULT_MAX_VALUES,
    Element,
    _Budget,
    _control_elements,
    _err,
    _InterleavedSection,
    _literal,
    _Stream,
)
from .rawbson import iter_elements

__all__ = ["decode_paths", "extract_path"]

# How a path maps onto an interleaved reference: a stream, a sub-object span of the
# schema, a stream holding a whole array (legacy mode) to search further, or nothing.
Target = tuple


def extract_path(elem: Element | None, comps: Sequence[bytes]) -> Element | None:
    """The element at `comps` inside an object/array element (None when absent)."""
    for comp in comps:
        if elem is None or elem[0] not in (T_OBJECT, T_ARRAY):
            return None
        doc = elem[1]
        found = None
        for t, name, vs, ve in iter_elements(doc, 0, len(doc)):
            if name == comp:
                found = (t, doc[vs:ve])
                break
        elem = found
    return elem


def _resolve(entries: list, comps: Sequence[bytes]) -> Target:
    lo, hi = 0, len(entries)
    for depth, comp in enumerate(comps):
        k = lo + 1
        found: Target | None = None
        while k < hi - 1:
            entry = entries[k]
            if entry[0] == _SCALAR:
                if entry[1] == comp:
                    rest = comps[depth + 1 :]
                    found = ("stream", entry[2]) if not rest else ("inside", entry[2], rest)
                    break
                k += 1
            else:  # _ENTER: find its EXIT
                level = 0
                j = k
                while True:
                    if entries[j][0] == _ENTER:
                        level += 1
                    elif entries[j][0] == _EXIT:
                        level -= 1
                        if level == 0:
                            break
                    j += 1
                if entry[1] == comp:
                    found = ("span", k, j + 1)
                    break
                k = j + 1
        if found is None:
            return ("none",)
        if found[0] != "span":
            return found
        lo, hi = found[1], found[2]
    return ("span", lo, hi)


def _streams_of(entries: list, target: Target) -> list[int]:
    if target[0] in ("stream", "inside"):
        return [target[1]]
    if target[0] == "span":
        return [e[2] for e in entries[target[1] : target[2]] if e[0] == _SCALAR]
    return []


def decode_paths(
    column: bytes | bytearray | memoryview,
    paths: Sequence[str],
    max_values: int = DEFAULT_MAX_VALUES,
) -> dict[str, list[Element | None]]:
    data = bytes(column)
    end = len(data)
    if end == 0:
        raise _err("BSON Column encoding is empty")
    split = {p: [c.encode() for c in p.split(".")] for p in paths}
    for p, comps in split.items():
        if not p or not all(comps):
            raise ValueError(f"invalid path {p!r}")
    out: dict[str, list[Element | None]] = {p: [] for p in paths}
    budget = _Budget(max_values)
    stream = _Stream()
    pos = 0

    def add_rows(rows: list[Element | None]) -> None:
        for p, comps in split.items():
            target = out[p]
            last: Element | None = None
            found: Element | None = None
            for r in rows:
                # repeats share their bytes: search a repeated (maybe large) object once
                if r is None or last is None or r[1] is not last[1] or r[0] != last[0]:
                    found = extract_path(r, comps)
                    last = r
                target.append(found)

    while True:
        if pos >= end:
            raise _err("Invalid BSON Column encoding has overflowed buffer")
        control = data[pos]
        if control == 0:
            if pos + 1 != end:
                raise _err("Final EOO found before reaching end of buffer")
            return out
        if is_literal(control):
            elem, pos = _literal(data, pos, end)
            budget.take(1)
            stream.load_literal(*elem)
            add_rows([elem])
        elif is_interleaved_start(control):
            section = _InterleavedSection(data, pos, end, budget, wanted=None)
            targets = {p: _resolve(section.entries, comps) for p, comps in split.items()}
            wanted = [False] * len(section.streams)
            for target in targets.values():
                for k in _streams_of(section.entries, target):
                    wanted[k] = True
            section.wanted = wanted
            last_vals = None
            while True:
                vals = section.next_values()
                if vals is None:
                    break
                budget.take(1)
                last_vals = vals
                for p, target in targets.items():
                    kind = target[0]
                    if kind == "stream":
                        out[p].append(vals[target[1]])
                    elif kind == "inside":
                        out[p].append(extract_path(vals[target[1]], target[2]))
                    elif kind == "span":
                        out[p].append(section.assemble(vals, target[1], target[2]))
                    else:
                        out[p].append(None)
            pos = section.pos
            stream = _Stream()
            # Zero deltas right after a section would repeat its last row (MongoDB's
            # builder never writes that); it is known only when every stream was decoded.
            if last_vals is not None and all(wanted):
                stream.after_interleaved(section.assemble(last_vals))
        else:
            elems, pos = _control_elements(data, pos, end, stream, budget)
            add_rows(elems)

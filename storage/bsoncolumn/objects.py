"""Object helpers for interleaved mode: lock-step traversal and reference merging.

Interleaved mode encodes a run of objects (or arrays) as one delta stream per scalar
field of a *reference object* that holds a superset of their fields in order. These
functions decide whether an object fits a reference (`traverse_lock_step`), extend a
reference with an object's new fields (`merge_objects`), and answer the small questions
the builder asks (`contains_scalars`, `has_empty_object`). They follow the rules of
MongoDB's BSONColumnBuilder: fields keep their order, an object may lack fields of the
reference, a scalar may not become an object, and empty sub-objects must match exactly.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from storage.vocabulary.bson_types import T_ARRAY, T_OBJECT

from .rawbson import iter_elements

__all__ = [
    "EMPTY_OBJECT",
    "contains_scalars",
    "has_empty_object",
    "merge_objects",
    "traverse_lock_step",
]

EMPTY_OBJECT = b"\x05\x00\x00\x00\x00"
_I32 = struct.Struct("<i")

Elem = tuple[int, bytes]  # (type, value bytes)
ElementFunc = Callable[[Elem, Elem | None], None]


def _is_obj(t: int) -> bool:
    return t in (T_OBJECT, T_ARRAY)


def contains_scalars(obj: bytes, start: int = 0, end: int | None = None) -> bool:
    end = len(obj) if end is None else end
    for t, _name, vs, ve in iter_elements(obj, start, end):
        if not _is_obj(t):
            return True
        if contains_scalars(obj, vs, ve):
            return True
    return False


def _traverse_until_empty(obj: bytes, start: int, end: int, fn: ElementFunc | None) -> bool:
    """Report every scalar as missing; True (stop) at the first empty sub-object."""
    for t, _name, vs, ve in iter_elements(obj, start, end):
        if _is_obj(t):
            if _traverse_until_empty(obj, vs, ve, fn):
                return True
        elif fn is not None:
            fn((t, obj[vs:ve]), None)
    return end - start == 5


def has_empty_object(obj: bytes, start: int = 0, end: int | None = None) -> bool:
    return _traverse_until_empty(obj, start, len(obj) if end is None else end, None)


def _lock_step(ref: bytes, rs: int, re: int, obj: bytes, os: int, oe: int, fn: ElementFunc) -> bool:
    elems = list(iter_elements(obj, os, oe))
    n = len(elems)
    i = 0
    for t, name, vs, ve in iter_elements(ref, rs, re):
        if _is_obj(t):
            if i < n and elems[i][1] == name:
                ot, _oname, ovs, ove = elems[i]
                if ot != t:
                    return False
                if (ve - vs == 5) != (ove - ovs == 5):
                    return False
                i += 1
                if not _lock_step(ref, vs, ve, obj, ovs, ove, fn):
                    return False
            elif _traverse_until_empty(ref, vs, ve, fn):
                return False
        else:
            if i < n and elems[i][1] == name:
                ot, _oname, ovs, ove = elems[i]
                if _is_obj(ot):
                    return False  # scalar to object would compress badly
                fn((t, ref[vs:ve]), (ot, obj[ovs:ove]))
                i += 1
            else:
                fn((t, ref[vs:ve]), None)
    return i == n


def traverse_lock_step(ref: bytes, obj: bytes, fn: ElementFunc) -> bool:
    """Walk `ref` and `obj` together, calling fn(ref scalar, obj scalar or None).

    Returns False when `obj` is not compatible with `ref` (fields out of order, extra
    fields, type changes between scalar and object, empty-object mismatches).
    """
    return _lock_step(ref, 0, len(ref), obj, 0, len(obj), fn)


def _element(t: int, name: bytes, value: bytes) -> bytes:
    return bytes((t,)) + name + b"\x00" + value


def _merge(ref: bytes, rs: int, re: int, obj: bytes, os: int, oe: int) -> bytes | None:
    refs = list(iter_elements(ref, rs, re))
    objs = list(iter_elements(obj, os, oe))
    out: list[bytes] = []
    names: set[bytes] = set()
    ri = oi = 0
    while ri < len(refs) and oi < len(objs):
        rt, rname, rvs, rve = refs[ri]
        ot, oname, ovs, ove = objs[oi]
        if rname == oname:
            r_obj = _is_obj(rt)
            o_obj = _is_obj(ot)
            if r_obj and o_obj and rt == ot:
                if (rve - rvs == 5) != (ove - ovs == 5):
                    return None
                if rname in names:
                    return None
                sub = _merge(ref, rvs, rve, obj, ovs, ove)
                if sub is None:
                    return None
                out.append(_element(rt, rname, sub))
            elif r_obj or o_obj:
                return None
            else:
                if rname in names:
                    return None
                out.append(_element(rt, rname, ref[rvs:rve]))
            names.add(rname)
            ri += 1
            oi += 1
            continue
        if not any(objs[k][1] == rname for k in range(oi + 1, len(objs))):
            # The reference field is not in obj: keep it.
            if _is_obj(rt) and has_empty_object(ref, rvs, rve):
                return None
            if rname in names:
                return None
            out.append(_element(rt, rname, ref[rvs:rve]))
            names.add(rname)
            ri += 1
        else:
            # It comes later in obj: obj's field goes first (once).
            if _is_obj(ot) and has_empty_object(obj, ovs, ove):
                return None
            if oname in names:
                return None
            out.append(_element(ot, oname, obj[ovs:ove]))
            names.add(oname)
            oi += 1
    for rt, rname, rvs, rve in refs[ri:]:
        if _is_obj(rt) and has_empty_object(ref, rvs, rve):
            return None
        if rname in names:
            return None
        out.append(_element(rt, rname, ref[rvs:rve]))
        names.add(rname)
    for ot, oname, ovs, ove in objs[oi:]:
        if _is_obj(ot) and has_empty_object(obj, ovs, ove):
            return None
        if oname in names:
            return None
        out.append(_element(ot, oname, obj[ovs:ove]))
        names.add(oname)
    body = b"".join(out)
    return _I32.pack(len(body) + 5) + body + b"\x00"


def merge_objects(ref: bytes, obj: bytes) -> bytes | None:
    """A reference holding the fields of both in a compatible order, or None."""
    return _merge(ref, 0, len(ref), obj, 0, len(obj))

"""control.min / control.max and the bucket schema, as MongoDB's FlatBSON computes them.

`MinMax` keeps, for every path seen in a bucket's measurements, the minimum and the
maximum under BSON comparison order, with MongoDB's rules for objects and arrays
(flat_bson.cpp):

- Two objects (or two arrays) at the same path are compared *element-wise*: the result
  is the field-wise min/max, not the BSON-order min of whole objects. Array elements
  are matched by position; object fields by name.
- When the types differ, the canonical type order decides which side wins (a number is
  below an object, an object below an array), and the loser's sub-tree is dropped.
- Fields are kept in the order they were first seen, with MongoDB's lock-step insertion:
  a new field is inserted *before* the first stored field the document did not match,
  so `{_id, t, x}` measurements give `control.min = {_id, t, x}` even though the time
  field was recorded first.

`Schema` records the type of every path (object / array / canonical scalar type); an
update that would change a path's type fails, which is how the catalog detects
`RolloverReason.kSchemaChange`.

Values are decoded Python values (storage.bsonutil.CODEC_OPTIONS); order comes from
storage.bson_order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from math import isnan as _isnan
from typing import Any, Final

from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bson_order import RANK_ARRAY, RANK_OBJECT, sort_key, type_rank

__all__ = ["MinMax", "Schema", "SchemaChange"]

UNSET: Final = 0
OBJECT: Final = 1
ARRAY: Final = 2
VALUE: Final = 3

# Name of entries created for array elements; an object may later claim it. Not a
# possible BSON field name.
ARRAY_NAME: Final = "\x00"
_MAX_LINEAR: Final = 12

_NUMERIC_FAST: Final = frozenset((int, float, Int64))


def _compare(a: Any, b: Any) -> int:
    """BSON woCompare of two scalar values, with fast paths for common types."""
    ta, tb = type(a), type(b)
    if ta in _NUMERIC_FAST and tb in _NUMERIC_FAST:
        if a == a and b == b:  # NaN is below every number: leave it to sort_key
            return (a > b) - (a < b)
    elif ta is tb and (ta is str or ta is DatetimeMS or ta is ObjectId):
        return (a > b) - (a < b)
    ka, kb = sort_key(a), sort_key(b)
    return (ka > kb) - (ka < kb)


_NUMBERS: Final = frozenset((int, float, Int64))


_FAMILY_SINGLE: Final = frozenset((int, Int64, str, DatetimeMS, bool, ObjectId))


def _family(vals: list[Any]) -> bool:
    """True when all values are scalars Python orders exactly like BSON does: numbers
    (int, Int64, float but no NaN) or values of one type among str, date, bool, ObjectId."""
    types = set(map(type, vals))
    if len(types) == 1:
        t0 = types.pop()
        if t0 is float:
            return not any(map(_isnan, vals))
        return t0 in _FAMILY_SINGLE
    if types <= _NUMBERS:
        return float not in types or not any(
            map(_isnan, [v for v in vals if type(v) is float]))
    return False


def _is_object(v: Any) -> bool:
    return type(v) is dict or (isinstance(v, Mapping) and not isinstance(v, list))


def _is_array(v: Any) -> bool:
    return type(v) is list or type(v) is tuple


class _Node:
    """One path: its name, min/max state per side, children in insertion order."""

    __slots__ = ("children", "max_t", "max_v", "min_t", "min_v", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.min_t = UNSET
        self.max_t = UNSET
        self.min_v: Any = None
        self.max_v: Any = None
        self.children: list[_Node] = []


def _search(children: list, start: int, stop: int, name: str) -> int:
    """Index of `name` in children[start:stop] (claiming an array entry on the way), else stop.

    Mirrors FlatBSONStore::Obj::search's linear phase; MongoDB switches to a hash lookup
    after 12 steps, which cannot claim array entries, so neither do we past that point.
    """
    steps = 0
    i = start
    while i < stop:
        child = children[i]
        if child.name == name:
            return i
        if steps < _MAX_LINEAR and child.name == ARRAY_NAME:
            child.name = name
            return i
        i += 1
        steps += 1
    return stop


def _locate(children: list, factory: Any, items: Iterable[tuple[str, Any]],
            skip: str | None) -> Iterable[tuple[Any, Any]]:
    """Walk `items` in lock-step with `children`, yielding (child, value) pairs.

    New fields are inserted where FlatBSON::_updateObj inserts them.
    """
    it = 0
    handled = 0
    skipped = False
    for name, value in items:
        if name == skip:
            continue
        end = len(children)
        if it == end and skipped:
            it = _search(children, handled, end, name)
        if it == end:
            children.insert(it, factory(name))
        else:
            cur = children[it]
            if cur.name == ARRAY_NAME:
                cur.name = name
            elif cur.name != name:
                found = _search(children, it + 1, end, name)
                if found == end:
                    if skipped:
                        found = _search(children, handled, it, name)
                        if found == it:
                            children.insert(it, factory(name))
                        else:
                            it = found
                    else:
                        children.insert(it, factory(name))
                else:
                    it = found
                    skipped = True
        yield children[it], value
        it += 1
        if not skipped:
            handled += 1


class MinMax:
    """Field-wise minimum and maximum of the measurements of one bucket."""

    __slots__ = ("_nodes", "_root")

    def __init__(self) -> None:
        self._root = _Node("")
        self._root.min_t = OBJECT
        self._root.max_t = OBJECT
        self._nodes: dict[str, _Node] = {}  # the root's children by name (see _top_nodes)

    def _top_nodes(self) -> dict[str, _Node]:
        """The root's children by name. Root fields are only ever added (an object has no
        array entries to rename), so the map is current while its size matches."""
        children = self._root.children
        if len(self._nodes) != len(children):
            self._nodes = {c.name: c for c in children}
        return self._nodes

    def update(self, doc: Mapping[str, Any], skip_field: str | None = None) -> None:
        """Fold one measurement (or a control.min/max document) in; `skip_field` is the meta."""
        self._update_obj(self._root, doc.items(), True, True, skip_field)

    def update_many(self, docs: Sequence[Mapping[str, Any]], skip_field: str | None = None,
                    names: Sequence[str] | None = None,
                    values: dict[str, list[Any]] | None = None,
                    extremes: dict[str, tuple[Any, Any]] | None = None) -> None:
        """`update` for each doc in turn, with top-level scalar fields folded in bulk.

        Same result as the loop: the root's fields are inserted document by document
        (only documents bringing a new name change the structure), and each field's
        node sees its values in order, which for a run of scalars of one comparable
        family reduces to its first minimum and first maximum. `names`, when given,
        says every doc has exactly these fields (`skip_field` aside) in this order;
        `values`, given with `names`, holds each name's values in document order, except
        for the scalar fields whose first minimum and maximum `extremes` gives instead.
        """
        root = self._root
        children = root.children
        per_field: dict[str, list[Any]]
        if names is not None and docs:
            if not self._top_nodes().keys() >= set(names):
                for _child, _v in _locate(children, _Node, docs[0].items(), skip_field):
                    pass
            per_field = values if values is not None else \
                {name: [d[name] for d in docs] for name in names}
        else:
            known = {c.name for c in children}
            per_field = {}
            for d in docs:
                new = False
                for k, v in d.items():
                    if k == skip_field:
                        continue
                    lst = per_field.get(k)
                    if lst is None:
                        lst = per_field[k] = []
                    lst.append(v)
                    if k not in known:
                        new = True
                if new:
                    for _child, _v in _locate(children, _Node, d.items(), skip_field):
                        pass
                    known = {c.name for c in children}
        nodes = self._top_nodes()
        if extremes:
            for name, (lo, hi) in extremes.items():
                node = nodes[name]
                _update_scalar(node, lo, True, False)
                _update_scalar(node, hi, False, True)
        update = self._update
        for name, vals in per_field.items():
            node = nodes[name]
            if _family(vals):
                _update_scalar(node, min(vals), True, False)
                _update_scalar(node, max(vals), False, True)
            else:
                for v in vals:
                    update(node, v, True, True)

    @classmethod
    def from_control(cls, min_doc: Mapping[str, Any], max_doc: Mapping[str, Any]) -> MinMax:
        """MinMax::parseFromBSON: rebuilt from a stored bucket's control.min and control.max."""
        mm = cls()
        mm.update(min_doc)
        mm.update(max_doc)
        return mm

    def min(self) -> dict[str, Any]:
        return _render_obj(self._root, True)

    def max(self) -> dict[str, Any]:
        return _render_obj(self._root, False)

    def copy(self) -> MinMax:
        mm = MinMax.__new__(MinMax)
        mm._root = _copy_node(self._root)
        mm._nodes = {}
        return mm

    # -- FlatBSON::_update -------------------------------------------------------------------

    def _update_obj(self, node: _Node, items: Iterable[tuple[str, Any]], umin: bool,
                    umax: bool, skip: str | None) -> None:
        for child, value in _locate(node.children, _Node, items, skip):
            self._update(child, value, umin, umax)

    def _update(self, node: _Node, value: Any, umin: bool, umax: bool) -> None:
        if _is_object(value):
            if umin:
                t = node.min_t
                umin = t in (OBJECT, UNSET, ARRAY) or (
                    t == VALUE and type_rank(node.min_v) > RANK_OBJECT)
                if umin and t != OBJECT:
                    node.min_t = OBJECT
                    for c in node.children:
                        c.min_t = UNSET
            if umax:
                t = node.max_t
                umax = t in (OBJECT, UNSET) or (
                    t == VALUE and type_rank(node.max_v) < RANK_OBJECT)
                if umax and t != OBJECT:
                    node.max_t = OBJECT
                    for c in node.children:
                        c.max_t = UNSET
            if umin or umax:
                self._update_obj(node, value.items(), umin, umax, None)
        elif _is_array(value):
            if umin:
                t = node.min_t
                umin = t in (ARRAY, UNSET) or (
                    t == VALUE and type_rank(node.min_v) > RANK_ARRAY)
                if umin and t != ARRAY:
                    node.min_t = ARRAY
                    for c in node.children:
                        c.min_t = UNSET
            if umax:
                t = node.max_t
                umax = t in (ARRAY, UNSET, OBJECT) or (
                    t == VALUE and type_rank(node.max_v) < RANK_ARRAY)
                if umax and t != ARRAY:
                    node.max_t = ARRAY
                    for c in node.children:
                        c.max_t = UNSET
            if umin or umax:
                children = node.children
                for i, elem in enumerate(value):
                    if i == len(children):
                        children.append(_Node(ARRAY_NAME))
                    self._update(children[i], elem, umin, umax)
        else:
            _update_scalar(node, value, umin, umax)


def _update_scalar(node: _Node, value: Any, umin: bool, umax: bool) -> None:
    """FlatBSON::_update for a value that is neither an object nor an array."""
    if umin:
        t = node.min_t
        if (t == UNSET or (t == VALUE and _compare(value, node.min_v) < 0)
                or (t == OBJECT and type_rank(value) < RANK_OBJECT)
                or (t == ARRAY and type_rank(value) < RANK_ARRAY)):
            node.min_t = VALUE
            node.min_v = value
    if umax:
        t = node.max_t
        if (t == UNSET or (t == VALUE and _compare(value, node.max_v) > 0)
                or (t == OBJECT and type_rank(value) > RANK_OBJECT)
                or (t == ARRAY and type_rank(value) > RANK_ARRAY)):
            node.max_t = VALUE
            node.max_v = value


def _render_obj(node: _Node, use_min: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in node.children:
        t = c.min_t if use_min else c.max_t
        if t == VALUE:
            out[c.name] = c.min_v if use_min else c.max_v
        elif t == OBJECT:
            out[c.name] = _render_obj(c, use_min)
        elif t == ARRAY:
            out[c.name] = _render_arr(c, use_min)
    return out


def _render_arr(node: _Node, use_min: bool) -> list[Any]:
    out: list[Any] = []
    for c in node.children:
        t = c.min_t if use_min else c.max_t
        if t == VALUE:
            out.append(c.min_v if use_min else c.max_v)
        elif t == OBJECT:
            out.append(_render_obj(c, use_min))
        elif t == ARRAY:
            out.append(_render_arr(c, use_min))
    return out


def _copy_node(node: _Node) -> _Node:
    n = _Node(node.name)
    n.min_t, n.max_t, n.min_v, n.max_v = node.min_t, node.max_t, node.min_v, node.max_v
    n.children = [_copy_node(c) for c in node.children]
    return n


# -- Schema -------------------------------------------------------------------------------------

class SchemaChange(Exception):
    """A measurement's field changed type class compared with the bucket's earlier ones."""


class _SNode:
    __slots__ = ("children", "name", "rank", "state")

    def __init__(self, name: str) -> None:
        self.name = name
        self.state = UNSET
        self.rank = 0
        self.children: list[_SNode] = []


class Schema:
    """The type (object, array, or canonical scalar type) of every path of a bucket."""

    __slots__ = ("_root",)

    def __init__(self) -> None:
        self._root = _SNode("")
        self._root.state = OBJECT

    @classmethod
    def from_control(cls, min_doc: Mapping[str, Any], max_doc: Mapping[str, Any]) -> Schema:
        """Schema::parseFromBSON; raises SchemaChange for mixed-schema buckets."""
        s = cls()
        s.update(min_doc)
        s.update(max_doc)
        return s

    def update(self, doc: Mapping[str, Any], skip_field: str | None = None) -> None:
        """Record `doc`'s types; raise SchemaChange at the first incompatible path.

        Like MongoDB's, a failed update may leave the schema partly updated: the bucket
        that owns it is closed anyway.
        """
        self._update_obj(self._root, doc.items(), skip_field)

    def compatible(self, doc: Mapping[str, Any], skip_field: str | None = None) -> bool:
        """Update with `doc`; False (schema change) when a path changes type class."""
        try:
            self.update(doc, skip_field)
        except SchemaChange:
            return False
        return True

    def copy(self) -> Schema:
        s = Schema.__new__(Schema)
        s._root = _copy_snode(self._root)
        return s

    def _update_obj(self, node: _SNode, items: Iterable[tuple[str, Any]],
                    skip: str | None) -> None:
        for child, value in _locate(node.children, _SNode, items, skip):
            self._update(child, value)

    def _update(self, node: _SNode, value: Any) -> None:
        if _is_object(value):
            if node.state == UNSET:
                node.state = OBJECT
                for c in node.children:
                    c.state = UNSET
            elif node.state != OBJECT:
                raise SchemaChange(node.name)
            self._update_obj(node, value.items(), None)
        elif _is_array(value):
            if node.state == UNSET:
                node.state = ARRAY
                for c in node.children:
                    c.state = UNSET
            elif node.state != ARRAY:
                raise SchemaChange(node.name)
            children = node.children
            for i, elem in enumerate(value):
                if i == len(children):
                    children.append(_SNode(ARRAY_NAME))
                self._update(children[i], elem)
        else:
            r = type_rank(value)
            if node.state == UNSET:
                node.state = VALUE
                node.rank = r
            elif node.state != VALUE or node.rank != r:
                raise SchemaChange(node.name)


def _copy_snode(node: _SNode) -> _SNode:
    n = _SNode(node.name)
    n.state, n.rank = node.state, node.rank
    n.children = [_copy_snode(c) for c in node.children]
    return n

"""Array operators: $arrayElemAt $first $last $size $slice $in $concatArrays $range $zip
$reverseArray $indexOfArray $isArray $sortArray $filter $map $reduce $let and the array forms
of $firstN $lastN $maxN $minN.

`$filter`, `$map`, `$reduce` and `$let` bind variables: their sub-expressions are compiled in
a scope that knows the new names, and evaluation passes a copy of the variables dict with the
bound values.
"""

from __future__ import annotations

from typing import Any

from query.sort import compile_sort
from storage.collation import Collator
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .comparison import agg_key, agg_key_fn
from .core import (
    Scope,
    check_arity,
    check_arity_range,
    compile_node,
    parse_args,
    validate_user_var_name,
)
from .registry import Fn, operator
from .values import as_int, is_integral, is_integral64, num_kind, to_float, truthy, value_repr

__all__ = ["array_elem_at", "sort_values"]


def array_elem_at(name: str, arr: Any, idx: Any, arity: int) -> Any:
    if arr is None or arr is MISSING or idx is None or idx is MISSING:
        return None
    if type(arr) is not list:
        which = "argument" if arity == 1 else "first argument"
        raise MongoError(28689, f"{name}'s {which} must be an array, but is {type_name(arr)}")
    if num_kind(idx) < 0:
        raise MongoError(28690, f"{name}'s second argument must be a numeric value, but is "
                         f"{type_name(idx)}")
    if not is_integral(idx):
        raise MongoError(28691, f"{name}'s second argument must be representable as a 32-bit "
                         f"integer: {value_repr(to_float(idx))}")
    i = as_int(idx)
    if i < 0:
        if -i > len(arr):
            return MISSING
        i += len(arr)
    return arr[i] if i < len(arr) else MISSING


@operator("$arrayElemAt")
def _c_array_elem_at(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 2)
    a_fn, i_fn = args

    def f(doc: Any, v: dict) -> Any:
        return array_elem_at(name, a_fn(doc, v), i_fn(doc, v), 2)
    return f


def _first_last(index: int) -> Any:
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        args = parse_args(arg, scope)
        check_arity(name, args, 1)
        (a_fn,) = args

        def f(doc: Any, v: dict) -> Any:
            return array_elem_at(name, a_fn(doc, v), index, 1)
        return f
    return compiler


operator("$first")(_first_last(0))
operator("$last")(_first_last(-1))


@operator("$size")
def _c_size(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        a = a_fn(doc, v)
        if type(a) is not list:
            raise MongoError(17124, "The argument to $size must be an array. Type of the "
                             f"argument is {type_name(a)}")
        return len(a)
    return f


@operator("$isArray")
def _c_is_array(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        return type(a_fn(doc, v)) is list
    return f


@operator("$slice")
def _c_slice(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity_range(name, args, 2, 3)

    def f(doc: Any, v: dict) -> Any:
        vals = [a(doc, v) for a in args]
        if any(x is None or x is MISSING for x in vals):
            return None
        arr = vals[0]
        if type(arr) is not list:
            raise MongoError(28724, "First argument to $slice must be an array, but is of "
                             f"type: {type_name(arr)}")
        second = vals[1]
        if num_kind(second) < 0:
            raise MongoError(28725, "Second argument to $slice must be a numeric value, but "
                             f"is of type: {type_name(second)}")
        if not is_integral(second):
            raise MongoError(28726, "Second argument to $slice can't be represented as a "
                             f"32-bit integer: {value_repr(second)}")
        n = as_int(second)
        size = len(arr)
        if len(vals) == 2:
            if n >= 0:
                return arr[:n]
            return arr[max(0, size + n):]
        third = vals[2]
        if num_kind(third) < 0:
            raise MongoError(28727, "Third argument to $slice must be numeric, but is of type: "
                             f"{type_name(third)}")
        if not is_integral(third):
            raise MongoError(28728, "Third argument to $slice can't be represented as a 32-bit "
                             f"integer: {value_repr(third)}")
        count = as_int(third)
        if count <= 0:
            raise MongoError(28729, f"Third argument to $slice must be positive: "
                             f"{value_repr(third)}")
        start = n if n >= 0 else max(0, size + n)
        return arr[start:start + count]
    return f


@operator("$in")
def _c_in(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 2)
    x_fn, a_fn = args
    key = agg_key_fn(scope.collator)

    def f(doc: Any, v: dict) -> Any:
        x = x_fn(doc, v)
        arr = a_fn(doc, v)
        if type(arr) is not list:
            raise MongoError(40081, f"$in requires an array as a second argument, found: "
                             f"{type_name(arr)}")
        k = key(x)
        return any(key(e) == k for e in arr)
    return f


@operator("$concatArrays")
def _c_concat_arrays(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)

    def f(doc: Any, v: dict) -> Any:
        out: list = []
        for a in args:
            x = a(doc, v)
            if x is None or x is MISSING:
                return None
            if type(x) is not list:
                raise MongoError(28664, f"$concatArrays only supports arrays, not "
                                 f"{type_name(x)}")
            out.extend(x)
        return out
    return f


@operator("$range")
def _c_range(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity_range(name, args, 2, 3)

    def f(doc: Any, v: dict) -> Any:
        start = args[0](doc, v)
        end = args[1](doc, v)
        if num_kind(start) < 0:
            raise MongoError(34443, "$range requires a numeric starting value, found value of "
                             f"type: {type_name(start)}")
        if not is_integral(start):
            raise MongoError(34444, "$range requires a starting value that can be represented "
                             f"as a 32-bit integer, found value: {value_repr(start)}")
        if num_kind(end) < 0:
            raise MongoError(34445, "$range requires a numeric ending value, found value of "
                             f"type: {type_name(end)}")
        if not is_integral(end):
            raise MongoError(34446, "$range requires an ending value that can be represented "
                             f"as a 32-bit integer, found value: {value_repr(end)}")
        step = 1
        if len(args) == 3:
            s = args[2](doc, v)
            if num_kind(s) < 0:
                raise MongoError(34447, "$range requires a numeric step value, found value of "
                                 f"type:{type_name(s)}")
            if not is_integral(s):
                raise MongoError(34448, "$range requires a step value that can be represented "
                                 f"as a 32-bit integer, found value: {value_repr(s)}")
            step = as_int(s)
            if step == 0:
                raise MongoError(34449, "$range requires a non-zero step value")
        lo, hi = as_int(start), as_int(end)
        steps = (hi - lo) // step if (hi - lo) * step >= 0 else -1
        if steps > 64 * 1024 * 1024:
            raise MongoError(ErrorCode.ExceededMemoryLimit,
                             "$range would use too much memory and cannot spill to disk")
        return list(range(lo, hi, step))
    return f


@operator("$reverseArray")
def _c_reverse_array(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        a = a_fn(doc, v)
        if a is None or a is MISSING:
            return None
        if type(a) is not list:
            raise MongoError(34435, "The argument to $reverseArray must be an array, but was "
                             f"of type: {type_name(a)}")
        return a[::-1]
    return f


@operator("$indexOfArray")
def _c_index_of_array(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity_range(name, args, 2, 4)
    key = agg_key_fn(scope.collator)

    def idx_arg(val: Any, what: str) -> int:
        if not is_integral(val):
            raise MongoError(40096, f"{name}requires an integral {what}, found a value of "
                             f"type: {type_name(val)}, with value: {value_repr(val)}")
        n = as_int(val)
        if n < 0:
            raise MongoError(40097, f"{name} requires a nonnegative {what}, found: "
                             f"{value_repr(val)}")
        return n

    def f(doc: Any, v: dict) -> Any:
        arr = args[0](doc, v)
        if arr is None or arr is MISSING:
            return None
        if type(arr) is not list:
            raise MongoError(40090, "$indexOfArray requires an array as a first argument, "
                             f"found: {type_name(arr)}")
        start = idx_arg(args[2](doc, v), "starting index") if len(args) > 2 else 0
        end = len(arr)
        if len(args) > 3:
            end = min(len(arr), idx_arg(args[3](doc, v), "ending index"))
        k = key(args[1](doc, v))
        for i in range(start, end):
            if key(arr[i]) == k:
                return i
        return -1
    return f


@operator("$zip")
def _c_zip(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(34460, f"$zip only supports an object as an argument, found "
                         f"{type_name(arg)}")
    inputs: list[Fn] | None = None
    defaults: list[Fn] | None = None
    longest = False
    for k, x in arg.items():
        if k == "inputs":
            if type(x) is not list:
                raise MongoError(34461, f"inputs must be an array of expressions, found "
                                 f"{type_name(x)}")
            inputs = [compile_node(e, scope) for e in x]
        elif k == "defaults":
            if type(x) is not list:
                raise MongoError(34462, f"defaults must be an array of expressions, found "
                                 f"{type_name(x)}")
            defaults = [compile_node(e, scope) for e in x]
        elif k == "useLongestLength":
            if type(x) is not bool:
                raise MongoError(34463, f"useLongestLength must be a bool, found "
                                 f"{type_name(x)}")
            longest = x
        else:
            raise MongoError(34464, f"$zip found an unknown argument: {k}")
    if not inputs:
        raise MongoError(34465, "$zip requires at least one input array")
    if defaults is not None and not longest:
        raise MongoError(34466, "cannot specify defaults unless useLongestLength is true")
    if defaults is not None and len(defaults) != len(inputs):
        raise MongoError(34467, "defaults and inputs must have the same length")
    ins = inputs
    dfs = defaults

    def f(doc: Any, v: dict) -> Any:
        arrays = []
        for fn in ins:
            a = fn(doc, v)
            if a is None or a is MISSING:
                return None
            if type(a) is not list:
                raise MongoError(34468, f"$zip found a non-array expression in input: "
                                 f"{value_repr(a)}")
            arrays.append(a)
        fill = [None] * len(arrays) if dfs is None else [d(doc, v) for d in dfs]
        fill = [None if x is MISSING else x for x in fill]
        n = max(len(a) for a in arrays) if longest else min(len(a) for a in arrays)
        return [[a[i] if i < len(a) else fill[j] for j, a in enumerate(arrays)]
                for i in range(n)]
    return f


def sort_values(values: list, descending: bool = False) -> list:
    """Whole values in BSON order (stable)."""
    return sorted(values, key=agg_key, reverse=descending)


@operator("$sortArray")
def _c_sort_array(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(2942500, f"$sortArray requires an object as an argument, found: "
                         f"{type_name(arg)}")
    inp = None
    sort_by: Any = MISSING
    for k, x in arg.items():
        if k == "input":
            inp = compile_node(x, scope)
        elif k == "sortBy":
            sort_by = x
        else:
            raise MongoError(2942501, f"$sortArray found an unknown argument: {k}")
    if inp is None:
        raise MongoError(2942502, "$sortArray requires 'input' to be specified")
    if sort_by is MISSING:
        raise MongoError(2942503, "$sortArray requires 'sortBy' to be specified")
    keyfn = _sort_by_key(sort_by, scope.collator)
    i_fn = inp

    def f(doc: Any, v: dict) -> Any:
        a = i_fn(doc, v)
        if a is None or a is MISSING:
            return None
        if type(a) is not list:
            raise MongoError(2942504, "The input argument to $sortArray must be an array, but "
                             f"was of type: {type_name(a)}")
        if len(a) < 2:
            return a
        return keyfn(a)
    return f


def _sort_by_key(sort_by: Any, collator: Collator | None = None) -> Any:
    """A function sorting a list per a `sortBy` spec: 1/-1 (whole values) or a pattern;
    strings by `collator` (None: simple)."""
    if num_kind(sort_by) >= 0:
        if sort_by not in (1, -1):
            raise MongoError(2942505, "$sortArray sortBy must be 1 or -1 or a sort pattern")
        desc = sort_by == -1
        whole = agg_key_fn(collator)
        return lambda a: sorted(a, key=whole, reverse=desc)
    if type(sort_by) is not dict:
        raise MongoError(2942505, "$sortArray sortBy must be 1 or -1 or a sort pattern")
    key = compile_sort(sort_by, collator)

    def by_pattern(a: list) -> list:
        return sorted(a, key=lambda e: key(e if type(e) is dict else {}))
    return by_pattern


def _n_array_op(kind: str) -> Any:
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        if type(arg) is not dict:
            raise MongoError(5787801, f"specification must be an object; found {name}: "
                             f"{value_repr(arg)}")
        n_fn = i_fn = None
        for k, x in arg.items():
            if k == "n":
                n_fn = compile_node(x, scope)
            elif k == "input":
                i_fn = compile_node(x, scope)
            else:
                raise MongoError(5787901, f"Unknown argument for 'n' operator: {k}")
        if n_fn is None:
            raise MongoError(5787906, "Missing value for 'n'")
        if i_fn is None:
            raise MongoError(5787907, "Missing value for 'input'")
        nf, inf = n_fn, i_fn

        def f(doc: Any, v: dict) -> Any:
            n = nf(doc, v)
            if not is_integral64(n):
                raise MongoError(5787902, f"Value for 'n' must be of integral type, but found "
                                 f"{value_repr(n)}")
            n = as_int(n)
            if n <= 0:
                raise MongoError(5787908, f"'n' must be greater than 0, found {n}")
            a = inf(doc, v)
            if type(a) is not list:
                raise MongoError(5788200, f"Input must be an array, found {type_name(a)}")
            if kind == "first":
                return a[:n]
            if kind == "last":
                return a[-n:] if n < len(a) else a[:]
            vals = [x for x in a if x is not None and x is not MISSING]
            vals.sort(key=agg_key, reverse=(kind == "max"))
            return vals[:n]
        return f
    return compiler


operator("$firstN")(_n_array_op("first"))
operator("$lastN")(_n_array_op("last"))
operator("$maxN")(_n_array_op("max"))
operator("$minN")(_n_array_op("min"))


# ---------------------------------------------------------------- variable binding

def _var_name(raw: Any, default: str) -> str:
    if raw is MISSING:
        return default
    if type(raw) is not str:
        raise MongoError(16866, "variable name must be a string")
    validate_user_var_name(raw, for_write=True)
    return raw


@operator("$filter")
def _c_filter(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(28646, "$filter only supports an object as its argument")
    spec: dict[str, Any] = {}
    for k, x in arg.items():
        if k not in ("input", "as", "cond", "limit"):
            raise MongoError(28647, f"Unrecognized parameter to $filter: {k}")
        spec[k] = x
    if "input" not in spec:
        raise MongoError(28648, "Missing 'input' parameter to $filter")
    if "cond" not in spec:
        raise MongoError(28650, "Missing 'cond' parameter to $filter")
    var = _var_name(spec.get("as", MISSING), "this")
    i_fn = compile_node(spec["input"], scope)
    c_fn = compile_node(spec["cond"], scope.with_vars([var]))
    l_fn = compile_node(spec["limit"], scope) if "limit" in spec else None

    def f(doc: Any, v: dict) -> Any:
        a = i_fn(doc, v)
        limit = None
        if l_fn is not None:
            lim = l_fn(doc, v)
            if lim is not None and lim is not MISSING:
                if not is_integral(lim):
                    raise MongoError(327391, "$filter: limit must be represented as a 32-bit "
                                     f"integral value: {value_repr(lim)}")
                limit = as_int(lim)
                if limit < 1:
                    raise MongoError(327392, f"$filter: limit must be greater than 0: {limit}")
        if a is None or a is MISSING:
            return None
        if type(a) is not list:
            raise MongoError(28651, f"input to $filter must be an array not {type_name(a)}")
        inner = dict(v)
        out = []
        for x in a:
            inner[var] = x
            if truthy(c_fn(doc, inner)):
                out.append(x)
                if limit is not None and len(out) >= limit:
                    break
        return out
    return f


@operator("$map")
def _c_map(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(16878, "$map only supports an object as its argument")
    spec: dict[str, Any] = {}
    for k, x in arg.items():
        if k not in ("input", "as", "in"):
            raise MongoError(16879, f"Unrecognized parameter to $map: {k}")
        spec[k] = x
    if "input" not in spec:
        raise MongoError(16880, "Missing 'input' parameter to $map")
    if "in" not in spec:
        raise MongoError(16882, "Missing 'in' parameter to $map")
    var = _var_name(spec.get("as", MISSING), "this")
    i_fn = compile_node(spec["input"], scope)
    e_fn = compile_node(spec["in"], scope.with_vars([var]))

    def f(doc: Any, v: dict) -> Any:
        a = i_fn(doc, v)
        if a is None or a is MISSING:
            return None
        if type(a) is not list:
            raise MongoError(16883, f"input to $map must be an array not {type_name(a)}")
        inner = dict(v)
        out = []
        for x in a:
            inner[var] = x
            r = e_fn(doc, inner)
            out.append(None if r is MISSING else r)
        return out
    return f


@operator("$reduce")
def _c_reduce(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(40075, f"$reduce requires an object as an argument, found: "
                         f"{type_name(arg)}")
    spec: dict[str, Any] = {}
    for k, x in arg.items():
        if k not in ("input", "initialValue", "in"):
            raise MongoError(40076, f"$reduce found an unknown argument: {k}")
        spec[k] = x
    for k, code in (("input", 40077), ("initialValue", 40078), ("in", 40079)):
        if k not in spec:
            raise MongoError(code, f"$reduce requires '{k}' to be specified")
    i_fn = compile_node(spec["input"], scope)
    init_fn = compile_node(spec["initialValue"], scope)
    e_fn = compile_node(spec["in"], scope.with_vars(["this", "value"]))

    def f(doc: Any, v: dict) -> Any:
        a = i_fn(doc, v)
        if a is None or a is MISSING:
            return None
        if type(a) is not list:
            raise MongoError(40080, f"$reduce requires that 'input' be an array, found: "
                             f"{value_repr(a)}")
        acc = init_fn(doc, v)
        inner = dict(v)
        for x in a:
            inner["this"] = x
            inner["value"] = acc
            acc = e_fn(doc, inner)
        return acc
    return f


@operator("$let")
def _c_let(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(16874, "$let only supports an object as its argument")
    vars_spec: Any = MISSING
    in_spec: Any = MISSING
    for k, x in arg.items():
        if k == "vars":
            vars_spec = x
        elif k == "in":
            in_spec = x
        else:
            raise MongoError(16875, f"Unrecognized parameter to $let: {k}")
    if vars_spec is MISSING:
        raise MongoError(16876, "Missing 'vars' parameter to $let")
    if in_spec is MISSING:
        raise MongoError(16877, "Missing 'in' parameter to $let")
    if type(vars_spec) is not dict:
        raise MongoError(10065, "invalid parameter: expected an object (vars)")
    bindings: list[tuple[str, Fn]] = []
    for vn, vx in vars_spec.items():
        if vn != "CURRENT":
            validate_user_var_name(vn, for_write=True)
        bindings.append((vn, compile_node(vx, scope)))
    body = compile_node(in_spec, scope.with_vars([vn for vn, _ in bindings]))

    def f(doc: Any, v: dict) -> Any:
        inner = dict(v)
        for vn, fn in bindings:
            inner[vn] = fn(doc, v)
        return body(doc, inner)
    return f


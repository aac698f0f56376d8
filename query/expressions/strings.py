"""String operators: $concat $substr $substrBytes $substrCP $toUpper $toLower $strcasecmp
$split $trim $ltrim $rtrim $strLenCP $strLenBytes $indexOfBytes $indexOfCP $replaceOne
$replaceAll $regexMatch $regexFind $regexFindAll.

Byte-oriented operators work on UTF-8 bytes, code-point operators on Python characters.
Case conversion is ASCII-only, as in MongoDB (simple collation). Regexes are PCRE in MongoDB;
we translate the common differences (named groups) to Python's `re`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from bson import Decimal128, Int64, Regex, Timestamp
from bson.datetime_ms import DatetimeMS

from query.dates.formatting import format_iso_utc
from storage.bson_order import regex_flags_str
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.missing import MISSING

from .core import Scope, check_arity, check_arity_range, compile_node, const_fn, parse_args
from .registry import Fn, operator
from .values import fmt_double, is_integral, num_kind, to_float, value_repr

__all__ = ["coerce_to_string", "compile_regex", "ascii_upper", "ascii_lower"]

_UPPER = {c: c - 32 for c in range(ord("a"), ord("z") + 1)}
_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def ascii_upper(s: str) -> str:
    return s.translate(_UPPER)


def ascii_lower(s: str) -> str:
    return s.translate(_LOWER)


def coerce_to_string(v: Any) -> str:
    """MongoDB's Value::coerceToString."""
    if v is None or v is MISSING:
        return ""
    t = type(v)
    if t is str:
        return v
    if t is int or t is Int64:
        return str(int(v))
    if t is float:
        return fmt_double(v)
    if t is Decimal128:
        return str(v)
    if t is DatetimeMS:
        return format_iso_utc(int(v))
    if t is Timestamp:
        return f"Timestamp({v.time}, {v.inc})"
    raise MongoError(16007, f"can't convert from BSON type {type_name(v)} to String")


@operator("$concat")
def _c_concat(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)

    def f(doc: Any, v: dict) -> Any:
        parts = []
        for a in args:
            x = a(doc, v)
            if x is None or x is MISSING:
                return None
            if type(x) is not str:
                raise MongoError(16702, f"$concat only supports strings, not {type_name(x)}")
            parts.append(x)
        return "".join(parts)
    return f


def _utf8_continuation(b: int) -> bool:
    return (b & 0xC0) == 0x80


@operator("$substrBytes", "$substr")
def _c_substr_bytes(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 3)
    s_fn, l_fn, n_fn = args

    def f(doc: Any, v: dict) -> Any:
        s = coerce_to_string(s_fn(doc, v)).encode()
        lower = l_fn(doc, v)
        length = n_fn(doc, v)
        if num_kind(lower) < 0:
            raise MongoError(16034, f"{name}:  starting index must be a numeric type (is BSON "
                             f"type {type_name(lower)})")
        if num_kind(length) < 0:
            raise MongoError(16035, f"{name}:  length must be a numeric type (is BSON type "
                             f"{type_name(length)})")
        lo = int(to_float(lower)) if type(lower) is not int else lower
        if lo < 0:
            raise MongoError(50752, f"{name}:  starting index must be non-negative (got: {lo})")
        ln = int(to_float(length)) if type(length) is not int else length
        if ln < 0:
            ln = len(s)
        if lo < len(s) and _utf8_continuation(s[lo]):
            raise MongoError(28656, f"{name}:  Invalid range, starting index is a UTF-8 "
                             "continuation byte.")
        if lo + ln < len(s) and _utf8_continuation(s[lo + ln]):
            raise MongoError(28657, f"{name}:  Invalid range, ending index is in the middle of "
                             "a UTF-8 character.")
        if lo >= len(s):
            return ""
        return s[lo:lo + ln].decode()
    return f


@operator("$substrCP")
def _c_substr_cp(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 3)
    s_fn, l_fn, n_fn = args

    def f(doc: Any, v: dict) -> Any:
        s = coerce_to_string(s_fn(doc, v))
        lower = l_fn(doc, v)
        length = n_fn(doc, v)
        if num_kind(lower) < 0:
            raise MongoError(34450, f"{name}: starting index must be a numeric type (is BSON "
                             f"type {type_name(lower)})")
        if not is_integral(lower):
            raise MongoError(34451, f"{name}: starting index cannot be represented as a 32-bit "
                             f"integral value: {value_repr(lower)}")
        if num_kind(length) < 0:
            raise MongoError(34452, f"{name}: length must be a numeric type (is BSON type "
                             f"{type_name(length)})")
        if not is_integral(length):
            raise MongoError(34453, f"{name}: length cannot be represented as a 32-bit integral "
                             f"value: {value_repr(length)}")
        lo = int(to_float(lower))
        ln = int(to_float(length))
        if ln < 0:
            raise MongoError(34454, f"{name}: length must be a nonnegative integer.")
        if lo < 0:
            raise MongoError(34455, f"{name}: the starting index must be nonnegative integer.")
        return s[lo:lo + ln]
    return f


def _case_op(conv: Any) -> Any:
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        args = parse_args(arg, scope)
        check_arity(name, args, 1)
        (a_fn,) = args

        def f(doc: Any, v: dict) -> Any:
            return conv(coerce_to_string(a_fn(doc, v)))
        return f
    return compiler


operator("$toUpper")(_case_op(ascii_upper))
operator("$toLower")(_case_op(ascii_lower))


@operator("$strcasecmp")
def _c_strcasecmp(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 2)
    a_fn, b_fn = args

    def f(doc: Any, v: dict) -> Any:
        a = ascii_upper(coerce_to_string(a_fn(doc, v))).encode()
        b = ascii_upper(coerce_to_string(b_fn(doc, v))).encode()
        return (a > b) - (a < b)
    return f


@operator("$strLenBytes")
def _c_strlen_bytes(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        s = a_fn(doc, v)
        if type(s) is not str:
            raise MongoError(34473, f"$strLenBytes requires a string argument, found: "
                             f"{type_name(s)}")
        return len(s.encode())
    return f


@operator("$strLenCP")
def _c_strlen_cp(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        s = a_fn(doc, v)
        if type(s) is not str:
            raise MongoError(34471, f"$strLenCP requires a string argument, found: "
                             f"{type_name(s)}")
        return len(s)
    return f


@operator("$split")
def _c_split(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 2)
    s_fn, d_fn = args

    def f(doc: Any, v: dict) -> Any:
        s = s_fn(doc, v)
        d = d_fn(doc, v)
        if s is None or s is MISSING or d is None or d is MISSING:
            return None
        if type(s) is not str:
            raise MongoError(40085, "$split requires an expression that evaluates to a string "
                             f"as a first argument, found: {type_name(s)}")
        if type(d) is not str:
            raise MongoError(40086, "$split requires an expression that evaluates to a string "
                             f"as a second argument, found: {type_name(d)}")
        if d == "":
            raise MongoError(40087, "$split requires a non-empty separator")
        return s.split(d)
    return f


_WHITESPACE = "\0 \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007" \
              "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _trim_op(left: bool, right: bool) -> Any:
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        if type(arg) is not dict:
            raise MongoError(50696, f"{name} requires an object as an argument, found: "
                             f"{type_name(arg)}")
        inp = chars = None
        for k, x in arg.items():
            if k == "input":
                inp = compile_node(x, scope)
            elif k == "chars":
                chars = compile_node(x, scope)
            else:
                raise MongoError(50694, f"{name} found an unknown argument: {k}")
        if inp is None:
            raise MongoError(50695, f"{name} requires an 'input' field")
        c_fn = chars

        def f(doc: Any, v: dict) -> Any:
            s = inp(doc, v)
            if s is None or s is MISSING:
                return None
            if type(s) is not str:
                raise MongoError(50699, f"{name} requires its input to be a string, got "
                                 f"{value_repr(s)} (of type {type_name(s)}) instead.")
            cs = _WHITESPACE
            if c_fn is not None:
                cs = c_fn(doc, v)
                if cs is None or cs is MISSING:
                    return None
                if type(cs) is not str:
                    raise MongoError(50700, f"{name} requires 'chars' to be a string, got "
                                     f"{value_repr(cs)} (of type {type_name(cs)}) instead.")
            if left and right:
                return s.strip(cs)
            if left:
                return s.lstrip(cs)
            return s.rstrip(cs)
        return f
    return compiler


operator("$trim")(_trim_op(True, True))
operator("$ltrim")(_trim_op(True, False))
operator("$rtrim")(_trim_op(False, True))


def _index_arg(val: Any, name: str, what: str) -> int:
    if not is_integral(val):
        raise MongoError(40096, f"{name}requires an integral {what}, found a value of type: "
                         f"{type_name(val)}, with value: {value_repr(val)}")
    n = int(to_float(val))
    if n < 0:
        raise MongoError(40097, f"{name} requires a nonnegative {what}, found: {value_repr(val)}")
    return n


@operator("$indexOfBytes")
def _c_index_of_bytes(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity_range(name, args, 2, 4)

    def f(doc: Any, v: dict) -> Any:
        s = args[0](doc, v)
        if s is None or s is MISSING:
            return None
        if type(s) is not str:
            raise MongoError(40091, "$indexOfBytes requires a string as the first argument, "
                             f"found: {type_name(s)}")
        tok = args[1](doc, v)
        if type(tok) is not str:
            raise MongoError(40092, "$indexOfBytes requires a string as the second argument, "
                             f"found: {type_name(tok)}")
        b, t = s.encode(), tok.encode()
        start = _index_arg(args[2](doc, v), name, "starting index") if len(args) > 2 else 0
        end = len(b)
        if len(args) > 3:
            end = min(len(b), _index_arg(args[3](doc, v), name, "ending index"))
        if start > len(b) or end < start:
            return -1
        return b[:end].find(t, start)
    return f


@operator("$indexOfCP")
def _c_index_of_cp(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity_range(name, args, 2, 4)

    def f(doc: Any, v: dict) -> Any:
        s = args[0](doc, v)
        if s is None or s is MISSING:
            return None
        if type(s) is not str:
            raise MongoError(40093, "$indexOfCP requires a string as the first argument, "
                             f"found: {type_name(s)}")
        tok = args[1](doc, v)
        if type(tok) is not str:
            raise MongoError(40094, "$indexOfCP requires a string as the second argument, "
                             f"found: {type_name(tok)}")
        start = _index_arg(args[2](doc, v), name, "starting index") if len(args) > 2 else 0
        end = len(s)
        if len(args) > 3:
            end = min(len(s), _index_arg(args[3](doc, v), name, "ending index"))
        if end < start:
            return -1
        if s == "" and tok == "" and start == 0:
            return 0
        for i in range(start, end):
            if s.startswith(tok, i):
                return i
        return -1
    return f


def _replace_op(all_: bool) -> Any:
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        if type(arg) is not dict:
            raise MongoError(51751, f"{name} requires an object as an argument, found: "
                             f"{type_name(arg)}")
        parts: dict[str, Fn] = {}
        for k, x in arg.items():
            if k not in ("input", "find", "replacement"):
                raise MongoError(51750, f"{name} found an unknown argument: {k}")
            parts[k] = compile_node(x, scope)
        for k, code in (("input", 51749), ("find", 51748), ("replacement", 51747)):
            if k not in parts:
                raise MongoError(code, f"{name} requires '{k}' to be specified")
        i_fn, f_fn, r_fn = parts["input"], parts["find"], parts["replacement"]

        def f(doc: Any, v: dict) -> Any:
            vals = []
            for what, fn, code in (("input", i_fn, 51746), ("find", f_fn, 51745),
                                   ("replacement", r_fn, 51744)):
                x = fn(doc, v)
                if x is not None and x is not MISSING and type(x) is not str:
                    raise MongoError(code, f"{name} requires that '{what}' be a string, found: "
                                     f"{value_repr(x)}")
                vals.append(x)
            s, fnd, rep = vals
            # each is None, MISSING or a str by now
            if type(s) is not str or type(fnd) is not str or type(rep) is not str:
                return None
            if all_:
                if fnd == "":
                    # Python inserts between every character; MongoDB does too.
                    return s.replace(fnd, rep)
                return s.replace(fnd, rep)
            return s.replace(fnd, rep, 1)
        return f
    return compiler


operator("$replaceOne")(_replace_op(False))
operator("$replaceAll")(_replace_op(True))


# ---------------------------------------------------------------- regular expressions

_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")
_ALLOWED_FLAGS = set("imsux")


@lru_cache(maxsize=512)
def compile_regex(pattern: str, options: str, opname: str = "$regexMatch") -> re.Pattern:
    """A PCRE-style pattern with MongoDB options compiled to Python's `re`."""
    flags = 0
    for ch in options:
        if ch not in _ALLOWED_FLAGS:
            raise MongoError(51108, f"{opname} invalid flag in regex options: {ch}")
        flags |= {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE,
                  "u": 0}[ch]
    try:
        return re.compile(_NAMED_GROUP.sub("(?P<", pattern), flags)
    except re.error as e:
        raise MongoError(51111, f"Invalid Regex in {opname}: {e}") from None


def _regex_op(kind: str) -> Any:
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        if type(arg) is not dict:
            raise MongoError(51103, f"{name} expects an object of named arguments but found: "
                             f"{type_name(arg)}")
        parts: dict[str, Fn] = {}
        for k, x in arg.items():
            if k not in ("input", "regex", "options"):
                raise MongoError(31024, f"{name} found an unknown argument: {k}")
            parts[k] = compile_node(x, scope)
        if "input" not in parts:
            raise MongoError(31022, f"{name} requires 'input' parameter")
        if "regex" not in parts:
            raise MongoError(31023, f"{name} requires 'regex' parameter")
        i_fn, r_fn = parts["input"], parts["regex"]
        o_fn = parts.get("options", const_fn(MISSING))

        def prepare(doc: Any, v: dict) -> tuple[str, re.Pattern] | None:
            pat = r_fn(doc, v)
            opts = o_fn(doc, v)
            inp = i_fn(doc, v)
            if opts is not None and opts is not MISSING and type(opts) is not str:
                raise MongoError(51106, f"{name} needs 'options' to be of type string")
            opts_s = opts if type(opts) is str else ""
            if "\0" in opts_s:
                raise MongoError(51110, f"{name}: regular expression options cannot contain "
                                 "an embedded null byte")
            if isinstance(pat, Regex):
                flags = pat.flags
                rflags = regex_flags_str(flags) if isinstance(flags, int) else str(flags)
                if rflags and opts_s:
                    raise MongoError(51107, f"{name}: found regex option(s) specified in both "
                                     "'regex' and 'option' fields")
                pattern, opts_s = pat.pattern, rflags or opts_s
            elif isinstance(pat, re.Pattern):
                pattern = pat.pattern
            elif pat is None or pat is MISSING:
                pattern = None
            elif type(pat) is str:
                pattern = pat
            else:
                raise MongoError(51105, f"{name} needs 'regex' to be of type string or regex")
            if pattern is not None and "\0" in pattern:
                raise MongoError(51109, f"{name}: regular expression cannot contain an "
                                 "embedded null byte")
            if inp is not None and inp is not MISSING and type(inp) is not str:
                raise MongoError(51104, f"{name} needs 'input' to be of type string")
            if pattern is None or type(inp) is not str:  # inp is None, MISSING or a str
                return None
            return inp, compile_regex(pattern, opts_s, name)

        def as_doc(m: re.Match) -> dict:
            return {"match": m.group(0), "idx": m.start(),
                    "captures": [g for g in m.groups()]}

        if kind == "match":
            def f(doc: Any, v: dict) -> Any:
                prepared = prepare(doc, v)
                if prepared is None:
                    return False
                s, rx = prepared
                return rx.search(s) is not None
        elif kind == "find":
            def f(doc: Any, v: dict) -> Any:
                prepared = prepare(doc, v)
                if prepared is None:
                    return None
                s, rx = prepared
                m = rx.search(s)
                return None if m is None else as_doc(m)
        else:
            def f(doc: Any, v: dict) -> Any:
                prepared = prepare(doc, v)
                if prepared is None:
                    return []
                s, rx = prepared
                out = []
                pos = 0
                while pos <= len(s):
                    m = rx.search(s, pos)
                    if m is None:
                        break
                    out.append(as_doc(m))
                    pos = m.end() if m.end() > m.start() else m.start() + 1
                return out
        return f
    return compiler


operator("$regexMatch")(_regex_op("match"))
operator("$regexFind")(_regex_op("find"))
operator("$regexFindAll")(_regex_op("all"))

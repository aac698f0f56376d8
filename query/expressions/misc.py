"""Miscellaneous operators: $rand, $bsonSize, $binarySize, and clear refusals for what bucketd
does not evaluate ($meta, $function, $accumulator as an expression)."""

from __future__ import annotations

import random
from typing import Any

from bson import Binary

from storage.bsonutil import bson_size
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .core import Scope, check_arity, parse_args
from .registry import Fn, operator


@operator("$rand", impure=True)
def _c_rand(arg: Any, scope: Scope, name: str) -> Fn:
    if arg != {} and arg != []:
        raise MongoError(3040501, "$rand does not currently accept arguments")
    rnd = random.random

    def f(doc: Any, v: dict) -> Any:
        return rnd()
    return f


@operator("$meta", impure=True)
def _c_meta(arg: Any, scope: Scope, name: str) -> Fn:
    raise MongoError(ErrorCode.NotImplemented,
                     "$meta is not supported by bucketd (no text or search scores)")


@operator("$function", "$accumulator", impure=True)
def _c_js(arg: Any, scope: Scope, name: str) -> Fn:
    raise MongoError(31264, f"{name} requires server-side JavaScript, which bucketd does not "
                     "provide")


@operator("$bsonSize")
def _c_bson_size(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        x = a_fn(doc, v)
        if x is None or x is MISSING:
            return None
        if type(x) is not dict:
            raise MongoError(31393, f"$bsonSize requires a document input, found: "
                             f"{type_name(x)}")
        return bson_size(x)
    return f


@operator("$binarySize")
def _c_binary_size(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        x = a_fn(doc, v)
        if x is None or x is MISSING:
            return None
        if type(x) is str:
            return len(x.encode())
        if isinstance(x, bytes | Binary):
            return len(x)
        raise MongoError(51276, f"$binarySize requires a string or BinData argument, found: "
                         f"{type_name(x)}")
    return f

"""Index keys as bytes whose plain byte order is MongoDB's BSON order.

`encode_value(v)` maps one BSON value to bytes such that, for any two values,
``encode_value(a) < encode_value(b)`` exactly when ``bson_order.compare(a, b) < 0``
and the encodings are equal exactly when the values compare equal (so
``1 == 1.0 == Int64(1) == Decimal128("1.0")`` all encode to the same bytes and
``-0.0`` encodes like ``0``). Every encoding is prefix-free (no encoding is a proper
prefix of another), which is what makes the two composite forms work:

- `encode_key(values, directions)` concatenates the components of a compound key;
  a descending component (direction < 0) is stored with every byte inverted, which
  reverses its order and keeps it prefix-free.
- `component_spans(key, directions)` splits a key back into its components, so a
  scan can test each field against its own bounds with byte comparisons only.

An index range scan is therefore a plain byte-range scan over the index store.

Layout (first byte = type tag, in canonical type order):

=====================  =====================================================
MinKey 0x0A            tag only
undefined 0x0C         tag only (empty-array keys; see `UNDEFINED`)
null 0x0E              tag only
number                 NaN 0x10, -inf 0x11, below -DBL_MAX 0x12 (decimal only),
                       finite 0x13, above DBL_MAX 0x14 (decimal only), +inf 0x15
string/symbol 0x1E     UTF-8 with 0x00 escaped as 00 FF, ended by 00 01
object 0x28            per element: type-rank byte, field name (as a string
                       body), value encoding; then 0x00
array 0x32             element encodings, then 0x00
binData 0x3C           4-byte length, subtype, bytes
ObjectId 0x46          12 bytes
false 0x50, true 0x51  tag only
date 0x5A              int64 + 2**63, 8 bytes big-endian
timestamp 0x64         time (4 bytes), increment (4 bytes)
regex 0x6E             pattern, flags (string bodies)
code 0x78              string body
code w/ scope 0x82     string body, object body
MaxKey 0xF0            tag only
=====================  =====================================================

Numbers are exact across int32, int64, double and decimal128. A finite number v
is written as D, the largest double <= v (8 bytes, order-preserving bit pattern),
then 0x00 when v == D, or 0x01 followed by the fraction f = (v - D) / (next double
after D - D), 0 < f < 1, as 65535 minus its count of zeros after the decimal point
(2 bytes) and its significant digits, two per byte (value + 1), ended by 0x00. Doubles and int64 values up to 2**53 therefore take 10 bytes; larger int64
values and decimals that are not doubles carry the exact remainder. Decimals beyond
the double range are written as a decimal exponent and digits.
"""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, Final

import bson
from bson import Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS

from storage.bson_order import regex_flags_str

__all__ = [
    "UNDEFINED",
    "Keyed",
    "EncodedValue",
    "Undefined",
    "encode_value",
    "encode_date_ms",
    "encode_key",
    "invert",
    "component_spans",
    "prefix_successor",
    "MIN_KEY_BYTES",
    "MAX_KEY_BYTES",
    "KS_OID",
]

# KeyString type tags: the first byte of an encoded value, chosen so that bytes sort in
# MongoDB's type order. They are not BSON type bytes (KS_OID is 0x46, BSON's ObjectId 0x07).
KS_MINKEY: Final = 0x0A
KS_UNDEFINED: Final = 0x0C
KS_NULL: Final = 0x0E
KS_NUM_NAN: Final = 0x10
KS_NUM_NEG_INF: Final = 0x11
KS_NUM_NEG_HUGE: Final = 0x12
KS_NUM_FINITE: Final = 0x13
KS_NUM_POS_HUGE: Final = 0x14
KS_NUM_POS_INF: Final = 0x15
KS_STRING: Final = 0x1E
KS_OBJECT: Final = 0x28
KS_ARRAY: Final = 0x32
KS_BINDATA: Final = 0x3C
KS_OID: Final = 0x46
KS_FALSE: Final = 0x50
KS_TRUE: Final = 0x51
KS_DATE: Final = 0x5A
KS_TIMESTAMP: Final = 0x64
KS_REGEX: Final = 0x6E
KS_CODE: Final = 0x78
KS_CODE_W_SCOPE: Final = 0x82
KS_MAXKEY: Final = 0xF0

_B_NUM_NAN: Final = bytes([KS_NUM_NAN])
_B_NUM_NEG_INF: Final = bytes([KS_NUM_NEG_INF])
_B_NUM_POS_INF: Final = bytes([KS_NUM_POS_INF])
_B_NUM_NEG_HUGE: Final = bytes([KS_NUM_NEG_HUGE])
_B_NUM_POS_HUGE: Final = bytes([KS_NUM_POS_HUGE])
_B_STRING: Final = bytes([KS_STRING])
_B_OBJECT: Final = bytes([KS_OBJECT])
_B_ARRAY: Final = bytes([KS_ARRAY])
_B_BINDATA: Final = bytes([KS_BINDATA])
_B_OID: Final = bytes([KS_OID])
_B_DATE: Final = bytes([KS_DATE])
_B_TIMESTAMP: Final = bytes([KS_TIMESTAMP])
_B_REGEX: Final = bytes([KS_REGEX])
_B_CODE: Final = bytes([KS_CODE])
_B_CODE_W_SCOPE: Final = bytes([KS_CODE_W_SCOPE])
_B_UNDEFINED: Final = bytes([KS_UNDEFINED])
_B_TRUE: Final = bytes([KS_TRUE])
_B_FALSE: Final = bytes([KS_FALSE])
_END: Final = b"\x00"  # end of an object or array, and of a digit string
_STR_END: Final = b"\x00\x01"
_INVERT: Final = bytes(255 - i for i in range(256))
# Exact (Decimal(float) is exact; unary minus would round to the context's 28 digits).
_DBL_MAX: Final = Decimal(sys.float_info.max)
_NEG_DBL_MAX: Final = Decimal(-sys.float_info.max)
_MASK64: Final = (1 << 64) - 1
_pack_d = struct.Struct(">d").pack
_unpack_q = struct.Struct(">Q").unpack
_pack_q = struct.Struct(">Q").pack
_pack_i = struct.Struct(">I").pack
_pack_h = struct.Struct(">H").pack
_pack_exact = struct.Struct(">BQB").pack  # tag, double bits, exactness marker
_SIGN: Final = 1 << 63
_2_53: Final = 1 << 53


class Keyed(dict[str, Any]):
    """A document carrying its own `encode_value` (`keystring`), for a caller that keys
    the same value again and again (a bucket's meta, at each write of the bucket). A
    collation's translation rebuilds it as a plain dict, which is encoded afresh."""

    __slots__ = ("keystring",)

    def __init__(self, doc: dict[str, Any], keystring: bytes) -> None:
        super().__init__(doc)
        self.keystring = keystring


class EncodedValue:
    """A value known only by its `encode_value` (`keystring`), for a caller that needs
    nothing else of it: a bucket's meta, for indexes keying the meta whole without a
    collation (its contents, never decoded, cannot be looked into or translated)."""

    __slots__ = ("keystring",)

    def __init__(self, keystring: bytes) -> None:
        self.keystring = keystring


class Undefined:
    """BSON undefined: the key MongoDB stores for an empty array (below null)."""

    _instance: Undefined | None = None

    def __new__(cls) -> Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __reduce__(self) -> str:
        return "UNDEFINED"


UNDEFINED: Final = Undefined()

MIN_KEY_BYTES: Final = bytes([KS_MINKEY])
MAX_KEY_BYTES: Final = bytes([KS_MAXKEY])


def invert(b: bytes) -> bytes:
    """Every byte complemented: the order of a descending key component."""
    return b.translate(_INVERT)


# --- numbers -------------------------------------------------------------------------


def _double_bits(d: float) -> bytes:
    """8 bytes whose unsigned order is the numeric order of finite doubles (-0.0 -> 0)."""
    (u,) = _unpack_q(_pack_d(d + 0.0))
    return _pack_q((u ^ _MASK64) if u >> 63 else (u | _SIGN))


def _pack_digits(digits: str) -> bytes:
    """Decimal digits two per byte (value + 1, so 1..100), ended by 0x00."""
    if len(digits) & 1:
        digits += "0"
    return bytes(int(digits[i : i + 2]) + 1 for i in range(0, len(digits), 2)) + _END


def _fraction_code(num: int, den: int) -> bytes:
    """The fraction num/den (0 < num/den < 1, den = 2**a * 5**b), order-preserving:
    65535 - (number of zeros after the point) as 2 bytes, then the significant
    digits (no trailing zeros). More leading zeros means a smaller fraction."""
    a = (den & -den).bit_length() - 1
    rest = den >> a
    b = 0
    while rest > 1:
        rest //= 5
        b += 1
    n = max(a, b)
    # num/den == m / 10**n with m an integer of n - z digits
    m = num << (n - a) if n == b else num * 5 ** (n - b) << (n - a)
    digits = "".join(map(str, Decimal(m).as_tuple().digits))  # no int->str digit limit
    zeros = n - len(digits)
    return _pack_h(0xFFFF - zeros) + _pack_digits(digits.rstrip("0"))


def _finite(d_floor: float, frac_num: int = 0, frac_den: int = 1) -> bytes:
    (u,) = _unpack_q(_pack_d(d_floor + 0.0))
    u = (u ^ _MASK64) if u >> 63 else (u | _SIGN)
    if frac_num == 0:
        return _pack_exact(KS_NUM_FINITE, u, 0)
    return _pack_exact(KS_NUM_FINITE, u, 1) + _fraction_code(frac_num, frac_den)


_FINITE_ZERO: Final = _finite(0.0)


def _enc_float(v: float) -> bytes:
    if v - v == 0.0:  # finite (inf - inf and nan - nan are nan)
        (u,) = _unpack_q(_pack_d(v + 0.0))
        return _pack_exact(KS_NUM_FINITE, (u ^ _MASK64) if u >> 63 else (u | _SIGN), 0)
    if v != v:
        return _B_NUM_NAN
    return _B_NUM_POS_INF if v > 0 else _B_NUM_NEG_INF


def _enc_int(v: int) -> bytes:
    if -_2_53 <= v <= _2_53:
        (u,) = _unpack_q(_pack_d(float(v) + 0.0))
        return _pack_exact(KS_NUM_FINITE, (u ^ _MASK64) if u >> 63 else (u | _SIGN), 0)
    f = float(v)
    if f == v:
        return _finite(f)
    d = f if f < v else math.nextafter(f, -math.inf)
    lo = int(d)
    gap = int(math.nextafter(d, math.inf)) - lo
    return _finite(d, v - lo, gap)


def _enc_huge(d: Decimal) -> bytes:
    sign, digits, exp = d.as_tuple()
    ds = "".join(map(str, digits)).rstrip("0")
    adj = int(exp) + len(digits)  # value = 0.ds * 10**adj
    body = _pack_h(adj) + _pack_digits(ds)
    if sign:
        return _B_NUM_NEG_HUGE + invert(body)
    return _B_NUM_POS_HUGE + body


def _enc_decimal(v: Decimal128) -> bytes:
    d = v.to_decimal()
    if d.is_nan():
        return _B_NUM_NAN
    if d.is_infinite():
        return _B_NUM_POS_INF if d > 0 else _B_NUM_NEG_INF
    if d.is_zero():
        return _FINITE_ZERO
    if d > _DBL_MAX or d < _NEG_DBL_MAX:
        return _enc_huge(d)
    f = float(d)
    if d == f:  # exact comparison between Decimal and float
        return _finite(f)
    lower = f if f < d else math.nextafter(f, -math.inf)
    gap = Fraction(math.nextafter(lower, math.inf)) - Fraction(lower)
    frac = (Fraction(d) - Fraction(lower)) / gap
    return _finite(lower, frac.numerator, frac.denominator)


# --- other types ---------------------------------------------------------------------


def _str_body(s: str) -> bytes:
    b = s.encode("utf-8")
    if b"\x00" in b:
        b = b.replace(b"\x00", b"\x00\xff")
    return b + _STR_END


def _enc_str(v: str) -> bytes:
    return _B_STRING + _str_body(v)


_RANK_BYTE_BY_TAG: Final = {
    KS_NUM_NAN: KS_NUM_FINITE,
    KS_NUM_NEG_INF: KS_NUM_FINITE,
    KS_NUM_NEG_HUGE: KS_NUM_FINITE,
    KS_NUM_POS_HUGE: KS_NUM_FINITE,
    KS_NUM_POS_INF: KS_NUM_FINITE,
    KS_TRUE: KS_FALSE,
}


def _obj_body(doc: Any) -> bytes:
    parts = []
    for name, value in doc.items():
        enc = _B_OBJECT + _obj_body(value) if type(value) is dict else encode_value(value)
        tag = enc[0]
        parts.append(bytes([_RANK_BYTE_BY_TAG.get(tag, tag)]))
        parts.append(_str_body(name))
        parts.append(enc)
    parts.append(_END)
    return b"".join(parts)


# The same objects come back as index keys (a time-series bucket's meta value, in every
# write of its buckets), and encoding one costs several times encoding it as BSON: the
# encodings of top-level objects are kept by their BSON bytes, which tell values apart
# exactly (wrapped in a document, so that `_id` is not moved first).
_OBJ_MEMO: dict[bytes, bytes] = {}
_OBJ_MEMO_MAX: Final = 4096


def _enc_obj(v: Any) -> bytes:
    if isinstance(v, DBRef):
        v = v.as_doc()
    try:
        raw = bson.encode({"": v})
    except Exception:  # not BSON as it stands (a Python int beyond int64, a Decimal)
        raw = None
    if raw is None:
        return _B_OBJECT + _obj_body(v)
    enc = _OBJ_MEMO.get(raw)
    if enc is None:
        enc = _B_OBJECT + _obj_body(v)
        if len(_OBJ_MEMO) >= _OBJ_MEMO_MAX:
            _OBJ_MEMO.clear()
        _OBJ_MEMO[raw] = enc
    return enc


def _enc_array(v: Sequence[Any]) -> bytes:
    return _B_ARRAY + b"".join(encode_value(x) for x in v) + _END


def _enc_bin(v: bytes) -> bytes:
    sub = v.subtype if isinstance(v, Binary) else 0
    return _B_BINDATA + _pack_i(len(v)) + bytes([sub]) + bytes(v)


def _enc_oid(v: ObjectId) -> bytes:
    return _B_OID + v.binary


def _enc_bool(v: bool) -> bytes:
    return _B_TRUE if v else _B_FALSE


def _enc_date(v: DatetimeMS) -> bytes:
    return encode_date_ms(int(v))


def encode_date_ms(ms: int) -> bytes:
    """`encode_value` of the date `ms` milliseconds from the epoch."""
    return _B_DATE + _pack_q((ms + (1 << 63)) & _MASK64)


def _enc_ts(v: Timestamp) -> bytes:
    return _B_TIMESTAMP + _pack_i(v.time) + _pack_i(v.inc)


def _enc_regex(v: Regex) -> bytes:
    return _B_REGEX + _str_body(v.pattern) + _str_body(regex_flags_str(v.flags))


def _enc_code(v: Code) -> bytes:
    if v.scope is not None:
        return _B_CODE_W_SCOPE + _str_body(str(v)) + _obj_body(v.scope)
    return _B_CODE + _str_body(str(v))


_NULL_BYTES: Final = bytes([KS_NULL])
_ENCODERS: Final[dict[type, Callable[[Any], bytes]]] = {
    type(None): lambda _v: _NULL_BYTES,
    bool: _enc_bool,
    int: _enc_int,
    Int64: _enc_int,
    float: _enc_float,
    Decimal128: _enc_decimal,
    str: _enc_str,
    dict: _enc_obj,
    Keyed: lambda v: v.keystring,
    EncodedValue: lambda v: v.keystring,
    list: _enc_array,
    tuple: _enc_array,
    bytes: _enc_bin,
    Binary: _enc_bin,
    ObjectId: _enc_oid,
    DatetimeMS: _enc_date,
    Timestamp: _enc_ts,
    Regex: _enc_regex,
    Code: _enc_code,
    DBRef: _enc_obj,
    MinKey: lambda _v: MIN_KEY_BYTES,
    MaxKey: lambda _v: MAX_KEY_BYTES,
    Undefined: lambda _v: _B_UNDEFINED,
}


def encode_value(v: Any) -> bytes:
    """The order-preserving encoding of one BSON value (ascending)."""
    enc = _ENCODERS.get(type(v))
    if enc is not None:
        return enc(v)
    # Subclasses (e.g. SON, OrderedDict, RawBSONDocument-like mappings).
    if isinstance(v, bool):
        return _enc_bool(v)
    if isinstance(v, int):
        return _enc_int(v)
    if isinstance(v, float):
        return _enc_float(v)
    if isinstance(v, str):
        return _enc_str(v)
    if isinstance(v, dict):
        return _enc_obj(v)
    if isinstance(v, list | tuple):
        return _enc_array(v)
    if isinstance(v, bytes | Binary):
        return _enc_bin(v)
    if isinstance(v, Code):
        return _enc_code(v)
    raise TypeError(f"cannot encode {type(v).__name__} as an index key")


def encode_key(values: Sequence[Any], directions: Sequence[int]) -> bytes:
    """A compound key: components concatenated, descending ones inverted."""
    if len(values) == 1:
        enc = encode_value(values[0])
        return enc if directions[0] >= 0 else enc.translate(_INVERT)
    parts = []
    for v, d in zip(values, directions, strict=True):
        enc = encode_value(v)
        parts.append(enc if d >= 0 else enc.translate(_INVERT))
    return b"".join(parts)


def prefix_successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with `prefix`
    (None when there is none: the prefix is all 0xFF)."""
    p = prefix.rstrip(b"\xff")
    if not p:
        return None
    return p[:-1] + bytes([p[-1] + 1])


# --- splitting keys into components ----------------------------------------------------

_FIXED_BODY: Final = {
    KS_MINKEY: 0, KS_UNDEFINED: 0, KS_NULL: 0, KS_NUM_NAN: 0, KS_NUM_NEG_INF: 0,
    KS_NUM_POS_INF: 0, KS_OID: 12, KS_FALSE: 0, KS_TRUE: 0, KS_DATE: 8, KS_TIMESTAMP: 8,
    KS_MAXKEY: 0,
}


def _skip_str(b: bytes, pos: int) -> int:
    while True:
        i = b.index(0, pos)
        if b[i + 1] == 0x01:
            return i + 2
        pos = i + 2  # 00 FF: an escaped NUL


def _skip_obj_body(b: bytes, pos: int) -> int:
    while b[pos] != 0:
        pos = _skip_str(b, pos + 1)
        pos = _skip_value(b, pos)
    return pos + 1


def _skip_value(b: bytes, pos: int) -> int:
    tag = b[pos]
    fixed = _FIXED_BODY.get(tag)
    if fixed is not None:
        return pos + 1 + fixed
    if tag == KS_NUM_FINITE:
        pos += 9
        if b[pos] == 0:
            return pos + 1
        return b.index(0, pos + 3) + 1  # marker, 2-byte zero count, digits, 0x00
    if tag == KS_NUM_POS_HUGE:
        return b.index(0, pos + 3) + 1
    if tag == KS_NUM_NEG_HUGE:
        return b.index(0xFF, pos + 3) + 1
    if tag in (KS_STRING, KS_CODE):
        return _skip_str(b, pos + 1)
    if tag == KS_OBJECT:
        return _skip_obj_body(b, pos + 1)
    if tag == KS_ARRAY:
        pos += 1
        while b[pos] != 0:
            pos = _skip_value(b, pos)
        return pos + 1
    if tag == KS_BINDATA:
        n = int.from_bytes(b[pos + 1 : pos + 5], "big")
        return pos + 6 + n
    if tag == KS_REGEX:
        return _skip_str(b, _skip_str(b, pos + 1))
    if tag == KS_CODE_W_SCOPE:
        return _skip_obj_body(b, _skip_str(b, pos + 1))
    raise ValueError(f"bad key tag 0x{tag:02x} at {pos}")


def component_spans(key: bytes, directions: Sequence[int]) -> list[bytes]:
    """The stored bytes of each component of `key` (descending ones still inverted)."""
    out = []
    pos = 0
    for d in directions:
        if d >= 0:
            end = _skip_value(key, pos)
        else:
            end = pos + _skip_value(key[pos:].translate(_INVERT), 0)
        out.append(key[pos:end])
        pos = end
    return out

"""Control bytes of a BSONColumn and the per-type encoding families.

A column is a sequence of control bytes, each followed by its payload, ending in 0x00:

- literal: a BSON type byte (0x01-0x1F, 0x7F MaxKey, 0xFF MinKey), then 0x00 (empty
  field name) and the value, as a BSON element;
- Simple-8b run: high nibble 0x8 (integers / raw memory) or 0x9-0xD (doubles scaled by
  10^0, 10^1, 10^2, 10^4, 10^8), low nibble + 1 = number of 8-byte blocks that follow;
- interleaved start: 0xF0 (legacy, arrays are scalars), 0xF1 (object root), 0xF2
  (array root), then the reference object; the interleaved section ends with 0x00.
"""

from __future__ import annotations

from typing import Final

from storage.vocabulary.bson_types import (
    T_ARRAY,
    T_BINARY,
    T_CODE,
    T_CODEWSCOPE,
    T_DATE,
    T_DBPOINTER,
    T_DECIMAL,
    T_MAXKEY,
    T_MINKEY,
    T_NULL,
    T_OBJECT,
    T_OID,
    T_REGEX,
    T_STRING,
    T_SYMBOL,
    T_TIMESTAMP,
    T_UNDEFINED,
)

__all__ = [
    "CONTROL_FOR_SCALE",
    "EOO",
    "INTERLEAVED_ARRAY",
    "INTERLEAVED_LEGACY",
    "INTERLEAVED_OBJECT",
    "is_interleaved_start",
    "is_literal",
    "scale_index_for_control",
]

EOO: Final = 0x00
INTERLEAVED_LEGACY: Final = 0xF0
INTERLEAVED_OBJECT: Final = 0xF1
INTERLEAVED_ARRAY: Final = 0xF2
INVALID_SCALE: Final = 0xFF
MAX_BLOCKS_PER_CONTROL: Final = 16

# Control byte high nibble for each scale index (index 5 = raw memory / integers).
CONTROL_FOR_SCALE: Final = (0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0x80)
_SCALE_FOR_NIBBLE: Final = (
    INVALID_SCALE,
    INVALID_SCALE,
    INVALID_SCALE,
    INVALID_SCALE,
    INVALID_SCALE,
    INVALID_SCALE,
    INVALID_SCALE,
    INVALID_SCALE,
    5,
    0,
    1,
    2,
    3,
    4,
    INVALID_SCALE,
    INVALID_SCALE,
)

DELTA_OF_DELTA_TYPES: Final = frozenset({T_OID, T_DATE, T_TIMESTAMP})
TYPES_128: Final = frozenset({T_DECIMAL, T_BINARY, T_STRING, T_CODE})
ZERO_DELTA_TYPES: Final = frozenset(
    {
        T_REGEX,
        T_DBPOINTER,
        T_CODEWSCOPE,
        T_SYMBOL,
        T_OBJECT,
        T_ARRAY,
        T_NULL,
        T_UNDEFINED,
        T_MINKEY,
        T_MAXKEY,
    }
)


def is_literal(control: int) -> bool:
    return control & 224 == 0 or control in (T_MINKEY, T_MAXKEY)


def is_interleaved_start(control: int) -> bool:
    return control in (INTERLEAVED_LEGACY, INTERLEAVED_OBJECT, INTERLEAVED_ARRAY)


def scale_index_for_control(control: int) -> int:
    return _SCALE_FOR_NIBBLE[control >> 4]

"""Simple-8b selector tables: how many values of how many bits each selector and extension
packs, shared by the builder and the decoders.

A block is a little-endian uint64. Its low 4 bits are the selector:

    selector        0 | 1  2  3  4  5  6 7 8 9 10 11 12 13 14 | 15
    values          - |60 30 20 15 12 10 8 7 6  5  4  3  2  1 | RLE
    bits per value  - | 1  2  3  4  5  6 7 8 10 12 15 20 30 60 |

Selectors 7 and 8 leave 4 bits unused; bits 4-7 then hold an *extension*: 0 keeps the
plain meaning, otherwise the block is "seven" (extension 1-9: each slot is a 4-bit
trailing-zero count + value bits), "eight small" (1-7: 4-bit count of trailing zero
nibbles) or "eight large" (8-13: 5-bit count of nibbles). Selector 15 repeats the last
value of the previous block (ext+1)*120 times. A slot of all ones is a missing value.
"""

from __future__ import annotations

from typing import Final

__all__ = ["RLE_SELECTOR", "RLE_MULTIPLIER", "MAX_RLE_COUNT", "BASE", "SEVEN", "EIGHT_SMALL",
           "EIGHT_LARGE", "DATA_BITS", "TZ_BITS", "MIN_DATA_BITS", "MIN_SELECTOR",
           "MAX_SELECTOR", "INTS", "BITS"]

RLE_SELECTOR: Final = 15
RLE_MULTIPLIER: Final = 120
MAX_RLE_COUNT: Final = 16

# Extension types, in the priority order the builder tries them.
BASE, SEVEN, EIGHT_SMALL, EIGHT_LARGE = 0, 1, 2, 3
DATA_BITS: Final = (60, 56, 56, 56)
TZ_BITS: Final = (0, 4, 4, 5)
MIN_DATA_BITS: Final = (1, 2, 4, 4)
MIN_SELECTOR: Final = (1, 1, 1, 8)
MAX_SELECTOR: Final = (14, 9, 7, 13)
INTS: Final = (
    (0, 60, 30, 20, 15, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1, 0),
    (0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0),
    (0, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0),
    (0, 0, 0, 0, 0, 0, 0, 0, 6, 5, 4, 3, 2, 1, 0, 0),
)
BITS: Final = (
    (64, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 60, 64),
    (64, 2, 3, 4, 5, 7, 10, 14, 24, 52, 64, 64, 64, 64, 64, 64),
    (64, 4, 5, 7, 10, 14, 24, 52, 0, 0, 64, 64, 64, 64, 64, 64),
    (64, 0, 0, 0, 0, 0, 0, 0, 4, 6, 9, 13, 23, 51, 64, 64),
)

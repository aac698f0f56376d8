"""Bucket `_id`s: an ObjectId carrying the bucket's rounded start time.

generateBucketOID (bucket_catalog_internal.cpp): the 4 timestamp bytes are the bucket's
`control.min.<time>` in seconds, stored as a 32-bit two's-complement big-endian integer;
the remaining 8 bytes are a big-endian 64-bit counter, seeded from a random number and
incremented per bucket (random instance bytes + increment would collide for buckets
sharing a rounded timestamp).

When several processes share the storage, each one's counter starts with its instance
tag in its top 24 bits (`BucketIdGenerator(tag=...)`, `tag_of`): a process tells its own
buckets, and those of processes no longer alive, from the open buckets of others.

Extended range (timeseries_extended_range.cpp): seconds outside 0..2**31-1 (before
1970 or after 2038-01-19T03:14:07Z) do not fit; the int32 truncation then sets the most
significant bit of the `_id` for 1902..1969 and 2038..2106, which is how MongoDB tells a
collection may hold extended-range dates.
"""

from __future__ import annotations

import secrets
import struct
from typing import Final

from bson import ObjectId

__all__ = ["BucketIdGenerator", "bucket_oid", "tag_of", "TAG_BITS", "date_outside_standard_range",
           "oid_has_extended_range_time", "oid_time_seconds"]

_MAX_NORMAL_RANGE_MS: Final = ((1 << 31) - 1) * 1000
_BE_U32: Final = struct.Struct(">I")
_BE_U64: Final = struct.Struct(">Q")
_BE_I32: Final = struct.Struct(">i")
TAG_BITS: Final = 24
_TAG_SHIFT: Final = 64 - TAG_BITS


def date_outside_standard_range(time_ms: int) -> bool:
    return time_ms < 0 or time_ms > _MAX_NORMAL_RANGE_MS


def bucket_oid(rounded_ms: int, counter: int) -> ObjectId:
    """The bucket ObjectId for a rounded start time (ms) and a 64-bit counter value."""
    seconds = rounded_ms // 1000  # rounded times are whole seconds
    return ObjectId(_BE_U32.pack(seconds & 0xFFFFFFFF) + _BE_U64.pack(counter & (2**64 - 1)))


def oid_has_extended_range_time(oid: ObjectId) -> bool:
    return bool(oid.binary[0] & 0x80)


def oid_time_seconds(oid: ObjectId) -> int:
    """The signed 32-bit seconds of an ObjectId (as MongoDB reads a bucket id's time)."""
    return _BE_I32.unpack(oid.binary[:4])[0]


class BucketIdGenerator:
    """The per-catalog counter behind the last 8 bytes of bucket ids."""

    __slots__ = ("_counter", "_tag")

    def __init__(self, seed: int | None = None, *, tag: int | None = None) -> None:
        """`tag`: this process's instance tag (`TAG_BITS` bits), kept in the counter's top
        bits through every reseed."""
        self._tag = tag
        self._counter = self._draw() if seed is None else seed & (2**64 - 1)

    def next(self, rounded_ms: int) -> ObjectId:
        self._counter = (self._counter + 1) & (2**64 - 1)
        return bucket_oid(rounded_ms, self._counter)

    def reset(self) -> None:
        """After a collision MongoDB reseeds the counter from its PRNG."""
        self._counter = self._draw()

    def _draw(self) -> int:
        if self._tag is None:
            return secrets.randbits(64)
        return (self._tag << _TAG_SHIFT) | secrets.randbits(_TAG_SHIFT - 8)


def tag_of(oid: ObjectId) -> int:
    """The instance tag of a bucket id made by a tagged generator."""
    return int.from_bytes(oid.binary[4:4 + TAG_BITS // 8], "big")

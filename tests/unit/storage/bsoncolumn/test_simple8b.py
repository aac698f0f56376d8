"""Simple-8b: hand-computed blocks, edge values, and decoders agreeing with the builder."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.bsoncolumn import BSONColumnError
from storage.bsoncolumn.simple8b import decoding
from storage.bsoncolumn.simple8b.builder import Simple8bBuilder
from storage.bsoncolumn.simple8b.decoding import block_count, decode_block, decode_blocks_np


def encode(values: list[int | None], is128: bool = False) -> list[int]:
    blocks: list[int] = []
    b = Simple8bBuilder(is128)
    for v in values:
        if v is None:
            b.skip(blocks.append)
        else:
            assert b.append(v, blocks.append)
    b.flush(blocks.append)
    return blocks


def decode(blocks: list[int], is128: bool = False) -> list[int | None]:
    out: list[int | None] = []
    prev: int | None = 0
    for block in blocks:
        vals = decode_block(block, prev, is128)
        prev = vals[-1]
        out += vals
    return out


# (values, expected blocks) worked out from the selector table by hand.
HAND_CASES = [
    # three 3-bit values: selector 12 (3 values of 20 bits)
    ([5, 5, 5], [12 | 5 << 4 | 5 << 24 | 5 << 44]),
    # a skip is a slot of all ones
    ([1, None], [13 | 1 << 4 | ((1 << 30) - 1) << 34]),
    # a single 60-bit value: selector 14
    ([(1 << 59) + 1], [14 | ((1 << 59) + 1) << 4]),
    # 120 zeros at the start repeat the initial "last value" 0: one RLE block
    ([0] * 120, [15]),
    # 1920 + 120 repeats: a full RLE block (count nibble 15) and one of 120
    ([0] * 2040, [15 | 15 << 4, 15]),
    # 121 zeros: RLE for 120, then one zero in a 1-value block
    ([0] * 121, [15, 14]),
    # round values pack with a trailing-zero extension (checked by round trip only)
    ([1 << 40, 1 << 40, 3 << 40], None),
]


@pytest.mark.parametrize(("values", "expected"), HAND_CASES)
def test_hand_computed_blocks(values: list, expected: list | None) -> None:
    blocks = encode(values)
    if expected is not None:
        assert blocks == expected
    assert decode(blocks)[: len(values)] == values


def test_trailing_zero_extension_is_used_for_large_round_values() -> None:
    # 41-bit values do not fit two per plain block, but with 40 trailing zeros do fit
    # selector 8's nibble-shifted extension (values 1 and 3, shift 10 nibbles).
    values = [1 << 40, 3 << 40]
    blocks = encode(values)
    assert len(blocks) == 1
    assert blocks[0] & 0xF == 8 and (blocks[0] >> 4) & 0xF != 0
    assert decode(blocks) == values


def test_all_ones_cannot_be_stored() -> None:
    b = Simple8bBuilder()
    assert not b.append((1 << 64) - 1, lambda _b: None)
    b128 = Simple8bBuilder(True)
    assert not b128.append((1 << 128) - 1, lambda _b: None)
    assert not b.append(1 << 61 | 1, lambda _b: None)  # 62 significant bits, no zeros


# Values whose stored bits and zero count would otherwise look like a skip (all ones).
EDGE_64 = [0b111 << 15, 0b1 << 15, ((1 << 20) - 1) << 15, 0b1111 << 60, 1 << 60, 1 << 63]
EDGE_128 = [((1 << 51) - 1) << 64, 1 << 124, 0b111 << 124, ((1 << 40) - 1) << 60, 1 << 127]


@pytest.mark.parametrize("v", EDGE_64)
def test_edge_values_64(v: int) -> None:
    for values in ([v], [v, v], [v, 1, v, None, v], [v] * 130):
        assert decode(encode(values))[: len(values)] == values


@pytest.mark.parametrize("v", EDGE_128)
def test_edge_values_128(v: int) -> None:
    for values in ([v], [v, v >> 4], [v, 1, v, None, v]):
        assert decode(encode(values, True), True)[: len(values)] == values


def _round(bits: int) -> st.SearchStrategy[int]:
    # odd * 2**k concentrates on trailing-zero handling
    return st.tuples(st.integers(0, 2 ** min(bits, 20)), st.integers(0, bits - 1)).map(
        lambda p: ((2 * p[0] + 1) << p[1]) % (1 << bits)
    )


def _values(bits: int) -> st.SearchStrategy[list]:
    value = (
        st.integers(0, 3)
        | st.integers(0, (1 << 60) - 2)
        | _round(bits)
        | st.integers(0, (1 << bits) - 2)
    )
    return st.lists(st.none() | value, max_size=80) | st.lists(
        st.tuples(st.none() | value, st.sampled_from([1, 2, 119, 120, 121, 500])), max_size=5
    ).map(lambda runs: [v for v, n in runs for _ in range(n)])


def _append_all(values: list, is128: bool) -> tuple[list, list]:
    blocks: list[int] = []
    kept: list = []
    b = Simple8bBuilder(is128)
    for v in values:
        if v is None:
            b.skip(blocks.append)
            kept.append(None)
        elif b.append(v, blocks.append):
            kept.append(v)
    b.flush(blocks.append)
    return blocks, kept


@settings(max_examples=200, deadline=None)
@given(_values(64))
def test_roundtrip_64(values: list) -> None:
    blocks, kept = _append_all(values, False)
    decoded = decode(blocks)
    assert decoded[: len(kept)] == kept
    # a flush pads the last block with nothing but skips
    assert all(v is None for v in decoded[len(kept) :])
    # the numpy decoder agrees with the scalar one
    arr, missing, _last = decode_blocks_np(np.array(blocks, dtype=np.uint64), 0, 10**6)
    assert [None if m else int(v) for v, m in zip(arr, missing)] == decoded


@settings(max_examples=200, deadline=None)
@given(_values(128))
def test_roundtrip_128(values: list) -> None:
    blocks, kept = _append_all(values, True)
    decoded = decode(blocks, True)
    assert decoded[: len(kept)] == kept
    assert all(v is None for v in decoded[len(kept) :])


_blocks = st.lists(
    st.integers(0, (1 << 64) - 1)
    | st.sampled_from([15, 15 | 3 << 4, 15 | 15 << 4, 14, 0xE | 5 << 4, 7 | 3 << 4, 8 | 9 << 4]),
    min_size=1,
    max_size=90,
)


@settings(max_examples=300, deadline=None)
@given(_blocks, st.none() | st.integers(0, 99), st.sampled_from([0, 40]))
def test_numpy_decoder_matches_scalar_on_any_blocks(
    blocks: list[int], prev: int | None, small: int
) -> None:
    try:
        expected = []
        p = prev
        for block in blocks:
            vals = decode_block(block, p, False)
            p = vals[-1]
            expected += vals
    except BSONColumnError:
        expected = None
    # small=0 forces the whole-array path, 40 per-block bookkeeping for short inputs
    saved = decoding._SMALL_BLOCKS
    decoding._SMALL_BLOCKS = small
    try:
        if expected is None:
            with pytest.raises(BSONColumnError):
                decode_blocks_np(np.array(blocks, dtype=np.uint64), prev, 10**6)
            return
        arr, missing, last = decode_blocks_np(np.array(blocks, dtype=np.uint64), prev, 10**6)
    finally:
        decoding._SMALL_BLOCKS = saved
    assert [None if m else int(v) for v, m in zip(arr, missing)] == expected
    assert last == expected[-1]
    assert sum(block_count(b) for b in blocks) == len(expected)


@pytest.mark.parametrize(
    "block",
    [
        0x0,  # selector 0
        0x7 | 10 << 4,  # selector 7, extension 10: invalid
        0x8 | 14 << 4,  # selector 8, extension 14: invalid
    ],
)
def test_invalid_selectors(block: int) -> None:
    with pytest.raises(BSONColumnError):
        decode_block(block, 0, False)
    with pytest.raises(BSONColumnError):
        block_count(block)


def test_numpy_decoder_bounds_output() -> None:
    blocks = np.array([15 | 15 << 4] * 10, dtype=np.uint64)  # 19,200 values
    with pytest.raises(BSONColumnError):
        decode_blocks_np(blocks, 0, 10_000)

"""Simple-8b, the integer block code of BSONColumn deltas, as MongoDB writes it.

- `selectors`: the selector and extension tables (values per block, bits per value)
- `builder`: `Simple8bBuilder`, the greedy block builder (and its bulk `extend`)
- `decoding`: one block in Python, many blocks with numpy
"""

"""100,000 random and mutated columns: each decodes or raises BSONColumnError.

Every input goes through the element decoder (and `decompress`); every fourth also
through the numpy, path and reader decoders, which must agree with it.

The mutation engine and corpus live in tools/fuzz_bsoncolumn.py (run it for longer
campaigns). Besides the exception type, every decoded column must be valid BSON and
hold no more rows than its bytes can encode; see `check` there. "Valid" is well-formed:
strings are bytes to a column (not checked to be UTF-8, as in MongoDB's BSONColumn), so
the check (in the tool) decodes with `VALUES_CODEC_OPTIONS`, which replaces invalid
sequences.
"""

from __future__ import annotations

import base64

from tools.fuzz_bsoncolumn import fuzz

CASES = 100_000


def test_fuzz_decoders_fixed_seed() -> None:
    stats = fuzz(seed=20240531, cases=CASES, others_every=4)
    assert stats.cases == CASES
    failures = [base64.b64encode(c).decode() + "\n" + tb for c, tb in stats.failures[:3]]
    assert not failures, "\n".join(failures)
    # the campaign reaches both outcomes in quantity
    assert stats.decoded > CASES // 10
    assert stats.rejected > CASES // 10

"""`RawDocuments`: BSON documents kept as the bytes they arrived in, with where each starts.

An OP_MSG kind-1 section (a document sequence, such as an `insert`'s `documents`) is
framed by the protocol layer without being decoded: every document's int32 size has been
checked (at least 5 bytes, at most the internal BSON limit, inside the sequence) and so
has its trailing NUL, and its start is recorded. What is inside a document has not been
checked; `decode` finds out.

The value is handed on as is to whoever consumes the documents (for a time-series insert,
the bucket catalog), who decides whether to decode them (`decode`, one `bson.decode_all`
over the whole buffer) or to scan `buffer` at `offsets` natively. Both `protocol/` and
`storage/` use it, so it lives here and imports nothing else of ours.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bson.codec_options import CodecOptions

from storage.vocabulary.bson_decode import decode_document, decode_documents

__all__ = ["MalformedDocument", "RawDocuments"]


class MalformedDocument(ValueError):
    """A document of a `RawDocuments` is not valid BSON.

    `index` is its position in the sequence; `message` is the text of the error every
    layer reports with code InvalidBSON (22): ``invalid BSON in message: <reason>``.
    """

    def __init__(self, index: int, reason: str) -> None:
        self.index = index
        self.reason = reason
        self.message = f"invalid BSON in message: {reason}"
        super().__init__(self.message)


@dataclass(frozen=True, slots=True, eq=False)
class RawDocuments:
    """The documents of one sequence: `buffer` holds them back to back (nothing else);
    `offsets[i]` is where document `i` starts (so `offsets[0] == 0` unless empty), and it
    ends where the next one starts or at `len(buffer)`. `offsets` is an `array('q')` (a
    buffer a native scan can read without copying); nobody may change it."""

    buffer: bytes
    offsets: array[int]

    def __len__(self) -> int:
        return len(self.offsets)

    def __repr__(self) -> str:
        return f"RawDocuments(<{len(self.offsets)} documents, {len(self.buffer)} bytes>)"

    def bounds(self, i: int) -> tuple[int, int]:
        """Where document `i` starts and ends in `buffer`."""
        offsets = self.offsets
        start = offsets[i]
        end = offsets[i + 1] if i + 1 < len(offsets) else len(self.buffer)
        return start, end

    def document(self, i: int) -> memoryview:
        """The bytes of document `i` (a view of `buffer`)."""
        start, end = self.bounds(i)
        return memoryview(self.buffer)[start:end]

    def __iter__(self) -> Iterator[memoryview]:
        return (self.document(i) for i in range(len(self.offsets)))

    def decode(self, codec: CodecOptions[Any]) -> list[Any]:
        """Every document decoded with `codec`, in one C call for a well-formed sequence;
        a bad one is looked for document by document, so `MalformedDocument` names it."""
        try:
            return decode_documents(self.buffer, codec)
        except Exception:
            pass
        docs = []
        for i in range(len(self.offsets)):
            try:
                docs.append(decode_document(self.document(i), codec))
            except Exception as exc:
                raise MalformedDocument(i, str(exc)) from None
        return docs  # each alone decodes (as the walk of the wire layer always did)

"""OP_COMPRESSED payload codecs: snappy (raw block format), zlib, zstd."""

from __future__ import annotations

import zlib

import cramjam

from storage.vocabulary.error_codes import ErrorCode

from .constants import CompressorId
from .errors import ProtocolError

__all__ = ["compress", "decompress", "SUPPORTED"]

SUPPORTED: tuple[str, ...] = ("snappy", "zlib", "zstd")


def compress(compressor: CompressorId, data: bytes | memoryview) -> bytes:
    if compressor == CompressorId.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if compressor == CompressorId.ZLIB:
        return zlib.compress(data, 6)
    if compressor == CompressorId.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=1))
    if compressor == CompressorId.NOOP:
        return bytes(data)
    raise ValueError(f"unknown compressor {compressor}")


def decompress(compressor_id: int, data: bytes | memoryview, expected_size: int) -> bytes:
    # Decompress into a buffer of the announced size (already bounded by the caller):
    # a compression bomb fails instead of allocating without limit.
    out = bytearray(expected_size)
    try:
        if compressor_id == CompressorId.SNAPPY:
            n = cramjam.snappy.decompress_raw_into(bytes(data), out)
        elif compressor_id == CompressorId.ZLIB:
            d = zlib.decompressobj()
            chunk = d.decompress(data, expected_size + 1)
            n = len(chunk)
            out[: min(n, expected_size)] = chunk[:expected_size]
            if not d.eof:
                n = expected_size + 1
        elif compressor_id == CompressorId.ZSTD:
            n = cramjam.zstd.decompress_into(bytes(data), out)
        elif compressor_id == CompressorId.NOOP:
            n = len(data)
            out[: min(n, expected_size)] = bytes(data[:expected_size])
        else:
            raise ProtocolError(ErrorCode.ProtocolError, f"unknown compressor id {compressor_id}")
    except ProtocolError:
        raise
    except Exception as exc:  # any codec failure is malformed input
        raise ProtocolError(ErrorCode.ProtocolError, f"could not decompress message: {exc}") from None
    if n != expected_size:
        raise ProtocolError(ErrorCode.ProtocolError,
                            f"decompressed message size does not match the header's {expected_size}")
    return bytes(out)

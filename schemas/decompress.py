"""Decompressing one Avro block's data under a size bound, for every codec of the Avro spec.

Each codec either streams its output with a bound (deflate, bzip2, xz, zstandard) or states the
decompressed size before any work is done (snappy's length preamble, lz4's size prefix), so that a
block announcing or expanding to more than the bound is refused having held at most the bound: a
512 KB deflate bomb never becomes 1.25 GB. Codec data as the Avro specification defines it:
deflate is raw RFC 1951 data; snappy is raw snappy data followed by the big-endian CRC-32 of the
decompressed bytes (checked here); xz, bzip2 and zstandard are whole streams of their format.
"""
from __future__ import annotations

import bz2
import lzma
import zlib
from collections.abc import Callable
from typing import Any

try:
    import cramjam
except ImportError:  # fastavro reads snappy with cramjam; without it, snappy files are refused
    cramjam = None  # type: ignore[assignment]  # an optional module: None when missing
try:
    import zstandard
except ImportError:
    zstandard = None  # type: ignore[assignment]  # an optional module: None when missing
try:
    import lz4.block
except ImportError:
    lz4 = None


# Memory a codec may use besides its output (its window or dictionary, which a stream states):
# enough for every preset of xz (64 MiB dictionary at -9) and zstandard's default window limit.
CODEC_MEMORY_LIMIT = 128 << 20


class CorruptBlock(ValueError):
    """A block's data is not valid data of its codec."""


class BlockTooLarge(ValueError):
    """A block decompresses, or states that it decompresses, to more than the bound."""


def decompress(codec: str, data: bytes, limit: int) -> bytes:
    """The decompressed data of a block of `codec`, at most `limit` bytes.

    Raises BlockTooLarge beyond `limit`, CorruptBlock for data that is not the codec's, and
    KeyError for a codec that `codec_problem` reports.
    """
    return _DECOMPRESSORS[codec](data, limit)


def codec_problem(codec: str) -> str | None:
    """Why blocks of `codec` cannot be decompressed here, or None when they can."""
    if codec not in _DECOMPRESSORS:
        return f"unknown codec {codec!r}"
    library = _LIBRARIES.get(codec)
    if library is not None and library[1] is None:
        return f"codec {codec!r} cannot be read here: install the {library[0]!r} package"
    return None


def _null(data: bytes, limit: int) -> bytes:
    if len(data) > limit:
        raise BlockTooLarge(f"{len(data)} bytes")
    return data


def _streamed(decompressor_factory: Callable[[], Any], errors: tuple[type[Exception], ...]
              ) -> Callable[[bytes, int], bytes]:
    """Decompress streams of one format (one after another, as the format allows) to `limit`."""
    def run(data: bytes, limit: int) -> bytes:
        out = bytearray()
        rest = data
        try:
            while rest:
                stream = decompressor_factory()
                out += stream.decompress(rest, limit + 1 - len(out))
                if len(out) > limit or not stream.needs_input and not stream.eof:
                    raise BlockTooLarge(f"more than {limit} bytes once decompressed")
                if not stream.eof:
                    raise CorruptBlock("the compressed stream ends early")
                rest = stream.unused_data
        except errors as error:
            raise CorruptBlock(f"{type(error).__name__}: {error}") from error
        return bytes(out)
    return run


class _RawDeflate:
    """zlib's raw-deflate decompressor with the interface of bz2's and lzma's."""

    def __init__(self) -> None:
        self._inflate = zlib.decompressobj(-15)

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = self._inflate.decompress(data, max_length)
        self.needs_input = not self._inflate.unconsumed_tail
        return out

    @property
    def eof(self) -> bool:
        return self._inflate.eof

    @property
    def unused_data(self) -> bytes:
        """Nothing: raw deflate is one stream, and bytes after it are ignored (Python's reference
        `avro` leaves 3 bytes of a zlib checksum there; Java and fastavro ignore them too)."""
        return b""


def _snappy(data: bytes, limit: int) -> bytes:
    if len(data) < 4:
        raise CorruptBlock("shorter than its CRC-32")
    body, crc = data[:-4], int.from_bytes(data[-4:], "big")
    try:
        stated = cramjam.snappy.decompress_raw_len(body)
        if stated > limit:
            raise BlockTooLarge(f"{stated} bytes once decompressed (stated by the block)")
        out = bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as error:
        raise CorruptBlock(f"snappy: {error}") from error
    if zlib.crc32(out) != crc:
        raise CorruptBlock("the CRC-32 of the decompressed data does not match")
    return out


def _zstandard(data: bytes, limit: int) -> bytes:
    try:
        decompressor = zstandard.ZstdDecompressor(max_window_size=CODEC_MEMORY_LIMIT)
        with decompressor.stream_reader(data, read_across_frames=True) as reader:
            out = bytearray()
            while len(out) <= limit:
                piece = reader.read(limit + 1 - len(out))
                if not piece:
                    break
                out += piece
    except zstandard.ZstdError as error:
        raise CorruptBlock(f"zstandard: {error}") from error
    if len(out) > limit:
        raise BlockTooLarge(f"more than {limit} bytes once decompressed")
    return bytes(out)


def _lz4(data: bytes, limit: int) -> bytes:
    if len(data) < 4:
        raise CorruptBlock("shorter than its size prefix")
    stated = int.from_bytes(data[:4], "little")
    if stated > limit:
        raise BlockTooLarge(f"{stated} bytes once decompressed (stated by the block)")
    try:
        plain: bytes = lz4.block.decompress(data)  # lz4 is untyped
        return plain
    except lz4.block.LZ4BlockError as error:
        raise CorruptBlock(f"lz4: {error}") from error


_DECOMPRESSORS: dict[str, Callable[[bytes, int], bytes]] = {
    "null": _null,
    "deflate": _streamed(_RawDeflate, (zlib.error,)),
    "bzip2": _streamed(bz2.BZ2Decompressor, (OSError, EOFError)),
    "xz": _streamed(lambda: lzma.LZMADecompressor(memlimit=CODEC_MEMORY_LIMIT),
                    (lzma.LZMAError, EOFError)),
    "snappy": _snappy,
    "zstandard": _zstandard,
    "lz4": _lz4,
}
# codec -> (the package that reads it, the imported module or None)
_LIBRARIES = {"snappy": ("cramjam", cramjam), "zstandard": ("zstandard", zstandard),
              "lz4": ("lz4", lz4)}

"""Bloscpack format 3: constants, record tables, checksums and the Blosc1 chunk header.

Layout of a file (all integers little-endian, no alignment)::

    | header (32) | [metadata section] | [offsets: (nchunks + max_app_chunks) x int64] |
    | chunk 0 | digest 0 | chunk 1 | digest 1 | ...

Each chunk is one complete Blosc1 buffer (16-byte Blosc header + payload, ``cbytes`` bytes)
followed by its digest. docs/formats/bloscpack.md states every byte.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from .._binary import Record, adler32, crc32
from ._errors import NoSuchChecksum, NoSuchCodec

FORMAT_NAME = "bloscpack"
MAGIC = b"blpk"
FORMAT_VERSION = 3
EXTENSION = ".blp"

OPTION_OFFSETS = 0x01
OPTION_METADATA = 0x02
KNOWN_OPTIONS = OPTION_OFFSETS | OPTION_METADATA

MAX_CHUNKS = 2**63 - 1
MAX_BUFFERSIZE = 2**31 - 1 - 16  # blosc.MAX_BUFFERSIZE: the largest chunk Blosc1 compresses
MAX_TYPESIZE = 255
MAX_META_SIZE = 2**32 - 1
MIN_CLEVEL, MAX_CLEVEL = 0, 9
UNKNOWN = -1  # chunk_size, last_chunk and nchunks use -1 for "not recorded"

class BloscpackHeader(NamedTuple):
    """The fields of HEADER as ``HEADER.read`` gives them."""

    magic: bytes
    format_version: int
    options: int
    checksum: int
    typesize: int
    chunk_size: int
    last_chunk: int
    nchunks: int
    max_app_chunks: int


HEADER = Record("bloscpack header", [
    ("magic", "4s"),
    ("format_version", "u1"),
    ("options", "u1"),
    ("checksum", "u1"),
    ("typesize", "u1"),
    ("chunk_size", "<i4"),
    ("last_chunk", "<i4"),
    ("nchunks", "<i8"),
    ("max_app_chunks", "<i8"),
], size=32, tuple_type=BloscpackHeader)

METADATA_HEADER = Record("bloscpack metadata header", [
    ("magic_format", "8s"),
    ("meta_options", "u1"),
    ("meta_checksum", "u1"),
    ("meta_codec", "u1"),
    ("meta_level", "u1"),
    ("meta_size", "<u4"),
    ("max_meta_size", "<u4"),
    ("meta_comp_size", "<u4"),
    ("user_codec", "8s"),
], size=32)

BLOSC_HEADER = Record("blosc chunk header", [
    ("version", "u1"),
    ("versionlz", "u1"),
    ("flags", "u1"),
    ("typesize", "u1"),
    ("nbytes", "<u4"),
    ("blocksize", "<u4"),
    ("cbytes", "<u4"),
], size=16)

OFFSET_DTYPE = "<i8"
OFFSET_SIZE = 8

# Blosc1 chunk header flags. Codec format ids live in bits 5-7 (lz4 and lz4hc share id 1).
BLOSC_FORMAT_VERSIONS = (1, 2)  # C-Blosc 1.x writes 2; C-Blosc2 writes 5, which python-blosc cannot read
BLOSC_OVERHEAD = 16
FLAG_BYTE_SHUFFLE = 0x01
FLAG_MEMCPYED = 0x02
FLAG_BIT_SHUFFLE = 0x04
FLAG_DONT_SPLIT = 0x10
CODEC_FORMATS = {0: "blosclz", 1: "lz4", 2: "snappy", 3: "zlib", 4: "zstd"}

SUFFIXES = {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True)
class Checksum:
    """One entry of the checksum table: the id stored in the header, its name and digest."""

    id: int
    name: str
    size: int
    digest: Callable[[Any], bytes]

    def __call__(self, data: Any) -> bytes:
        return self.digest(data)


def _zlib_sum(function: Callable[[Any], int]) -> Callable[[Any], bytes]:
    # zlib sums are stored as little-endian uint32
    return lambda data: struct.pack("<I", function(data) & 0xFFFFFFFF)


def _hash(name: str) -> Callable[[Any], bytes]:
    constructor = getattr(hashlib, name)
    return lambda data: constructor(data).digest()


CHECKSUMS = (
    Checksum(0, "None", 0, lambda data: b""),
    Checksum(1, "adler32", 4, _zlib_sum(adler32)),
    Checksum(2, "crc32", 4, _zlib_sum(crc32)),
    Checksum(3, "md5", 16, _hash("md5")),
    Checksum(4, "sha1", 20, _hash("sha1")),
    Checksum(5, "sha224", 28, _hash("sha224")),
    Checksum(6, "sha256", 32, _hash("sha256")),
    Checksum(7, "sha384", 48, _hash("sha384")),
    Checksum(8, "sha512", 64, _hash("sha512")),
)
CHECKSUM_NAMES = tuple(checksum.name for checksum in CHECKSUMS)

METADATA_CODECS = ("None", "zlib")
METADATA_SERIALIZERS = (b"JSON",)


def checksum_named(name: str | None) -> Checksum:
    """The checksum called ``name`` (Python ``None`` means ``'None'``)."""
    name = "None" if name is None else name
    for checksum in CHECKSUMS:
        if checksum.name == name:
            return checksum
    raise NoSuchChecksum(f"bloscpack: checksum {name!r} does not exist; use one of {', '.join(CHECKSUM_NAMES)}")


def check_metadata_codec(name: str) -> str:
    """``name`` when it is a metadata codec (``'None'`` or ``'zlib'``)."""
    if name not in METADATA_CODECS:
        raise NoSuchCodec(f"bloscpack: metadata codec {name!r} does not exist; use one of {', '.join(METADATA_CODECS)}")
    return name


def decode_blosc_flags(flags: int) -> dict[str, Any]:
    """The meaning of a Blosc1 chunk header's flags byte."""
    return {
        "byte_shuffle": bool(flags & FLAG_BYTE_SHUFFLE),
        "pure_memcpy": bool(flags & FLAG_MEMCPYED),
        "bit_shuffle": bool(flags & FLAG_BIT_SHUFFLE),
        "split_blocks": not flags & FLAG_DONT_SPLIT,
        "codec": CODEC_FORMATS.get(flags >> 5, f"unknown ({flags >> 5})"),
    }


def pretty_size(size_in_bytes: int) -> str:
    """A size as the largest fitting power of 1024 with two decimals (``'12.3M'``, ``'0B'``)."""
    if size_in_bytes == 0:
        return "0B"
    for suffix, factor in reversed(SUFFIXES.items()):
        if size_in_bytes >= factor:
            return f"{round(size_in_bytes / factor, 2)}{suffix}"
    return f"{size_in_bytes}B"


def double_pretty_size(size_in_bytes: int) -> str:
    """``pretty_size`` followed by the exact byte count: ``'1.0M (1048576B)'``."""
    return f"{pretty_size(size_in_bytes)} ({size_in_bytes}B)"


def reverse_pretty(readable: str) -> int:
    """Parse a human size with a B/K/M/G/T suffix (powers of 1024; ``'5.2M'`` allowed)."""
    suffix = readable[-1:]
    if suffix not in SUFFIXES:
        raise ValueError(f"{readable!r}: {suffix!r} is not a size suffix; use one of {', '.join(SUFFIXES)}")
    try:
        number = float(readable[:-1])
    except ValueError:
        raise ValueError(f"{readable!r} is not a number followed by one of {', '.join(SUFFIXES)}") from None
    return int(number * SUFFIXES[suffix])

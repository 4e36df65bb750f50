"""Typed metadata encoding v1: tagged little-endian values, a Map at the top.

Each value is a one-byte tag and a body (tags 0x01-0x08, see
docs/formats/pycauset.md). Arrays and Maps carry element counts, not byte
lengths, so an unknown tag cannot be skipped and is an error. The decoder
enforces the limits pycauset's plan promises but never implemented (nesting
depth, entry count, string and bytes sizes) and checks every declared length
against the bytes that remain before allocating anything.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ._errors import ERRORS

TAG_BOOL = 0x01
TAG_I64 = 0x02
TAG_U64 = 0x03
TAG_F64 = 0x04
TAG_STRING = 0x05
TAG_BYTES = 0x06
TAG_ARRAY = 0x07
TAG_MAP = 0x08

MAX_DEPTH = 32
MAX_ENTRIES = 1_000_000
MAX_STRING_BYTES = 16 << 20
MAX_BYTES_LENGTH = 1 << 30
MAX_KEY_BYTES = 0xFFFF

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")

# Smallest encoding of one Array element (a tag and a Bool body) and of one
# Map entry (an empty key, a tag and a Bool body): a declared count larger
# than the remaining bytes allow is rejected before anything is allocated.
_MIN_ELEMENT_BYTES = 2
_MIN_ENTRY_BYTES = 4


def _describe(path: tuple, what: str) -> str:
    """Render a lazily built value path, e.g. ``['view']['scalar'] tag``."""
    parts = []
    while path:
        path, key = path
        parts.append(f"[{key!r}]" if isinstance(key, str) else f"[{key}]")
    return "".join(reversed(parts)) + (" " if parts else "") + what


class _Decoder:
    """A cursor over one encoded payload; ``base`` makes offsets absolute in the file.

    Paths are built as nested tuples and only rendered into text for an error,
    which keeps decoding a typical block cheap (load is O(1) but not free).
    """

    def __init__(self, data: Any, base: int) -> None:
        self.data = memoryview(data).cast("B")
        self.size = len(self.data)
        self.position = 0
        self.base = base
        self.entries = 0

    def fail(self, path: tuple, what: str, expected: Any, found: Any, at: int) -> Exception:
        return ERRORS.invalid(f"metadata {_describe(path, what)}", self.base + at, expected, found)

    def truncated(self, path: tuple, what: str, length: int) -> Exception:
        return ERRORS.truncated_at(f"metadata {_describe(path, what)}", self.base + self.position, length,
                                   self.base + self.size)

    def take(self, length: int, path: tuple, what: str) -> memoryview:
        start = self.position
        if length > self.size - start:
            raise self.truncated(path, what, length)
        self.position = start + length
        return self.data[start:start + length]

    def scalar(self, codec: struct.Struct, path: tuple, what: str) -> Any:
        start = self.position
        if codec.size > self.size - start:
            raise self.truncated(path, what, codec.size)
        self.position = start + codec.size
        return codec.unpack_from(self.data, start)[0]

    def count(self, path: tuple, what: str, per_item: int) -> int:
        at = self.position
        count = self.scalar(_U32, path, what)
        remaining = self.size - self.position
        if count * per_item > remaining:
            field = f"metadata {_describe(path, what)}"
            raise ERRORS.truncated(
                f"pycauset: {field} at byte {self.base + at}: declares {count} entries of at least "
                f"{per_item} bytes each, but only {remaining} bytes remain",
                format=ERRORS.format, field=field, offset=self.base + at,
                expected=f"at most {remaining // per_item}", found=count)
        self.entries += count
        if self.entries > MAX_ENTRIES:
            raise self.fail(path, what, f"at most {MAX_ENTRIES} values in one metadata map", self.entries, at)
        return count

    def text(self, length: int, path: tuple, what: str) -> str:
        at = self.position
        raw = self.take(length, path, what)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as error:
            raise self.fail(path, what, "UTF-8 text", f"invalid byte at +{error.start}", at) from None

    def length(self, path: tuple, what: str, limit: int) -> int:
        at = self.position
        length = self.scalar(_U32, path, what)
        if length > limit:
            raise self.fail(path, what, f"at most {limit} bytes", length, at)
        return length

    def value(self, path: tuple, depth: int) -> Any:
        at = self.position
        tag = self.scalar(_U8, path, "tag")
        if tag == TAG_STRING:
            return self.text(self.length(path, "string length", MAX_STRING_BYTES), path, "string")
        if tag == TAG_U64:
            return self.scalar(_U64, path, "u64")
        if tag == TAG_F64:
            return self.scalar(_F64, path, "f64")
        if tag == TAG_BOOL:
            flag = self.scalar(_U8, path, "bool")
            if flag > 1:
                raise self.fail(path, "bool", "0 or 1", flag, at + 1)
            return bool(flag)
        if tag == TAG_I64:
            return self.scalar(_I64, path, "i64")
        if tag == TAG_BYTES:
            return bytes(self.take(self.length(path, "bytes length", MAX_BYTES_LENGTH), path, "bytes"))
        if tag == TAG_ARRAY or tag == TAG_MAP:
            if depth >= MAX_DEPTH:
                raise self.fail(path, "tag", f"nesting depth at most {MAX_DEPTH}", depth + 1, at)
            return self.array(path, depth + 1) if tag == TAG_ARRAY else self.map(path, depth + 1)
        raise self.fail(path, "tag", "a tag 0x01..0x08", f"0x{tag:02x}", at)

    def array(self, path: tuple, depth: int) -> list:
        count = self.count(path, "array count", _MIN_ELEMENT_BYTES)
        return [self.value((path, index), depth) for index in range(count)]

    def map(self, path: tuple, depth: int) -> dict:
        count = self.count(path, "map count", _MIN_ENTRY_BYTES)
        result: dict[str, Any] = {}
        for _ in range(count):
            key = self.text(self.scalar(_U16, path, "key length"), path, "key")
            result[key] = self.value((path, key), depth)
        return result


def decode_metadata(data: Any, base_offset: int = 0) -> dict[str, Any]:
    """Decode one typed-metadata payload (a top-level Map) into a dict; errors name file offsets."""
    decoder = _Decoder(data, base_offset)
    tag = decoder.scalar(_U8, (), "top-level tag")
    if tag != TAG_MAP:
        raise decoder.fail((), "top-level tag", f"0x{TAG_MAP:02x} (a map)", f"0x{tag:02x}", 0)
    result = decoder.map((), 1)
    if decoder.position != decoder.size:
        raise decoder.fail((), "payload end", "no bytes after the top-level map",
                           f"{decoder.size - decoder.position} trailing bytes", decoder.position)
    return result


def _encode_key(key: Any, out: list[bytes]) -> None:
    if not isinstance(key, str):
        raise UnsupportedError(f"pycauset metadata: map keys must be str, got {type(key).__name__} {key!r}")
    raw = key.encode("utf-8")
    if len(raw) > MAX_KEY_BYTES:
        raise UnsupportedError(f"pycauset metadata: key of {len(raw)} UTF-8 bytes exceeds {MAX_KEY_BYTES}")
    out.append(_U16.pack(len(raw)))
    out.append(raw)


def _encode_value(value: Any, out: list[bytes], depth: int) -> None:
    if isinstance(value, (bool, np.bool_)):
        out.append(bytes((TAG_BOOL, int(value))))
    elif isinstance(value, (int, np.integer)):
        number = int(value)
        if 0 <= number < 1 << 64:
            out.append(bytes((TAG_U64,)) + _U64.pack(number))
        elif -(1 << 63) <= number < 0:
            out.append(bytes((TAG_I64,)) + _I64.pack(number))
        else:
            raise UnsupportedError(f"pycauset metadata: integer {number} does not fit i64 or u64")
    elif isinstance(value, (float, np.floating)):
        out.append(bytes((TAG_F64,)) + _F64.pack(float(value)))
    elif isinstance(value, str):
        raw = value.encode("utf-8")
        if len(raw) > MAX_STRING_BYTES:
            raise UnsupportedError(f"pycauset metadata: string of {len(raw)} bytes exceeds {MAX_STRING_BYTES}")
        out.append(bytes((TAG_STRING,)) + _U32.pack(len(raw)))
        out.append(raw)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) > MAX_BYTES_LENGTH:
            raise UnsupportedError(f"pycauset metadata: bytes value of {len(raw)} bytes exceeds {MAX_BYTES_LENGTH}")
        out.append(bytes((TAG_BYTES,)) + _U32.pack(len(raw)))
        out.append(raw)
    elif isinstance(value, (list, tuple, Mapping)):
        if depth >= MAX_DEPTH:
            raise UnsupportedError(f"pycauset metadata: nesting deeper than {MAX_DEPTH} levels")
        if isinstance(value, Mapping):
            _encode_map(value, out, depth + 1)
        else:
            out.append(bytes((TAG_ARRAY,)) + _U32.pack(len(value)))
            for item in value:
                _encode_value(item, out, depth + 1)
    else:
        raise UnsupportedError(f"pycauset metadata: cannot encode {type(value).__name__} {value!r} "
                               "(supported: bool, int, float, str, bytes, list, dict)")


def _encode_map(mapping: Mapping, out: list[bytes], depth: int) -> None:
    for key in mapping:
        if not isinstance(key, str):
            raise UnsupportedError(f"pycauset metadata: map keys must be str, got {type(key).__name__} {key!r}")
    out.append(bytes((TAG_MAP,)) + _U32.pack(len(mapping)))
    # Sorted keys make the encoding deterministic and byte-identical to pycauset's.
    for key in sorted(mapping):
        _encode_key(key, out)
        _encode_value(mapping[key], out, depth)


def encode_metadata(mapping: Mapping[str, Any]) -> bytes:
    """Encode a dict (str keys; bool/int/float/str/bytes/list/dict values) as a typed-metadata payload."""
    if not isinstance(mapping, Mapping):
        raise UnsupportedError(f"pycauset metadata: the top level must be a dict, got {type(mapping).__name__}")
    out: list[bytes] = []
    _encode_map(mapping, out, 1)
    return b"".join(out)


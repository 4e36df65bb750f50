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
from typing import Any, Mapping

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


class _Decoder:
    """A cursor over one encoded payload; ``base`` makes offsets absolute in the file."""

    def __init__(self, data: Any, base: int) -> None:
        self.data = memoryview(data).cast("B")
        self.position = 0
        self.base = base
        self.entries = 0

    def fail(self, field: str, expected: Any, found: Any = None, at: int | None = None) -> Exception:
        offset = self.base + (self.position if at is None else at)
        return ERRORS.invalid(f"metadata {field.strip()}", offset, expected, found)

    def take(self, length: int, field: str) -> memoryview:
        remaining = len(self.data) - self.position
        if length > remaining:
            raise ERRORS.truncated_at(f"metadata {field.strip()}", self.base + self.position, length,
                                      self.base + len(self.data))
        chunk = self.data[self.position:self.position + length]
        self.position += length
        return chunk

    def scalar(self, codec: struct.Struct, field: str) -> Any:
        return codec.unpack(self.take(codec.size, field))[0]

    def count(self, field: str, per_item: int) -> int:
        at = self.position
        count = self.scalar(_U32, field)
        remaining = len(self.data) - self.position
        if count * per_item > remaining:
            offset = self.base + at
            raise ERRORS.truncated(
                f"pycauset: metadata {field.strip()} at byte {offset}: declares {count} entries of at least "
                f"{per_item} bytes each, but only {remaining} bytes remain",
                format=ERRORS.format, field=f"metadata {field.strip()}", offset=offset,
                expected=f"at most {remaining // per_item}", found=count)
        self.entries += count
        if self.entries > MAX_ENTRIES:
            raise self.fail(field, f"at most {MAX_ENTRIES} values in one metadata map",
                            self.entries, at)
        return count

    def text(self, length: int, field: str) -> str:
        at = self.position
        raw = self.take(length, field)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as error:
            raise self.fail(field, "UTF-8 text", f"invalid byte at +{error.start}", at) from None

    def value(self, path: str, depth: int) -> Any:
        at = self.position
        tag = self.scalar(_U8, f"{path} tag")
        if tag == TAG_BOOL:
            flag = self.scalar(_U8, f"{path} bool")
            if flag > 1:
                raise self.fail(f"{path} bool", "0 or 1", flag, at + 1)
            return bool(flag)
        if tag == TAG_I64:
            return self.scalar(_I64, f"{path} i64")
        if tag == TAG_U64:
            return self.scalar(_U64, f"{path} u64")
        if tag == TAG_F64:
            return self.scalar(_F64, f"{path} f64")
        if tag == TAG_STRING:
            length = self._length(f"{path} string length", MAX_STRING_BYTES)
            return self.text(length, f"{path} string")
        if tag == TAG_BYTES:
            length = self._length(f"{path} bytes length", MAX_BYTES_LENGTH)
            return bytes(self.take(length, f"{path} bytes"))
        if tag in (TAG_ARRAY, TAG_MAP):
            if depth >= MAX_DEPTH:
                raise self.fail(f"{path} tag", f"nesting depth at most {MAX_DEPTH}", depth + 1, at)
            return self.array(path, depth + 1) if tag == TAG_ARRAY else self.map(path, depth + 1)
        raise self.fail(f"{path} tag", "a tag 0x01..0x08", f"0x{tag:02x}", at)

    def _length(self, field: str, limit: int) -> int:
        at = self.position
        length = self.scalar(_U32, field)
        if length > limit:
            raise self.fail(field, f"at most {limit} bytes", length, at)
        return length

    def array(self, path: str, depth: int) -> list:
        count = self.count(f"{path} array count", _MIN_ELEMENT_BYTES)
        return [self.value(f"{path}[{index}]", depth) for index in range(count)]

    def map(self, path: str, depth: int) -> dict:
        count = self.count(f"{path} map count", _MIN_ENTRY_BYTES)
        result: dict[str, Any] = {}
        for index in range(count):
            key_length = self.scalar(_U16, f"{path} key {index} length")
            key = self.text(key_length, f"{path} key {index}")
            result[key] = self.value(f"{path}[{key!r}]", depth)
        return result


def decode_metadata(data: Any, base_offset: int = 0) -> dict[str, Any]:
    """Decode one typed-metadata payload (a top-level Map) into a dict; errors name file offsets."""
    decoder = _Decoder(data, base_offset)
    tag = decoder.scalar(_U8, "top-level tag")
    if tag != TAG_MAP:
        raise decoder.fail("top-level tag", f"0x{TAG_MAP:02x} (a map)", f"0x{tag:02x}", 0)
    result = decoder.map("", 1)
    if decoder.position != len(decoder.data):
        raise decoder.fail("payload end", "no bytes after the top-level map",
                           f"{len(decoder.data) - decoder.position} trailing bytes")
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


"""KAST draft layout byte records and constants (docs/formats/kast.md)."""

from __future__ import annotations

from typing import NamedTuple

from .._binary import Record

FORMAT_NAME = "kast"
EXTENSION = ".kast"
MAGIC = b"KAST"
VERSION_MAJOR = 1
VERSION_MINOR = 0
ALIGNMENT = 8
DEFAULT_KEY_ENCODING = "utf-8"
U32_MAX = 0xFFFFFFFF

class Header(NamedTuple):
    """The fields of HEADER as ``HEADER.read`` gives them."""

    magic: bytes
    version_major: int
    version_minor: int
    flags: int
    num_keys: int
    keys_table_offset: int
    data_offset: int
    reserved: bytes
    padding: bytes


HEADER = Record("header", [
    ("magic", "4s"), ("version_major", "<u2"), ("version_minor", "<u2"), ("flags", "<u4"),
    ("num_keys", "<u4"), ("keys_table_offset", "<u8"), ("data_offset", "<u8"),
    ("reserved", "4s"), ("padding", "4s"),
], size=40, tuple_type=Header)

# One keys-table entry. Packed: key_offset sits at byte 4, so tables are read as unaligned structured views.
ENTRY = Record("keys table entry", [
    ("key_length", "<u4"), ("key_offset", "<u8"), ("data_type", "<u4"),
    ("data_length", "<u8"), ("data_offset", "<u8"),
], size=32)

KEYS_TABLE_OFFSET = HEADER.size

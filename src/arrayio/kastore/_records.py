"""kastore byte records and constants (file version 1.0; docs/formats/kastore.md)."""

from __future__ import annotations

from typing import NamedTuple

from .._binary import Record

FORMAT_NAME = "kastore"
EXTENSION = ".kas"
MAGIC = b"\x89KAS\r\n\x1a\n"
VERSION_MAJOR = 1
VERSION_MINOR = 0
ALIGNMENT = 8
DEFAULT_KEY_ENCODING = "utf-8"

class Header(NamedTuple):
    """The fields of HEADER as ``HEADER.read`` gives them."""

    magic: bytes
    version_major: int
    version_minor: int
    num_items: int
    file_size: int
    reserved: bytes


HEADER = Record("header", [
    ("magic", "8s"), ("version_major", "<u2"), ("version_minor", "<u2"),
    ("num_items", "<u4"), ("file_size", "<u8"), ("reserved", "40s"),
], size=64, tuple_type=Header)

ITEM = Record("item descriptor", [
    ("type", "u1"), ("reserved_after_type", "7s"), ("key_start", "<u8"), ("key_len", "<u8"),
    ("array_start", "<u8"), ("array_len", "<u8"), ("reserved", "24s"),
], size=64)

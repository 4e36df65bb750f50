"""pycauset container byte records and constants: the preamble, the two header slots, the PCMB block header."""

from __future__ import annotations

from .._binary import Record

FORMAT_NAME = "pycauset"
EXTENSION = ".pycauset"
MAGIC = b"PYCAUSET"
FORMAT_VERSION = 1
ENDIAN_LITTLE = 1
HEADER_BYTES = 4096
PAYLOAD_ALIGN = 4096
METADATA_ALIGN = 16
BLOCK_MAGIC = b"PCMB"
BLOCK_VERSION = 1
ENCODING_VERSION = 1

PREAMBLE = Record("pycauset preamble", [
    ("magic", "8s"), ("format_version", "<u4"), ("endian", "u1"), ("header_bytes", "<u2"), ("reserved0", "u1"),
], size=16)
SLOT = Record("pycauset header slot", [
    ("generation", "<u8"), ("payload_offset", "<u8"), ("payload_length", "<u8"),
    ("metadata_offset", "<u8"), ("metadata_length", "<u8"), ("hot_offset", "<u8"), ("hot_length", "<u8"),
    ("slot_crc32", "<u4"), ("reserved", "68s"),
], size=128)
BLOCK_HEADER = Record("pycauset metadata block header", [
    ("block_magic", "4s"), ("block_version", "<u4"), ("encoding_version", "<u4"), ("reserved0", "<u4"),
    ("payload_length", "<u8"), ("payload_crc32", "<u4"), ("reserved1", "<u4"),
], size=32)

SLOT_OFFSETS = {"A": PREAMBLE.size, "B": PREAMBLE.size + SLOT.size}
SLOT_CRC_COVERS = SLOT.offsets["slot_crc32"]
SLOTS_END = SLOT_OFFSETS["B"] + SLOT.size
U64_LIMIT = 2**64 - 1

# Keys that describe the payload bytes; update_metadata may not change them.
IDENTITY_KEYS = frozenset({"rows", "cols", "matrix_type", "data_type", "payload_layout", "payload_uuid"})
WRITER_KEYS = IDENTITY_KEYS | {"seed", "view"}

"""The zip records a tszip file is made of (PKWARE APPNOTE 6.3), and tszip's own constants.

A ``.tsz`` file is a zip archive (members stored, not deflated, as zarr's
ZipStore writes them) of a Zarr v2 hierarchy: one group per tskit table, one
1-D array per column, each chunk Blosc-compressed (zstd, byte shuffle),
offset columns and a few others delta-filtered first. The root group's
attributes say ``format_name: tszip`` and ``format_version: [1, 0]``.
"""

from __future__ import annotations

from .._binary import Record

FORMAT_NAME = "tszip"
FORMAT_VERSION = (1, 0)
EXTENSION = ".tsz"
MAGIC = b"PK\x03\x04"

LOCAL_SIGNATURE = 0x04034B50
CENTRAL_SIGNATURE = 0x02014B50
END_SIGNATURE = 0x06054B50
ZIP64_END_SIGNATURE = 0x06064B50
ZIP64_LOCATOR_SIGNATURE = 0x07064B50
ZIP64_EXTRA_ID = 0x0001
STORED = 0
DEFLATED = 8
# An end record sits within its 22 bytes plus a comment of at most 65535 bytes of the end of the file.
END_SEARCH_BYTES = 22 + 0xFFFF
UNSET_32 = 0xFFFFFFFF
UNSET_16 = 0xFFFF

END = Record("end of central directory", [
    ("signature", "<u4"), ("disk", "<u2"), ("directory_disk", "<u2"), ("disk_entries", "<u2"),
    ("entries", "<u2"), ("directory_size", "<u4"), ("directory_offset", "<u4"), ("comment_length", "<u2"),
], size=22)

ZIP64_LOCATOR = Record("zip64 end of central directory locator", [
    ("signature", "<u4"), ("disk", "<u4"), ("end_offset", "<u8"), ("disks", "<u4"),
], size=20)

ZIP64_END = Record("zip64 end of central directory", [
    ("signature", "<u4"), ("record_size", "<u8"), ("version_made", "<u2"), ("version_needed", "<u2"),
    ("disk", "<u4"), ("directory_disk", "<u4"), ("disk_entries", "<u8"), ("entries", "<u8"),
    ("directory_size", "<u8"), ("directory_offset", "<u8"),
], size=56)

CENTRAL = Record("central directory entry", [
    ("signature", "<u4"), ("version_made", "<u2"), ("version_needed", "<u2"), ("flags", "<u2"),
    ("method", "<u2"), ("time", "<u2"), ("date", "<u2"), ("crc32", "<u4"), ("compressed_size", "<u4"),
    ("size", "<u4"), ("name_length", "<u2"), ("extra_length", "<u2"), ("comment_length", "<u2"),
    ("disk", "<u2"), ("internal_attributes", "<u2"), ("external_attributes", "<u4"), ("local_offset", "<u4"),
], size=46)

LOCAL = Record("local file header", [
    ("signature", "<u4"), ("version_needed", "<u2"), ("flags", "<u2"), ("method", "<u2"), ("time", "<u2"),
    ("date", "<u2"), ("crc32", "<u4"), ("compressed_size", "<u4"), ("size", "<u4"), ("name_length", "<u2"),
    ("extra_length", "<u2"),
], size=30)

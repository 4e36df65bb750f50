"""The byte layout: golden vectors, header fields at their offsets, offsets positions, chunking,
checksums and size strings (cases from bloscpack's own test suite and the research notes)."""

from __future__ import annotations

import hashlib
import struct
import zlib

import numpy as np
import pytest

import arrayio.bloscpack as bp
from arrayio.bloscpack._records import (
    BLOSC_HEADER,
    CHECKSUMS,
    HEADER,
    METADATA_HEADER,
    checksum_named,
    decode_blosc_flags,
)
from arrayio.bloscpack._args import calculate_nchunks, check_range, resolve_max_app_chunks

EMPTY_140 = bytes.fromhex(
    "626c706b03010108" "00000000" "00000000" "0100000000000000" "0a00000000000000"
    "7800000000000000" + "ff" * 80 + "0201130800000000" "01000000" "10000000" "3000f901")
CRC32_84 = bytes.fromhex(
    "626c706b03000208" "20000000" "20000000" "0100000000000000" "0000000000000000"
    "0201130820000000" "20000000" "30000000") + b"abcdefgh" * 4 + bytes.fromhex("a4981145")
METADATA_144 = bytes.fromhex(
    "626c706b03030008" "20000000" "20000000" "0100000000000000" "0100000000000000"
    "4a534f4e00000000" "00000006" "09000000" "10000000" "09000000" "0000000000000000") \
    + b'{"k":"v"}' + bytes(7) + bytes.fromhex("6000000000000000" "ffffffffffffffff") + CRC32_84[32:80]


def test_golden_empty_file_is_140_bytes():
    assert bp.pack_bytes_to_bytes(b"") == EMPTY_140
    assert bp.unpack_bytes_from_bytes(EMPTY_140) == (b"", None)


def test_golden_empty_without_offsets_and_checksum_is_48_bytes():
    packed = bp.pack_bytes_to_bytes(b"", bloscpack_args={"offsets": False, "checksum": None})
    assert len(packed) == 48
    assert packed[:8] == bytes.fromhex("626c706b03000008")


def test_golden_crc32_file_is_84_bytes():
    packed = bp.pack_bytes_to_bytes(b"abcdefgh" * 4, bloscpack_args={"offsets": False, "checksum": "crc32"})
    assert packed == CRC32_84


def test_golden_metadata_file_is_144_bytes():
    packed = bp.pack_bytes_to_bytes(
        b"abcdefgh" * 4, metadata={"k": "v"},
        metadata_args={"meta_codec": "None", "meta_checksum": None, "max_meta_size": 16},
        bloscpack_args={"checksum": None, "max_app_chunks": 1})
    assert packed == METADATA_144
    assert bp.unpack_bytes_from_bytes(packed) == (b"abcdefgh" * 4, {"k": "v"})


def test_annotated_100mb_dump_prefix():
    packed = bp.pack_ndarray_to_bytes(np.linspace(0, 100, 12_500_000))
    assert len(packed) == 4_766_448
    assert packed[:0x40] == bytes.fromhex(
        "626c706b03030108000010000 0e10500600000000000000 0c003000000000000"
        "4a534f4e00000000000101064400000 0a802000042000000 0000000000000000".replace(" ", ""))
    assert packed[0x2E8:0x2EC] == bytes.fromhex("631b9499")
    assert struct.unpack_from("<q", packed, 0x2EC)[0] == 9196
    assert packed[9196:9200] == bytes.fromhex("02010108")


@pytest.mark.parametrize("field, value, offset, raw", [
    ("format_version", 3, 4, "03"),
    ("options", 3, 5, "03"),
    ("checksum", 8, 6, "08"),
    ("typesize", 255, 7, "ff"),
    ("chunk_size", 2**20, 8, "00001000"),
    ("chunk_size", 2**31 - 1 - 16, 8, "efffff7f"),
    ("chunk_size", -1, 8, "ffffffff"),
    ("last_chunk", 385_280, 12, "00e10500"),
    ("nchunks", 2**63 - 1, 16, "ffffffffffffff7f"),
    ("nchunks", -1, 16, "ffffffffffffffff"),
    ("max_app_chunks", 2**63 - 2, 24, "feffffffffffff7f"),
])
def test_header_fields_encode_at_their_offsets(field, value, offset, raw):
    encoded = HEADER.pack(magic=b"blpk", **{field: value})
    assert encoded[offset:offset + len(raw) // 2].hex() == raw
    assert getattr(HEADER.unpack(encoded), field) == value


@pytest.mark.parametrize("field, value, offset, raw", [
    ("magic_format", b"JSON", 0, "4a534f4e00000000"),
    ("meta_checksum", 1, 9, "01"),
    ("meta_codec", 1, 10, "01"),
    ("meta_level", 6, 11, "06"),
    ("meta_size", 68, 12, "44000000"),
    ("max_meta_size", 680, 16, "a8020000"),
    ("meta_comp_size", 66, 20, "42000000"),
    ("user_codec", b"sesame", 24, "7365736 16d650000".replace(" ", "")),
])
def test_metadata_header_fields_encode_at_their_offsets(field, value, offset, raw):
    encoded = METADATA_HEADER.pack(**{field: value})
    assert encoded[offset:offset + len(raw) // 2].hex() == raw


def test_offsets_positions_736_and_96(tmp_path):
    data = np.linspace(0, 1, 2_000_000).tobytes()  # 16 000 000 bytes
    packed = bp.pack_bytes_to_bytes(data[:8 * 2**20], chunk_size="1M")
    header = HEADER.unpack(packed)
    assert (header.nchunks, header.max_app_chunks) == (8, 80)
    offsets = np.frombuffer(packed, "<i8", 88, 32)
    assert offsets[0] == 736 and np.all(offsets[8:] == -1)
    second = BLOSC_HEADER.unpack(packed, int(offsets[1]))
    assert second.nbytes == 2**20
    packed = bp.pack_bytes_to_bytes(data[:8 * 2**20], chunk_size="1M", bloscpack_args={"max_app_chunks": 0})
    assert struct.unpack_from("<q", packed, 32)[0] == 96
    packed = bp.pack_bytes_to_bytes(data[:8 * 2**20], chunk_size="2M")
    assert BLOSC_HEADER.unpack(packed, struct.unpack_from("<q", packed, 40)[0]).nbytes == 2 * 2**20


def test_sixteen_megabytes_first_offset_1440():
    packed = bp.pack_bytes_to_bytes(np.linspace(0, 1, 2_000_000).tobytes())
    header = HEADER.unpack(packed)
    assert (header.nchunks, header.last_chunk, header.max_app_chunks) == (16, 271_360, 160)
    assert struct.unpack_from("<q", packed, 32)[0] == 1440


def test_disabled_offsets_leave_no_table():
    packed = bp.pack_bytes_to_bytes(b"x" * 5000, chunk_size=1000, bloscpack_args={"offsets": False})
    header = HEADER.unpack(packed)
    assert header.options == 0 and header.max_app_chunks == 0
    with bp.open(packed) as reader:
        assert reader.offsets is None and reader.nchunks == 5


@pytest.mark.parametrize("chunk_size, expected", [
    (1, (9, 1, 1)), (2, (5, 2, 1)), (3, (3, 3, 3)), (4, (3, 4, 1)), (5, (2, 5, 4)),
    (6, (2, 6, 3)), (7, (2, 7, 2)), (8, (2, 8, 1)), (9, (1, 9, 9)),
])
def test_calculate_nchunks_nine_bytes(chunk_size, expected):
    assert calculate_nchunks(9, chunk_size) == expected


def test_calculate_nchunks_other_cases():
    assert calculate_nchunks(0, "1M") == (1, 0, 0)
    assert calculate_nchunks(23, 24) == (1, 23, 23)
    assert calculate_nchunks(int(5.2 * 2**20), "1M") == (6, 1_048_576, 209_715)
    assert calculate_nchunks(int(5.2 * 2**20), "2M") == (3, 2_097_152, 1_258_291)
    for bad in (0, -1, 2**31):
        with pytest.raises(ValueError):
            calculate_nchunks(10, bad)
    with pytest.raises(TypeError):
        calculate_nchunks(10, 1.5)


def test_max_app_chunks_rules():
    assert resolve_max_app_chunks(True, 16, lambda n: 10 * n) == 160
    assert resolve_max_app_chunks(True, 16, 7) == 7
    assert resolve_max_app_chunks(False, 16, 7) == 0
    assert resolve_max_app_chunks(True, -1, 7) == 0
    assert resolve_max_app_chunks(True, 2**63 - 10, 100) == 9
    with pytest.raises(TypeError):
        resolve_max_app_chunks(True, 1, 1.5)
    with pytest.raises(ValueError):
        resolve_max_app_chunks(True, 1, lambda n: -1)
    with pytest.raises(ValueError):
        resolve_max_app_chunks(True, 1, lambda n: 1.5)
    with pytest.raises(ValueError):
        check_range("x", 11, 0, 10)


def test_checksum_table_order_and_known_answers():
    data = b"\x23\x42\xbe\xef"
    assert [c.name for c in CHECKSUMS] == ["None", "adler32", "crc32", "md5", "sha1", "sha224", "sha256",
                                           "sha384", "sha512"]
    assert checksum_named(None)(data) == b""
    assert checksum_named("adler32")(data) == struct.pack("<I", zlib.adler32(data))
    assert checksum_named("crc32")(data) == struct.pack("<I", zlib.crc32(data))
    for name in ("md5", "sha1", "sha224", "sha256", "sha384", "sha512"):
        assert checksum_named(name)(data) == hashlib.new(name, data).digest()
    assert [c.size for c in CHECKSUMS] == [0, 4, 4, 16, 20, 28, 32, 48, 64]
    with pytest.raises(bp.NoSuchChecksum):
        checksum_named("sha3")


@pytest.mark.parametrize("length", [0, 1, 15, 5 * 1024 + 3, (1 << 20) + 7])
def test_zlib_sums_match_the_stdlib_on_every_length(length):
    # zlib-ng's SIMD adler32/crc32 replace the stdlib's when installed: same values, any length and alignment.
    data = np.random.default_rng(length).bytes(length + 3)
    for start in (0, 3):
        piece = memoryview(data)[start:start + length]
        assert checksum_named("adler32")(piece) == struct.pack("<I", zlib.adler32(piece))
        assert checksum_named("crc32")(piece) == struct.pack("<I", zlib.crc32(piece))


def test_checksums_match_the_reference(reference):
    from bloscpack.checksums import CHECKSUMS_LOOKUP

    data = b"\x23\x42\xbe\xef"
    for checksum in CHECKSUMS:
        assert checksum(data) == (CHECKSUMS_LOOKUP[checksum.name](data) or b"")


@pytest.mark.parametrize("size, text", [
    (9 * 2**40, "9.0T"), (int(4.78 * 2**30), "4.78G"), (int(12.3 * 2**20), "12.3M"),
    (int(966.7 * 2**10), "966.7K"), (128, "128.0B"), (0, "0B"),
])
def test_pretty_size(size, text):
    assert bp.pretty_size(size) == text


def test_reverse_pretty():
    assert bp.reverse_pretty("8K") == 8192
    assert bp.reverse_pretty("2G") == 2**31
    assert bp.reverse_pretty("5.2M") == 5_452_595
    with pytest.raises(ValueError):
        bp.reverse_pretty("2P")


@pytest.mark.parametrize("flags, expected", [
    (0x01, {"byte_shuffle": True, "codec": "blosclz"}),
    (0x02, {"pure_memcpy": True}),
    (0x04, {"bit_shuffle": True}),
    (0x10, {"split_blocks": False}),
    (0x20, {"codec": "lz4"}), (0x40, {"codec": "snappy"}), (0x60, {"codec": "zlib"}), (0x80, {"codec": "zstd"}),
])
def test_blosc_flags(flags, expected):
    decoded = decode_blosc_flags(flags)
    for key, value in expected.items():
        assert decoded[key] == value


@pytest.mark.parametrize("cname, codec_id", [("blosclz", 0), ("lz4", 1), ("lz4hc", 1), ("zlib", 3), ("zstd", 4)])
def test_codec_lands_in_chunk_flags(cname, codec_id):
    packed = bp.pack_ndarray_to_bytes(np.arange(10_000, dtype="f8"), blosc_args={"cname": cname})
    with bp.open(packed) as reader:
        assert reader.chunk_location(0)[1].flags >> 5 == codec_id


def test_typesize_follows_the_itemsize():
    packed = bp.pack_ndarray_to_bytes(np.arange(100, dtype=np.uint8), blosc_args={"typesize": 8})
    assert HEADER.unpack(packed).typesize == 1


def test_blosc_headers_of_special_chunks():
    incompressible = np.random.default_rng(1).random(255).astype("f4")
    with bp.open(bp.pack_ndarray_to_bytes(incompressible)) as reader:
        header = reader.chunk_location(0)[1]
        assert header.flags & 0x02 and header.cbytes == 255 * 4 + 16
    with bp.open(bp.pack_ndarray_to_bytes(np.linspace(0, 1, 5000), blosc_args={"shuffle": False})) as reader:
        assert reader.chunk_location(0)[1].flags & 0x01 == 0

"""Malformed files: a crafted case for every header and metadata field, every checksum and each
section cut short, then random truncations and byte flips. Only arrayio.FormatError may escape."""

from __future__ import annotations

import random
import struct
import zlib

import numpy as np
import pytest

import arrayio
import arrayio.bloscpack as bp
from arrayio.bloscpack._records import HEADER, METADATA_HEADER

ARRAY = np.arange(3000, dtype="<f8").reshape(300, 10)
VALID = bp.pack_ndarray_to_bytes(ARRAY, chunk_size=8000)  # 3 chunks, metadata, offsets, adler32
HEAD = HEADER.unpack(VALID)
META_AT = 32
META = METADATA_HEADER.unpack(VALID, META_AT)
TABLE_AT = META_AT + 32 + META.max_meta_size + 4
OFFSETS = np.frombuffer(VALID, "<i8", HEAD.nchunks + HEAD.max_app_chunks, TABLE_AT)
FIRST = int(OFFSETS[0])


def _patch(data: bytes, offset: int, raw: bytes) -> bytes:
    return data[:offset] + raw + data[offset + len(raw):]


def _header(**fields) -> bytes:
    return _patch(VALID, 0, HEADER.pack(**{**HEAD._asdict(), **fields}))


def _meta_header(**fields) -> bytes:
    return _patch(VALID, META_AT, METADATA_HEADER.pack(**{**META._asdict(), **fields}))


def _with_metadata(value: str, **meta_fields) -> bytes:
    """VALID with its metadata replaced by the raw JSON ``value`` (stored uncompressed, adler32 as before)."""
    text = value.encode("utf-8", "surrogateescape")
    room = max(META.max_meta_size, len(text))
    header = METADATA_HEADER.pack(**{**META._asdict(), "meta_codec": 0, "meta_size": len(text),
                                     "meta_comp_size": len(text), "max_meta_size": room, **meta_fields})
    section = header + text + bytes(room - len(text)) + struct.pack("<I", zlib.adler32(text))
    table = np.asarray(OFFSETS) + (len(section) - (TABLE_AT - META_AT))
    return VALID[:META_AT] + section + table.astype("<i8").tobytes() + VALID[FIRST:]


CASES = {
    "empty file": (b"", arrayio.TruncatedError),
    "short header": (VALID[:20], arrayio.TruncatedError),
    "magic": (_header(magic=b"blpx"), arrayio.FormatError),
    "version 2": (_header(format_version=2), arrayio.VersionTooOldError),
    "version 4": (_header(format_version=4), arrayio.VersionTooNewError),
    "options bit 2": (_header(options=0x07), arrayio.FormatError),
    "checksum id 9": (_header(checksum=9), arrayio.FormatError),
    "chunk_size -2": (_header(chunk_size=-2), arrayio.FormatError),
    "chunk_size too big": (_header(chunk_size=2**31 - 1), arrayio.FormatError),
    "last_chunk > chunk_size": (_header(last_chunk=HEAD.chunk_size + 8), arrayio.FormatError),
    "last_chunk -5": (_header(last_chunk=-5), arrayio.FormatError),
    "nchunks -2": (_header(nchunks=-2), arrayio.FormatError),
    "nchunks huge": (_header(nchunks=2**62), arrayio.FormatError),
    "nchunks one more": (_header(nchunks=HEAD.nchunks + 1, max_app_chunks=HEAD.max_app_chunks - 1),
                         arrayio.FormatError),
    "nchunks one less": (_header(nchunks=HEAD.nchunks - 1, max_app_chunks=HEAD.max_app_chunks + 1),
                         arrayio.FormatError),
    "max_app negative": (_header(max_app_chunks=-1), arrayio.FormatError),
    "max_app overflow": (_header(max_app_chunks=2**63 - 1), arrayio.FormatError),
    "max_app huge": (_header(max_app_chunks=2**40), arrayio.TruncatedError),
    "max_app without offsets": (_header(options=0x02), arrayio.FormatError),
    "typesize 0 is fine but size wrong": (_header(last_chunk=HEAD.last_chunk - 8), arrayio.FormatError),
    "meta magic": (_meta_header(magic_format=b"YAML"), arrayio.FormatError),
    "meta checksum id": (_meta_header(meta_checksum=9), arrayio.FormatError),
    "meta codec id": (_meta_header(meta_codec=2), arrayio.FormatError),
    "meta comp > max": (_meta_header(meta_comp_size=META.max_meta_size + 1), arrayio.FormatError),
    "meta max past end": (_meta_header(max_meta_size=2**32 - 1), arrayio.TruncatedError),
    "meta size wrong": (_meta_header(meta_size=META.meta_size + 1), arrayio.FormatError),
    "meta digest": (_patch(VALID, META_AT + 32 + META.max_meta_size, b"\0\0\0\0"), bp.ChecksumMismatch),
    "meta stream": (_patch(VALID, META_AT + 34, b"\xff\xff"), arrayio.FormatError),
    "meta not json": (_with_metadata("{nope"), arrayio.FormatError),
    "meta deep json": (_with_metadata("[" * 50_000), arrayio.FormatError),
    "meta not utf8": (_with_metadata('"\udcff"'), arrayio.FormatError),
    "meta no dtype": (_with_metadata('{"shape":[300,10],"order":"C","container":"numpy"}'), arrayio.FormatError),
    "meta bad dtype": (_with_metadata('{"dtype":"\'<q9\'","shape":[300,10],"order":"C","container":"numpy"}'),
                       arrayio.FormatError),
    "meta object dtype": (_with_metadata('{"dtype":"\'|O\'","shape":[3000],"order":"C","container":"numpy"}'),
                          arrayio.FormatError),
    "meta shape too small": (_with_metadata('{"dtype":"\'<f8\'","shape":[10],"order":"C","container":"numpy"}'),
                             arrayio.FormatError),
    "meta shape negative": (_with_metadata('{"dtype":"\'<f8\'","shape":[-3000],"order":"C","container":"numpy"}'),
                            arrayio.FormatError),
    "meta shape not ints": (_with_metadata('{"dtype":"\'<f8\'","shape":[1.5],"order":"C","container":"numpy"}'),
                            arrayio.FormatError),
    "meta order": (_with_metadata('{"dtype":"\'<f8\'","shape":[3000],"order":"X","container":"numpy"}'),
                   arrayio.FormatError),
    "offset[1] wrong": (_patch(VALID, TABLE_AT + 8, struct.pack("<q", int(OFFSETS[1]) + 1)), arrayio.FormatError),
    "chunk version 5": (_patch(VALID, FIRST, b"\x05"), arrayio.FormatError),
    "chunk cbytes small": (_patch(VALID, FIRST + 12, struct.pack("<I", 3)), arrayio.FormatError),
    "chunk cbytes huge": (_patch(VALID, FIRST + 12, struct.pack("<I", 2**31)), arrayio.FormatError),
    "chunk nbytes": (_patch(VALID, FIRST + 4, struct.pack("<I", 8)), arrayio.FormatError),
    "chunk digest": (_patch(VALID, int(OFFSETS[1]) - 4, b"\0\0\0\0"), bp.ChecksumMismatch),
    "chunk payload": (_patch(VALID, FIRST + 20, b"\xaa"), bp.ChecksumMismatch),
    "cut in metadata": (VALID[:META_AT + 40], arrayio.TruncatedError),
    "cut in offsets": (VALID[:TABLE_AT + 8], arrayio.TruncatedError),
    "cut in chunk 0": (VALID[:FIRST + 100], arrayio.TruncatedError),
    "cut in last digest": (VALID[:-2], arrayio.TruncatedError),
}


@pytest.mark.parametrize("name", list(CASES))
def test_crafted_case_raises_a_format_error(name):
    data, expected = CASES[name]
    with pytest.raises(arrayio.FormatError) as raised:
        bp.unpack_ndarray_from_bytes(data)
    if expected is not None:
        assert isinstance(raised.value, expected), raised.value
    assert str(raised.value).startswith("bloscpack:")
    problems = bp.validate(data)
    assert problems and all(str(problem).startswith("bloscpack:") for problem in problems)
    assert any(isinstance(problem.offset, int) for problem in problems), problems


def test_messages_name_field_offset_and_expectation():
    with pytest.raises(bp.ChecksumMismatch) as raised:
        bp.unpack_ndarray_from_bytes(CASES["chunk payload"][0])
    assert str(raised.value).startswith(f"bloscpack: chunk 0 adler32 digest at byte {int(OFFSETS[1]) - 4}: expected")
    assert isinstance(raised.value, RuntimeError)
    with pytest.raises(bp.FormatVersionMismatch):
        bp.unpack_ndarray_from_bytes(CASES["version 4"][0])
    with pytest.raises(arrayio.TruncatedError, match="chunk 0"):
        bp.unpack_ndarray_from_bytes(CASES["cut in chunk 0"][0])
    with pytest.raises(arrayio.FormatError, match=r"metadata\['shape'\] at byte 64"):
        bp.unpack_ndarray_from_bytes(CASES["meta shape too small"][0])


def test_garbage_offsets_fall_back_to_a_scan():
    garbage = _patch(VALID, TABLE_AT, struct.pack("<3q", 5, 7, 1))
    assert np.array_equal(bp.unpack_ndarray_from_bytes(garbage), ARRAY)
    problems = bp.validate(garbage)
    assert len(problems) == 1 and "offsets table" in str(problems[0]) and problems[0].field == "offsets table"


VARIANTS = [
    VALID,
    bp.pack_ndarray_to_bytes(ARRAY, chunk_size=4000, bloscpack_args={"checksum": None}),
    bp.pack_ndarray_to_bytes(ARRAY, chunk_size=4000, bloscpack_args={"checksum": None, "offsets": False},
                             blosc_args={"cname": "zstd"}),
    bp.pack_bytes_to_bytes(np.linspace(0, 1, 2000).tobytes(), chunk_size=3000, metadata={"k": list(range(30))},
                           bloscpack_args={"checksum": None}, blosc_args={"cname": "lz4", "shuffle": 2}),
    bp.pack_bytes_to_bytes(bytes(range(256)) * 20, chunk_size=1000, bloscpack_args={"checksum": "sha1"},
                           blosc_args={"cname": "zlib"}),
]


def _exercise(data: bytes) -> None:
    """Every reading entry point; only FormatError may escape."""
    bp.validate(data)
    try:
        with bp.open(data) as reader:
            reader.read()
            if reader.shape and reader.order == "C":
                reader[len(reader) // 2:len(reader) // 2 + 3]
            list(reader.iter_chunks())
        with bp.open(data) as reader:
            reader.info()
            reader.entries()
        bp.unpack_bytes_from_bytes(data)
    except arrayio.FormatError:
        pass


@pytest.mark.parametrize("seed", range(300))
def test_fuzz_truncations_and_flips(seed):
    rng = random.Random(seed)
    data = bytearray(VARIANTS[seed % len(VARIANTS)])
    if seed % 3 == 0:
        data = data[:rng.randrange(len(data))]
    else:
        for _ in range(rng.choice((1, 1, 2, 8))):
            position = rng.randrange(len(data))
            data[position] = rng.randrange(256) if seed % 3 == 1 else data[position] ^ (1 << rng.randrange(8))
    _exercise(bytes(data))


@pytest.mark.parametrize("field, offset", [
    ("metadata header.meta_options", META_AT + METADATA_HEADER.offsets["meta_options"]),
    ("metadata header.user_codec", META_AT + METADATA_HEADER.offsets["user_codec"] + 3),
    ("metadata spare room", META_AT + 32 + META.meta_comp_size + 5),
])
def test_bytes_written_zero_and_never_read_load_but_do_not_validate(field, offset):
    data = _patch(VALID, offset, b"\x40")
    assert np.array_equal(bp.unpack_ndarray_from_bytes(data), ARRAY)
    (problem,) = bp.validate(data)
    assert problem.field == field and str(problem).startswith(f"bloscpack: {field} at byte ")
    assert problem.offset == (offset if field == "metadata spare room" else METADATA_HEADER.offset_of(
        field.split(".")[1], base=META_AT))


def test_claims_beyond_blosc_expansion_are_refused_before_allocating():
    # Found by fuzzing: nchunks -1 and one chunk header claiming 989,856,744 bytes from 42 stored bytes
    # made validate() size a ~1 GB scratch buffer before reading the chunk.
    data = bytes.fromhex("626c706b03000108e8030000e8030000ffffffffffffffff0000000000000000"
                         "02011108e803003be8030000260000001400000e000000002378787878e0ffff"
                         "ffdc03017878eb09657f")
    with pytest.raises(arrayio.FormatError, match=r"blosc header.nbytes at byte 32: expected at most 32768 x"):
        bp.open(data)
    assert str(bp.validate(data)[0]).startswith("bloscpack: the chunks' blosc header.nbytes at byte 32")
    claim = _patch(_patch(VALID, HEADER.offset_of("chunk_size"), struct.pack("<i", 2**31 - 17)),
                   HEADER.offset_of("last_chunk"), struct.pack("<i", 2**31 - 17))
    with pytest.raises(arrayio.FormatError, match=r"header.chunk_size at byte \d+: expected at most 32768 x"):
        bp.open(claim)

"""In-place append and metadata rewrite: the reference's arithmetic, its errors, and our ordering."""

from __future__ import annotations

import os

import numpy as np
import pytest

import arrayio.bloscpack as bp
from arrayio.bloscpack._records import HEADER

SIXTEEN_MB = np.linspace(0, 1, 2_000_000).tobytes()


@pytest.fixture
def sixteen(tmp_path):
    source = tmp_path / "data.bin"
    source.write_bytes(SIXTEEN_MB)
    packed = tmp_path / "data.blp"
    bp.pack_file_to_file(source, packed)
    return source, packed


def _header(path):
    return HEADER.unpack(open(path, "rb").read(32))


def test_append_arithmetic(sixteen):
    source, packed = sixteen
    header = _header(packed)
    assert (header.nchunks, header.last_chunk, header.max_app_chunks) == (16, 271_360, 160)
    assert bp.append(packed, source) == 15
    header = _header(packed)
    assert (header.nchunks, header.last_chunk, header.max_app_chunks) == (31, 542_720, 145)
    assert bp.unpack_bytes_from_file(packed)[0] == SIXTEEN_MB * 2
    assert bp.validate(packed) == []
    assert bp.append(packed, source) == 15
    assert bp.unpack_bytes_from_file(packed)[0] == SIXTEEN_MB * 3


def test_append_squeezes_into_the_last_chunk(tmp_path):
    packed, extra = tmp_path / "a.blp", tmp_path / "extra"
    bp.pack_bytes_to_file(bytes(2 * 2**20), packed)
    extra.write_bytes(b"\x01" * 1023)
    assert bp.append(packed, extra) == 1
    assert (_header(packed).nchunks, _header(packed).last_chunk) == (3, 1023)
    assert bp.append(packed, extra) == 0
    assert (_header(packed).nchunks, _header(packed).last_chunk) == (3, 2046)
    assert bp.unpack_bytes_from_file(packed)[0] == bytes(2 * 2**20) + b"\x01" * 2046


def test_append_leaves_no_stale_bytes(tmp_path):
    packed, extra = tmp_path / "a.blp", tmp_path / "extra"
    bp.pack_bytes_to_file(bytes(13_000), packed, chunk_size=8000, blosc_args={"clevel": 0})
    extra.write_bytes(bytes(3000))
    before = os.path.getsize(packed)
    # the last chunk was stored raw (clevel 0); rewritten at clevel 9 it shrinks
    assert bp.append(packed, extra, blosc_args={"clevel": 9}) == 0
    assert bp.open(packed).info()["trailing_bytes"] == 0
    assert os.path.getsize(packed) < before - 4000
    assert bp.unpack_bytes_from_file(packed)[0] == bytes(16_000)


def test_append_to_single_chunk_files(tmp_path):
    packed, extra = tmp_path / "a.blp", tmp_path / "extra"
    bp.pack_bytes_to_file(b"abcd" * 250, packed)  # one chunk of 1000 bytes, max_app 10
    extra.write_bytes(b"efgh" * 500)
    assert bp.append(packed, extra) == 2
    assert _header(packed).nchunks == 3
    extra.write_bytes(b"z")
    assert bp.append(packed, extra) == 1
    extra.write_bytes(b"")
    assert bp.append(packed, extra) == 0
    assert bp.unpack_bytes_from_file(packed)[0] == b"abcd" * 250 + b"efgh" * 500 + b"z"


def test_append_needs_offsets_and_room(tmp_path):
    packed, extra = tmp_path / "a.blp", tmp_path / "extra"
    extra.write_bytes(bytes(5000))
    bp.pack_bytes_to_file(bytes(1000), packed, chunk_size=100, bloscpack_args={"offsets": False})
    with pytest.raises(bp.OffsetsRequired) as raised:
        bp.append(packed, extra)
    assert isinstance(raised.value, RuntimeError)
    bp.pack_bytes_to_file(bytes(1000), packed, chunk_size=100, bloscpack_args={"max_app_chunks": 0})
    with pytest.raises(bp.NotEnoughSpace):
        bp.append(packed, extra)
    assert bp.unpack_bytes_from_file(packed)[0] == bytes(1000)


def test_append_with_other_blosc_args(tmp_path):
    packed, extra = tmp_path / "a.blp", tmp_path / "extra"
    data = np.linspace(0, 1, 25_000).tobytes()  # 200 000 bytes: two full 100 000-byte chunks
    bp.pack_bytes_to_file(data, packed, chunk_size=100_000)
    size = os.path.getsize(packed)
    old_last = bp.open(packed).entries()[-1]["cbytes"]
    extra.write_bytes(data)
    assert bp.append(packed, extra, blosc_args={"clevel": 0}) == 2
    # the full last chunk is rewritten too (with no new data), then two raw chunks: 16 + 4 overhead each
    assert os.path.getsize(packed) == size - old_last + 3 * (100_000 + 16) + 2 * 4
    bp.pack_bytes_to_file(data, packed, chunk_size=100_000)
    bp.append(packed, extra, blosc_args={"shuffle": False})
    rows = bp.open(packed).entries()
    assert rows[0]["shuffle"] == "byte" and rows[-1]["shuffle"] == "none"
    assert bp.unpack_bytes_from_file(packed)[0] == data * 2


def test_append_builds_the_new_file_beside_the_old_one(sixteen):
    # crash order (docs/formats/bloscpack.md): the old file is never written; the new one replaces it by rename
    source, packed = sixteen
    before = packed.read_bytes()
    with open(packed, "rb") as old:
        bp.append(packed, source)
        old.seek(0)
        assert old.read() == before
        assert os.fstat(old.fileno()).st_ino != os.stat(packed).st_ino
    assert bp.unpack_bytes_from_file(packed)[0] == bp.unpack_bytes_from_file(before)[0] + source.read_bytes()
    assert [name for name in os.listdir(packed.parent) if name.endswith(".tmp")] == []


def test_append_interop_both_ways(tmp_path, reference, reference_append):
    source = tmp_path / "data.bin"
    source.write_bytes(SIXTEEN_MB[:3_000_000])
    ours, theirs = tmp_path / "ours.blp", tmp_path / "theirs.blp"
    bp.pack_file_to_file(source, ours, chunk_size="512K")
    reference.pack_file_to_file(str(source), str(theirs), chunk_size="512K")
    assert ours.read_bytes() == theirs.read_bytes()
    bp.append(ours, source)
    reference_append(str(theirs), str(source))
    assert ours.read_bytes() == theirs.read_bytes()
    assert reference.unpack_bytes_from_file(str(ours))[0] == SIXTEEN_MB[:3_000_000] * 2
    bp.append(theirs, source)
    reference_append(str(ours), str(source))
    assert bp.unpack_bytes_from_file(ours)[0] == bp.unpack_bytes_from_file(theirs)[0] == SIXTEEN_MB[:3_000_000] * 3


def test_rewrite_metadata_rules(tmp_path):
    path = tmp_path / "m.blp"
    bp.pack_bytes_to_file(b"x" * 100, path, metadata={"a": 1}, metadata_args={"max_meta_size": 1000})
    bp.rewrite_metadata(path, {"a": 2, "grown": list(range(50))})
    assert bp.unpack_bytes_from_file(path) == (b"x" * 100, {"a": 2, "grown": list(range(50))})
    with pytest.raises(bp.NoChangeInMetadata):
        bp.rewrite_metadata(path, {"a": 2, "grown": list(range(50))})
    with pytest.raises(bp.ChecksumLengthMismatch):
        bp.rewrite_metadata(path, {"a": 3}, checksum="sha512")
    bp.rewrite_metadata(path, {"a": 4}, checksum="crc32")
    with pytest.raises(bp.MetadataSectionTooSmall):
        bp.rewrite_metadata(path, {"big": [str(i) * 3 for i in range(400)]}, codec="None")
    with pytest.raises(bp.NoSuchCodec):
        bp.rewrite_metadata(path, {"a": 5}, codec="lzma")
    assert bp.unpack_bytes_from_file(path) == (b"x" * 100, {"a": 4})
    assert bp.validate(path) == []
    bp.pack_bytes_to_file(b"x", path)
    with pytest.raises(bp.NoMetadataFound):
        bp.rewrite_metadata(path, {"a": 1})

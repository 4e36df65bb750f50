"""Leaving bloscpack: .blp -> python-blosc2 .b2nd / .b2frame and back, with python-blosc2 and the reference
bloscpack 0.16 reading and writing the other side."""

from __future__ import annotations

import os

import numpy as np
import pytest
import references

blosc2 = pytest.importorskip("blosc2")

import arrayio.bloscpack as blp  # noqa: E402
from arrayio import blosc2 as migrate  # noqa: E402
from arrayio.convert import convert  # noqa: E402
from arrayio.errors import FormatError, UnsupportedError  # noqa: E402

RNG = np.random.default_rng(23)
ARRAYS = {
    "c-2d": np.linspace(0, 100, 200_000).reshape(-1, 100),
    "f-2d": np.asfortranarray(RNG.integers(0, 1000, (300, 257), dtype=np.int32)),
    "1d-uint16": np.arange(300_000, dtype=np.uint16),
    "3d-float32": RNG.random((30, 20, 40), dtype=np.float32),
    "0d": np.array(2.5),
    "empty": np.zeros((0, 7)),
    "structured": np.array([(1, 2.0), (3, 4.0)] * 5000, dtype=[("a", "<i4"), ("b", "<f8")]),
}


@pytest.fixture(scope="module")
def reference_bloscpack():
    return references.bloscpack(pytest.importorskip)


def _read_b2nd(path) -> np.ndarray:
    opened = blosc2.open(str(path))
    return opened[()] if opened.ndim == 0 else opened[:]


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_reference_blp_to_b2nd_read_by_python_blosc2(reference_bloscpack, tmp_path, name):
    array = ARRAYS[name]
    source, target = tmp_path / "a.blp", tmp_path / "a.b2nd"
    chunk = (64 << 10) // array.dtype.itemsize * array.dtype.itemsize  # byte chunks that end mid-row
    reference_bloscpack.pack_ndarray_to_file(array, str(source), chunk_size=chunk if array.nbytes > chunk else "1M")
    assert convert(source, target) == "b2nd"
    read = _read_b2nd(target)
    assert read.dtype == array.dtype and read.shape == array.shape
    np.testing.assert_array_equal(read, array)
    opened = blosc2.open(str(target))
    assert opened.schunk.vlmeta["order"] == ("F" if np.isfortran(array) else "C")
    assert opened.schunk.vlmeta["bloscpack"]["container"] == "numpy"


def test_chunking_and_codec_carry_over(tmp_path):
    array = np.arange(1 << 20, dtype=np.float64)
    source = tmp_path / "z.blp"
    blp.pack_ndarray_to_file(array, source, chunk_size=1 << 20, blosc_args={"cname": "zstd", "clevel": 3,
                                                                             "shuffle": 2})
    with blp.open(source) as reader:
        nchunks = reader.nchunks
    migrate.from_bloscpack(source, tmp_path / "z.b2nd", clevel=3)
    opened = blosc2.open(str(tmp_path / "z.b2nd"))
    assert opened.chunks == ((1 << 20) // 8,) and opened.schunk.nchunks == nchunks
    assert opened.schunk.cparams.codec == blosc2.Codec.ZSTD
    assert blosc2.Filter.BITSHUFFLE in opened.schunk.cparams.filters
    assert opened.schunk.cparams.clevel == 3
    frame = tmp_path / "z.b2frame"
    migrate.from_bloscpack(source, frame, kind="frame")
    schunk = blosc2.open(str(frame))
    assert schunk.nchunks == nchunks and schunk.chunksize == 1 << 20 and schunk.typesize == 8


def test_byte_payload_to_b2frame_and_back(reference_bloscpack, tmp_path):
    payload = os.urandom(700_000) + bytes(900_000)
    source = tmp_path / "bytes.blp"
    reference_bloscpack.pack_bytes_to_file(payload, str(source), chunk_size=256 << 10)
    assert convert(source, tmp_path / "bytes.b2frame") == "b2frame"
    schunk = blosc2.open(str(tmp_path / "bytes.b2frame"))
    assert schunk[:] == payload and schunk.nchunks == 7
    assert convert(tmp_path / "bytes.b2frame", tmp_path / "back.blp") == "bloscpack"
    assert reference_bloscpack.unpack_bytes_from_file(str(tmp_path / "back.blp"))[0] == payload


@pytest.mark.parametrize("name", ["c-2d", "f-2d", "3d-float32", "1d-uint16"])
def test_python_blosc2_ndarrays_to_blp_read_by_reference_bloscpack(reference_bloscpack, tmp_path, name):
    array = ARRAYS[name]
    source = tmp_path / "theirs.b2nd"
    written = blosc2.asarray(np.ascontiguousarray(array), urlpath=str(source), mode="w",
                             cparams={"codec": blosc2.Codec.LZ4, "clevel": 5})
    del written
    assert convert(source, tmp_path / "back.blp") == "bloscpack"
    back = reference_bloscpack.unpack_ndarray_from_file(str(tmp_path / "back.blp"))
    np.testing.assert_array_equal(back, array)
    with blp.open(tmp_path / "back.blp") as reader:
        assert reader.info()["first_chunk"]["codec"] == "lz4"


@pytest.mark.parametrize("name", ["f-2d", "structured", "0d"])
def test_round_trip_keeps_fortran_order_and_dtype(tmp_path, name):
    array = ARRAYS[name]
    blp.pack_ndarray_to_file(array, tmp_path / "a.blp")
    migrate.from_bloscpack(tmp_path / "a.blp", tmp_path / "a.b2nd")
    migrate.to_bloscpack(tmp_path / "a.b2nd", tmp_path / "b.blp")
    back = blp.unpack_ndarray_from_file(tmp_path / "b.blp")
    np.testing.assert_array_equal(back, array)
    assert back.dtype == array.dtype and np.isfortran(back) == np.isfortran(array)


def test_bytes_cannot_become_an_ndarray(tmp_path):
    blp.pack_bytes_to_file(b"abc" * 1000, tmp_path / "b.blp")
    with pytest.raises(UnsupportedError, match="b2frame"):
        migrate.from_bloscpack(tmp_path / "b.blp", tmp_path / "b.b2nd")
    assert not (tmp_path / "b.b2nd").exists()


def test_a_corrupt_chunk_leaves_no_output(tmp_path):
    array = np.arange(200_000, dtype=np.int64)
    blp.pack_ndarray_to_file(array, tmp_path / "a.blp", chunk_size=1 << 16)
    data = bytearray((tmp_path / "a.blp").read_bytes())
    data[-100] ^= 0xFF
    (tmp_path / "bad.blp").write_bytes(bytes(data))
    with pytest.raises(FormatError):
        migrate.from_bloscpack(tmp_path / "bad.blp", tmp_path / "bad.b2nd")
    assert sorted(os.listdir(tmp_path)) == ["a.blp", "bad.blp"]


def test_cli_converts_a_folder_one_line_each(tmp_path, cli):
    for index in range(2):
        blp.pack_ndarray_to_file(np.full((100, 10), index, dtype=np.int16), tmp_path / f"{index}.blp")
    for path in sorted(tmp_path.glob("*.blp")):
        result = cli("convert", str(path), str(path.with_suffix(".b2nd")))
        assert result.returncode == 0, result.stderr
    for index in range(2):
        np.testing.assert_array_equal(_read_b2nd(tmp_path / f"{index}.b2nd"), np.full((100, 10), index, np.int16))


def _blosc1_chunk(special: int) -> tuple[bytes, bytes]:
    """(data, its Blosc1 chunk) where the chunk's byte 31 (compressed data: a Blosc1 header is 16 bytes)
    has the bits c-blosc2 frames read as the Blosc2 special value ``special`` (0: none, 1: a chunk of zeros)."""
    blosc = pytest.importorskip("blosc")
    for length in range(1000, 1100):
        data = np.arange(length, dtype=np.float64).tobytes()
        chunk = blosc.compress(data, typesize=8, clevel=5, shuffle=blosc.SHUFFLE, cname="zstd")
        if (chunk[31] >> 4) & 7 == special:
            return data, chunk
    pytest.fail(f"no Blosc1 chunk of 1000..1099 float64 values has the bit pattern {special} at byte 31")


def test_why_blosc1_chunks_are_re_framed_for_blosc2_frames(tmp_path):
    """Why from_bloscpack re-frames Blosc1 chunks as Blosc2 ones instead of appending them as they are
    (docs/migrating-from-bloscpack.md): a Blosc2 frame (.b2frame, .b2nd) reads byte 31 of each appended chunk
    as Blosc2's special-value flags, which in an unchanged Blosc1 chunk is compressed data, so a chunk can be
    stored as "all zeros" and its bytes dropped; and a file-backed frame refuses Blosc1 chunks after the
    first. When this test fails, python-blosc2 takes Blosc1 chunks as they are."""
    data, chunk = _blosc1_chunk(special=1)
    in_memory = blosc2.SChunk(chunksize=len(data), contiguous=False)
    in_memory.append_chunk(chunk)
    assert in_memory.decompress_chunk(0) == data  # no frame: the chunk is kept as it is and reads back
    frame = blosc2.SChunk(chunksize=len(data), contiguous=True)
    frame.append_chunk(chunk)
    assert frame.decompress_chunk(0) == bytes(len(data)) != data  # in a frame: silently a chunk of zeros
    blosc = pytest.importorskip("blosc")
    data = (np.arange(1 << 17, dtype=np.float64) + np.random.default_rng(0).random(1 << 17)).tobytes()
    chunk = blosc.compress(data, typesize=8, clevel=5, shuffle=blosc.SHUFFLE, cname="zstd")
    on_disk = blosc2.SChunk(chunksize=len(data), contiguous=True, urlpath=str(tmp_path / "x.b2frame"), mode="w")
    on_disk.append_chunk(chunk)  # c-blosc2 traces "Invalid arguments for stdio write" here already
    with pytest.raises(RuntimeError, match="Could not append"):
        on_disk.append_chunk(chunk)


def _streams(chunk: bytes | memoryview, header: int) -> tuple[int, int, int, bytes]:
    """(nbytes, blocksize, typesize, the codec's streams) of a Blosc chunk whose header is ``header`` bytes
    (16: Blosc1, 32: Blosc2 extended): what re-framing must keep."""
    chunk = bytes(chunk)
    nbytes, blocksize = int.from_bytes(chunk[4:8], "little"), int.from_bytes(chunk[8:12], "little")
    blocks = 0 if chunk[2] & 0x02 else -(-nbytes // blocksize)  # a memcpy'd chunk has no block starts
    return nbytes, blocksize, chunk[3], chunk[header + 4 * blocks:]


@pytest.mark.parametrize("cname", ["blosclz", "lz4", "lz4hc", "zlib", "zstd"])
@pytest.mark.parametrize("shuffle", [0, 1, 2])
def test_b2frame_carries_the_compressed_streams_unchanged(tmp_path, cname, shuffle):
    """.blp -> .b2frame copies each chunk's compressed streams into a Blosc2 chunk (the codec is not run):
    python-blosc2 decodes every chunk to the original bytes, and the streams are byte-identical."""
    data = (np.cumsum(RNG.random(300_000)) * 100).astype(np.float32).tobytes()[:1_000_003]  # a short last chunk
    source, target = tmp_path / "x.blp", tmp_path / "x.b2frame"
    blp.pack_bytes_to_file(data, source, chunk_size=1 << 18,
                           blosc_args={"typesize": 4, "clevel": 5, "shuffle": shuffle, "cname": cname})
    assert migrate.from_bloscpack(source, target) == "frame"
    frame = blosc2.open(str(target))
    assert b"".join(frame.decompress_chunk(index) for index in range(frame.nchunks)) == data
    with blp.open(source) as reader:
        assert frame.nchunks == reader.nchunks == 4
        for index in range(reader.nchunks):
            assert _streams(frame.get_chunk(index), 32) == _streams(reader.compressed_chunk(index), 16)


def test_chunks_whose_streams_cannot_be_carried_are_named_none():
    """Another Blosc format version, snappy's codec number, both shuffle bits (already a Blosc2 header) or a
    chunk too short for its block starts: decoded and encoded again instead."""
    chunk = bytearray(bytes([2, 1, 0x81, 4]) + (4000).to_bytes(4, "little") + (1000).to_bytes(4, "little")
                      + (40).to_bytes(4, "little") + bytes(24))
    assert migrate._as_blosc2_chunk(memoryview(bytes(chunk))) is not None
    for position, value in ((0, 1), (2, 0x41), (2, 0x85)):
        changed = bytearray(chunk)
        changed[position] = value
        assert migrate._as_blosc2_chunk(memoryview(bytes(changed))) is None, (position, value)
    assert migrate._as_blosc2_chunk(memoryview(bytes(chunk[:20]))) is None


@pytest.mark.parametrize("shape", [(1_000_003,), (125_001, 8)])  # 1-D, and rows of 64 bytes: blocks of whole rows
def test_b2nd_carries_the_full_chunks_streams_unchanged(tmp_path, shape):
    """.blp -> .b2nd copies each full chunk's compressed streams into the NDArray's chunk of the same rows;
    the short last chunk is decoded and encoded (padded); python-blosc2 reads the array and any slice back."""
    array = np.cumsum(RNG.random(shape), axis=0)
    source, target = tmp_path / "x.blp", tmp_path / "x.b2nd"
    blp.pack_ndarray_to_file(array, source, chunk_size=1 << 20,
                             blosc_args={"typesize": 8, "clevel": 5, "shuffle": 1, "cname": "zstd"})
    assert migrate.from_bloscpack(source, target) == "ndarray"
    opened = blosc2.open(str(target))
    assert np.array_equal(opened[:], array)
    assert np.array_equal(opened[123_456:654_321 // len(shape)], array[123_456:654_321 // len(shape)])
    with blp.open(source) as reader:
        assert opened.schunk.nchunks == reader.nchunks == 8
        for index in range(reader.nchunks - 1):
            assert _streams(opened.schunk.get_chunk(index), 32) == _streams(reader.compressed_chunk(index), 16)

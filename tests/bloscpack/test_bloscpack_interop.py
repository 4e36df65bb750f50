"""Interop with bloscpack 0.16.0 in both directions: it reads what we write, we read what it writes,
and where both use the same python-blosc the bytes are identical."""

from __future__ import annotations

import numpy as np
import pytest

import arrayio.bloscpack as bp

ARRAYS = {
    "f8": np.linspace(0, 100, 50_000),
    "i2-2d": np.arange(30_000, dtype="i2").reshape(300, 100),
    "u1": np.random.default_rng(2).integers(0, 255, 70_000, dtype=np.uint8),
    "c16-F": np.asfortranarray((np.arange(6000) * (1 + 2j)).reshape(60, 100)),
    ">i8": np.arange(9000, dtype=">i8"),
    "M8": np.arange(4000).astype("M8[s]"),
    "U3": np.array(["abc", "de", "f"] * 1000),
    "nested": np.zeros(500, dtype=[("a", "<i4"), ("b", [("c", "f8"), ("d", "S2")])]),
    "bool": np.arange(5000) % 3 == 0,
    "empty": np.empty((0, 4), "f4"),
    "0-d": np.array(1.25),
    "sliced": np.arange(40_000, dtype="f4").reshape(200, 200)[::3, 5:90],
}

SETTINGS = [
    ({}, {}),
    ({"cname": "lz4", "clevel": 5}, {"checksum": "None"}),
    ({"cname": "zstd", "shuffle": 2}, {"checksum": "sha256", "offsets": False}),
    ({"cname": "zlib", "shuffle": False, "clevel": 1}, {"checksum": "md5", "max_app_chunks": 3}),
    ({"cname": "lz4hc", "clevel": 0}, {"checksum": "crc32"}),
]


@pytest.mark.parametrize("name", list(ARRAYS))
@pytest.mark.parametrize("setting", range(len(SETTINGS)))
def test_ndarray_both_ways_byte_identical(reference, name, setting):
    array = ARRAYS[name]
    blosc_args, bloscpack_args = SETTINGS[setting]
    itemsize = array.dtype.itemsize
    chunk_size = itemsize * 997
    ours = bp.pack_ndarray_to_bytes(array, chunk_size=chunk_size, blosc_args=dict(blosc_args),
                                    bloscpack_args=dict(bloscpack_args))
    theirs = reference.pack_ndarray_to_bytes(array, chunk_size=chunk_size,
                                             blosc_args=reference.BloscArgs(**blosc_args),
                                             bloscpack_args=reference.BloscpackArgs(**bloscpack_args))
    assert ours == theirs
    from_ours = reference.unpack_ndarray_from_bytes(ours)
    from_theirs = bp.unpack_ndarray_from_bytes(theirs)
    for back in (from_ours, from_theirs):
        assert back.dtype == array.dtype and back.shape == array.shape and np.array_equal(back, array)


@pytest.mark.parametrize("metadata", [None, {"a": [1, 2, 3], "b": "text"}, ["list", 1], "x" * 500])
@pytest.mark.parametrize("offsets", [True, False])
def test_bytes_with_metadata_both_ways(reference, metadata, offsets):
    data = np.linspace(0, 1, 30_000).tobytes()
    ours = bp.pack_bytes_to_bytes(data, chunk_size="32K", metadata=metadata, bloscpack_args={"offsets": offsets})
    theirs = reference.pack_bytes_to_bytes(data, chunk_size="32K", metadata=metadata,
                                           bloscpack_args=reference.BloscpackArgs(offsets=offsets))
    assert ours == theirs
    assert reference.unpack_bytes_from_bytes(ours) == (data, metadata)
    assert bp.unpack_bytes_from_bytes(theirs) == (data, metadata)


@pytest.mark.parametrize("meta_args", [
    {"meta_codec": "None", "meta_checksum": "sha1"},
    {"meta_level": 9, "max_meta_size": 4000},
    {"meta_checksum": "None", "meta_codec": "zlib", "meta_level": 1},
])
def test_metadata_args_both_ways(reference, meta_args):
    metadata = {"key": list(range(40))}
    ours = bp.pack_bytes_to_bytes(b"abc" * 100, metadata=metadata, metadata_args=dict(meta_args))
    theirs = reference.pack_bytes_to_bytes(b"abc" * 100, metadata=metadata,
                                           metadata_args=reference.MetadataArgs(**meta_args))
    assert ours == theirs
    assert bp.unpack_bytes_from_bytes(theirs)[1] == metadata


def test_files_both_ways(tmp_path, reference):
    data = np.random.default_rng(5).standard_normal(200_000).tobytes()
    source = tmp_path / "in.bin"
    source.write_bytes(data)
    bp.pack_file_to_file(source, tmp_path / "ours.blp", chunk_size="256K")
    reference.pack_file_to_file(str(source), str(tmp_path / "theirs.blp"), chunk_size="256K")
    assert (tmp_path / "ours.blp").read_bytes() == (tmp_path / "theirs.blp").read_bytes()
    reference.unpack_file_from_file(str(tmp_path / "ours.blp"), str(tmp_path / "a.out"))
    bp.unpack_file_from_file(tmp_path / "theirs.blp", tmp_path / "b.out")
    assert (tmp_path / "a.out").read_bytes() == (tmp_path / "b.out").read_bytes() == data
    array = np.arange(100_000, dtype="f8").reshape(1000, 100)
    reference.pack_ndarray_to_file(array, str(tmp_path / "r.blp"))
    with bp.open(str(tmp_path / "r.blp")) as reader:
        assert np.array_equal(reader[250:260, ::7], array[250:260, ::7])

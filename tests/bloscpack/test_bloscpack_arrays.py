"""Round trips of every kind of array and byte stream, the lazy reader, and the writer's rules."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import arrayio
import arrayio.bloscpack as bp
from arrayio.bloscpack._records import HEADER

NUMERIC = [np.dtype(code) for code in "bBhHiIlLqQefdgFD?"] + [np.dtype("M8[ns]"), np.dtype("m8[s]")]
SHAPES = [(64,), (8, 8), (4, 16), (4, 4, 4)]


def _sample(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    raw = np.random.default_rng(7).integers(0, 255, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    values = raw.view(dtype).reshape(shape)
    return np.nan_to_num(values) if dtype.kind in "fc" else values


@pytest.mark.parametrize("dtype", NUMERIC, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_numeric_round_trip(dtype, shape):
    array = _sample(dtype, shape)
    for candidate in (array, np.asfortranarray(array)):
        packed = bp.pack_ndarray_to_bytes(candidate, chunk_size=dtype.itemsize * 5)
        back = bp.unpack_ndarray_from_bytes(packed)
        assert back.dtype == candidate.dtype and back.shape == candidate.shape
        assert back.tobytes(order="A") == candidate.tobytes(order="A")
        assert bool(np.isfortran(back)) == bool(np.isfortran(candidate))


@pytest.mark.parametrize("array", [
    np.array(["ab", "cde", "f"], dtype="U4"),
    np.array([b"ab", b"cde"], dtype="S3"),
    np.array([(1, "a", 2.5)], dtype="i4,U1,f8"),
    np.array([(1, b"ab", (2.0, 3))] * 5, dtype=[("a", "<i4"), ("b", "S2"), ("c", [("x", "f8"), ("y", "i2")])]),
    np.array([(1, [1, 2])], dtype=[("a", "i2"), ("b", "i4", (2,))]),
    np.arange(10, dtype=">i8"),
    np.array(3.5),
    np.empty((0,), "f8"),
    np.empty((3, 0, 2), "i2"),
    np.arange(100, dtype="f8").reshape(10, 10)[::2, 1::3],
    np.arange(20_000, dtype="f4"),
    np.rec.fromarrays([np.arange(3), np.arange(3.0)], names="x,y"),
], ids=lambda a: str(a.dtype))
def test_special_arrays_round_trip(array, tmp_path):
    back = bp.unpack_ndarray_from_bytes(bp.pack_ndarray_to_bytes(array))
    assert back.dtype == array.dtype and back.shape == array.shape
    assert np.array_equal(back, array)
    path = tmp_path / "a.blp"
    bp.pack_ndarray_to_file(array, path)
    assert np.array_equal(bp.unpack_ndarray_from_file(path), array)


def test_structured_dtype_metadata_is_a_repr():
    packed = bp.pack_ndarray_to_bytes(np.zeros(2, dtype=[("a", "<i4"), ("b", "|S2", (2,))]))
    with bp.open(packed) as reader:
        assert reader.metadata == {"dtype": "[('a', '<i4'), ('b', '|S2', (2,))]", "shape": [2], "order": "C",
                                   "container": "numpy"}
    with bp.open(bp.pack_ndarray_to_bytes(np.zeros(2, "M8[ns]"))) as reader:
        assert reader.metadata["dtype"] == "'<M8[ns]'"
    with bp.open(bp.pack_ndarray_to_bytes(np.zeros(2, "U4"))) as reader:
        assert reader.header.typesize == 16


@pytest.mark.parametrize("stored, dtype", [
    ("<f8", np.dtype("<f8")),
    ([["a", "<f8"], ["b", "<i4"]], np.dtype([("a", "<f8"), ("b", "<i4")])),
    ([["a", [["b", "<f8"]]]], np.dtype([("a", [("b", "<f8")])])),
])
def test_pre_0_7_2_metadata_still_reads(stored, dtype):
    array = np.zeros(3, dtype)
    packed = bp.pack_bytes_to_bytes(array.tobytes(), metadata={"dtype": stored, "shape": [3], "order": "C",
                                                                "container": "numpy"})
    assert bp.unpack_ndarray_from_bytes(packed).dtype == dtype


def test_object_arrays_are_rejected():
    with pytest.raises(bp.ObjectNumpyArrayRejection):
        bp.pack_ndarray_to_bytes(np.array([object()]))
    with pytest.raises(bp.ObjectNumpyArrayRejection):
        bp.pack_ndarray_to_bytes(np.zeros(2, dtype=[("a", "O"), ("b", "i4")]))


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 15])
def test_chunk_size_must_hold_whole_items(chunk_size):
    with pytest.raises(bp.ChunkSizeTypeSizeMismatch):
        bp.pack_ndarray_to_bytes(np.arange(100, dtype="f8"), chunk_size=chunk_size)


def test_bytes_file_is_not_an_ndarray():
    with pytest.raises(bp.NotANumpyArray) as raised:
        bp.unpack_ndarray_from_bytes(bp.pack_bytes_to_bytes(b"abc"))
    assert isinstance(raised.value, arrayio.FormatError)


@pytest.mark.parametrize("chunk_size", ["1K", 4096, 8192 * 3])
@pytest.mark.parametrize("with_metadata", [False, True])
def test_bytes_round_trips(tmp_path, chunk_size, with_metadata):
    data = np.random.default_rng(3).integers(0, 4, 100_003, dtype=np.uint8).tobytes()
    metadata = {"name": "x", "n": [1, 2]} if with_metadata else None
    packed = bp.pack_bytes_to_bytes(data, chunk_size=chunk_size, metadata=metadata)
    assert bp.unpack_bytes_from_bytes(packed) == (data, metadata)
    bp.pack_bytes_to_file(data, tmp_path / "b.blp", chunk_size=chunk_size, metadata=metadata)
    assert bp.unpack_bytes_from_file(tmp_path / "b.blp") == (data, metadata)
    (tmp_path / "in").write_bytes(data)
    bp.pack_file_to_file(tmp_path / "in", tmp_path / "c.blp", chunk_size=chunk_size, metadata=metadata)
    assert (tmp_path / "c.blp").read_bytes() == packed
    assert bp.unpack_file_from_file(tmp_path / "c.blp", tmp_path / "out") == metadata
    assert (tmp_path / "out").read_bytes() == data


def test_metadata_is_compressed_only_when_it_helps():
    long = {"dtype": "float64", "shape": [1024], "others": list(range(100))}
    with bp.open(bp.pack_bytes_to_bytes(b"x", metadata=long)) as reader:
        assert reader.metadata_section.header.meta_codec == 1
        assert reader.metadata == long
    with bp.open(bp.pack_bytes_to_bytes(b"x", metadata="abc")) as reader:
        header = reader.metadata_section.header
        assert (header.meta_codec, header.meta_level, header.meta_size, header.max_meta_size) == (0, 6, 5, 50)
    with pytest.raises(bp.MetadataSectionTooSmall):
        bp.pack_bytes_to_bytes(b"x", metadata=long, metadata_args={"max_meta_size": 10, "meta_codec": "None"})
    with pytest.raises(bp.NoSuchCodec):
        bp.pack_bytes_to_bytes(b"x", metadata=long, metadata_args={"meta_codec": "lzma"})
    with pytest.raises(bp.NoSuchSerializer):
        bp.pack_bytes_to_bytes(b"x", metadata=long, metadata_args={"magic_format": b"YAML"})


def test_metadata_json_is_compact():
    section = bp._writer.metadata_section({"dtype": "float64", "shape": [1024], "others": []},
                                         bp.MetadataArgs(meta_codec="None"))
    assert section[1] == b'{"dtype":"float64","shape":[1024],"others":[]}'


def test_args_objects_behave_like_the_reference():
    args = bp.BloscArgs()
    assert dict(args) == {"typesize": 8, "clevel": 7, "shuffle": True, "cname": "blosclz"}
    assert bp.BloscpackArgs()["offsets"] is True and bp.BloscpackArgs().checksum == "adler32"
    assert bp.BloscpackArgs().max_app_chunks(3) == 30
    assert bp.MetadataArgs().magic_format == b"JSON"
    with pytest.raises(TypeError):
        bp.BloscArgs(level=3)
    with pytest.raises(KeyError):
        args["level"] = 3
    with pytest.raises(NotImplementedError):
        del args["clevel"]
    assert bp.BloscpackArgs(checksum=None).checked().checksum == "None"
    with pytest.raises(bp.NoSuchCodec):
        bp.BloscArgs(cname="snappy").checked()
    with pytest.raises(ValueError):
        bp.BloscArgs(clevel=10).checked()


@pytest.mark.parametrize("cname", ["blosclz", "lz4", "lz4hc", "zlib", "zstd"])
@pytest.mark.parametrize("shuffle", [0, 1, 2])
def test_codecs_and_shuffles_round_trip(cname, shuffle):
    array = np.linspace(0, 1, 3000).reshape(300, 10)
    for clevel in (0, 9):
        packed = bp.pack_ndarray_to_bytes(array, chunk_size="8K",
                                          blosc_args={"cname": cname, "shuffle": shuffle, "clevel": clevel})
        assert np.array_equal(bp.unpack_ndarray_from_bytes(packed), array)


@pytest.mark.parametrize("checksum", bp.CHECKSUM_NAMES)
@pytest.mark.parametrize("offsets", [True, False])
def test_checksums_and_offsets_round_trip(checksum, offsets):
    array = np.arange(5000, dtype="i4")
    packed = bp.pack_ndarray_to_bytes(array, chunk_size=4000,
                                      bloscpack_args={"checksum": checksum, "offsets": offsets})
    assert np.array_equal(bp.unpack_ndarray_from_bytes(packed), array)
    assert bp.validate(packed) == []


# -- the lazy reader --------------------------------------------------------------------------

LAZY = np.arange(12_000, dtype="<i8").reshape(1000, 12)


@pytest.fixture(scope="module")
def lazy_file():
    return bp.pack_ndarray_to_bytes(LAZY, chunk_size=12 * 8 * 7 + 8 * 5)


@pytest.mark.parametrize("key", [
    0, 999, -1, -1000, 500, slice(None), slice(3, 4), slice(10, 990, 7), slice(None, None, -1), slice(900, 10, -13),
    slice(5, 5), slice(2000, 3000), (slice(1, 50), 3), (7, slice(2, 5)), (slice(0, 100, 3), slice(None, None, 2)),
    Ellipsis, (Ellipsis, 0), np.int64(42),
], ids=str)
def test_lazy_slicing_matches_numpy(lazy_file, key):
    with bp.open(lazy_file) as reader:
        assert np.array_equal(reader[key], LAZY[key])


def test_lazy_slicing_decodes_only_needed_chunks(lazy_file, monkeypatch):
    decoded = []
    original = bp.BloscpackFile._decode_into

    def spy(self, index, address):
        decoded.append(index)
        return original(self, index, address)

    # On the class: a closed reader has no attributes left for monkeypatch to restore.
    monkeypatch.setattr(bp.BloscpackFile, "_decode_into", spy)
    with bp.open(lazy_file) as reader:
        assert np.array_equal(reader[500:503], LAZY[500:503])
        assert len(set(decoded)) <= 2 and reader.nchunks > 100


def test_lazy_reader_attributes(lazy_file):
    with bp.open(lazy_file) as reader:
        assert reader.shape == (1000, 12) and reader.dtype == np.dtype("<i8") and len(reader) == 1000
        assert reader.nchunks == len(list(reader.iter_chunks()))
        assert b"".join(chunk.tobytes() for chunk in reader.iter_chunks()) == LAZY.tobytes()
        assert np.array_equal(np.asarray(reader), LAZY)
        with pytest.raises(IndexError):
            reader[1000]
        with pytest.raises(IndexError):
            reader.read_chunk(reader.nchunks)


def test_fortran_and_0d_arrays_index_through_a_full_read():
    array = np.asfortranarray(np.arange(60.0).reshape(6, 10))
    with bp.open(bp.pack_ndarray_to_bytes(array, chunk_size=80)) as reader:
        assert np.array_equal(reader[2:4, 1], array[2:4, 1])
    with bp.open(bp.pack_ndarray_to_bytes(np.array(7))) as reader:
        assert reader[()] == 7


def test_open_on_file_objects_and_paths(tmp_path, lazy_file):
    path = tmp_path / "l.blp"
    path.write_bytes(lazy_file)
    with bp.open(str(path)) as reader:
        assert reader.source.is_mapped and np.array_equal(reader[10:20], LAZY[10:20])
    with bp.open(io.BytesIO(lazy_file)) as reader:
        assert np.array_equal(reader[10:20], LAZY[10:20])
        assert np.array_equal(reader.read(), LAZY)
    assert np.array_equal(arrayio.open(str(path))[5], LAZY[5])


def _unknown_layout(packed: bytes, *, nchunks: bool, sizes: bool) -> bytes:
    header = HEADER.unpack(packed)._asdict()
    if nchunks:
        header["nchunks"] = -1
        header["max_app_chunks"] = 0
    if sizes:
        header["chunk_size"] = header["last_chunk"] = -1
    return HEADER.pack(**header) + packed[32:]


@pytest.mark.parametrize("offsets", [True, False])
@pytest.mark.parametrize("sizes", [True, False])
def test_files_with_unknown_nchunks_read_correctly(offsets, sizes):
    array = np.arange(1000, dtype="f8")
    packed = bp.pack_ndarray_to_bytes(array, chunk_size=800,
                                      bloscpack_args={"offsets": offsets, "max_app_chunks": 0})
    streaming = _unknown_layout(packed, nchunks=True, sizes=sizes)
    assert np.array_equal(bp.unpack_ndarray_from_bytes(streaming), array)
    with bp.open(streaming) as reader:
        assert reader.nchunks == 10 and np.array_equal(reader[123:456], array[123:456])
    assert bp.validate(streaming) == []


def test_trailing_bytes_are_tolerated():
    packed = bp.pack_ndarray_to_bytes(np.arange(100.0), chunk_size=80) + b"stale"
    assert np.array_equal(bp.unpack_ndarray_from_bytes(packed), np.arange(100.0))
    assert bp.open(packed).info()["trailing_bytes"] == 5


@settings(max_examples=60, deadline=None)
@given(array=hnp.arrays(hnp.scalar_dtypes() | hnp.byte_string_dtypes() | hnp.unicode_string_dtypes(),
                        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=9)),
       items_per_chunk=st.integers(1, 40), fortran=st.booleans())
def test_hypothesis_round_trip(array, items_per_chunk, fortran):
    if fortran:
        array = np.asfortranarray(array)
    packed = bp.pack_ndarray_to_bytes(array, chunk_size=items_per_chunk * array.dtype.itemsize)
    back = bp.unpack_ndarray_from_bytes(packed)
    assert back.dtype == array.dtype and back.shape == array.shape
    assert back.tobytes(order="A") == array.tobytes(order="A")
    if array.ndim and array.flags.c_contiguous:
        with bp.open(packed) as reader:
            assert reader[1:-1:2].tobytes() == array[1:-1:2].tobytes()


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=3000), chunk_size=st.integers(1, 700), typesize=st.integers(1, 16),
       metadata=st.none() | st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4))
def test_hypothesis_bytes_round_trip(data, chunk_size, typesize, metadata):
    packed = bp.pack_bytes_to_bytes(data, chunk_size=chunk_size, metadata=metadata,
                                    blosc_args={"typesize": typesize})
    assert bp.unpack_bytes_from_bytes(packed) == (data, json.loads(json.dumps(metadata)))

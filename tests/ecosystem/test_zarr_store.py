"""arrayio.zarr.open_store: every format as a Zarr v3 group, through zarr, xarray and dask."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from ecosystem_cases import KEYED

import arrayio
import arrayio.kastore as kastore
from arrayio import pycauset
from arrayio.bloscpack import BloscpackFile
from arrayio.zarr import ReadOnlyError, key_of_zarr_path, open_store, unmappable_keys, zarr_path_of_key


def arrays_of(group: zarr.Group) -> dict[str, np.ndarray]:
    return {path: node[...] for path, node in group.members(max_depth=None) if isinstance(node, zarr.Array)}


# --------------------------------------------------------------------------- kastore / kast

@pytest.mark.parametrize("fixture", ["kas_file", "kast_file"])
def test_keyed_files_open_as_nested_groups(request, fixture, small_chunks):
    path = request.getfixturevalue(fixture)
    group = zarr.open_group(store=open_store(path), mode="r")
    found = arrays_of(group)
    assert len(found) == len(KEYED)
    for array_path, values in found.items():
        key = key_of_zarr_path(array_path)
        assert group[array_path].attrs["key"] == key
        assert values.dtype == KEYED[key].dtype and np.array_equal(values, KEYED[key])
    assert isinstance(group["nodes"], zarr.Group) and set(group["nodes"].array_keys()) == {"time", "flags"}
    assert group["big"].chunks == (128,)  # 1 KiB row blocks of int64


def test_key_rule_is_reversible_and_documented_cases():
    keys = list(KEYED)
    bad = unmappable_keys(keys)
    assert bad == {"a", "x/./y", "__meta", "edges/zarr.json"}
    paths = {key: zarr_path_of_key(key, key in bad) for key in keys}
    assert paths["a"] == "%/a"
    assert paths["x/./y"] == "%/x%2F%2E%2Fy"
    assert paths["__meta"] == "%/%5F%5Fmeta"
    assert paths["edges/zarr.json"] == "%/edges%2Fzarr%2Ejson"
    assert paths["100% sure"] == "100%25 sure"
    assert paths["nodes/time"] == "nodes/time"
    assert len(set(paths.values())) == len(keys)
    assert all(key_of_zarr_path(path) == key for key, path in paths.items())


def test_keyed_chunks_are_byte_ranges_of_the_file(kas_file, small_chunks):
    store = open_store(kas_file)
    data = kas_file.read_bytes()
    node = store.root.children["big"]
    assert node.grid == (24,)
    for index in range(23):
        reference = node.reference((index,))
        assert reference.length == 1024
        stored = zarr.core.sync.sync(store.get(f"big/c/{index}"))
        assert stored.to_bytes() == data[reference.offset:reference.offset + reference.length]
    # The short last chunk is referenced at full size while the file goes on after it.
    last = zarr.core.sync.sync(store.get("big/c/23")).to_bytes()
    assert len(last) == 1024 and last[:(3000 - 23 * 128) * 8] == KEYED["big"][23 * 128:].tobytes()


@pytest.mark.parametrize("fixture", ["kas_file", "kast_file"])
def test_xarray_dask_and_datatree_on_keyed_files(request, fixture, small_chunks):
    store = open_store(request.getfixturevalue(fixture))
    nodes = xr.open_zarr(store, group="nodes", consolidated=False)
    assert set(nodes.data_vars) == {"time", "flags"}
    assert np.array_equal(nodes["time"].values, KEYED["nodes/time"])
    tree = xr.open_datatree(store, engine="zarr", consolidated=False)
    assert np.array_equal(tree["edges"]["left"].values, KEYED["edges/left"])
    assert np.array_equal(tree["a"]["b"].values, KEYED["a/b"])
    big = da.from_zarr(zarr.open_group(store=store, mode="r")["big"])
    assert big.numblocks == (24,) and int(big.sum().compute()) == int(KEYED["big"].sum())


def test_writes_raise_a_read_only_error(kas_file):
    store = open_store(kas_file)
    group = zarr.open_group(store=store, mode="r")
    with pytest.raises(ReadOnlyError, match="read-only"):
        zarr.core.sync.sync(store.set("big/c/0", zarr.core.buffer.default_buffer_prototype().buffer.from_bytes(b"x")))
    with pytest.raises(ReadOnlyError):
        zarr.core.sync.sync(store.delete("big/zarr.json"))
    with pytest.raises((ReadOnlyError, ValueError)):
        group["big"][0] = 1
    assert isinstance(ReadOnlyError("x"), arrayio.ArrayIOError)


def test_store_lists_and_refuses_unknown_keys(kas_file):
    store = open_store(kas_file)

    async def collect(iterator):
        return [item async for item in iterator]

    assert set(zarr.core.sync.sync(collect(store.list_dir("")))) == {"zarr.json", "nodes", "edges", "a", "%",
                                                                    "100%25 sure", "big"}
    assert zarr.core.sync.sync(collect(store.list_dir("nodes/time"))) == ["zarr.json", "c"]
    assert "nodes/time/c/0" in zarr.core.sync.sync(collect(store.list_prefix("nodes/")))
    for missing in ("nodes/time/c/1", "nodes/time/c/x", "nope/zarr.json", "nodes/c/0"):
        assert zarr.core.sync.sync(store.get(missing)) is None
        assert not zarr.core.sync.sync(store.exists(missing))


# --------------------------------------------------------------------------- bloscpack

def count_decodes(monkeypatch) -> list[int]:
    """The Blosc chunks read (digest checked) from the file: once per decode, by arrayio or by zarr's codec."""
    decoded: list[int] = []
    original = BloscpackFile._compressed

    def spy(self, index):
        decoded.append(index)
        return original(self, index)

    monkeypatch.setattr(BloscpackFile, "_compressed", spy)
    return decoded


def test_bloscpack_aligned_chunks_decode_one_blosc_chunk_each(blp_file, monkeypatch):
    path, array = blp_file
    group = zarr.open_group(store=open_store(path), mode="r")
    node = group["array"]
    assert node.shape == array.shape and node.dtype == array.dtype and node.chunks == (100, 7)
    assert node.attrs["order"] == "C" and node.attrs["container"] == "numpy"
    decoded = count_decodes(monkeypatch)
    assert np.array_equal(node[250:260], array[250:260])
    assert decoded == [2]
    decoded.clear()
    assert np.array_equal(node[1000:], array[1000:])  # the short last chunk
    assert decoded == [10]
    assert np.array_equal(node[:], array)


def test_bloscpack_chunks_straddling_rows(blp_unaligned, monkeypatch):
    path, array = blp_unaligned
    assert 1000 % (7 * 8)  # the point of this file
    store = open_store(path)
    node = zarr.open_group(store=store, mode="r")["array"]
    decoded = count_decodes(monkeypatch)
    assert np.array_equal(node[40:45, 2:5], array[40:45, 2:5])
    # zarr chunks of 17 rows (952 bytes): rows 40..44 lie in zarr chunk 2, rows 34..50 = bytes 1904..2856,
    # which Blosc chunks 1 (bytes 1000..2000) and 2 (bytes 2000..3000) hold.
    assert node.chunks == (17, 7)
    assert sorted(set(decoded)) == [1, 2]
    assert np.array_equal(node[:], array)
    assert np.array_equal(da.from_zarr(node).compute(), array)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["<i4", ">f8", "u1", "<c16", "bool"])
def test_bloscpack_dtypes_and_orders(tmp_path, order, dtype):
    import arrayio.bloscpack as blp

    array = (np.arange(3 * 50 * 4) % 7).astype(dtype).reshape(3, 50, 4)
    array = np.asfortranarray(array) if order == "F" else array
    path = tmp_path / "a.blp"
    blp.pack_ndarray_to_file(array, path, chunk_size=np.dtype(dtype).itemsize * 37)  # 37 items: rows of 4 straddle
    node = zarr.open_group(store=open_store(path), mode="r")["array"]
    assert node.attrs["order"] == order
    assert np.array_equal(node[:], array)
    assert np.array_equal(node[1:, 7:33, 2], array[1:, 7:33, 2])
    dataset = xr.open_zarr(open_store(path), consolidated=False)
    assert dataset["array"].dims == ("dim_0", "dim_1", "dim_2")


# --------------------------------------------------------------------------- pycauset, kdb

def test_pycauset_matrix_and_metadata(pycauset_file, small_chunks):
    path, matrix = pycauset_file
    group = zarr.open_group(store=open_store(path), mode="r")
    node = group["matrix"]
    assert node.chunks == (25, 5)  # 1 KiB of 40-byte rows
    assert np.array_equal(node[:], matrix)
    assert node.attrs["metadata"]["properties"] == {"note": "sample", "seed": 3}
    assert node.attrs["metadata"]["matrix_type"] == "DENSE_FLOAT"
    assert np.array_equal(xr.open_zarr(open_store(path), consolidated=False)["matrix"].values, matrix)
    blocks = da.from_zarr(node)
    assert blocks.numblocks == (3, 1) and np.array_equal(blocks.compute(), matrix)


def test_kdb_episodes_table_and_images(kdb_file):
    path, episodes = kdb_file
    store = open_store(path)
    group = zarr.open_group(store=store, mode="r")
    with arrayio.open(path) as native:
        for position, (states, actions, images) in enumerate(episodes):
            episode = group[f"episodes/{position}"]
            assert np.array_equal(episode["states"][:], states)
            assert np.array_equal(episode["actions"][:], actions)
            assert np.array_equal(episode["rewards"][:], native.read_episode(position).rewards)
            assert np.array_equal(episode["terminals"][:], native.read_episode(position).terminals)
            camera = episode["images/front"]
            assert camera.shape == images.shape and camera.chunks == (1, 8, 6, 3)
            assert np.array_equal(camera[2], images[2]) and np.array_equal(camera[:], images)
            assert episode.attrs["task"] == native.read_meta(position).task
            assert episode.attrs["fps"] == 15.0
    table = xr.open_zarr(store, consolidated=False)
    assert list(table["num_frames"].values) == [6, 4]
    assert list(table["task"].values) == ["pick", "place"]
    tree = xr.open_datatree(store, engine="zarr", consolidated=False)
    assert tree["episodes/1/images"]["front"].shape == (4, 8, 6, 3)
    frames = da.from_zarr(group["episodes/0/images/front"])
    assert frames.numblocks[0] == 6 and np.array_equal(frames[3].compute(), episodes[0][2][3])


def test_corrupt_file_raises_its_format_error(kas_file):
    data = bytearray(kas_file.read_bytes())
    data[16:24] = (10**9).to_bytes(8, "little")  # file_size field
    kas_file.write_bytes(bytes(data))
    with pytest.raises(arrayio.FormatError):
        open_store(kas_file)


def test_store_from_bytes_and_file_objects(kas_file):
    data = kas_file.read_bytes()
    group = zarr.open_group(store=open_store(data), mode="r")
    assert np.array_equal(group["nodes/time"][:], KEYED["nodes/time"])
    with open(kas_file, "rb") as handle:
        with kastore.load(handle, read_all=False):
            pass
        handle.seek(0)
        group = zarr.open_group(store=open_store(handle), mode="r")
        assert np.array_equal(group["big"][:], KEYED["big"])


def test_store_pickles_by_reopening_its_path(kas_file, tmp_path, monkeypatch):
    import pickle

    monkeypatch.chdir(kas_file.parent)
    pickled = pickle.dumps(open_store(kas_file.name))
    monkeypatch.chdir(tmp_path.parent)  # a worker elsewhere still finds the file
    store = pickle.loads(pickled)
    assert np.array_equal(zarr.open_group(store=store, mode="r")["big"][:], KEYED["big"])
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(open_store(kas_file.read_bytes()))


def test_packed_pycauset_layouts_are_read_in_row_blocks(tmp_path, small_chunks, monkeypatch):
    from arrayio.pycauset._matrices import Layout

    rng = np.random.default_rng(9)
    relation = np.triu(rng.random((300, 300)) < 0.2, 1)
    upper = np.triu(rng.standard_normal((40, 40)))
    matrices = {"causal": (pycauset.causal(relation), relation),
                "triangular": (pycauset.triangular(upper, diagonal=True), upper),
                "diagonal": (pycauset.diagonal(np.arange(1.0, 60.0)), np.diag(np.arange(1.0, 60.0))),
                "bits": (rng.random((70, 130)) < 0.5,) * 2}
    monkeypatch.setattr(Layout, "unpack", lambda *args, **kwargs: pytest.fail("the whole matrix was unpacked"))
    for name, (matrix, expected) in matrices.items():
        path = tmp_path / f"{name}.pycauset"
        pycauset.save(matrix, path)
        node = zarr.open_group(store=open_store(path), mode="r")["matrix"]
        assert node.nchunks > 1, name
        assert np.array_equal(node[...], expected), name
        assert np.array_equal(node[17:23, 5:], expected[17:23, 5:]), name


def test_store_of_a_relative_path_reopens_from_any_working_directory(tmp_path, monkeypatch):
    """dask.distributed workers unpickle the store in their own working directory."""
    import pickle

    monkeypatch.chdir(tmp_path)
    kastore.dump({"a": np.arange(10)}, "rel.kas")
    pickled = pickle.dumps(open_store("rel.kas"))
    monkeypatch.chdir("/")
    store = pickle.loads(pickled)
    assert np.array_equal(zarr.open_group(store=store, mode="r")["a"][:], np.arange(10))

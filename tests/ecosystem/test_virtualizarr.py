"""arrayio.virtualizarr with the real VirtualiZarr, obstore and zarr: manifests that point into the file, decoded by
zarr's own codecs to the values the native readers and tskit give; computed chunks named, or loaded by the fallback."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

virtualizarr = pytest.importorskip("virtualizarr")
obstore_store = pytest.importorskip("obstore.store")
zarr = pytest.importorskip("zarr")
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402
from virtualizarr.manifests import ManifestArray  # noqa: E402

import arrayio._tree  # noqa: E402
import arrayio.bloscpack as blp  # noqa: E402
import arrayio.kast as kast  # noqa: E402
import arrayio.kastore as kastore  # noqa: E402
from arrayio import pycauset  # noqa: E402
from arrayio.errors import UnsupportedError  # noqa: E402
from arrayio.virtualizarr import ComputedChunksWarning, Parser, open_virtual_dataset, open_virtual_datatree  # noqa: E402


@pytest.fixture
def registry():
    """The user's object store for local files, as VirtualiZarr's docs set it up."""
    return ObjectStoreRegistry({"file://": obstore_store.LocalStore()})


def url_of(path) -> str:
    return path.resolve().as_uri()


def manifests(dataset: xr.Dataset) -> dict[str, ManifestArray]:
    return {name: variable.data for name, variable in dataset.variables.items()
            if isinstance(variable.data, ManifestArray)}


def values_through_zarr(store, group: str = "") -> dict[str, np.ndarray]:
    """Every array below ``group`` of a ManifestStore, read by zarr (chunks fetched from the registry's store)."""
    root = zarr.open_group(store=store, mode="r", path=group, zarr_format=3)
    return {path: node[...] for path, node in root.members(max_depth=None) if isinstance(node, zarr.Array)}


TABLE_COLUMNS = {
    "nodes": ["flags", "time", "population", "individual", "metadata", "metadata_offset"],
    "edges": ["left", "right", "parent", "child"],
    "sites": ["position", "ancestral_state", "ancestral_state_offset"],
    "mutations": ["site", "node", "parent", "time", "derived_state", "derived_state_offset"],
    "individuals": ["flags", "location", "location_offset", "parents", "parents_offset"],
    "populations": ["metadata", "metadata_offset"],
    "provenances": ["timestamp", "timestamp_offset", "record", "record_offset"],
}


def test_tree_sequence_is_virtual_and_equals_tskit_tables(trees_file, registry):
    tskit = pytest.importorskip("tskit")
    path = trees_file
    url = url_of(path)
    tables = tskit.load(path).tables
    store = Parser()(url, registry)
    read = values_through_zarr(store)
    for table, columns in TABLE_COLUMNS.items():
        dataset = virtualizarr.open_virtual_dataset(url, parser=Parser(group=table), registry=registry)
        virtual = manifests(dataset)
        assert set(columns) <= set(virtual), table
        for column in columns:
            manifest = virtual[column].manifest
            # No byte copied: every chunk is a byte range of the .trees file itself.
            assert {str(p) for p in np.unique(manifest._paths) if p} <= {url}, (table, column)
            expected = getattr(getattr(tables, table), column)
            actual = read[f"{table}/{column}"]
            if actual.dtype.kind == "u" and expected.dtype.kind == "i" and actual.itemsize == 1:
                actual = actual.view(expected.dtype)  # tskit's API shows the stored uint8 text bytes as int8
            # (and widens the stored uint32 offsets to uint64 in memory: the values are what must agree)
            assert np.array_equal(actual, expected), (table, column)
    assert read["sequence_length"][0] == tables.sequence_length


def test_loadable_variables_read_through_the_registry(trees_file, registry):
    tskit = pytest.importorskip("tskit")
    path = trees_file
    dataset = virtualizarr.open_virtual_dataset(url_of(path), parser=Parser(group="edges"), registry=registry,
                                                loadable_variables=["left", "parent"])
    edges = tskit.load(path).tables.edges
    assert np.array_equal(dataset["left"].values, edges.left)
    assert np.array_equal(dataset["parent"].values, edges.parent)
    assert isinstance(dataset["right"].data, ManifestArray)


def test_every_chunk_of_a_multi_chunk_key_is_a_manifest_entry(tmp_path, registry, monkeypatch):
    monkeypatch.setattr(arrayio._tree, "MAX_CHUNK_BYTES", 800)  # 100 float64 per chunk
    path = tmp_path / "rows.kas"
    values = {"a": np.arange(1000, dtype=np.float64), "b": np.arange(700, dtype=np.int64), "last": np.arange(3)}
    kastore.dump(values, path)
    store = Parser()(url_of(path), registry)
    dataset = virtualizarr.open_virtual_dataset(url_of(path), parser=Parser(), registry=registry)
    assert manifests(dataset)["a"].manifest.shape_chunk_grid == (10,)
    with kastore.load(path) as native:
        offset, _length = native.extent("a")
        assert int(manifests(dataset)["a"].manifest._offsets[3]) == offset + 300 * 8
    read = values_through_zarr(store)
    for key, expected in values.items():
        assert np.array_equal(read[key], expected), key


def test_kast_file_is_virtual(tmp_path, registry):
    path = tmp_path / "sample.kast"
    values = {"x/time": np.linspace(0, 1, 50), "x/flags": np.arange(50, dtype=np.uint32)}
    kast.dump(values, path)
    read = values_through_zarr(Parser()(url_of(path), registry))
    for key, expected in values.items():
        assert np.array_equal(read[key], expected), key


def test_bloscpack_chunks_decode_through_zarrs_blosc_codec(tmp_path, registry):
    path = tmp_path / "rows.blp"
    array = np.arange(1000 * 7, dtype="<f8").reshape(1000, 7)
    blp.pack_ndarray_to_file(array, path, chunk_size=5600)  # 100 rows a chunk, every chunk full
    dataset = virtualizarr.open_virtual_dataset(url_of(path), parser=Parser(), registry=registry)
    virtual = manifests(dataset)["array"]
    assert [codec.__class__.__name__ for codec in virtual.metadata.codecs] == ["BytesCodec", "BloscCodec"]
    assert virtual.manifest.shape_chunk_grid == (10, 1)
    # Each entry is one Blosc1 frame of the file: zarr's Blosc codec decodes those bytes to the chunk's rows.
    raw = path.read_bytes()
    blosc = zarr.codecs.BloscCodec()
    for index in range(10):
        offset, length = (int(virtual.manifest._offsets[index, 0]), int(virtual.manifest._lengths[index, 0]))
        frame = raw[offset:offset + length]
        decoded = np.frombuffer(_blosc_decode(blosc, frame), dtype="<f8").reshape(100, 7)
        assert np.array_equal(decoded, array[index * 100:(index + 1) * 100]), index
    assert np.array_equal(values_through_zarr(Parser()(url_of(path), registry))["array"], array)


def _blosc_decode(codec, frame: bytes) -> bytes:
    """Decode one frame with zarr's BloscCodec the way zarr's codec pipeline does (its async decode)."""
    import asyncio

    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.dtype import Float64

    spec = ArraySpec(shape=(100, 7), dtype=Float64(), fill_value=0.0, config=ArrayConfig.from_dict({}),
                     prototype=default_buffer_prototype())
    buffer = default_buffer_prototype().buffer.from_bytes(frame)
    out = asyncio.run(codec.decode([(buffer, spec)]))
    return next(iter(out)).to_bytes()


def test_short_last_bloscpack_chunk_is_named_then_loaded(tmp_path, registry):
    path = tmp_path / "short.blp"
    array = np.arange(1003 * 7, dtype="<f8").reshape(1003, 7)
    blp.pack_ndarray_to_file(array, path, chunk_size=5600)  # the last Blosc chunk holds 3 rows, not 100
    with pytest.raises(UnsupportedError, match=r"array \(chunk \(10, 0\): the short last Blosc chunk decodes"):
        Parser()(url_of(path), registry)
    parser = Parser(computed="skip")
    with pytest.warns(ComputedChunksWarning, match="array"):
        virtualizarr.open_virtual_dataset(url_of(path), parser=parser, registry=registry)
    assert parser.left_out == ["array"]
    dataset = open_virtual_dataset(url_of(path), registry)
    assert not manifests(dataset)
    assert np.array_equal(dataset["array"].values, array)


def test_dense_pycauset_matrix_is_virtual_and_packed_one_is_loaded(tmp_path, registry):
    dense = tmp_path / "dense.pycauset"
    matrix = np.random.default_rng(0).random((40, 30))
    pycauset.save(matrix, dense)
    read = values_through_zarr(Parser()(url_of(dense), registry))
    assert np.array_equal(read["matrix"], matrix)

    packed = tmp_path / "causal.pycauset"
    pycauset.save(pycauset.causal(np.triu(np.random.default_rng(1).random((50, 50)) < 0.3, 1)), packed)
    with pytest.raises(UnsupportedError, match="matrix"):
        Parser()(url_of(packed), registry)
    dataset = open_virtual_dataset(url_of(packed), registry)
    assert np.array_equal(dataset["matrix"].values, pycauset.load(packed).values())


def test_kdb_arrays_are_computed_and_the_fallback_loads_them(tmp_path, registry):
    from arrayio import kdb

    path = kdb.demo(tmp_path)
    with pytest.raises(UnsupportedError, match="episode_id"):
        Parser()(url_of(path), registry)
    tree = open_virtual_datatree(url_of(path), registry)
    with kdb.open(path) as native:
        episode = native.read_episode(1)
        node = tree[f"episodes/{episode.meta.episode_id}"]
        assert np.array_equal(node["states"].values, episode.states)
        assert np.array_equal(node["images/front"].values[2], episode.images.frame(2)["front"])


def test_group_that_is_not_there_is_named(trees_file, registry):
    path = trees_file
    with pytest.raises(UnsupportedError, match="no group 'trees'.*nodes"):
        Parser(group="trees")(url_of(path), registry)
    with pytest.raises(UnsupportedError, match="is an array"):
        Parser(group="nodes/time")(url_of(path), registry)


def test_open_virtual_datatree_keeps_every_table(trees_file, registry):
    path = trees_file
    with warnings.catch_warnings():
        warnings.simplefilter("error", ComputedChunksWarning)  # nothing of a .trees file is computed
        tree = open_virtual_datatree(url_of(path), registry)
    assert {"nodes", "edges", "sites", "mutations"} <= set(tree.children)
    tskit = pytest.importorskip("tskit")
    assert manifests(tree["nodes"].to_dataset())["time"].shape == (tskit.load(path).num_nodes,)


def test_bad_targets_are_clear_errors(tmp_path, registry):
    from arrayio.errors import FormatError

    junk = tmp_path / "junk.kas"
    junk.write_bytes(b"not an arrayio file at all")
    with pytest.raises(FormatError, match="junk.kas: not a file of any known format"):
        Parser()(url_of(junk), registry)
    elsewhere = ObjectStoreRegistry({"s3://bucket": obstore_store.LocalStore()})
    with pytest.raises(UnsupportedError, match="no object store for file://"):
        Parser()(url_of(junk), elsewhere)
    with pytest.raises(FileNotFoundError):
        Parser()(url_of(tmp_path / "missing.kas"), registry)

"""The xarray engine "arrayio" against each format's native reader and tskit: the same values, tables as Datasets
with their table's dimension names, lazy reads of only the chunks a selection touches."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import arrayio
import arrayio._tree
import arrayio.bloscpack as blp
import arrayio.kast as kast
import arrayio.kastore as kastore
from arrayio import kdb, pycauset
from arrayio._keyed_dims import dimension_names


def test_tskit_tables_are_datasets_with_their_tables_dimensions(trees_file):
    trees = trees_file
    tskit = pytest.importorskip("tskit")
    tables = tskit.load(trees).tables
    with xr.open_dataset(trees, engine="arrayio", group="nodes") as nodes:
        assert nodes.sizes["nodes"] == tables.nodes.num_rows
        assert nodes["time"].dims == ("nodes",) and nodes["metadata_offset"].dims == ("nodes_offset",)
        assert np.array_equal(nodes["time"].values, tables.nodes.time)
        assert np.array_equal(nodes["flags"].values, tables.nodes.flags)
    with xr.open_dataset(trees, engine="arrayio", group="/edges") as edges:
        assert set(edges.dims) == {"edges", "edges_metadata", "edges_offset", "edges_metadata_schema"}
        for column in ("left", "right", "parent", "child"):
            assert edges[column].dims == ("edges",)
            assert np.array_equal(edges[column].values, getattr(tables.edges, column)), column
    with xr.open_datatree(trees) as tree:  # no engine named: xarray asks every engine, ours knows the magic
        assert np.array_equal(tree["mutations/time"].values, tables.mutations.time, equal_nan=True)
        assert tree["sites"]["position"].dims == ("sites",)
        assert tree["sites"]["ancestral_state_offset"].dims == ("sites_offset",)


@pytest.mark.parametrize(("table", "lengths", "expected"), [
    ("nodes", {"time": 5, "flags": 5, "metadata": 12, "metadata_offset": 6},
     {"time": "nodes", "flags": "nodes", "metadata": "nodes_metadata", "metadata_offset": "nodes_offset"}),
    ("populations", {"metadata": 33, "metadata_offset": 2, "metadata_schema": 175},
     {"metadata": "populations_metadata", "metadata_offset": "populations_offset",
      "metadata_schema": "populations_metadata_schema"}),
    ("indexes", {"edge_insertion_order": 9, "edge_removal_order": 9},
     {"edge_insertion_order": "indexes", "edge_removal_order": "indexes"}),
    ("format", {"name": 11, "version": 2}, {"name": "format_name", "version": "format_version"}),
    ("t", {"x": 5}, {"x": "t"}),
    ("", {"uuid": 36, "time_units": 11, "sequence_length": 1},
     {"uuid": "dim_36", "time_units": "dim_11", "sequence_length": "dim_1"}),
    # a column literally named "offset" of another length must not share the offsets' dimension
    ("t", {"x": 3, "x_offset": 4, "offset": 7}, {"x": "t", "x_offset": "t_offset_4", "offset": "t_offset_7"}),
])
def test_keyed_dimension_names(table, lengths, expected):
    assert dimension_names(table, lengths) == expected


def test_keyed_files_equal_their_native_reader(tmp_path):
    values = {"a/x": np.linspace(0, 1, 40), "a/y": np.arange(40, dtype=np.int16), "b": np.arange(3, dtype="u8")}
    for module, name in ((kastore, "s.kas"), (kast, "s.kast")):
        path = tmp_path / name
        module.dump(values, path)
        with xr.open_datatree(path, engine="arrayio") as tree, arrayio.open(path) as native:
            for key in values:
                assert np.array_equal(tree[key].values, native[key]), (name, key)
                assert tree[key].dtype == native[key].dtype


def test_bloscpack_equals_its_native_reader_and_reads_only_touched_chunks(tmp_path, monkeypatch):
    path = tmp_path / "rows.blp"
    array = np.arange(2000 * 5, dtype="<f4").reshape(2000, 5)
    blp.pack_ndarray_to_file(array, path, chunk_size=2000)  # 100 rows a chunk
    with xr.open_dataset(path, engine="arrayio") as dataset:
        assert np.array_equal(dataset["array"].values, blp.unpack_ndarray_from_file(path))
        # steps longer than a chunk, negative steps, integer lists: xarray decomposes them into basic reads
        assert np.array_equal(dataset["array"][5:1900:250, 1].values, array[5:1900:250, 1])
        assert np.array_equal(dataset["array"][::-3, [0, 4]].values, array[::-3][:, [0, 4]])
        assert np.array_equal(dataset["array"][[1999, 3, 150]].values, array[[1999, 3, 150]])
    read_chunks = []
    tree_of = arrayio._tree.tree_of

    def counting_tree_of(reader):
        tree = tree_of(reader)
        node = tree.children["array"]  # children may be made as they are asked for: keep this one
        plain = node.read
        node.read = lambda coords: read_chunks.append(coords) or plain(coords)
        tree.children = {"array": node}
        return tree

    monkeypatch.setattr("arrayio.xarray_backend.tree_of", counting_tree_of)
    with xr.open_dataset(path, engine="arrayio") as dataset:
        assert read_chunks == []                                  # opening reads no chunk
        assert np.array_equal(dataset["array"][1234:1240, 2].values, array[1234:1240, 2])
    assert read_chunks == [(12, 0)]
    with blp.open(path) as native:
        assert native.nchunks == 20


def test_pycauset_and_kdb_equal_their_native_readers(tmp_path):
    dense = tmp_path / "m.pycauset"
    pycauset.save(np.random.default_rng(3).random((30, 20)), dense)
    packed = tmp_path / "c.pycauset"
    pycauset.save(pycauset.causal(np.triu(np.random.default_rng(4).random((25, 25)) < 0.3, 1)), packed)
    for path in (dense, packed):
        with xr.open_dataset(path, engine="arrayio") as dataset:
            assert np.array_equal(dataset["matrix"].values, pycauset.load(path).values()), path.name
    path = kdb.demo(tmp_path)
    with xr.open_datatree(path, engine="arrayio") as tree, kdb.open(path) as native:
        for position in range(len(native)):
            episode = native.read_episode(position)
            node = tree[f"episodes/{episode.meta.episode_id}"]
            assert np.array_equal(node["states"].values, episode.states)
            assert np.array_equal(node["actions"].values, episode.actions)
            for frame in range(len(episode)):
                assert np.array_equal(node["images/front"][frame].values, episode.images.frame(frame)["front"])
        assert list(tree["task"].values) == [native.read_episode(p).meta.task for p in range(len(native))]


def test_storage_options_reach_the_reader(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    path = tmp_path / "s.kas"
    kastore.dump({"t/x": np.arange(10.0)}, path)
    with fsspec.open("memory://engine/s.kas", "wb") as out:
        out.write(path.read_bytes())
    with xr.open_dataset("memory://engine/s.kas", engine="arrayio", group="t",
                         backend_kwargs={"storage_options": {}}) as dataset:
        assert np.array_equal(dataset["x"].values, np.arange(10.0))
    with pytest.raises(TypeError, match="storage_options"):
        xr.open_dataset(path, engine="arrayio", backend_kwargs={"storage_options": {"anon": True}})

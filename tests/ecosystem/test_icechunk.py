"""Icechunk repositories of arrayio's virtual references, with the real icechunk, VirtualiZarr and obstore: the arrays
read back equal through ``xarray.open_zarr(session.store)`` and the repository holds references, not chunk bytes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

icechunk = pytest.importorskip("icechunk")
obstore_store = pytest.importorskip("obstore.store")
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402

from arrayio import pycauset  # noqa: E402
from arrayio.virtualizarr import open_virtual_dataset, open_virtual_datatree  # noqa: E402


def local_repository(repo_path: Path, data_folder: Path):
    """A new Icechunk repository on disk whose virtual chunks may be read from files under ``data_folder``."""
    prefix = data_folder.resolve().as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(data_folder.resolve()))))
    credentials = icechunk.containers_credentials({prefix: None})
    storage = icechunk.local_filesystem_storage(str(repo_path))
    icechunk.Repository.create(storage, config, authorize_virtual_chunk_access=credentials)
    # Opened again as a user would: the container comes from the repository's stored config.
    return icechunk.Repository.open(storage, authorize_virtual_chunk_access=credentials)


def files_under(folder: Path) -> dict[str, int]:
    return {os.path.relpath(os.path.join(root, name), folder): os.path.getsize(os.path.join(root, name))
            for root, _dirs, names in os.walk(folder) for name in names}


@pytest.fixture
def registry():
    return ObjectStoreRegistry({"file://": obstore_store.LocalStore()})


def test_tree_sequence_in_icechunk_reads_back_equal_with_no_chunk_data(tmp_path, registry, make_trees):
    tskit = pytest.importorskip("tskit")
    path = make_trees(samples=200, sequence_length=1e6, seed=11)
    data = path.parent
    url = path.resolve().as_uri()

    repo = local_repository(tmp_path / "repo", data)
    session = repo.writable_session("main")
    open_virtual_datatree(url, registry).vz.to_icechunk(session.store)
    session.commit("sim.trees as virtual references")

    session = repo.readonly_session(branch="main")
    assert set(session.all_virtual_chunk_locations()) == {url}
    tables = tskit.load(path).tables
    for table, columns in {"nodes": ["time", "flags", "population"], "edges": ["left", "right", "parent", "child"],
                           "sites": ["position"], "mutations": ["site", "node", "time"]}.items():
        dataset = xr.open_zarr(session.store, group=table, consolidated=False)
        for column in columns:
            assert np.array_equal(dataset[column].values, getattr(getattr(tables, table), column),
                                  equal_nan=True), (table, column)

    # No chunk payload in the repository: no chunk objects, and far fewer bytes than the arrays it serves.
    stored = files_under(tmp_path / "repo")
    assert not [name for name in stored if name.startswith("chunks")], stored
    payload = sum(array.nbytes for array in (tables.edges.left, tables.edges.right, tables.nodes.time,
                                              tables.mutations.time, tables.sites.position))
    assert sum(stored.values()) < payload / 4, (sum(stored.values()), payload)
    assert tables.edges.left.tobytes()[:64] not in b"".join((tmp_path / "repo" / name).read_bytes()
                                                         for name in stored)


def test_computed_arrays_are_stored_as_chunks_beside_the_references(tmp_path, registry):
    data = tmp_path / "data"
    data.mkdir()
    dense, packed = data / "dense.pycauset", data / "causal.pycauset"
    pycauset.save(np.arange(600, dtype=np.float64).reshape(20, 30), dense)
    pycauset.save(pycauset.causal(np.triu(np.random.default_rng(2).random((40, 40)) < 0.3, 1)), packed)
    repo = local_repository(tmp_path / "repo", data)
    session = repo.writable_session("main")
    open_virtual_dataset(dense.resolve().as_uri(), registry).vz.to_icechunk(session.store, group="dense")
    with pytest.warns(UserWarning, match="non-virtual"):  # VirtualiZarr notes that this one is all loaded
        open_virtual_dataset(packed.resolve().as_uri(), registry).vz.to_icechunk(session.store, group="causal")
    session.commit("one virtual matrix, one loaded")
    session = repo.readonly_session(branch="main")
    assert set(session.all_virtual_chunk_locations()) == {dense.resolve().as_uri()}
    assert np.array_equal(xr.open_zarr(session.store, group="dense", consolidated=False)["matrix"].values,
                          pycauset.load(dense).values())
    assert np.array_equal(xr.open_zarr(session.store, group="causal", consolidated=False)["matrix"].values,
                          pycauset.load(packed).values())


def test_to_icechunk_references_all_but_the_computed_chunks(tmp_path, registry):
    import arrayio.bloscpack as blp
    from arrayio import kdb
    from arrayio.virtualizarr import to_icechunk

    data = tmp_path / "data"
    data.mkdir()
    short = data / "short.blp"
    array = np.arange(1003 * 7, dtype="<f8").reshape(1003, 7)
    blp.pack_ndarray_to_file(array, short, chunk_size=5600)  # 10 chunks of 100 rows, then one of 3 rows
    repo = local_repository(tmp_path / "repo", data)
    session = repo.writable_session("main")
    assert to_icechunk(short.resolve().as_uri(), registry, session.store) == {"array": 1}
    session.commit("bloscpack: ten references and one stored chunk")
    session = repo.readonly_session(branch="main")
    assert len(session.all_virtual_chunk_locations()) == 10
    assert np.array_equal(xr.open_zarr(session.store, consolidated=False)["array"].values, array)

    episodes = kdb.demo(data)
    repo = local_repository(tmp_path / "kdb-repo", data)
    session = repo.writable_session("main")
    written = to_icechunk(episodes.resolve().as_uri(), registry, session.store)
    session.commit("kdb: every chunk computed, stored one at a time")
    assert written["task"] == 1 and sum(written.values()) > len(written)
    session = repo.readonly_session(branch="main")
    assert session.all_virtual_chunk_locations() == []
    with kdb.open(episodes) as native:
        for position in range(len(native)):
            episode = native.read_episode(position)
            stored = xr.open_zarr(session.store, group=f"episodes/{episode.meta.episode_id}", consolidated=False)
            assert np.array_equal(stored["states"].values, episode.states)
            frames = xr.open_zarr(session.store, group=f"episodes/{episode.meta.episode_id}/images",
                                  consolidated=False)["front"].values
            assert all(np.array_equal(frames[i], episode.images.frame(i)["front"]) for i in range(len(episode)))

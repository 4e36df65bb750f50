"""The views stay bounded: many keys, many chunks and big chunks cost what they must, not N times over."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import zarr

import arrayio
import arrayio._tree
import arrayio.bloscpack as blp
import arrayio.kastore as kastore
from arrayio import dask as arrayio_dask
from arrayio.bloscpack import BloscpackFile
from arrayio.kerchunk import references
from arrayio.zarr import open_store

KEYS = 50_000


@pytest.fixture(scope="module")
def many_keys(tmp_path_factory):
    path = tmp_path_factory.mktemp("many") / "many.kas"
    kastore.dump({f"key{index}": np.arange(3) for index in range(KEYS)}, path)
    return path


def _peak(call) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_open_store_of_many_keys_makes_nodes_when_asked(many_keys):
    """The store's own index is the cost; the zarr view adds little per key (it used to add a document
    and an array object for every key: 4.8 GB for a million)."""
    loaded = _peak(lambda: kastore.load(many_keys).close())

    def open_and_read():
        store = open_store(many_keys)
        group = zarr.open_group(store=store, mode="r")
        assert np.array_equal(group[f"key{KEYS - 1}"][:], np.arange(3))
        store.close()

    added = _peak(open_and_read) - loaded
    assert added < 300 * KEYS, f"{added / KEYS:.0f} bytes per key on top of the store's index"


def test_references_refuse_to_grow_past_their_limit(many_keys):
    with arrayio.limits.raised(references=1000), pytest.raises(arrayio.errors.LimitError, match="references = 1000"):
        references(many_keys)


def test_references_within_the_limit_cover_every_key(tmp_path):
    path = tmp_path / "few.kas"
    kastore.dump({f"key{index}": np.arange(3) for index in range(20)}, path)
    with arrayio.limits.raised(references=100):
        refs = references(path)
    assert sum(key.endswith("/0") for key in refs["refs"]) == 20


def test_to_dask_of_very_many_chunks_runs_blocks_of_chunks(tmp_path, monkeypatch):
    """A file of a million tiny chunks made a million tasks (minutes, 4.5 GB); past MAX_BLOCKS, runs of chunks."""
    path = tmp_path / "tiny.blp"
    values = np.arange(4000, dtype=np.float64)
    blp.pack_ndarray_to_file(values, path, chunk_size=16)  # 2000 chunks of two values
    monkeypatch.setattr(arrayio_dask, "MAX_BLOCKS", 100)
    array = arrayio_dask.to_dask(path, block_bytes=1)  # runs by block size alone would be one block here
    assert array.numblocks == (100,) and array.chunks[0] == (40,) * 100
    assert float(array.sum().compute(scheduler="sync")) == float(values.sum())
    assert np.array_equal(array[1234:1301].compute(scheduler="sync"), values[1234:1301])


def test_zarr_reads_a_big_blosc_chunk_once(tmp_path, monkeypatch):
    """A Blosc chunk bigger than the model's row blocks is one zarr chunk: one element decodes it once, not
    once per row block (32 times for a 2 GiB chunk)."""
    path = tmp_path / "big.blp"
    values = np.arange(8192, dtype=np.float64).reshape(1024, 8)
    blp.pack_ndarray_to_file(values, path, chunk_size=32 << 10)  # two chunks of 512 rows
    monkeypatch.setattr(arrayio._tree, "MAX_CHUNK_BYTES", 1024)  # row blocks of 16 rows elsewhere
    read = []
    original = BloscpackFile._compressed

    def spy(self, index):
        read.append(index)
        return original(self, index)

    monkeypatch.setattr(BloscpackFile, "_compressed", spy)
    node = zarr.open_group(store=open_store(path), mode="r")["array"]
    assert node.chunks == (512, 8)
    assert np.array_equal(node[0:1], values[0:1]) and read == [0]
    read.clear()
    assert np.array_equal(node[:], values) and sorted(read) == [0, 1]

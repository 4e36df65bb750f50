"""arrayio.dask on a real LocalCluster (2 worker processes): arrays whose chunks follow the file, kdb episode
bags and validate_many, over http:// and s3:// objects; graphs that hold no data."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import arrayio
from arrayio import bloscpack, kastore, kdb, pycauset
from arrayio import dask as arrayio_dask
from arrayio.robot.dask import kdb_bag

pytestmark = pytest.mark.slow
# The graphs and the cluster are what these tests are about; both clients' fetch paths are tested elsewhere.
REMOTE_CLIENTS = ("obstore",)


def _graph_bytes(array) -> int:
    return len(pickle.dumps(dict(array.__dask_graph__())))


def test_bloscpack_over_http_one_dask_chunk_per_file_chunk(dask_client, http_server, samples):
    path = samples("bloscpack/reference")
    url = http_server.put("dask/reference.blp", path.read_bytes())
    local = bloscpack.unpack_ndarray_from_file(path)
    array = arrayio_dask.to_dask(url, block_bytes=1)  # no run of chunks fits: one per block
    with bloscpack.open(path) as reader:
        assert array.numblocks == (reader.nchunks, 1)
        assert array.chunks[0] == tuple(np.diff(reader.starts) // (64 * 8))
    http_server.counts.reset()
    assert np.isclose(array.sum().compute(), local.sum())
    assert np.array_equal(array[1000:1100].compute(), local[1000:1100])
    requests, sent = http_server.counts.total()
    # each worker reads the header once (64 KiB read-ahead), then every task fetches its own chunk once
    assert sent <= path.stat().st_size * 2 + 2 * (64 << 10)
    assert requests <= 2 * array.numblocks[0] + 4


def test_small_chunks_are_read_in_runs_one_request_a_task(dask_client, http_server, tmp_path):
    """A task per 1 MiB chunk cost dask more than the read (issue 22: 954 tasks took 11.9 s over HTTP, as long as
    making the same chunks out of nothing); runs of chunks up to block_bytes are one task, one fetch, one decode."""
    values = np.random.default_rng(22).integers(0, 1 << 16, (40 * 512, 64), dtype=np.uint16)
    path = tmp_path / "runs.blp"
    bloscpack.pack_ndarray_to_file(values, path, chunk_size=64 << 10)  # 40 chunks of 512 rows
    url = http_server.put("dask/runs.blp", path.read_bytes())
    array = arrayio_dask.to_dask(url, block_bytes=256 << 10)
    assert array.numblocks == (10, 1) and array.chunks[0] == (2048,) * 10
    http_server.counts.reset()
    assert int(array.sum().compute()) == int(values.sum(dtype=np.uint64))
    requests, sent = http_server.counts.total()
    # each worker opens the file once (header, metadata and offsets: one read-ahead), then one GET per run
    assert requests <= 10 + 2 * 2, requests
    assert sent <= path.stat().st_size + 2 * (64 << 10)
    assert np.array_equal(array[1000:5000].compute(), values[1000:5000])


def test_graph_holds_no_data(http_server, tmp_path):
    sizes = {}
    for rows in (4096, 16384):
        path = tmp_path / f"rows{rows}.blp"
        data = np.random.default_rng(rows).standard_normal((rows, 64))
        bloscpack.pack_ndarray_to_file(data, path, chunk_size=rows * 64 * 8 // 16)
        array = arrayio_dask.to_dask(http_server.put(f"graph/{path.name}", path.read_bytes()), block_bytes=1)
        assert array.numblocks == (16, 1)
        sizes[rows] = _graph_bytes(array)
    # four times the data, the same graph: offsets and a URL only, a few KB
    assert sizes[16384] - sizes[4096] < 200
    assert sizes[16384] < 8192


def test_kastore_key_over_s3_in_row_blocks(dask_client, s3_put, s3_options, samples):
    url = s3_put("dask/store.kas", samples("kastore/reference").read_bytes())
    array = arrayio_dask.to_dask(url, key="big", storage_options=s3_options, block_bytes=100_000)
    assert array.numblocks == (11,) and max(array.chunks[0]) * 8 <= 100_000
    with kastore.load(samples("kastore/reference")) as store:
        expected = np.array(store["big"])
    assert np.array_equal(array.compute(), expected)
    with pytest.raises(ValueError, match="name one with key="):
        arrayio_dask.to_dask(url, storage_options=s3_options)


def test_pycauset_payload_over_http_in_row_blocks(dask_client, http_server, samples):
    path = samples("pycauset/reference")
    url = http_server.put("dask/matrix.pycauset", path.read_bytes())
    array = arrayio_dask.to_dask(url, block_bytes=64 << 10)
    assert array.chunks == ((32,) * 16, (256,))
    with pycauset.load(path) as container:
        assert np.array_equal(array.compute(), container.array)


def test_transposed_pycauset_and_local_paths(dask_client, tmp_path):
    matrix = np.arange(300.0).reshape(20, 15)
    pycauset.save(matrix.T, tmp_path / "t.pycauset")
    array = arrayio_dask.to_dask(tmp_path / "t.pycauset", block_bytes=15 * 8 * 3)
    assert np.array_equal(array.compute(), matrix.T)


def test_kdb_holds_many_arrays_named_by_key_or_taken_as_a_tree(samples):
    with pytest.raises(arrayio.UnsupportedError, match="name one with key="):
        arrayio_dask.to_dask(samples("kdb/ours"))
    with kdb.open(samples("kdb/ours")) as local:
        states = local.read_episode(0).states
        episode_id = local.read_meta(0).episode_id
    tree = arrayio_dask.to_dask_tree(samples("kdb/ours"))
    assert np.array_equal(tree[f"episodes/{episode_id}/states"].compute(), states)
    assert np.array_equal(arrayio_dask.to_dask(samples("kdb/ours"), key=f"episodes/{episode_id}/states").compute(),
                          states)


def _summary(episode) -> tuple:
    return episode.meta.task, float(episode.states.sum()), episode.images["front"].shape, int(
        episode.images["front"][2].sum())


def test_kdb_bag_over_http_and_s3(dask_client, http_server, s3_put, s3_options, samples):
    data = samples("kdb/ours").read_bytes()
    urls = [http_server.put(f"bag/{index}.kdb", data) for index in range(2)]
    with kdb.open(samples("kdb/ours")) as local:
        expected = [_summary(episode) for episode in local] * 2
    assert kdb_bag(urls).map(_summary).compute() == expected
    s3_urls = [s3_put(f"bag/{index}.kdb", data) for index in range(2)]
    bag = kdb_bag(s3_urls, storage_options=s3_options, episodes_per_partition=5)
    assert bag.npartitions == 6
    assert bag.map(_summary).compute() == expected


def test_kdb_bag_of_one_path_and_its_arguments(samples):
    # Before: kdb_bag("file.kdb") made a partition per letter of the path, episodes_per_partition=0 ended in
    # "range() arg 3 must not be zero", -1 gave an empty bag, and storage_options="x" a message about
    # dictionary update sequences.
    path = samples("kdb/ours")
    with kdb.open(path) as local:
        count = len(local)
    assert kdb_bag(str(path)).count().compute(scheduler="sync") == count
    assert kdb_bag(path, episodes_per_partition=2).count().compute(scheduler="sync") == count
    for wrong, error in ((0, ValueError), (-1, ValueError), (1.5, TypeError)):
        with pytest.raises(error, match="episodes_per_partition must be"):
            kdb_bag([path], episodes_per_partition=wrong)
    with pytest.raises(TypeError, match="storage_options must be a dict"):
        kdb_bag([path], storage_options="x")


def test_validate_many_on_the_cluster(dask_client, http_server, s3_put, s3_options, samples):
    good = [http_server.put(f"many/{index}.kas", samples("kastore/ours").read_bytes()) for index in range(3)]
    broken_bytes = bytearray(samples("bloscpack/ours").read_bytes())
    broken_bytes[-100] ^= 0xFF
    broken = http_server.put("many/broken.blp", bytes(broken_bytes))
    missing = f"{http_server.url}/many/missing.kdb"
    results = arrayio_dask.validate_many([*good, broken, missing], dask_client)
    assert all(results[url] == [] for url in good)
    assert len(results[broken]) == 1 and "chunk 15" in str(results[broken][0])
    assert len(results[missing]) == 1 and "missing.kdb" in str(results[missing][0])
    on_s3 = s3_put("many/matrix.pycauset", samples("pycauset/reference").read_bytes())
    assert arrayio_dask.validate_many([on_s3], dask_client, storage_options=s3_options) == {on_s3: []}
    # One URL alone is one file (it was validated letter by letter), and options must be a dict.
    assert arrayio_dask.validate_many(good[0], dask_client) == {good[0]: []}
    with pytest.raises(TypeError, match="storage_options must be a dict"):
        arrayio_dask.validate_many([on_s3], dask_client, storage_options="anon=true")


def test_cli_validate_on_a_dask_scheduler(dask_client, cli, http_server, samples):
    urls = [http_server.put(f"cli-dask/{index}.kdb", samples("kdb/ours").read_bytes()) for index in range(2)]
    result = cli("validate", f"--dask={dask_client.scheduler.address}", *urls)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().count("valid") == 2
    cut = http_server.put("cli-dask/cut.kdb", samples("kdb/ours").read_bytes()[:5000])
    result = cli("validate", "--json", f"--dask={dask_client.scheduler.address}", urls[0], cut)
    assert result.returncode == 1
    assert "cut.kdb" in result.stdout.decode()


"""arrayio.zarr and arrayio.kerchunk over the loopback HTTP range server and moto S3: the same values as a local
read, and one zarr chunk moves at most its own bytes (its Blosc chunks for bloscpack) + 64 KiB, counted by the
servers themselves."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import xarray as xr
import zarr
from remote_samples import SAMPLES

import arrayio
import arrayio._tree
from arrayio.zarr import open_store

SLACK = 64 << 10
BACKENDS = ["http", "s3"]


@pytest.fixture
def served(http_server, s3_server, s3_options, s3_put, samples):
    """Serve a sample on a backend: returns (url, storage_options, server counts, local path)."""
    def serve(kind: str, backend: str):
        path = samples(kind)
        name = f"zarr-{kind.replace('/', '-')}-{path.name}"
        if backend == "http":
            url, options, counts = http_server.put(name, path.read_bytes()), {}, http_server.counts
        else:
            url, options, counts = s3_put(name, path.read_bytes()), s3_options, s3_server.counts
        counts.reset()
        return url, options, counts, path
    return serve


def arrays_of(store) -> dict[str, np.ndarray]:
    group = zarr.open_group(store=store, mode="r")
    return {path: node[...] for path, node in group.members(max_depth=None) if isinstance(node, zarr.Array)}


def listing(store) -> list[str]:
    """The store's own keys, in the order it lists them."""
    async def keys() -> list[str]:
        return [key async for key in store.list()]
    return asyncio.run(keys())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", SAMPLES)
def test_remote_store_equals_local(served, kind, backend):
    url, options, _counts, path = served(kind, backend)
    local_store, remote_store = open_store(path), open_store(url, storage_options=options or None)
    assert listing(local_store) == listing(remote_store)
    # zarr-python yields a group's members as their metadata reads complete (asyncio.as_completed): their
    # order is its own, and varies with the wire's timing
    local, remote = arrays_of(local_store), arrays_of(remote_store)
    assert sorted(local) == sorted(remote)
    for name, values in local.items():
        assert values.dtype == remote[name].dtype, name
        assert np.array_equal(values, remote[name], equal_nan=values.dtype.kind == "f"), name


def _one_chunk(store, kind: str) -> tuple[str, tuple[int, ...], int]:
    """(array path, chunk coordinates, bytes of the file the chunk occupies) of one chunk inside the file."""
    name = kind.split("/")[0]
    if name in ("kastore", "kast"):
        node = store.root.children["big"]
        coords = (1,)
        return "big", coords, node.reference(coords).length
    if name == "bloscpack":
        node = store.root.children["array"]
        coords = (3, 0)
        return "array", coords, node.reference(coords).length + store.reader.checksum.size
    if name == "pycauset":
        node = store.root.children["matrix"]
        coords = (2, 0)
        return "matrix", coords, node.reference(coords).length
    node = store.root.children["episodes"].children["3"].children["images"].children["front"]
    record = store.reader.read_episode(3).images.record(2, "front")
    return "episodes/3/images/front", (2, 0, 0, 0), record.length


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["kastore/ours", "kast/ours", "bloscpack/ours", "bloscpack/reference",
                                  "pycauset/ours", "kdb/ours"])
def test_one_remote_chunk_moves_its_bytes_and_at_most_64_kib_more(served, kind, backend, monkeypatch):
    monkeypatch.setattr(arrayio._tree, "MAX_CHUNK_BYTES", 128 << 10)  # several chunks per array
    url, options, counts, path = served(kind, backend)
    store = open_store(url, storage_options=options or None)
    group = zarr.open_group(store=store, mode="r")
    array_path, coords, chunk_bytes = _one_chunk(store, kind)
    array = group[array_path]
    region = tuple(slice(index * size, min((index + 1) * size, length))
                   for index, size, length in zip(coords, array.chunks, array.shape))
    counts.reset()
    values = array[region]
    requests, sent = counts.total()
    assert requests >= 1 or kind.startswith("kdb")  # kdb: the frame may already sit in the read-ahead
    assert sent <= chunk_bytes + SLACK, (sent, chunk_bytes)
    local = zarr.open_group(store=open_store(path), mode="r")[array_path]
    assert np.array_equal(values, local[region])


@pytest.mark.parametrize("backend", BACKENDS)
def test_tskit_like_file_through_xarray_remotely(served, backend):
    url, options, _counts, path = served("kastore/reference", backend)
    remote = xr.open_zarr(open_store(url, storage_options=options or None), consolidated=False)
    local = xr.open_zarr(open_store(path), consolidated=False)
    assert set(remote.data_vars) == set(local.data_vars) == {"big", "other", "small"}
    assert np.array_equal(remote["other"].values, local["other"].values)


@pytest.mark.parametrize("kind", ["bloscpack/ours", "kastore/ours"])
def test_kerchunk_references_of_a_remote_file_read_over_http(served, kind):
    from kerchunk.utils import refs_as_store

    from arrayio.kerchunk import references

    url, _options, _counts, path = served(kind, "http")
    refs = references(url)
    assert refs["left_out"] == []
    assert all(value[0] == url for value in refs["refs"].values() if isinstance(value, list))
    remote = zarr.open_group(refs_as_store(refs, remote_protocol="http"), mode="r", zarr_format=2)
    local = arrays_of(open_store(path))
    for name, values in local.items():
        assert np.array_equal(remote[name][...], values), name


@pytest.mark.parametrize("backend", BACKENDS)
def test_bloscpack_references_need_no_request_per_chunk(served, backend):
    """The manifest of a remote bloscpack file comes from its header and offsets table, not from each chunk's
    Blosc header (one request per chunk before: 16 chunks of 128 KiB took 17 requests)."""
    from arrayio.kerchunk import references

    url, options, counts, path = served("bloscpack/ours", backend)
    refs = references(url, storage_options=options or None)
    requests, sent = counts.total()
    local = references(str(path))["refs"]
    chunks = [key for key in local if key.startswith("array/") and not key.endswith(".zarray") and "." in key]
    assert len(chunks) >= 15
    assert {key: value[1:] for key, value in refs["refs"].items() if key in chunks} == \
        {key: value[1:] for key, value in local.items() if key in chunks}
    assert requests <= 3, requests
    assert sent <= 3 * SLACK, sent


@pytest.mark.parametrize("backend", BACKENDS)
def test_convert_from_and_to_urls(served, backend, tmp_path, s3_options):
    import arrayio.bloscpack as blp
    from arrayio import kast
    from arrayio.convert import convert

    url, options, _counts, path = served("bloscpack/ours", backend)
    convert(url, tmp_path / "from-url.zarr", storage_options=options or None)
    assert np.array_equal(zarr.open_group(str(tmp_path / "from-url.zarr"), mode="r")["array"][...],
                          blp.unpack_ndarray_from_file(path))
    kas_url, kas_options, _counts, kas_path = served("kastore/ours", backend)
    if backend == "s3":
        target = kas_url.rsplit("/", 1)[0] + "/converted.kast"
        convert(kas_path, target, storage_options=s3_options)
        with kast.load(target, storage_options=s3_options) as converted, arrayio.open(kas_path) as original:
            assert set(converted) == set(original)
            assert all(np.array_equal(converted[key], original[key]) for key in original)


@pytest.mark.one_client  # a cluster: slow, and both clients' reads are tested above
def test_dask_from_zarr_on_a_local_cluster(served, dask_client):
    import dask.array as da

    url, options, _counts, path = served("bloscpack/ours", "s3")
    remote = da.from_zarr(zarr.open_group(store=open_store(url, storage_options=options), mode="r")["array"])
    local = zarr.open_group(store=open_store(path), mode="r")["array"][...]
    assert remote.numblocks[0] > 1
    assert float(dask_client.compute(remote.sum()).result()) == pytest.approx(float(local.sum()))

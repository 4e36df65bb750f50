"""Every view over every format's demo file: the zarr store, dask arrays, kerchunk references and convert,
from a local path, the loopback HTTP range server and moto's S3 server (the remote tests' fixtures).

The expected values are the array model's own chunk reads of the local file (``arrayio._tree``); each
format's tests check that model against its native reader. Here every view must give the same values,
wherever the file is, and say what it leaves out.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr
from kerchunk.utils import refs_as_store

import arrayio
from arrayio import dask as arrayio_dask
from arrayio._tree import Array, tree_of
from arrayio.convert import convert
from arrayio.kerchunk import references
from arrayio.zarr import open_store

PLACES = ["local", "http", "s3"]


def model_values(path) -> dict[str, np.ndarray]:
    """Every array of the local file, assembled from the model's chunk reads."""
    found = {}
    with arrayio.open(path) as reader:
        for name, array in tree_of(reader).arrays():
            found[name] = _assembled(array)
    return found


def _assembled(array: Array) -> np.ndarray:
    values = np.empty(array.shape, dtype=object if array.strings else array.dtype)
    for coords in np.ndindex(*array.grid):
        values[array.region(coords)] = array.read(coords)
    return values


def same(found, expected) -> bool:
    found = np.asarray(found)
    if expected.dtype == object:
        return [str(value) for value in found.reshape(-1)] == [str(value) for value in expected.reshape(-1)]
    return found.shape == expected.shape and np.array_equal(found, expected, equal_nan=expected.dtype.kind in "fc")


def store_values(target, options) -> dict[str, np.ndarray]:
    """Every array of ``target`` read through arrayio's zarr store."""
    store = open_store(target, options)
    try:
        group = zarr.open_group(store=store, mode="r")
        return {name: node[...] for name, node in group.members(max_depth=None) if isinstance(node, zarr.Array)}
    finally:
        store.close()


@pytest.fixture
def placed(request, demo, format_name):
    """(target, storage_options) of the demo file at the place the test's parameter names."""
    place = request.param
    if place == "local":
        return str(demo), None
    if place == "http":
        return request.getfixturevalue("http_server").put(f"views/{demo.name}", demo.read_bytes()), None
    url = request.getfixturevalue("s3_put")(f"views/{demo.name}", demo.read_bytes())
    return url, request.getfixturevalue("s3_options")


@pytest.mark.parametrize("placed", PLACES, indirect=True)
def test_zarr_store(placed, demo):
    target, options = placed
    expected = model_values(demo)
    found = store_values(target, options)
    assert found.keys() == expected.keys()
    for name, values in expected.items():
        assert same(found[name], values), name


@pytest.mark.parametrize("placed", PLACES, indirect=True)
def test_dask(placed, demo):
    target, options = placed
    expected = model_values(demo)
    arrays = arrayio_dask.to_dask_tree(target, storage_options=options)
    assert arrays.keys() == expected.keys()
    for name, values in expected.items():
        assert same(arrays[name].compute(scheduler="sync"), values), name
    if len(expected) == 1:
        assert same(arrayio_dask.to_dask(target, storage_options=options).compute(scheduler="sync"),
                    next(iter(expected.values())))


@pytest.mark.parametrize("placed", PLACES, indirect=True)
def test_kerchunk_references(placed, demo):
    target, options = placed
    expected = model_values(demo)
    refs = references(target, options)
    left_out = {item["path"]: item["reason"] for item in refs["left_out"]}
    with arrayio.open(demo) as reader:
        for name, array in tree_of(reader).arrays():
            computed = any(array.chunk_reference(coords) is None for coords in np.ndindex(*array.grid))
            # only arrays with chunks that have no byte range may be left out, with the format's reason
            assert name not in left_out or (computed and left_out[name] == array.why_computed), name
            if not computed:
                assert name not in left_out, name
    protocol = target.split("://")[0] if "://" in target else "file"
    # A filesystem of its own: fsspec's instance cache would otherwise hand the reference store's async
    # filesystem (bound to zarr's event loop) to arrayio's next remote open of the same bucket.
    remote_options = {**(options or {}), "skip_instance_cache": True} if protocol == "s3" else options or {}
    group = zarr.open_group(refs_as_store(refs, remote_protocol=protocol, remote_options=remote_options),
                            mode="r", zarr_format=2)
    for name, values in expected.items():
        if name not in left_out:
            assert same(group[name][...], values), name


@pytest.mark.parametrize("placed", PLACES, indirect=True)
def test_convert_to_zarr(placed, demo, tmp_path):
    target, options = placed
    expected = model_values(demo)
    convert(target, tmp_path / "out.zarr", storage_options=options)
    group = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    for name, values in expected.items():
        assert same(group[name][...], values), name


def test_readers_sharing_a_folder_read_every_format_as_the_model(demo, http_server, tmp_path):
    """The ``shared_cache`` storage option under every format: readers of one URL through one folder (the
    second maps what the first published) give the model's values through the zarr store and dask."""
    url = http_server.put(f"views-shared/{demo.name}", demo.read_bytes())
    options = {"shared_cache": str(tmp_path)}
    expected = model_values(demo)
    for _ in range(2):
        arrays = arrayio_dask.to_dask_tree(url, storage_options=options)
        stored = store_values(url, options)
        for name, values in expected.items():
            assert same(arrays[name].compute(scheduler="sync"), values) and same(stored[name], values), name
    assert os.listdir(tmp_path)  # what the readers fetched was published there

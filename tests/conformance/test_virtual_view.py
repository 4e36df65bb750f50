"""The VirtualiZarr view over every registered format's demo file: each array is either virtual (every chunk a byte
range of the file, read back by zarr to the model's values) or named as computed and loaded by the fallback."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

virtualizarr = pytest.importorskip("virtualizarr")
obstore_store = pytest.importorskip("obstore.store")
zarr = pytest.importorskip("zarr")
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402

import arrayio  # noqa: E402
from arrayio._tree import Array, tree_of  # noqa: E402
from arrayio.virtualizarr import ComputedChunksWarning, Parser, open_virtual_datatree  # noqa: E402


def model_values(path) -> dict[str, np.ndarray]:
    """Every array of the file's tree, assembled from its chunks' reads."""
    values = {}
    with arrayio.open(path) as reader:
        for name, node in tree_of(reader).walk():
            if isinstance(node, Array):
                whole = np.empty(node.shape, dtype=node.dtype)
                for coords in np.ndindex(*node.grid):
                    whole[node.region(coords)] = node.read(coords)
                values[name] = whole
    return values


def test_every_array_is_virtual_or_named_and_loaded(demo):
    registry = ObjectStoreRegistry({"file://": obstore_store.LocalStore()})
    url = demo.resolve().as_uri()
    expected = model_values(demo)
    parser = Parser(computed="skip")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ComputedChunksWarning)
        store = parser(url, registry)
    assert bool(parser.left_out) == any(issubclass(w.category, ComputedChunksWarning) for w in caught)
    group = zarr.open_group(store=store, mode="r", zarr_format=3)
    virtual = {name: node[...] for name, node in group.members(max_depth=None) if isinstance(node, zarr.Array)}
    assert not set(virtual) & set(parser.left_out)
    assert sorted([*virtual, *parser.left_out]) == sorted(expected)  # nothing dropped
    for name, values in virtual.items():
        assert np.array_equal(values, expected[name], equal_nan=values.dtype.kind == "f"), name
    if parser.left_out:
        with pytest.raises(arrayio.UnsupportedError, match=parser.left_out[0].split("/")[-1]):
            Parser()(url, registry)
    tree = open_virtual_datatree(url, registry)
    for name in parser.left_out:
        loaded = tree[name].values
        if loaded.dtype.kind == "O":
            assert list(loaded) == list(expected[name]), name
        else:
            assert np.array_equal(loaded, expected[name], equal_nan=loaded.dtype.kind == "f"), name
    assert isinstance(tree, xr.DataTree)

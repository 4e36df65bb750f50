"""The xarray engine and the VirtualiZarr parser over every format's demo file, from a local path, the loopback HTTP
range server and moto's S3 server, like the other views in test_views.py: the same values as the array model's
reads. The parser reads through the user's obstore store for the place; what it cannot reference (computed chunks)
it names, and the fallback loads."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

virtualizarr = pytest.importorskip("virtualizarr")
obstore_store = pytest.importorskip("obstore.store")
zarr = pytest.importorskip("zarr")
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402
from remote_samples import BUCKET  # noqa: E402

import arrayio  # noqa: E402
from arrayio._tree import tree_of  # noqa: E402
from arrayio.virtualizarr import ComputedChunksWarning, Parser, open_virtual_datatree  # noqa: E402

from . import test_views  # noqa: E402
from .test_views import PLACES, model_values, same  # noqa: E402

placed = test_views.placed  # the demo file at each place: test_views.py's fixture, registered here too


def variables_of(tree: xr.DataTree) -> dict[str, xr.Variable]:
    return {f"{node.path.strip('/')}/{name}".strip("/"): variable
            for node in tree.subtree for name, variable in node.to_dataset(inherit=False).variables.items()}


@pytest.mark.parametrize("placed", PLACES, indirect=True)
def test_xarray_engine(placed, demo):
    target, options = placed
    expected = model_values(demo)
    with xr.open_datatree(target, engine="arrayio", backend_kwargs={"storage_options": options}) as tree:
        found = {name: variable.values for name, variable in variables_of(tree).items()}
    assert found.keys() == expected.keys()
    for name, values in expected.items():
        assert same(found[name], values), name


def user_registry(request, target: str) -> tuple[str, ObjectStoreRegistry]:
    """(URL, the user's obstore registry) for a target of a place: what a VirtualiZarr user would set up."""
    if "://" not in target:
        return Path(target).resolve().as_uri(), ObjectStoreRegistry({"file://": obstore_store.LocalStore()})
    if target.startswith("http"):
        server = request.getfixturevalue("http_server")
        store = obstore_store.HTTPStore.from_url(server.url, client_options={"allow_http": True})
        return target, ObjectStoreRegistry({server.url: store})
    store = obstore_store.S3Store(BUCKET, endpoint=request.getfixturevalue("s3_server").endpoint, region="us-east-1",
                                  access_key_id="testing", secret_access_key="testing",
                                  client_options={"allow_http": True})
    return target, ObjectStoreRegistry({f"s3://{BUCKET}": store})


@pytest.mark.parametrize("placed", PLACES, indirect=True)
def test_virtualizarr_parser(placed, demo, request):
    url, registry = user_registry(request, placed[0])
    expected = model_values(demo)
    with arrayio.open(demo) as reader:
        computed = {name for name, array in tree_of(reader).arrays()
                    if any(array.chunk_reference(coords) is None for coords in np.ndindex(*array.grid))}
    parser = Parser(computed="skip")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ComputedChunksWarning)
        store = parser(url, registry)
    # exactly the arrays with a computed chunk are left out, and said so
    assert set(parser.left_out) == computed
    assert bool(computed) == any(issubclass(item.category, ComputedChunksWarning) for item in caught)
    group = zarr.open_group(store=store, mode="r", zarr_format=3)
    virtual = {name: node[...] for name, node in group.members(max_depth=None) if isinstance(node, zarr.Array)}
    assert virtual.keys() == expected.keys() - computed
    for name, values in virtual.items():
        assert same(values, expected[name]), name
    if computed:
        with pytest.raises(arrayio.UnsupportedError, match="chunks computed from the file"):
            Parser()(url, registry)
    loaded = {name: variable.values for name, variable in variables_of(open_virtual_datatree(url, registry)).items()
              if name in computed}
    assert loaded.keys() == computed
    for name, values in loaded.items():
        assert same(values, expected[name]), name

"""The xarray engine and the VirtualiZarr parser over the loopback HTTP range server and moto S3: every format's demo
file gives the same arrays as the local file, and the parser reads through the user's obstore store (the server
counts its requests), in byte ranges: the header and index, never the arrays."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from remote_samples import BUCKET

from arrayio._registry import FORMATS, spec_for

virtualizarr = pytest.importorskip("virtualizarr")
obstore_store = pytest.importorskip("obstore.store")
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402

import arrayio.virtualizarr  # noqa: E402


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("remote-demos")
    return {name: Path(spec_for(name).demo(folder)) for name in FORMATS}


def arrays_of(tree: xr.DataTree) -> dict[str, np.ndarray]:
    return {f"{node.path.strip('/')}/{name}".strip("/"): variable.values
            for node in tree.subtree for name, variable in node.to_dataset(inherit=False).variables.items()}


def assert_same(found: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(found) == sorted(expected)
    for path, values in expected.items():
        if values.dtype.kind == "O":
            assert list(found[path]) == list(values), path
        else:
            assert np.array_equal(found[path], values, equal_nan=values.dtype.kind == "f"), path


@pytest.mark.parametrize("backend", ["http", "s3"])
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_engine_over_a_server_equals_the_local_file(name, backend, demos, http_server, s3_put, s3_options):
    path = demos[name]
    if backend == "http":
        url, options = http_server.put(f"engine-{path.name}", path.read_bytes()), {}
    else:
        url, options = s3_put(f"engine-{path.name}", path.read_bytes()), s3_options
    with xr.open_datatree(path, engine="arrayio") as local:
        expected = arrays_of(local)
    with xr.open_datatree(url, engine="arrayio", backend_kwargs={"storage_options": options}) as remote:
        assert_same(arrays_of(remote), expected)


@pytest.fixture
def served_with_registry(http_server, s3_server, s3_put):
    """Serve a file on a backend: (url, the user's obstore registry for it, the server's request counts)."""
    def serve(path: Path, backend: str):
        if backend == "http":
            url = http_server.put(f"virtual-{path.name}", path.read_bytes())
            store = obstore_store.HTTPStore.from_url(http_server.url, client_options={"allow_http": True})
            return url, ObjectStoreRegistry({http_server.url: store}), http_server.counts
        url = s3_put(f"virtual-{path.name}", path.read_bytes())
        store = obstore_store.S3Store(BUCKET, endpoint=s3_server.endpoint, region="us-east-1",
                                      access_key_id="testing", secret_access_key="testing",
                                      client_options={"allow_http": True})
        return url, ObjectStoreRegistry({f"s3://{BUCKET}": store}), s3_server.counts
    return serve


@pytest.mark.parametrize("backend", ["http", "s3"])
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_virtualizarr_reads_through_the_registrys_store(name, backend, demos, served_with_registry):
    path = demos[name]
    url, registry, counts = served_with_registry(path, backend)
    counts.reset()
    tree = arrayio.virtualizarr.open_virtual_datatree(url, registry)
    requests, _sent = counts.total()
    assert requests >= 1  # the header and index came through the user's obstore store
    with xr.open_datatree(path, engine="arrayio") as local:
        expected = arrays_of(local)
    parser = arrayio.virtualizarr.Parser(computed="skip")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", arrayio.virtualizarr.ComputedChunksWarning)  # loaded in `tree` above
        manifest_store = parser(url, registry)
    virtual = {}
    for node_path, node in tree.to_dict().items():
        for variable_name, variable in node.variables.items():
            key = f"{node_path.strip('/')}/{variable_name}".strip("/")
            if isinstance(variable.data, virtualizarr.manifests.ManifestArray):
                # every chunk of a virtual array is a range of the served object itself
                assert {str(p) for p in np.unique(variable.data.manifest._paths) if p} <= {url}, key
                virtual[key] = xr.open_zarr(manifest_store, consolidated=False, zarr_format=3,
                                            group=node_path.strip("/") or None)[variable_name].values
            else:
                virtual[key] = variable.values
    assert_same(virtual, expected)


def test_parser_fetches_the_index_not_the_arrays(tmp_path, http_server):
    import arrayio.kastore as kastore

    path = tmp_path / "big.kas"
    kastore.dump({"t/big": np.arange(1 << 20, dtype=np.float64), "t/small": np.arange(7)}, path)  # 8 MiB
    url = http_server.put("virtual-big.kas", path.read_bytes())
    registry = ObjectStoreRegistry({http_server.url: obstore_store.HTTPStore.from_url(
        http_server.url, client_options={"allow_http": True})})
    http_server.counts.reset()
    store = arrayio.virtualizarr.Parser(group="t")(url, registry)
    requests, sent = http_server.counts.total()
    assert requests <= 3 and sent <= 256 << 10, (requests, sent)  # a HEAD and the header + index, not 8 MiB
    big = xr.open_zarr(store, consolidated=False, zarr_format=3)["big"]
    assert float(big[-1]) == (1 << 20) - 1


def test_engine_with_dask_threads_over_http(tmp_path, http_server):
    import arrayio.bloscpack as blp

    path = tmp_path / "rows.blp"
    array = np.arange(4000 * 6, dtype="<f8").reshape(4000, 6)
    blp.pack_ndarray_to_file(array, path, chunk_size=4800)  # 100 rows a chunk: 40 dask chunks
    url = http_server.put("engine-dask-rows.blp", path.read_bytes())
    with xr.open_dataset(url, engine="arrayio", chunks={}) as dataset:
        assert dataset["array"].data.numblocks == (40, 1)
        # the threaded scheduler reads chunks concurrently through one ranged source
        assert np.array_equal(dataset["array"].compute(scheduler="threads").values, array)

"""The VirtualiZarr parser and the xarray engine over the loopback HTTP range server, beyond the conformance suite's
every-format checks (tests/conformance/test_views_virtual.py): the parser reads through the user's obstore store in
byte ranges (the server counts a HEAD and the header + index, never the arrays), and the engine's dask chunks read
concurrently through one ranged source."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

virtualizarr = pytest.importorskip("virtualizarr")
obstore_store = pytest.importorskip("obstore.store")
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402

import arrayio.virtualizarr  # noqa: E402


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

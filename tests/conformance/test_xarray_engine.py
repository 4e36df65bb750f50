"""The xarray engine "arrayio" over every registered format's demo file: registered under its name, lazy (dask chunks
are the model's), selections equal to the whole, clear errors (its values against the model: test_views_virtual.py)."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the suite runs on 3.11
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINT = "arrayio.xarray_backend:ArrayioBackendEntrypoint"


def test_engine_is_declared_and_installed_under_its_name():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["xarray.backends"]
    assert declared == {"arrayio": ENTRY_POINT}
    installed = {point.name: point.value for point in importlib.metadata.entry_points(group="xarray.backends")}
    assert installed.get("arrayio") == ENTRY_POINT, "the installed arrayio predates the engine: pip install -e ."
    assert "arrayio" in xr.backends.list_engines()


def same(left, right) -> bool:
    left, right = np.asarray(left), np.asarray(right)
    if left.dtype.kind in "OTU" or right.dtype.kind in "OTU":
        return [str(value) for value in left.reshape(-1)] == [str(value) for value in right.reshape(-1)]
    return left.dtype == right.dtype and np.array_equal(left, right, equal_nan=left.dtype.kind in "fc")


def test_each_group_opens_as_a_lazy_dataset_with_the_trees_chunks(demo):
    with xr.open_datatree(demo, engine="arrayio") as tree:
        groups = [node.path for node in tree.subtree if node.to_dataset(inherit=False).variables]
    for group in groups:
        with xr.open_dataset(demo, engine="arrayio", group=group, chunks={}) as dataset:
            for name, variable in dataset.variables.items():
                assert variable.chunks is not None, (group, name)  # a dask array: nothing read yet
                assert variable.encoding["preferred_chunks"], (group, name)
                first = tuple(chunks[0] for chunks in variable.chunks) if variable.ndim else ()
                assert first == tuple(variable.encoding["chunks"])[:variable.ndim] or 0 in variable.shape


def test_selections_read_the_same_values_as_the_whole(demo):
    with xr.open_datatree(demo, engine="arrayio") as tree:
        for node in tree.subtree:
            for name, variable in node.to_dataset(inherit=False).variables.items():
                if not variable.ndim or not variable.size:
                    continue
                whole = variable.values
                stop = variable.shape[0]
                picks = {variable.dims[0]: slice(stop // 3, stop, 2)}
                assert same(variable.isel(picks).values, whole[stop // 3::2]), (node.path, name)
                assert same(variable.isel({variable.dims[0]: stop - 1}).values, whole[stop - 1]), (node.path, name)


def test_unknown_group_is_a_clear_error(demo):
    from arrayio.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="no group 'no/such/group'"):
        xr.open_dataset(demo, engine="arrayio", group="no/such/group")

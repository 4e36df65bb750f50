"""arrayio.kerchunk.references: version 1 reference sets read back through fsspec's reference filesystem."""

from __future__ import annotations

import json

import fsspec
import numpy as np
import pytest
import xarray as xr
import zarr
from ecosystem_cases import KEYED

from arrayio.kerchunk import references
from arrayio.zarr import key_of_zarr_path


def reference_group(refs: dict) -> zarr.Group:
    return zarr.open_group(fsspec.filesystem("reference", fo=refs).get_mapper(), mode="r", zarr_format=2)


@pytest.mark.parametrize("fixture", ["kas_file", "kast_file"])
def test_keyed_references_read_back(request, fixture, small_chunks):
    path = request.getfixturevalue(fixture)
    refs = references(path)
    assert refs["version"] == 1 and refs["left_out"] == []
    assert refs["refs"]["big/0"] == [str(path), *refs["refs"]["big/0"][1:]]
    group = reference_group(refs)
    found = {name: node[...] for name, node in group.members(max_depth=None) if isinstance(node, zarr.Array)}
    assert {key_of_zarr_path(name) for name in found} == set(KEYED)
    for name, values in found.items():
        assert np.array_equal(values, KEYED[key_of_zarr_path(name)]), name
    nodes = xr.open_zarr(fsspec.filesystem("reference", fo=refs).get_mapper(), group="nodes", zarr_format=2)
    assert np.array_equal(nodes["flags"].values, KEYED["nodes/flags"])


def test_bloscpack_references_are_the_files_blosc_chunks(blp_file):
    path, array = blp_file
    refs = references(path)
    assert refs["left_out"] == []
    assert [item["path"] for item in refs["inlined"]] == ["array/10.0"]  # the short last chunk
    assert json.loads(refs["refs"]["array/.zarray"])["compressor"]["id"] == "blosc"
    assert sum(isinstance(value, list) for value in refs["refs"].values()) == 10
    assert np.array_equal(reference_group(refs)["array"][...], array)
    dataset = xr.open_dataset(refs, engine="kerchunk")
    assert np.array_equal(dataset["array"].values, array)


def test_unaligned_bloscpack_is_left_out_with_the_reason(blp_unaligned):
    path, _array = blp_unaligned
    refs = references(path)
    assert [item["path"] for item in refs["left_out"]] == ["array"]
    assert "multiple of the row size" in refs["left_out"][0]["reason"]
    assert not any(key.startswith("array/") for key in refs["refs"])


def test_pycauset_and_kdb(pycauset_file, kdb_file):
    path, matrix = pycauset_file
    refs = references(path)
    assert refs["left_out"] == []
    assert np.array_equal(xr.open_dataset(refs, engine="kerchunk")["matrix"].values, matrix)
    kdb_refs = references(kdb_file[0])
    reasons = {item["path"]: item["reason"] for item in kdb_refs["left_out"]}
    assert "interleave" in reasons["episodes/0/states"] and "JPEG/PNG" in reasons["episodes/1/images/front"]


def test_cli_refs(cli, kas_file, tmp_path):
    out = tmp_path / "refs.json"
    result = cli("refs", kas_file, "-o", out)
    assert result.returncode == 0, result.stderr
    refs = json.loads(out.read_text())
    assert np.array_equal(reference_group(refs)["nodes/time"][...], KEYED["nodes/time"])
    result = cli("refs", tmp_path / "missing.kas")
    assert result.returncode == 1 and b"Traceback" not in result.stderr

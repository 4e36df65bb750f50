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


def test_bloscpack_reference_lengths_come_from_the_offsets_table(tmp_path):
    """Chunk lengths come from the offsets table (no Blosc header read per chunk) and equal the headers'
    cbytes; a table that is not sound is not trusted (the headers are walked) and gives the same lengths."""
    import arrayio.bloscpack as blp

    path = tmp_path / "a.blp"
    blp.pack_ndarray_to_file(np.random.default_rng(0).standard_normal(40_000), path, chunk_size=64 << 10)
    with blp.open(path) as reader:
        spans = [reader.chunk_span(index) for index in range(reader.nchunks)]
        headers = [reader.chunk_location(index) for index in range(reader.nchunks)]
        where = reader.offsets_offset + 8
    assert spans == [(position, int(header.cbytes)) for position, header in headers]
    sound = references(path)["refs"]
    data = bytearray(path.read_bytes())
    data[where:where + 8] = (spans[0][0] + 4).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    with blp.open(path) as reader:
        assert [reader.chunk_span(index) for index in range(reader.nchunks)] == spans
    assert references(path)["refs"] == sound

"""arrayio.convert / `arrayio convert`: round trips between every pair of models, validation, failures."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import zarr
from ecosystem_cases import KEYED

import arrayio
import arrayio.bloscpack as blp
import arrayio.kast as kast
import arrayio.kastore as kastore
from arrayio import pycauset
from arrayio.convert import ConversionWarning, convert


def keyed_values(path) -> dict[str, np.ndarray]:
    if str(path).endswith(".npz"):
        with np.load(path) as archive:
            return {name: archive[name] for name in archive.files}
    if str(path).endswith(".zarr"):
        group = zarr.open_group(str(path), mode="r")
        return {str(node.attrs["key"]): node[...] for _name, node in group.members(max_depth=None)
                if isinstance(node, zarr.Array)}
    with arrayio.open(path) as store:
        return {key: np.array(store[key]) for key in store}


def assert_same_mapping(found: dict, expected: dict) -> None:
    assert set(found) == set(expected)
    for key, values in expected.items():
        assert found[key].dtype == values.dtype and np.array_equal(found[key], values), key


def assert_valid(path) -> None:
    if os.path.splitext(str(path))[1] in (".kas", ".kast", ".blp", ".pycauset", ".kdb"):
        assert arrayio.validate(path) == []


@pytest.mark.parametrize("chain", [
    ("kas", "kast", "npz", "kas"),
    ("kas", "zarr", "kast", "zarr", "kas"),
    ("kas", "npz", "zarr", "npz", "kast"),
])
def test_keyed_round_trips(kas_file, tmp_path, chain):
    previous = kas_file
    for step, extension in enumerate(chain[1:]):
        target = tmp_path / f"step{step}.{extension}"
        convert(previous, target)
        assert_valid(target)
        assert_same_mapping(keyed_values(target), KEYED)
        previous = target
    assert_same_mapping(keyed_values(previous), KEYED)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("chain", [("blp", "npy", "blp"), ("blp", "zarr", "blp"), ("blp", "zarr", "npy", "zarr",
                                                                                    "blp")])
def test_array_round_trips(tmp_path, order, chain):
    array = np.arange(4 * 333 * 3, dtype=np.int32).reshape(4, 333, 3)
    array = np.asfortranarray(array) if order == "F" else array
    source = tmp_path / "source.blp"
    blp.pack_ndarray_to_file(array, source, chunk_size=4 * 100)
    previous = source
    for step, extension in enumerate(chain[1:]):
        target = tmp_path / f"step{step}.{extension}"
        convert(previous, target)
        assert_valid(target)
        previous = target
    with blp.open(previous) as reader:
        assert reader.order == order and reader.shape == array.shape and reader.dtype == array.dtype
        assert np.array_equal(reader.read(), array)


def test_bloscpack_to_zarr_keeps_chunking_attributes_and_compression(blp_file, tmp_path):
    path, array = blp_file
    for compression, codec in (("zstd", "zstd"), ("blosc", "blosc")):
        target = tmp_path / f"{compression}.zarr"
        convert(path, target, compression=compression)
        node = zarr.open_group(str(target), mode="r")["array"]
        assert node.chunks == (100, 7) and node.attrs["order"] == "C"
        document = json.loads((target / "array" / "zarr.json").read_text())
        assert codec in [item["name"] for item in document["codecs"]]
        assert np.array_equal(node[...], array)


def test_pycauset_round_trips(pycauset_file, tmp_path):
    path, matrix = pycauset_file
    convert(path, tmp_path / "m.zarr")
    convert(tmp_path / "m.zarr", tmp_path / "back.pycauset")
    back = pycauset.load(tmp_path / "back.pycauset")
    assert np.array_equal(back.values(), matrix) and back.properties == {"note": "sample", "seed": 3}
    assert_valid(tmp_path / "back.pycauset")
    with pytest.warns(ConversionWarning, match="properties"):
        convert(path, tmp_path / "m.npy")
    assert np.array_equal(np.load(tmp_path / "m.npy"), matrix)
    convert(tmp_path / "m.npy", tmp_path / "again.pycauset")
    assert np.array_equal(pycauset.load(tmp_path / "again.pycauset").values(), matrix)


def test_packed_pycauset_warns_it_becomes_dense(tmp_path):
    relation = np.triu(np.random.default_rng(2).random((20, 20)) < 0.3, 1)
    pycauset.save(pycauset.causal(relation), tmp_path / "c.pycauset")
    with pytest.warns(ConversionWarning, match="CAUSAL"):
        convert(tmp_path / "c.pycauset", tmp_path / "c.npy")
    assert np.array_equal(np.load(tmp_path / "c.npy"), relation)
    convert(tmp_path / "c.pycauset", tmp_path / "c.zarr")
    with pytest.warns(ConversionWarning, match="saved dense"):
        convert(tmp_path / "c.zarr", tmp_path / "d.pycauset")
    assert np.array_equal(pycauset.load(tmp_path / "d.pycauset").values(), relation)


def test_kdb_to_npz_and_zarr(kdb_file, tmp_path):
    path, episodes = kdb_file
    convert(path, tmp_path / "d.npz")
    with np.load(tmp_path / "d.npz") as archive:
        assert np.array_equal(archive["episode_1.states"], episodes[1][0])
        assert np.array_equal(archive["episode_0.images.front"], episodes[0][2])
    convert(path, tmp_path / "d.zarr")
    group = zarr.open_group(str(tmp_path / "d.zarr"), mode="r")
    for position, (states, actions, images) in enumerate(episodes):
        assert np.array_equal(group[f"episodes/{position}/states"][...], states)
        assert np.array_equal(group[f"episodes/{position}/actions"][...], actions)
        assert np.array_equal(group[f"episodes/{position}/images/front"][...], images)
    assert group["episodes/0"].attrs["task"] == "pick"
    assert list(group["task"][...]) == ["pick", "place"]


def test_zarr_with_attributes_warns_for_kastore(kas_file, tmp_path):
    convert(kas_file, tmp_path / "k.zarr")
    group = zarr.open_group(str(tmp_path / "k.zarr"), mode="r+")
    group["nodes/time"].attrs["units"] = "generations"
    with pytest.warns(ConversionWarning, match="units"):
        convert(tmp_path / "k.zarr", tmp_path / "k.kas")
    assert_same_mapping(keyed_values(tmp_path / "k.kas"), KEYED)


def test_refused_pairs_and_many_arrays(kas_file, kdb_file, tmp_path):
    with pytest.raises(arrayio.UnsupportedError, match="not a conversion the models allow"):
        convert(kas_file, tmp_path / "x.blp")
    with pytest.raises(arrayio.UnsupportedError, match="not a conversion"):
        convert(kdb_file[0], tmp_path / "x.kas")
    convert(kas_file, tmp_path / "k.zarr")
    with pytest.raises(arrayio.UnsupportedError, match="holds one array"):
        convert(tmp_path / "k.zarr", tmp_path / "x.npy")
    assert sorted(os.listdir(tmp_path)) == ["demos.kdb", "k.zarr", "sample.kas"]


@pytest.mark.parametrize("extension", ["kast", "npz", "zarr"])
def test_corrupt_source_fails_with_its_format_error_and_leaves_nothing(kas_file, tmp_path, extension):
    data = bytearray(kas_file.read_bytes())
    data[-20:] = b""  # arrays now run past the end of the file
    kas_file.write_bytes(bytes(data))
    target = tmp_path / f"out.{extension}"
    with pytest.raises(kastore.FileFormatError):
        convert(kas_file, target)
    assert sorted(os.listdir(tmp_path)) == ["sample.kas"]


def test_corrupt_bloscpack_chunk_fails_midway_and_leaves_nothing(blp_file, tmp_path):
    path, _array = blp_file
    data = bytearray(path.read_bytes())
    data[-40] ^= 0xFF  # inside the last chunk: found only after the others were copied
    path.write_bytes(bytes(data))
    for extension in ("zarr", "npy"):
        with pytest.raises(arrayio.FormatError):
            convert(path, tmp_path / f"out.{extension}")
    assert sorted(os.listdir(tmp_path)) == ["aligned.blp"]


def test_cli_convert_with_to(cli, kas_file, tmp_path):
    result = cli("convert", kas_file, tmp_path / "out.data", "--to", "kast")
    assert result.returncode == 0, result.stderr
    assert_same_mapping({key: np.array(value) for key, value in kast.load(tmp_path / "out.data").items()}, KEYED)
    result = cli("convert", kas_file, tmp_path / "out.zarr", "--compression", "blosc")
    assert result.returncode == 0 and b"(zarr)" in result.stdout
    result = cli("convert", kas_file, tmp_path / "out.blp")
    assert result.returncode == 2 and b"not a conversion the models allow" in result.stderr

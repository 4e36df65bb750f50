"""tszip in and out, with PyPI tszip as the oracle both ways, and the .tsz reader against zarr's own read."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
import tskit

tszip = pytest.importorskip("tszip")
zarr = pytest.importorskip("zarr")

import tree_sequences  # noqa: E402

import arrayio  # noqa: E402
import arrayio.kastore as kastore  # noqa: E402
from arrayio import tskit as arrayio_tskit  # noqa: E402
from arrayio import tszip as arrayio_tszip  # noqa: E402
from arrayio.convert import convert  # noqa: E402
from arrayio.errors import ChecksumError, FormatError  # noqa: E402

KINDS = ("msprime", "slim_like", *tree_sequences.SLIM_FILES)  # the last: files SLiM wrote


@pytest.fixture(scope="module")
def tszip_files(trees_files, tmp_path_factory) -> dict:
    """What tszip.compress writes for each sample (in chunks of 4096 values: its default 8 Mi pads every
    column to 64 MiB before compressing, seconds per file)."""
    folder = tmp_path_factory.mktemp("tsz")
    made = {}
    for kind, path in trees_files.items():
        made[kind] = folder / f"{kind}.tsz"
        tszip.compress(tskit.load(path), made[kind], chunk_size=4096)
    return made


@pytest.mark.parametrize("kind", KINDS)
def test_tszip_decompresses_what_convert_writes(trees_files, tmp_path, kind):
    target = tmp_path / "ours.tsz"
    assert convert(trees_files[kind], target) == "tszip"
    tszip.decompress(target).tables.assert_equals(tskit.load(trees_files[kind]).tables)


def test_many_chunks_round_trip_through_tszip(trees_files, tmp_path):
    target = tmp_path / "chunked.tsz"
    arrayio_tskit.to_tszip(trees_files["msprime"], target, chunk=64)
    with arrayio_tszip.load(target) as reader:
        assert reader.columns["edges/parent"].nchunks > 1
    tszip.decompress(target).tables.assert_equals(tskit.load(trees_files["msprime"]).tables)


@pytest.mark.parametrize("kind", KINDS)
def test_tsz_to_trees_is_byte_identical_to_tszip_then_dump(tszip_files, tmp_path, kind):
    ours, theirs = tmp_path / "ours.trees", tmp_path / "theirs.trees"
    assert convert(tszip_files[kind], ours) == "tskit"
    tszip.decompress(tszip_files[kind]).dump(theirs)
    mine, reference = ours.read_bytes(), theirs.read_bytes()
    assert len(mine) == len(reference)
    # tskit writes a fresh uuid on every dump (two dumps of one tree sequence differ there too): every
    # other byte is the same.
    with kastore.load(theirs) as store:
        start, length = store.extent("uuid")
    assert mine[:start] == reference[:start]
    assert mine[start + length:] == reference[start + length:]


@pytest.mark.parametrize("kind", KINDS)
def test_reader_equals_zarr_on_tszip_files(tszip_files, kind):
    group = zarr.open_group(zarr.storage.ZipStore(str(tszip_files[kind]), mode="r"), zarr_format=2, mode="r")
    expected = {path: array for path, array in group.members(max_depth=None) if isinstance(array, zarr.Array)}
    with arrayio_tszip.load(tszip_files[kind]) as reader:
        assert set(reader) == set(expected)
        for path, array in expected.items():
            np.testing.assert_array_equal(reader[path], array[:], err_msg=path)
            assert reader.columns[path].dtype == array.dtype
        assert reader.attributes["format_name"] == "tszip"
        assert reader.validate() == []


def test_cli_info_ls_cat_map_understand_tsz(tszip_files, cli, tmp_path):
    path = tszip_files["slim_like"]
    facts = json.loads(cli("info", str(path), "--json").stdout)
    assert facts["format"] == "tszip" and facts["attributes"]["sequence_length"] == 2e4
    by_name = {row["name"]: row for row in facts["columns"]}
    assert by_name["edges/parent"]["codecs"].startswith("delta > blosc zstd")
    assert by_name["nodes/time"]["stored_bytes"] > 0
    listed = cli("ls", "-l", str(path))
    assert listed.returncode == 0 and b"nodes/metadata_schema" in listed.stdout
    values = cli("cat", str(path), "nodes/flags").stdout.split()
    assert [int(value) for value in values] == list(tszip.decompress(path).tables.nodes.flags)
    mapped = cli("map", str(path), "--json")
    assert mapped.returncode == 0, mapped.stderr
    result = json.loads(mapped.stdout)
    assert result["format"] == "tszip"
    assert sum(section["length"] for section in result["sections"]) == path.stat().st_size
    assert not [section for section in result["sections"] if section["kind"] == "unaccounted"]
    assert cli("validate", str(path)).returncode == 0


def test_a_flipped_chunk_byte_is_a_checksum_problem(tszip_files, tmp_path):
    path = tmp_path / "damaged.tsz"
    data = bytearray(tszip_files["msprime"].read_bytes())
    with zipfile.ZipFile(tszip_files["msprime"]) as archive:
        member = archive.getinfo("nodes/time/0")
        offset = member.header_offset + 30 + len(member.filename) + 40
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    problems = arrayio.validate(path)
    assert any("crc32" in problem.message for problem in problems)
    with arrayio_tszip.load(path) as reader, pytest.raises(ChecksumError):
        reader.read_chunk("nodes/time", 0, check_crc=True)


@pytest.mark.parametrize("cut", [10, 100, 1000])
def test_a_truncated_tsz_is_a_format_error(tszip_files, tmp_path, cut):
    path = tmp_path / "short.tsz"
    path.write_bytes(tszip_files["msprime"].read_bytes()[:-cut])
    with pytest.raises(FormatError, match="tszip"):
        arrayio_tszip.load(path)


def test_a_zip_that_is_not_tszip_is_named(tmp_path):
    path = tmp_path / "other.tsz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(".zattrs", json.dumps({"format_name": "something"}))
    with pytest.raises(FormatError, match="format_name"):
        arrayio_tszip.load(path)


def test_a_chunk_header_that_lies_about_its_size_is_refused(tszip_files, tmp_path):
    path = tmp_path / "lying.tsz"
    data = bytearray(tszip_files["msprime"].read_bytes())
    with zipfile.ZipFile(tszip_files["msprime"]) as archive:
        member = archive.getinfo("nodes/time/0")
        offset = member.header_offset + 30 + len(member.filename)
    data[offset + 4:offset + 8] = (1 << 31).to_bytes(4, "little")  # Blosc header nbytes: 2 GiB
    path.write_bytes(bytes(data))
    with arrayio_tszip.load(path) as reader, pytest.raises(FormatError, match="nbytes"):
        reader["nodes/time"]

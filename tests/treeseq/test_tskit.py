"""arrayio.tskit against tskit itself: info shows what tskit knows of the file, load gives equal tables."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tree_sequences
import tskit

import arrayio
import arrayio.kastore as kastore
from arrayio import tskit as arrayio_tskit
from arrayio.errors import FormatError, UnsupportedError

KINDS = ("msprime", "slim_like", *tree_sequences.SLIM_FILES)  # the last: files SLiM wrote


def _schema(table) -> object:
    encoded = repr(table.metadata_schema)
    return json.loads(encoded) if encoded else None


@pytest.mark.parametrize("kind", KINDS)
def test_info_matches_tskit(trees_files, kind):
    path = trees_files[kind]
    reference = tskit.load(path)
    facts = arrayio_tskit.info(path)
    assert facts["format"] == "tskit"
    with kastore.load(path) as store:
        assert facts["version"] == ".".join(map(str, store["format/version"]))
    assert facts["sequence_length"] == reference.sequence_length
    assert facts["time_units"] == reference.time_units
    assert facts["uuid"] == reference.file_uuid
    tables = reference.tables
    with kastore.load(path) as store:
        for name in arrayio_tskit.TABLES:
            table = getattr(tables, name)
            assert facts["tables"][name]["rows"] == table.num_rows, name
            assert facts["tables"][name]["bytes"] == sum(store.info(key).size for key in store
                                                         if key.startswith(name + "/")), name
            if hasattr(table, "metadata_schema"):
                assert facts["tables"][name]["metadata_schema"] == _schema(table), name
    assert facts["metadata_schema"] == _schema(reference.tables)
    last = reference.provenance(reference.num_provenances - 1)
    assert facts["provenances"] == {"count": reference.num_provenances,
                                    "last": {"timestamp": last.timestamp, "record": json.loads(last.record)}}


def test_info_of_the_slim_like_file_shows_its_metadata(trees_files):
    facts = arrayio_tskit.info(trees_files["slim_like"])
    assert facts["time_units"] == "ticks"
    assert facts["tables"]["nodes"]["metadata_schema"]["codec"] == "struct"
    assert facts["tables"]["migrations"]["rows"] > 0
    assert facts["reference_sequence_bytes"] > 20_000


@pytest.mark.parametrize("kind", KINDS)
def test_load_equals_tskit_load(trees_files, kind):
    path = trees_files[kind]
    loaded = arrayio_tskit.load(path)
    assert isinstance(loaded, tskit.TreeSequence)
    loaded.tables.assert_equals(tskit.load(path).tables)
    assert loaded.num_trees == tskit.load(path).num_trees


@pytest.mark.parametrize("kind", KINDS)
def test_load_a_subset_of_tables(trees_files, kind):
    path = trees_files[kind]
    reference = tskit.load(path).tables
    subset = arrayio_tskit.load(path, tables=["nodes", "edges"])
    assert isinstance(subset, tskit.TableCollection)
    subset.nodes.assert_equals(reference.nodes)
    subset.edges.assert_equals(reference.edges)
    assert subset.mutations.num_rows == subset.sites.num_rows == 0
    assert subset.sequence_length == reference.sequence_length
    assert subset.metadata == reference.metadata


@pytest.mark.parametrize("kind", KINDS)
def test_skip_tables_equals_tskit_skip_tables(trees_files, kind):
    path = trees_files[kind]
    ours = arrayio_tskit.load(path, skip_tables=True)
    ours.tables.assert_equals(tskit.load(path, skip_tables=True).tables)
    theirs = tskit.load(path, skip_reference_sequence=True)
    arrayio_tskit.load(path, skip_reference_sequence=True).tables.assert_equals(theirs.tables)


def test_unknown_table_is_a_usage_error(trees_files):
    with pytest.raises(UnsupportedError, match="no such table"):
        arrayio_tskit.load(trees_files["msprime"], tables=["nodes", "trees"])


def test_a_kastore_file_that_is_no_tree_sequence_is_named(tmp_path):
    path = tmp_path / "plain.trees"
    kastore.dump({"x": np.arange(3)}, path)
    with pytest.raises(FormatError, match="format/name") as caught:
        arrayio_tskit.info(path)
    assert caught.value.field == "format/name" and caught.value.file == str(path)
    other = tmp_path / "other.trees"
    kastore.dump({"format/name": np.frombuffer(b"something", np.int8)}, other)
    with pytest.raises(FormatError, match="tskit.trees") as caught:
        arrayio_tskit.load(other)
    assert str(caught.value).startswith(f"{other}: tskit: format/name at byte ")


def test_the_registry_routes_trees_files_to_the_tskit_view(trees_files):
    path = trees_files["msprime"]
    assert arrayio.info(path)["format"] == "tskit"
    assert arrayio.validate(path) == []
    assert arrayio.detect(path) == "kastore"  # the bytes are kastore's: map, zarr and convert see a kastore file


def test_cli_info_ls_validate(trees_files, cli):
    path = trees_files["slim_like"]
    result = cli("info", str(path), "--json")
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert facts["tables"]["individuals"]["rows"] == tskit.load(path).num_individuals
    listed = cli("ls", "-l", str(path))
    assert listed.returncode == 0 and b"individuals" in listed.stdout
    checked = cli("validate", str(path))
    assert checked.returncode == 0 and b"valid tskit file" in checked.stdout

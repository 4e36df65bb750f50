"""Files SLiM wrote itself (tests/data/slim/): their SLiM metadata, schemas and provenance through info, load,
.trees -> .tsz -> .trees and the zarr and xarray views, tskit and tszip the oracles. (test_tskit.py and
test_tszip.py run their whole-file checks over these files too.)"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tskit

tszip = pytest.importorskip("tszip")
xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

import tree_sequences  # noqa: E402

import arrayio.kastore as kastore  # noqa: E402
from arrayio import tskit as arrayio_tskit  # noqa: E402
from arrayio.convert import convert  # noqa: E402
from arrayio.zarr import open_store  # noqa: E402

SLIM = sorted(tree_sequences.SLIM_FILES)
MODERN = [kind for kind in SLIM if "v4" in kind]  # SLiM 4 files: metadata schemas on every table


@pytest.mark.parametrize("kind", SLIM)
def test_info_shows_what_slim_recorded(kind):
    path = tree_sequences.SLIM_FILES[kind]
    reference = tskit.load(path)
    facts = arrayio_tskit.info(path)
    last = json.loads(reference.provenance(reference.num_provenances - 1).record)
    assert facts["provenances"]["last"]["record"] == last
    program = last.get("software", {}).get("name") or last.get("program")
    assert program == "SLiM"
    if kind in MODERN:
        assert facts["time_units"] == "ticks"
        assert facts["metadata_schema"]["properties"]["SLiM"]["properties"]["model_type"]
        for table in ("nodes", "individuals", "mutations"):
            assert facts["tables"][table]["metadata_schema"]["codec"] == "struct", table


@pytest.mark.parametrize("kind", SLIM)
def test_slim_metadata_decodes_the_same_after_load_and_a_tsz_round_trip(kind, tmp_path):
    path = tree_sequences.SLIM_FILES[kind]
    reference = tskit.load(path)
    convert(path, tmp_path / "slim.tsz")
    convert(tmp_path / "slim.tsz", tmp_path / "back.trees")
    loads = (arrayio_tskit.load(path), tszip.decompress(tmp_path / "slim.tsz"), tskit.load(tmp_path / "back.trees"))
    for loaded in loads:
        loaded.tables.assert_equals(reference.tables)
        assert loaded.metadata == reference.metadata
        for rows, expected in ((loaded.individuals(), reference.individuals()), (loaded.nodes(), reference.nodes()),
                               (loaded.mutations(), reference.mutations())):
            assert [row.metadata for row in rows] == [row.metadata for row in expected]


def _same(view: np.ndarray, column: np.ndarray) -> bool:
    """A view's column (the file's dtypes: uint8 text, uint32 offsets) equals tskit's (int8, uint64)."""
    if view.dtype.kind in "iu" and column.dtype.kind in "iu" and view.dtype.itemsize == column.dtype.itemsize:
        view = view.view(column.dtype)  # bytes of metadata and text: the same bits, signed or not
    return view.shape == column.shape and bool(np.array_equal(view, column, equal_nan=column.dtype.kind == "f"))


@pytest.mark.parametrize("kind", SLIM)
def test_views_give_every_column_slim_wrote(kind):
    path = tree_sequences.SLIM_FILES[kind]
    tables = tskit.load(path).tables
    with kastore.load(path) as store:
        expected = {key for key in store if key.partition("/")[0] in arrayio_tskit.TABLES
                    and not key.endswith("metadata_schema")}  # schemas are text attributes, not arrays
    engine_tree = xr.open_datatree(path, engine="arrayio")
    zarr_tree = xr.open_datatree(open_store(path), engine="zarr", consolidated=False)
    try:
        for tree in (engine_tree, zarr_tree):
            compared = set()
            for name in arrayio_tskit.TABLES:
                for column, values in getattr(tables, name).asdict().items():
                    if isinstance(values, np.ndarray) and column in tree[name].data_vars:
                        assert _same(tree[name][column].values, values), (name, column)
                        compared.add(f"{name}/{column}")
            assert compared == expected  # every table column in the file, none left out
    finally:
        engine_tree.close()
        zarr_tree.close()

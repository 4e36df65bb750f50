"""Files written by the reference packages, opened through arrayio.zarr: pycauset's every matrix type, a tskit
tree sequence made with msprime."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
import zarr

from arrayio import pycauset as ours
from arrayio.zarr import open_store


def reference_values(reference, obj) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(reference.to_numpy(obj, allow_huge=True))


def fill(obj, dense):
    for i, j in zip(*np.nonzero(dense)):
        obj.set(int(i), int(j), dense[i, j].item())
    return obj


def reference_objects(reference) -> dict:
    rng = np.random.default_rng(5)
    n = 40
    complex_matrix = rng.standard_normal((9, 4)) + 1j * rng.standard_normal((9, 4))
    symmetric = rng.standard_normal((9, 9))
    antisymmetric = np.triu(rng.standard_normal((9, 9)), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        objects = {
            "dense float64": reference.matrix(rng.standard_normal((30, 7))),
            "dense float32": reference.matrix(rng.standard_normal((5, 9)).astype(np.float32)),
            "dense float16": reference.matrix(rng.standard_normal((5, 9)).astype(np.float16)),
            "dense int32": reference.matrix(rng.integers(-50, 50, (8, 3)).astype(np.int32)),
            "dense uint8": reference.matrix(rng.integers(0, 255, (8, 3)).astype(np.uint8)),
            "dense complex128": reference.matrix(complex_matrix),
            "dense bool": reference.matrix(rng.random((9, 70)) < 0.4),
            "vector": reference.vector(rng.standard_normal(75)),
            "bit vector": reference.vector(rng.random(75) < 0.5, dtype="bool"),
            "transposed vector": reference.vector(rng.standard_normal(75)).T,
            "transposed": reference.matrix(rng.standard_normal((6, 4))).T,
            "conjugated": reference.matrix(complex_matrix).conj(),
            "conjugate transpose": reference.matrix(complex_matrix).H,
            "scaled": reference.matrix(complex_matrix) * 2.5,
            "triangular float": fill(reference.TriangularFloatMatrix(n), np.triu(rng.standard_normal((n, n)), 1)),
            "triangular integer": fill(reference.TriangularIntegerMatrix(n),
                                       np.triu(rng.integers(-9, 9, (n, n)), 1).astype(np.int32)),
            "causal": reference.causal_matrix(np.triu(rng.random((n, n)) < 0.3, 1)),
            "transposed triangular": fill(reference.TriangularFloatMatrix(n),
                                          np.triu(rng.standard_normal((n, n)), 1)).T,
            "triangular with diagonal": fill(reference.TriangularFloatMatrix(5, has_diagonal=True),
                                             np.triu(np.arange(1.0, 26.0).reshape(5, 5))),
            "symmetric": reference.symmetric(symmetric + symmetric.T),
            "antisymmetric": reference.antisymmetric(antisymmetric - antisymmetric.T),
            "diagonal": reference.diagonal(np.arange(1.0, 6.0)),
            "identity": reference.identity(4),
        }
        complex16 = reference.ComplexFloat16Matrix(2, 2)
        complex16.set(0, 0, 1 + 2j)
        complex16.set(1, 1, 3 - 4j)
        objects["complex float16"] = complex16
    return objects


def test_every_pycauset_matrix_type_written_by_pycauset(reference_pycauset, tmp_path, monkeypatch):
    import arrayio._tree

    monkeypatch.setattr(arrayio._tree, "MAX_CHUNK_BYTES", 256)  # several row blocks even for small matrices
    seen_types, seen_views = set(), set()
    for name, obj in reference_objects(reference_pycauset).items():
        path = tmp_path / f"{name.replace(' ', '_')}.pycauset"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference_pycauset.save(obj, str(path))
        container = ours.load(path)
        seen_types.add(container.matrix_type)
        seen_views.add((container.is_transposed, container.is_conjugated, container.scalar != 1,
                        container.layout.zero_copy))
        expected = reference_values(reference_pycauset, obj)
        node = zarr.open_group(store=open_store(path), mode="r")["matrix"]
        values = node[...]
        assert values.shape == expected.shape, name
        assert np.allclose(values, expected, equal_nan=True) if values.dtype.kind in "fc" \
            else np.array_equal(values, expected), name
        assert np.array_equal(values, container.values()), name
        assert node.attrs["metadata"]["matrix_type"] == container.matrix_type
        if values.ndim == 2 and values.shape[0] > 1:
            assert np.array_equal(node[1:3, :2], container.values()[1:3, :2]), name
    # dense and packed transposed, conjugated, conjugate-transposed and scaled views were all among them
    assert seen_views >= {(True, False, False, True), (True, False, False, False), (False, True, False, True),
                          (True, True, False, True), (False, False, True, True)}
    assert seen_types >= {"DENSE_FLOAT", "INTEGER", "VECTOR", "IDENTITY", "CAUSAL", "TRIANGULAR_FLOAT",
                          "TRIANGULAR_INTEGER", "SYMMETRIC", "ANTISYMMETRIC", "DIAGONAL"}


TSKIT_TABLES = ("nodes", "edges", "sites", "mutations", "individuals", "populations", "migrations", "provenances")


def test_tskit_tree_sequence_through_xarray(trees_file):
    tskit = pytest.importorskip("tskit")
    tables = tskit.load(trees_file).tables
    tree = xr.open_datatree(open_store(trees_file), engine="zarr", consolidated=False)
    for table_name in TSKIT_TABLES:
        table = getattr(tables, table_name)
        dataset = xr.open_zarr(open_store(trees_file), group=table_name, consolidated=False)
        columns = table.asdict()
        for column, values in columns.items():
            if not isinstance(values, np.ndarray):
                continue  # metadata_schema: a string, stored as a key of the store's own
            assert column in dataset.data_vars, (table_name, column)
            assert np.array_equal(dataset[column].values, values), (table_name, column)
            assert np.array_equal(tree[table_name][column].values, values)
    assert tree["nodes"]["time"].shape[0] == tables.nodes.num_rows > 20
    assert tables.sites.num_rows > 0

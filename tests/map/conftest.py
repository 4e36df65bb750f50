"""Fixtures of the byte-map tests: the demo files of every format and files written by the reference packages."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import references

from arrayio._registry import FORMATS, module_for


@pytest.fixture(scope="session")
def demo_files(tmp_path_factory) -> dict[str, Path]:
    """format -> the demo file of that format (what ``arrayio demo`` writes)."""
    folder = tmp_path_factory.mktemp("demo")
    return {name: Path(module_for(name).demo(folder)) for name in FORMATS}


@pytest.fixture(scope="session")
def reference_files(tmp_path_factory) -> dict[str, Path]:
    """name -> a file written by a reference package: kastore, bloscpack, pycauset, and a tskit .trees file."""
    folder = tmp_path_factory.mktemp("reference")
    files = {}
    kastore = pytest.importorskip("kastore")
    files["kastore"] = folder / "reference.kas"
    kastore.dump({"a": np.arange(7, dtype=np.int16), "bb": np.linspace(0, 1, 5), "c": np.zeros(0, np.uint8)},
                 str(files["kastore"]))
    bloscpack = references.bloscpack(pytest.importorskip)
    files["bloscpack"] = folder / "reference.blp"
    bloscpack.pack_ndarray_to_file(np.arange(300_000, dtype=np.float64), str(files["bloscpack"]),
                                   chunk_size="256K")
    pycauset = references.pycauset(importer=pytest.importorskip)
    files["pycauset"] = folder / "reference.pycauset"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pycauset.save(pycauset.matrix(np.arange(12.0).reshape(3, 4)), str(files["pycauset"]))
    msprime = pytest.importorskip("msprime")
    files["tskit"] = folder / "sim.trees"
    msprime.sim_ancestry(samples=10, sequence_length=10_000, recombination_rate=1e-8, population_size=1000,
                         random_seed=42).dump(str(files["tskit"]))
    return files

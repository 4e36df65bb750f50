"""Sample files of every format for the zarr, kerchunk and convert tests."""

from __future__ import annotations

import numpy as np
import pytest
import references
from ecosystem_cases import KEYED

import arrayio.bloscpack as blp
import arrayio.kast as kast
import arrayio.kastore as kastore
from arrayio import kdb, pycauset


@pytest.fixture
def small_chunks(monkeypatch):
    """Row blocks of 1 KiB instead of 64 MiB, so small files have many chunks."""
    import arrayio._tree

    monkeypatch.setattr(arrayio._tree, "MAX_CHUNK_BYTES", 1024)
    return 1024


@pytest.fixture
def kas_file(tmp_path):
    path = tmp_path / "sample.kas"
    kastore.dump(KEYED, path)
    return path


@pytest.fixture
def kast_file(tmp_path):
    path = tmp_path / "sample.kast"
    kast.dump(KEYED, path)
    return path


def blp_array(shape=(1000, 7), dtype="<f8", order="C"):
    array = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    return np.asfortranarray(array) if order == "F" else array


def _packed(path, rows: int, chunk_size: int):
    array = blp_array((rows, 7))
    blp.pack_ndarray_to_file(array, path, chunk_size=chunk_size)
    return path, array


@pytest.fixture
def blp_file(tmp_path):
    """Chunks of 5600 bytes = 100 rows of 7 float64, aligned with rows; 1003 rows leave a short last chunk."""
    return _packed(tmp_path / "aligned.blp", 1003, 5600)


@pytest.fixture
def blp_unaligned(tmp_path):
    """Chunks of 1000 bytes: not a multiple of the 56-byte rows, so chunks straddle rows."""
    return _packed(tmp_path / "unaligned.blp", 997, 1000)


@pytest.fixture
def kdb_file(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "demos.kdb"
    episodes = []
    with kdb.Writer(path, compress="png") as writer:
        for frames, task in ((6, "pick"), (4, "place")):
            states = rng.random((frames, 5), dtype=np.float32)
            actions = rng.random((frames, 2), dtype=np.float32)
            images = rng.integers(0, 255, (frames, 8, 6, 3), dtype=np.uint8)
            writer.add_episode(states, actions, images={"front": images}, task=task, fps=15, success=True)
            episodes.append((states, actions, images))
    return path, episodes


@pytest.fixture
def pycauset_file(tmp_path):
    path = tmp_path / "m.pycauset"
    matrix = np.arange(300, dtype=np.float64).reshape(60, 5) / 7
    pycauset.save(matrix, path, properties={"note": "sample", "seed": 3})
    return path, matrix


@pytest.fixture(scope="session")
def reference_pycauset():
    """The pycauset 0.6.1 package, imported from a scratch folder (it makes ./.pycauset/)."""
    return references.pycauset(importer=pytest.importorskip)


@pytest.fixture(scope="session")
def make_trees(tmp_path_factory):
    """Write an msprime tree sequence with mutations (samples, length, seed) as tskit does; returns its path."""
    msprime = pytest.importorskip("msprime")

    def make(samples: int = 20, sequence_length: float = 1e5, seed: int = 7):
        ts = msprime.sim_ancestry(samples=samples, sequence_length=sequence_length, recombination_rate=1e-8,
                                  population_size=1e4, random_seed=seed)
        path = tmp_path_factory.mktemp("tskit") / "sim.trees"
        msprime.sim_mutations(ts, rate=1e-8, random_seed=seed).dump(path)
        return path
    return make


@pytest.fixture(scope="session")
def trees_file(make_trees):
    """A small tree sequence (20 samples) shared by the zarr, engine and VirtualiZarr tests."""
    return make_trees()

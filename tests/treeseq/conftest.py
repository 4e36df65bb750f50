"""Tree sequence files for the tskit and tszip tests: msprime-simulated and SLiM-like (tests/tree_sequences.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("tskit")
pytest.importorskip("msprime")

import tree_sequences  # noqa: E402 - after the skips: it imports msprime and tskit

KINDS = ("msprime", "slim_like", *tree_sequences.SLIM_FILES)


@pytest.fixture(scope="session")
def trees_files(tmp_path_factory) -> dict[str, Path]:
    """One .trees file of each kind: written once per session by tskit, or (``slim:...``) as SLiM wrote it."""
    folder = tmp_path_factory.mktemp("trees")
    made = {"msprime": tree_sequences.simulated(), "slim_like": tree_sequences.slim_like()}
    paths = dict(tree_sequences.SLIM_FILES)
    for kind, tree_sequence in made.items():
        paths[kind] = folder / f"{kind}.trees"
        tree_sequence.dump(paths[kind])
    return paths
